package schedcache_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
)

// The calls upstream handles and schedcache now accepts as upstream does,
// and the ones it refuses because upstream panics or corrupts itself there
// (docs/rejections.md). bench/reject_test.go runs the same cases beside the
// real upstream cache.

func rejRenamed(p *v1.Pod, uid string) *v1.Pod {
	c := p.DeepCopy()
	c.UID, c.Name = types.UID(uid), "pod-"+uid
	return c
}

func rejWithNode(p *v1.Pod, node string) *v1.Pod {
	c := p.DeepCopy()
	c.Spec.NodeName = node
	return c
}

// TestRejectAssumeWithoutNodeName: upstream keys entries by the pod's node
// name, "" included.
func TestRejectAssumeWithoutNodeName(t *testing.T) {
	c := upNew(t)
	_, err := c.AddNode(upLog, upNode("n1", nil))
	require.NoError(t, err)
	pa := upWithPVC(upPod("pa", "ns", "a", ""), "claim")
	pb := upPod("pb", "ns", "b", "")
	require.NoError(t, c.AssumePod(upLog, pa))
	require.NoError(t, c.AssumePod(upLog, pb))

	require.Equal(t, 2, c.NodeCount(), "n1 and the nodeless entry \"\"")
	d, err := c.Dump()
	require.NoError(t, err)
	require.Contains(t, d.Nodes, "")
	require.Nil(t, d.Nodes[""].Node())
	require.Equal(t, []string{"pa", "pb"}, upInfoNames(d.Nodes[""].Pods()))
	require.Equal(t, map[string]struct{}{"a": {}, "b": {}}, d.AssumedPods)
	ni, err := c.GetNode("")
	require.NoError(t, err)
	require.Equal(t, 2, ni.NumPods())
	s := c.Snapshot()
	require.Equal(t, 1, s.NumNodes(), "the nodeless entry is never in snapshots")
	_, err = s.Get("")
	require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound)
	require.False(t, s.IsPVCUsedByPods("ns/claim"), "a nodeless entry's claims are not in use")
	assumed, err := c.IsAssumedPod(pa)
	require.NoError(t, err)
	require.True(t, assumed)

	// Confirmed elsewhere, forgotten: the entry goes with its last pod.
	require.NoError(t, c.AddPod(upLog, rejWithNode(pa, "n1")))
	require.Equal(t, 2, c.NodeCount())
	require.NoError(t, c.ForgetPod(upLog, pb))
	require.Equal(t, 1, c.NodeCount())
	upRequireNoEntry(t, c, "")
	require.True(t, c.Snapshot().IsPVCUsedByPods("ns/claim"))
}

// TestRejectUpdatePodRename: UpdatePod removes the pod found by the old
// UID and adds the new pod under its own UID, as upstream.
func TestRejectUpdatePodRename(t *testing.T) {
	c := upNew(t)
	_, err := c.AddNode(upLog, upNode("n1", nil))
	require.NoError(t, err)
	pa := upWithPodAntiAffinity(upWithPVC(upPod("pa", "ns", "a", "n1"), "claim"), "zone", upExistsSelector("x"))
	require.NoError(t, c.AddPod(upLog, pa))
	pz := rejRenamed(pa, "z")
	require.NoError(t, c.UpdatePod(upLog, pa, pz))

	_, err = c.GetPod(pa)
	require.ErrorIs(t, err, schedcache.ErrPodNotFound, "the old key is gone")
	got, err := c.GetPod(pz)
	require.NoError(t, err)
	require.Same(t, pz, got)
	n, _ := c.PodCount()
	require.Equal(t, 1, n)
	ni := upGetNode(t, c, "n1")
	require.Equal(t, []string{"pod-z"}, upInfoNames(ni.Pods()))
	s := c.Snapshot()
	anti, err := s.HavePodsWithRequiredAntiAffinityList()
	require.NoError(t, err)
	require.Equal(t, []string{"n1"}, upNodeNames(anti))
	require.True(t, s.IsPVCUsedByPods("ns/claim"))

	// The renamed pod is an added pod like any other.
	require.ErrorIs(t, c.UpdatePod(upLog, pa, pa), schedcache.ErrPodNotFound)
	require.NoError(t, c.RemovePod(upLog, pz))
	n, _ = c.PodCount()
	require.Equal(t, 0, n)
	require.False(t, c.Snapshot().IsPVCUsedByPods("ns/claim"))

	// On a pods-first entry holding only that pod, the entry is removed
	// and created again; it is there afterwards.
	pg := upPod("pg", "ns", "g", "ghost")
	require.NoError(t, c.AddPod(upLog, pg))
	require.NoError(t, c.UpdatePod(upLog, pg, rejRenamed(pg, "h")))
	require.Equal(t, []string{"pod-h"}, upInfoNames(upGetNode(t, c, "ghost").Pods()))
}

