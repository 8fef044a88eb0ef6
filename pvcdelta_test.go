package schedcache_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
)

// Upstream v1.37's pending PVC delta, as one refreshed snapshot sees it:
// a claim of a pod on a node the cache has not seen counts as used after
// a refresh that rebuilds nothing; a new snapshot (the published one)
// recounts from its list and does not. A fork of the refreshed snapshot
// starts from its counts and moves them by pod.
func TestPVCDeltaSeenByRefreshedSnapshotAndItsForks(t *testing.T) {
	c := newCache(t)
	lg := klog.Background()
	n1 := &v1.Node{}
	n1.Name = "n1"
	_, err := c.AddNode(lg, n1)
	require.NoError(t, err)
	s := schedcache.NewEmptySnapshot()
	require.NoError(t, c.UpdateSnapshot(lg, s))

	require.NoError(t, c.AddPod(lg, upWithPVC(upPod("p", "ns", "uid-p", "n9"), "c")))
	require.NoError(t, c.UpdateSnapshot(lg, s))
	require.True(t, s.IsPVCUsedByPods("ns/c"), "the delta counts the unseen node's pod")
	require.Equal(t, 1, s.PVCRefCount("ns/c"))
	require.False(t, c.Snapshot().IsPVCUsedByPods("ns/c"), "a new snapshot recounts from its list")

	f := s.Fork()
	q := upWithPVC(upPod("q", "ns", "uid-q", "n1"), "c")
	require.NoError(t, f.AddPod(q))
	require.True(t, f.Snapshot().IsPVCUsedByPods("ns/c"))
	require.NoError(t, f.RemovePod(q))
	require.True(t, f.Snapshot().IsPVCUsedByPods("ns/c"), "the refreshed snapshot's own count remains")

	// Removing the pod brings the count to 0 at the next refresh.
	require.NoError(t, c.RemovePod(lg, upWithPVC(upPod("p", "ns", "uid-p", "n9"), "c")))
	require.NoError(t, c.UpdateSnapshot(lg, s))
	require.False(t, s.IsPVCUsedByPods("ns/c"))
	// A second refreshed snapshot is unaffected by the first's refreshes.
	s2 := schedcache.NewEmptySnapshot()
	require.NoError(t, c.UpdateSnapshot(lg, s2))
	require.False(t, s2.IsPVCUsedByPods("ns/c"))
}
