package informer_test

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/informer"
)

// A cache with upstream's GenericWorkload gate on, fed by informers: the
// PodGroup object and the unassigned members of the scheduler the adapter
// is responsible for reach the cache's pod groups; a pod of another
// scheduler does not.
func ExampleAttach_podGroups() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := schedcache.New(ctx, schedcache.WithPodGroups(true, false))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	member := func(name, scheduler string) *v1.Pod {
		group := "training"
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name)},
			Spec: v1.PodSpec{SchedulerName: scheduler, SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: &group},
				Containers: []v1.Container{{Name: "c"}}},
		}
	}
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "training"}}
	cs := fake.NewClientset(pg, member("worker-0", "gang"), member("worker-1", "gang"), member("stray", "default-scheduler"))

	f := informers.NewSharedInformerFactory(cs, 0)
	adapter, err := informer.Attach(c, f, informer.WithSchedulerNames("gang"))
	if err != nil {
		panic(err)
	}
	defer f.Shutdown()
	defer cancel() // runs before Shutdown: stops the informers
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), adapter.HasSynced) {
		panic("not synced")
	}

	state, err := c.PodGroups().Get("ml", "training")
	if err != nil {
		panic(err)
	}
	var names []string
	for name := range state.UnscheduledPods() {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Println("object:", state.PodGroup() != nil)
	fmt.Println("unscheduled:", names)
	n := adapter.Counts()
	fmt.Println("member adds:", n.MemberAdds, "pod group adds:", n.PodGroupAdds, "ignored:", n.Unassigned)
	// Output:
	// object: true
	// unscheduled: [worker-0 worker-1]
	// member adds: 2 pod group adds: 1 ignored: 1
}