// TestRejectUpdatePodRefused: the UpdatePod calls upstream cannot survive
// are refused, typed, and change nothing.
func TestRejectUpdatePodRefused(t *testing.T) {
	pa := upPod("pa", "ns", "a", "n1")
	pb := upPod("pb", "ns", "b", "n1")
	tests := []struct {
		name     string
		old, new *v1.Pod
		want     error
		corrupt  bool
	}{
		// Upstream drops the pod's state, then adds it to n1 a second time.
		{name: "old names a node without entry", old: rejWithNode(pa, "nowhere"), new: pa, want: schedcache.ErrPodNodeMismatch},
		// Upstream panics (its error message reads the nil node's name).
		{name: "old names a nodeless entry", old: rejWithNode(pa, "ghost"), new: pa, want: schedcache.ErrPodNodeMismatch},
		// Upstream returns its "no corresponding pod" error, nothing changes.
		{name: "old names another live node", old: rejWithNode(pa, "n2"), new: pa, want: schedcache.ErrPodNodeMismatch},
		// Upstream holds key b twice on n1 and b's state describes pa's update.
		{name: "new UID is an added pod's", old: pa, new: rejRenamed(pa, "b"), want: schedcache.ErrUIDMismatch},
		{name: "new UID is an assumed pod's", old: pa, new: rejRenamed(pa, "c"), want: schedcache.ErrUIDMismatch},
		// Upstream exits.
		{name: "new names another node", old: pa, new: rejWithNode(rejRenamed(pa, "z"), "n2"), want: schedcache.ErrCorrupted, corrupt: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, async := range []bool{false, true} {
				var handled []error
				c := upNew(t, schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) { handled = append(handled, e.Err) }))
				for _, n := range []string{"n1", "n2"} {
					_, err := c.AddNode(upLog, upNode(n, nil))
					require.NoError(t, err)
				}
				require.NoError(t, c.AddPod(upLog, pa))
				require.NoError(t, c.AddPod(upLog, pb))
				require.NoError(t, c.AssumePod(upLog, upPod("pc", "ns", "c", "n2")))
				require.NoError(t, c.AddPod(upLog, upPod("pg", "ns", "g", "ghost")))
				before := upCacheFP(t, c)

				var err error
				if async {
					require.NoError(t, c.UpdatePodAsync(tc.old, tc.new))
					require.NoError(t, c.Sync())
					require.Equal(t, before, upCacheFP(t, c), "async: no change")
					require.NoError(t, c.Close()) // the handler has run for every failure
					require.Len(t, handled, 1)
					err = handled[0]
				} else {
					err = c.UpdatePod(upLog, tc.old, tc.new)
					require.Equal(t, before, upCacheFP(t, c), "no change")
				}
				require.ErrorIs(t, err, tc.want)
				var pe *schedcache.PodError
				var ce *schedcache.CorruptionError
				if tc.corrupt {
					require.True(t, errors.As(err, &ce), "%T", err)
				} else {
					require.True(t, errors.As(err, &pe), "%T", err)
					require.Equal(t, "UpdatePod", pe.Op)
					require.Equal(t, "a", pe.Key)
				}
			}
		})
	}
}

