package podgroup_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache/podgroup"
)

func gangPod(name, node string) *v1.Pod {
	group := "workers"
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec: v1.PodSpec{
			NodeName:        node,
			SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: &group},
		},
	}
}

// The cache applies informer events and its own assume/bind steps to an
// Editor and publishes each Table it builds; a scheduling cycle edits a
// private copy of one hierarchy; Diff tells a snapshot refresh what
// changed.
func Example() {
	job := "job"
	e := podgroup.NewTable(true, true).Edit()
	_ = e.AddComposite(&schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: job}})
	_ = e.AddPodGroup(&schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "workers"},
		Spec:       schedulingv1beta1.PodGroupSpec{ParentCompositePodGroupName: &job},
	})
	for _, name := range []string{"w0", "w1", "w2"} {
		_ = e.AddMember(gangPod(name, ""))
	}
	t1 := e.Done() // published: never changes

	// A pod-group scheduling cycle tries a placement on a private copy.
	tree, err := t1.Hierarchy(gangPod("w0", ""))
	if err != nil {
		panic(err)
	}
	trial := tree.Edit()
	_ = trial.SnapshotAssume(gangPod("w0", "node-a"))
	_ = trial.SnapshotAssume(gangPod("w1", "node-b"))
	s, _ := trial.Done().Get("default", "workers")
	fmt.Println("trial: scheduled", s.ScheduledPodsCount(), "unscheduled", len(s.UnscheduledPods()))

	// The cache assumes w0, then its bind is observed (AddPod of an
	// assumed pod: upstream removes the assumed pod and adds the bound one).
	e = t1.Edit()
	_ = e.AssumeMember(gangPod("w0", "node-a"))
	_ = e.RemoveMember(gangPod("w0", "node-a"))
	_ = e.ConfirmMember(gangPod("w0", "node-a"))
	t2 := e.Done()

	podgroup.Diff(t1, t2, func(o, n *podgroup.State) {
		fmt.Println("changed:", n.Key(), "assigned", n.AssignedPodsCount(), "unscheduled", n.UnscheduledPodsCount())
	}, nil)
	old, _ := t1.Get("default", "workers")
	fmt.Println("t1 still has", old.UnscheduledPodsCount(), "unscheduled")
	root, _, _ := t2.RootKey(podgroup.PodGroupKey("default", "workers"))
	fmt.Println("root:", root)
	// Output:
	// trial: scheduled 2 unscheduled 1
	// changed: podgroup/default/workers assigned 1 unscheduled 2
	// t1 still has 3 unscheduled
	// root: compositepodgroup/default/job
}
