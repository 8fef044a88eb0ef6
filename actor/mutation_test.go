package actor

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache/nodeinfo"
)

// The tests of this file close gaps the mutation round of 2026-11-27 found
// (docs/mutation/round-2026-11-27.md): each fails with the plant its
// comment names (docs/mutation/plants.txt) and passes without it.

// A commit may fill a node exactly to nodeinfo.MaxPodsPerNode, and its
// capacity check counts the pods it takes off a node as well as those it
// puts there. Plant C03 (">=": off by one) refuses the pod that fills the
// node; plant C04 (the pods leaving not counted) refuses a swap on a full
// node.
func TestApplyCommitFillsNodeExactly(t *testing.T) {
	l := newLocal(1, 0)
	c := l.core
	c.AddNode(testNode("full", "z"))
	c.AddNode(testNode("other", "z"))
	mk := func(uid, node string) *nodeinfo.PodInfo {
		pi, err := nodeinfo.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Spec: v1.PodSpec{NodeName: node}})
		require.NoError(t, err)
		return pi
	}
	pods := make([]*nodeinfo.PodInfo, nodeinfo.MaxPodsPerNode-1)
	for i := range pods {
		pods[i] = mk(fmt.Sprint("p", i), "full")
		require.NoError(t, c.AddPod(pods[i]))
	}
	numPods := func(name string) (n int, gen int64) {
		t.Helper()
		s, err := l.Publish()
		require.NoError(t, err)
		ni, err := s.Get(name)
		require.NoError(t, err)
		return ni.NumPods(), ni.Generation()
	}
	n, gen := numPods("full")
	require.Equal(t, nodeinfo.MaxPodsPerNode-1, n)

	// One more fills the node exactly: accepted.
	x := mk("x", "full")
	require.NoError(t, c.ApplyCommit(&CommitBatch{
		Pods:  []CommitPod{{Key: "x", New: x, NewAssumed: true}},
		Nodes: []CommitNode{{Name: "full", Gen: gen}},
	}), "a node may hold exactly MaxPodsPerNode pods")
	n, gen = numPods("full")
	require.Equal(t, nodeinfo.MaxPodsPerNode, n)

	// Past it: refused, nothing applied.
	err := c.ApplyCommit(&CommitBatch{
		Pods:  []CommitPod{{Key: "y", New: mk("y", "full"), NewAssumed: true}},
		Nodes: []CommitNode{{Name: "full", Gen: gen}},
	})
	require.ErrorIs(t, err, ErrTooManyPods)
	require.False(t, c.Dirty())

	// A swap on the full node (p0 leaves, y comes) and a move off it (p1
	// goes to other) with a new pod in its place (z): accepted, the node
	// stays exactly full.
	_, otherGen := numPods("other")
	require.NoError(t, c.ApplyCommit(&CommitBatch{
		Pods: []CommitPod{
			{Key: "p0", Base: pods[0].Pod()},
			{Key: "p1", Base: pods[1].Pod(), New: mk("p1", "other"), NewAssumed: true},
			{Key: "y", New: mk("y", "full"), NewAssumed: true},
			{Key: "z", New: mk("z", "full")},
		},
		Nodes: []CommitNode{{Name: "full", Gen: gen}, {Name: "other", Gen: otherGen}},
	}), "two pods leave the full node, two come")
	n, _ = numPods("full")
	require.Equal(t, nodeinfo.MaxPodsPerNode, n)
	n, _ = numPods("other")
	require.Equal(t, 1, n)
	s := c.Last()
	for key, want := range map[string]string{"p1": "other", "y": "full", "z": "full", "x": "full"} {
		e, ok := s.Pod(key)
		require.True(t, ok, key)
		require.Equal(t, want, e.Pod.Spec.NodeName, key)
	}
	_, ok := s.Pod("p0")
	require.False(t, ok)
}