// TestRejectUpdateNodeNilOld: a nil old node has zone key "". Upstream's
// own tests pass one for zoneless nodes; with a zoned new node upstream
// panics, half applied.
func TestRejectUpdateNodeNilOld(t *testing.T) {
	c := upNew(t)
	_, err := c.AddNode(upLog, upNode("a", nil))
	require.NoError(t, err)
	_, err = c.AddNode(upLog, upZoneNode("z", "r", "z1"))
	require.NoError(t, err)
	before := upCacheFP(t, c)

	for _, n := range []*v1.Node{upZoneNode("a", "r", "z1"), upZoneNode("z", "r", "z1"), upZoneNode("new", "", "z2")} {
		_, err := c.UpdateNode(upLog, nil, n)
		require.ErrorIs(t, err, schedcache.ErrNilNode, n.Name)
		var ne *schedcache.NodeError
		require.True(t, errors.As(err, &ne))
		require.Equal(t, "UpdateNode", ne.Op)
		require.Equal(t, n.Name, ne.Name)
		require.ErrorIs(t, c.UpdateNodeAsync(nil, n), schedcache.ErrNilNode, "async: refused before it is queued")
	}
	require.Equal(t, before, upCacheFP(t, c), "no change")

	// Zoneless: replaced, or added.
	a2 := upNode("a", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
	ni, err := c.UpdateNode(upLog, nil, a2)
	require.NoError(t, err)
	require.Same(t, a2, ni.Node())
	ni, err = c.UpdateNode(upLog, nil, upNode("b", nil))
	require.NoError(t, err)
	require.Equal(t, "b", ni.NodeName())
	require.ElementsMatch(t, []string{"a", "z", "b"}, upListNames(t, c.Snapshot()))
	require.NoError(t, c.UpdateNodeAsync(nil, upNode("c", nil)))
	require.NoError(t, c.Sync())
	require.Equal(t, 4, c.Snapshot().NumNodes())
}

// TestRejectUpdateNodeOtherName: the old node serves only the zone move;
// refused only when that move would unlist another live node.
func TestRejectUpdateNodeOtherName(t *testing.T) {
	var handled []error
	c := upNew(t, schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) { handled = append(handled, e.Err) }))
	for _, n := range []*v1.Node{upZoneNode("a", "r", "z1"), upZoneNode("b", "r", "z2")} {
		_, err := c.AddNode(upLog, n)
		require.NoError(t, err)
	}
	before := upCacheFP(t, c)
	// Old b (listed in z2, live), new a in z3: upstream removes b from
	// the zone order while b keeps its object.
	_, err := c.UpdateNode(upLog, upZoneNode("b", "r", "z2"), upZoneNode("a", "r", "z3"))
	require.ErrorIs(t, err, schedcache.ErrNodeNameMismatch)
	var ne *schedcache.NodeError
	require.True(t, errors.As(err, &ne))
	require.Equal(t, "a", ne.Name)
	require.Equal(t, before, upCacheFP(t, c), "no change")

	// Accepted: same zone key (the tree is untouched), old name not
	// listed in old's zone (only the new node moves).
	ni, err := c.UpdateNode(upLog, upZoneNode("b", "r", "z1"), upZoneNode("a", "r", "z1"))
	require.NoError(t, err)
	require.Equal(t, "a", ni.NodeName())
	require.Equal(t, []string{"a", "b"}, upListNames(t, c.Snapshot()))
	_, err = c.UpdateNode(upLog, upZoneNode("b", "r", "z1"), upZoneNode("a", "r", "z3"))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "a"}, upListNames(t, c.Snapshot()),
		"z1 does not list b: nothing leaves, a joins z3 and is listed twice, as upstream")
	_, err = c.UpdateNode(upLog, upZoneNode("x", "r", "z2"), upZoneNode("y", "r", "z4"))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "a", "y"}, upListNames(t, c.Snapshot()))

	// Async: the refusal reaches the handler, nothing changes.
	before = upCacheFP(t, c)
	require.NoError(t, c.UpdateNodeAsync(upZoneNode("b", "r", "z2"), upZoneNode("a", "r", "z1")))
	require.NoError(t, c.Sync())
	require.Equal(t, before, upCacheFP(t, c), "no change")
	require.NoError(t, c.Close())
	require.Len(t, handled, 1)
	require.ErrorIs(t, handled[0], schedcache.ErrNodeNameMismatch)
}
