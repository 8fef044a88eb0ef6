package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/examples"
)

// Upstream's NodeResourcesFit plugin, through kube/fwkadapter, scores a
// what-if fork exactly as it would the cluster the fork describes: pods
// assumed in the fork make their node look busier, a node added in the
// fork (a scale-up, Cluster Autoscaler style) becomes a candidate, and the
// cache's own snapshot is never affected.
func TestFitPlacerOnFork(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	placer, done, err := newFitPlacer(ctx)
	defer done()
	defer cancel()
	require.NoError(t, err)
	c, err := schedcache.New(ctx)
	require.NoError(t, err)
	defer c.Close()
	node := func(name string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("110")}}}
	}
	pod := func(name, cpu, nodeName string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}, Spec: v1.PodSpec{NodeName: nodeName,
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	for _, n := range []string{"a", "b"} {
		_, err := c.AddNode(discard, node(n))
		require.NoError(t, err)
	}
	require.NoError(t, c.AddPod(discard, pod("busy", "1", "a")))
	base := c.Snapshot()

	f := base.Fork()
	require.NoError(t, f.AssumePod(pod("w1", "1500m", "b")))
	got, err := placer.Place(ctx, f.Snapshot(), pod("p", "500m", ""))
	require.NoError(t, err)
	require.Equal(t, "a", got, "in the fork b is busier than a")
	got, err = placer.Place(ctx, base, pod("p", "500m", ""))
	require.NoError(t, err)
	require.Equal(t, "b", got, "the base is unchanged")

	// Fill both nodes in a nested fork: nothing fits; a new node does.
	f.Fork()
	require.NoError(t, f.AssumePod(pod("w2", "1", "a")))
	_, err = placer.Place(ctx, f.Snapshot(), pod("p", "1", ""))
	require.ErrorIs(t, err, examples.ErrNoNode)
	require.NoError(t, f.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Status: node("new").Status}))
	got, err = placer.Place(ctx, f.Snapshot(), pod("p", "1", ""))
	require.NoError(t, err)
	require.Equal(t, "new", got)
	require.NoError(t, f.Revert())
	got, err = placer.Place(ctx, f.Snapshot(), pod("p", "500m", ""))
	require.NoError(t, err)
	require.Equal(t, "a", got, "reverted to the first what-if")
	require.Equal(t, 1, c.Snapshot().PodCount())
}
