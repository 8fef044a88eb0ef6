package actor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
)

// listsTestAntiKeys are the required anti-affinity terms of the pods of
// the tests below, by kind: none, the hostname only, a zone, the hostname
// and a zone.
var listsTestAntiKeys = [][]string{nil, {v1.LabelHostname}, {v1.LabelTopologyZone}, {v1.LabelHostname, v1.LabelTopologyZone}}

// requireListsFollowSubLists checks the three affinity lists of s against
// its node list filtered by the nodes' sub-lists.
func requireListsFollowSubLists(t *testing.T, s *snapshot.Snapshot, when string) {
	t.Helper()
	var want [3][]string
	for i := range s.NumNodes() {
		ni := s.At(i)
		for l, n := range [3]int{ni.NumPodsWithAffinity(), ni.NumPodsWithRequiredAntiAffinity(), ni.NumPodsWithRequiredNonHostScopedAntiAffinity()} {
			if n > 0 {
				want[l] = append(want[l], ni.NodeName())
			}
		}
	}
	names := func(l []*nodeinfo.NodeInfo, _ error) []string {
		var out []string
		for _, ni := range l {
			out = append(out, ni.NodeName())
		}
		return out
	}
	require.Equal(t, want[0], names(s.HavePodsWithAffinityList()), "%s: affinity list", when)
	require.Equal(t, want[1], names(s.HavePodsWithRequiredAntiAffinityList()), "%s: anti-affinity list", when)
	require.Equal(t, want[2], names(s.HavePodsWithRequiredNonHostScopedAntiAffinityList()), "%s: non-host-scoped anti-affinity list", when)
}

// A removal whose pod object does not qualify for a sub-list leaves the
// pod's entry there (upstream searches a sub-list only for a qualifying
// object); a later pod of that key, not qualifying itself, removed
// through a qualifying object takes that stale entry out. The core's
// counts follow the shard's lists through both, so the node leaves the
// affinity lists with the last entry.
func TestAffinityCountsFollowStaleEntries(t *testing.T) {
	for kind := 1; kind < len(listsTestAntiKeys); kind++ {
		t.Run(fmt.Sprint(listsTestAntiKeys[kind]), func(t *testing.T) {
			l := newLocal(1, 0)
			c := l.core
			c.AddNode(testNode("n", "z"))
			with := antiAffinityPod(t, "p", "n", true, listsTestAntiKeys[kind]...)
			bare := antiAffinityPod(t, "p", "n", false)
			require.NoError(t, c.AssumePod(with))
			require.NoError(t, c.ForgetPod("p", bare.Pod()))
			s, err := l.Publish()
			require.NoError(t, err)
			requireShadowCounts(t, l, "after the bare forget")
			requireListsFollowSubLists(t, s, "after the bare forget")
			require.Equal(t, 1, s.NumNodesWithAffinity(), "the stale entry keeps the node listed, as upstream")
			require.Zero(t, c.nodes["n"].stale["q"])
			require.NotZero(t, c.nodes["n"].stale["p"])

			require.NoError(t, c.AssumePod(bare))
			require.NoError(t, c.ForgetPod("p", with.Pod()))
			s, err = l.Publish()
			require.NoError(t, err)
			requireShadowCounts(t, l, "after the forget with affinity")
			requireListsFollowSubLists(t, s, "after the forget with affinity")
			require.Zero(t, s.NumNodesWithAffinity())
			require.Zero(t, s.NumNodesWithRequiredAntiAffinity())
			require.Zero(t, s.NumNodesWithRequiredNonHostScopedAntiAffinity())
			require.Nil(t, c.nodes["n"].stale, "no stale entry left")
		})
	}
}

// Random pod operations on a few keys, through objects whose affinity
// differs from the cached pod's: the core's counts stay the shard's
// sub-list lengths, and the lists the node list filtered by them.
func TestAffinityCountsRandomStale(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	l := newLocal(2, 0)
	c := l.core
	nodes := []string{"a", "b", "c"}
	for i, n := range nodes {
		c.AddNode(testNode(n, fmt.Sprint("z", i%2)))
	}
	pod := func(key, node string) *nodeinfo.PodInfo {
		return antiAffinityPod(t, key, node, rng.IntN(3) == 0, listsTestAntiKeys[rng.IntN(len(listsTestAntiKeys))]...)
	}
	other := func(pi *nodeinfo.PodInfo) *v1.Pod { // the object a removal passes
		if rng.IntN(2) == 0 {
			return pi.Pod()
		}
		return pod(pi.Key(), pi.NodeName()).Pod()
	}
	staleSeen, rounds := 0, 3000
	if testing.Short() {
		rounds = 600
	}
	for i := range rounds {
		key := fmt.Sprint("p", rng.IntN(5))
		r := c.pods[key]
		switch {
		case r == nil && rng.IntN(2) == 0:
			require.NoError(t, c.AssumePod(pod(key, nodes[rng.IntN(len(nodes))])))
		case r == nil:
			require.NoError(t, c.AddPod(pod(key, nodes[rng.IntN(len(nodes))])))
		case r.assumed && rng.IntN(3) == 0:
			require.NoError(t, c.ForgetPod(key, other(r.info)))
		case r.assumed && rng.IntN(2) == 0:
			require.NoError(t, c.RemoveAssumedPod(key, other(r.info)))
		case r.assumed:
			require.NoError(t, c.AddPod(pod(key, r.info.NodeName())))
		case rng.IntN(2) == 0:
			require.NoError(t, c.UpdatePod(other(r.info), pod(key, r.info.NodeName())))
		default:
			require.NoError(t, c.RemovePod(key, other(r.info)))
		}
		if rng.IntN(3) == 0 {
			continue // several operations in one epoch
		}
		s, err := l.Publish()
		require.NoError(t, err)
		when := fmt.Sprint("round ", i)
		requireShadowCounts(t, l, when)
		requireListsFollowSubLists(t, s, when)
		stale := false
		for _, e := range c.nodes {
			for k, st := range e.stale {
				require.NotEqual(t, [3]int32{}, st, "%s: %s: an empty stale count is dropped", when, k)
				stale = true
			}
		}
		if stale {
			staleSeen++
		}
	}
	require.Greater(t, staleSeen, rounds/10, "publications with a stale entry")
}
