package app

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// The scheduling queue pops as PrioritySort: higher priority first, then
// the first queued; an unset priority, or a pod not in the store, is 0;
// a key added again while queued keeps its place.
func TestPrioQueueOrder(t *testing.T) {
	p := func(v int32) *int32 { return &v }
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, prio := range map[string]*int32{"low": p(-5), "none": nil, "high": p(1000), "high2": p(1000), "mid": p(10)} {
		require.NoError(t, store.Add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "d", Name: name}, Spec: v1.PodSpec{Priority: prio}}))
	}
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Queue: newPrioQueue(podPriority(corev1listers.NewPodLister(store))),
	})
	defer q.ShutDown()
	for _, k := range []string{"d/low", "d/none", "d/high", "d/gone", "d/mid", "d/high2", "d/low"} {
		q.Add(k)
	}
	require.Equal(t, 6, q.Len(), "d/low added twice is queued once")
	var got []string
	for q.Len() > 0 {
		k, _ := q.Get()
		got = append(got, k)
		q.Done(k)
	}
	require.Equal(t, []string{"d/high", "d/high2", "d/mid", "d/none", "d/gone", "d/low"}, got)
}
