package informer_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/informer"
)

// The tests of this file close gaps the mutation round of 2026-11-27 found
// (docs/mutation/round-2026-11-27.md): each fails with the plant its
// comment names (docs/mutation/plants.txt) and passes without it.

// An update event whose old pod is assigned is UpdatePod whatever the new
// pod's node, as upstream's updatePodInCache: one that moves the pod to
// another node is refused by the cache as a corruption (upstream exits),
// reported as an UpdatePod failure, and the pod stays where it was. Plant
// K04 (a move applied as AddPod) reports an AddPod failure instead.
func TestUpdateEventMovingAssignedPodIsUpdatePod(t *testing.T) {
	sink := &errSink{}
	c := newCache(t, sink)
	a, err := informer.New(c, informer.WithErrorHandler(sink.add))
	require.NoError(t, err)
	a.AddNode(mkNode("n1", ""))
	a.AddNode(mkNode("n2", ""))
	p := mkPod("p", "n1", 100)
	a.AddPod(p)
	moved := p.DeepCopy()
	moved.Spec.NodeName = "n2"
	a.UpdatePod(p, moved)
	require.NoError(t, c.Sync())
	eventually(t, func() bool { return len(sink.all()) == 1 }, "the refused update reported")

	err = sink.all()[0]
	var ee *informer.EventError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, "UpdatePod", ee.Op)
	var ce *schedcache.CorruptionError
	require.ErrorAs(t, err, &ce)
	cnt := a.Counts()
	require.Equal(t, int64(1), cnt.PodAdds)
	require.Equal(t, int64(1), cnt.PodUpdates)
	got, assumed, ok := cachedPod(c, p)
	require.True(t, ok)
	require.False(t, assumed)
	require.Same(t, p, got)
}
