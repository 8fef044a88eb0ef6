package schedcache_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/cachetest"
	"github.com/schedcache/schedcache/internal/watchdog"
)

// The tests of this file close gaps the mutation round of 2026-11-27 found
// (docs/mutation/round-2026-11-27.md): each fails with the plant its
// comment names (docs/mutation/plants.txt) and passes without it.

// mutAffinityPods returns a pod with pod affinity and one with required
// pod anti-affinity on node, and each one's copy without affinity (the
// same UID: what a stale informer object or a stripped tombstone holds).
func mutAffinityPods(node string) (aff, anti, affBare, antiBare *v1.Pod) {
	aff = upWithPodAffinity(upPod("aff", "ns", "aff", node), "zone", upExistsSelector("k"))
	anti = upWithPodAntiAffinity(upPod("anti", "ns", "anti", node), "zone", upExistsSelector("k"))
	affBare, antiBare = aff.DeepCopy(), anti.DeepCopy()
	affBare.Spec.Affinity, antiBare.Spec.Affinity = nil, nil
	return aff, anti, affBare, antiBare
}

// RemovePod takes the cached pod out of the affinity sub-lists whatever
// the object passed says: upstream's RemovePod removes currState.pod, the
// cached object. Plant S04 (the caller's object decides) leaves both pods
// in the sub-lists, and the node in the affinity lists, after they left.
func TestRemovePodSearchesAffinityListsByCachedPod(t *testing.T) {
	c := upNew(t)
	_, err := c.AddNode(upLog, upNode("n", nil))
	require.NoError(t, err)
	aff, anti, affBare, antiBare := mutAffinityPods("n")
	require.NoError(t, c.AddPod(upLog, aff))
	require.NoError(t, c.AssumePod(upLog, anti))
	ni := upGetNode(t, c, "n")
	require.Equal(t, 2, ni.NumPodsWithAffinity()) // anti-affinity counts as affinity too
	require.Equal(t, 1, ni.NumPodsWithRequiredAntiAffinity())

	require.NoError(t, c.RemovePod(upLog, affBare))
	require.NoError(t, c.RemovePod(upLog, antiBare))
	ni = upGetNode(t, c, "n")
	require.Zero(t, ni.NumPods())
	require.Zero(t, ni.NumPodsWithAffinity(), "the cached pod had affinity: it leaves PodsWithAffinity")
	require.Zero(t, ni.NumPodsWithRequiredAntiAffinity(), "the cached pod had anti-affinity: it leaves that list")
	s := c.Snapshot()
	require.Zero(t, s.NumNodesWithAffinity())
	require.Zero(t, s.NumNodesWithRequiredAntiAffinity())
}

// ForgetPod decides the sub-lists by the object passed, as upstream's
// (removePod(pod) of the caller's pod, whose NodeInfo.RemovePod asks that
// pod): forgetting an assumed pod with affinity through a copy without it
// leaves the pod in PodsWithAffinity (upstream's stale entry), and the
// node in the affinity list. Plant S05 (the stored pod decides) removes it.
func TestForgetPodSearchesAffinityListsByCallersPod(t *testing.T) {
	c := upNew(t)
	_, err := c.AddNode(upLog, upNode("n", nil))
	require.NoError(t, err)
	aff, anti, affBare, antiBare := mutAffinityPods("n")
	require.NoError(t, c.AssumePod(upLog, aff))
	require.NoError(t, c.AssumePod(upLog, anti))

	require.NoError(t, c.ForgetPod(upLog, affBare))
	require.NoError(t, c.ForgetPod(upLog, antiBare))
	upRequireForgotten(t, c, aff)
	upRequireForgotten(t, c, anti)
	ni := upGetNode(t, c, "n")
	require.Zero(t, ni.NumPods())
	require.Equal(t, 2, ni.NumPodsWithAffinity(), "upstream searches PodsWithAffinity only for a pod object with affinity")
	require.Equal(t, 1, ni.NumPodsWithRequiredAntiAffinity())
	s := c.Snapshot()
	require.Equal(t, 1, s.NumNodesWithAffinity())
	require.Equal(t, 1, s.NumNodesWithRequiredAntiAffinity())

	// A caller's object with affinity takes out the first entry of its UID,
	// the one the bare forget left.
	require.NoError(t, c.AssumePod(upLog, affBare))
	require.NoError(t, c.ForgetPod(upLog, aff))
	ni = upGetNode(t, c, "n")
	require.Zero(t, ni.NumPods())
	require.Equal(t, 1, ni.NumPodsWithAffinity(), "anti's entry is left")
}

// UpdateNode may name, as its old node, a ghost whose name its zone still
// lists (a RemoveNode naming another zone left it there): only a live node
// of that name is protected (ErrNodeNameMismatch), as upstream's update
// would unlist it for good. A ghost is not listed anyway, and upstream
// drops its name from the old zone and lists the new node. Plant N03
// (refusing for any entry of that name) refuses the update.
func TestUpdateNodeFromGhostNameInItsZone(t *testing.T) {
	c := upNew(t)
	_, err := c.AddNode(upLog, upZoneNode("a", "r", "z1"))
	require.NoError(t, err)
	_, err = c.AddNode(upLog, upZoneNode("c", "r", "z1"))
	require.NoError(t, err)
	require.NoError(t, c.AddPod(upLog, upPod("p", "ns", "p", "a")))
	// RemoveNode of a with the wrong zone: a becomes a ghost (it holds p),
	// its name stays listed in z1, and the list is inconsistent.
	require.ErrorIs(t, c.RemoveNode(upLog, upZoneNode("a", "r", "z2")), schedcache.ErrNodeNotFound)
	s := c.Snapshot()
	require.Equal(t, []string{"c"}, upListNames(t, s))
	var ie *schedcache.InconsistentListError
	require.ErrorAs(t, s.Err(), &ie)

	_, err = c.UpdateNode(upLog, upZoneNode("a", "r", "z1"), upZoneNode("b", "r", "z2"))
	require.NoError(t, err, "the old name is a ghost's, not a live node's")
	s = c.Snapshot()
	require.Equal(t, []string{"c", "b"}, upListNames(t, s))
	require.NoError(t, s.Err(), "a left z1: the tree lists only nodes again")
	upGetNode(t, c, "a") // the ghost still holds p
}

// A commit checks its nodes against their live state, which includes the
// pending epoch's changes: a node an earlier operation of the same batch
// changed is published first. Plant X04 (no publication first) checks it
// against the last published NodeInfo, whose generation is still the
// base's, and applies the commit over the change.
func TestCommitSeesPendingChangeOfItsNode(t *testing.T) {
	var holding atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	c := upNew(t, cachetest.WithFaultHooks(func(kind string) {
		if kind == "AddNode" && holding.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-release
		}
	}, nil))
	for _, n := range []string{"n1", "n2"} {
		_, err := c.AddNode(upLog, upNode(n, nil))
		require.NoError(t, err)
	}
	fork := c.Snapshot().Fork()
	require.NoError(t, fork.AssumePod(upPod("p", "ns", "p", "n1")))

	// The coordinator is held inside an async AddNode (so the next ops
	// queue behind it and form one batch with it): an async AddPod changes
	// n1, then the commit comes.
	holding.Store(true)
	require.NoError(t, c.AddNodeAsync(upNode("n3", nil)))
	watchdog.Recv(entered, "the coordinator entering the held AddNode")
	require.NoError(t, c.AddPodAsync(upPod("q", "ns", "q", "n1")))
	res := make(chan error, 1)
	go func() { res <- c.Commit(context.Background(), fork) }()
	stalled, stop := watchdog.Timer()
	defer stop()
	for c.Stats().MailboxDepth < 2 { // the AddPod and the commit queued
		select {
		case err := <-res:
			t.Fatalf("Commit returned %v before the coordinator took it", err)
		case <-stalled:
			watchdog.Stalled("the commit reaching the mailbox")
		default:
			runtime.Gosched()
		}
	}
	close(release)
	err := watchdog.Recv(res, "the commit's reply")
	var ce *schedcache.CommitConflictError
	require.ErrorAs(t, err, &ce, "n1 changed after the fork's base")
	require.Equal(t, []string{"n1"}, ce.Nodes)
	require.Equal(t, 1, upGetNode(t, c, "n1").NumPods(), "only q: p was not committed")
}

// The pod check of a commit compares the assumed state too: a pod assumed
// in the base and confirmed since (the same object) is a conflict, even
// under a node check that passes everything. Plant C02 (the object alone
// compared) lets the commit forget a pod that is no longer assumed, which
// fails the cache.
func TestCommitConflictOnPodConfirmedSinceFork(t *testing.T) {
	c := upNew(t)
	_, err := c.AddNode(upLog, upNode("n", nil))
	require.NoError(t, err)
	p := upPod("p", "ns", "p", "n")
	require.NoError(t, c.AssumePod(upLog, p))
	fork := c.Snapshot().Fork()
	require.NoError(t, fork.ForgetPod(p))
	require.NoError(t, c.AddPod(upLog, p)) // confirms the assumed pod

	err = c.Commit(context.Background(), fork, schedcache.CommitIf(func(string, *schedcache.NodeInfo, *schedcache.NodeInfo) bool { return true }))
	var ce *schedcache.CommitConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []string{"p"}, ce.Pods)
	require.NoError(t, c.Err())
	upRequireCached(t, c, p, false)
}

// A fork confirms an assumed pod on a ghost it made (its node removed in
// the fork while the pod was on it) in place, as the cache does: the
// ghost keeps the pod and the fork can remove it afterwards. Plant F05
// (the ghost is deleted when its only pod is taken off for the swap)
// loses the entry, and the later RemovePod finds no node.
func TestForkConfirmsPodOnItsGhost(t *testing.T) {
	c := upNew(t)
	n := upNode("n", nil)
	_, err := c.AddNode(upLog, n)
	require.NoError(t, err)
	p := upPod("p", "ns", "p", "n")
	require.NoError(t, c.AssumePod(upLog, p))
	base := c.Snapshot()
	f := base.Fork()
	require.NoError(t, f.RemoveNode(n))

	confirmed := p.DeepCopy()
	require.NoError(t, f.AddPod(confirmed))
	s := f.Snapshot()
	e, ok := s.Pod("p")
	require.True(t, ok)
	require.False(t, e.Assumed)
	require.Same(t, confirmed, e.Pod)
	require.Equal(t, 1, s.PodCount())
	require.Equal(t, 1, s.NodeCount(), "the ghost holds the confirmed pod")
	require.Zero(t, s.NumNodes())

	require.NoError(t, f.RemovePod(confirmed), "the ghost still holds the pod")
	s = f.Snapshot()
	require.Zero(t, s.PodCount())
	require.Zero(t, s.NodeCount(), "the ghost's last pod left: the entry goes")

	// The cache does the same.
	require.NoError(t, c.RemoveNode(upLog, n))
	require.NoError(t, c.AddPod(upLog, confirmed))
	require.NoError(t, c.RemovePod(upLog, confirmed))
	require.Zero(t, c.NodeCount())
}

// A refresh that finds its list inconsistent with the zone tree reports it
// and rebuilds the list from the tree, as upstream's UpdateSnapshot
// ("trying to recover"): a zone move that kept the list (no node new to
// the snapshot) is then listed in the tree's order. Plant R04 (reported,
// not rebuilt) keeps the old order.
func TestRefreshRebuildsInconsistentList(t *testing.T) {
	c := upNew(t)
	for _, n := range []*v1.Node{upZoneNode("a", "r", "z1"), upZoneNode("b", "r", "z1"), upZoneNode("c", "r", "z2"), upZoneNode("d", "r", "z2")} {
		_, err := c.AddNode(upLog, n)
		require.NoError(t, err)
	}
	require.NoError(t, c.AddPod(upLog, upPod("p", "ns", "p", "a")))
	// a becomes a ghost whose name stays listed in z1: the tree counts 4
	// names, the list 3 nodes, from now on.
	require.ErrorIs(t, c.RemoveNode(upLog, upZoneNode("a", "r", "z2")), schedcache.ErrNodeNotFound)

	snap := schedcache.NewEmptySnapshot()
	var ie *schedcache.InconsistentListError
	require.ErrorAs(t, c.UpdateSnapshot(upLog, snap), &ie)
	require.Equal(t, []string{"c", "b", "d"}, upListNames(t, snap)) // z1: a, b; z2: c, d

	// c moves to z1: the tree lists z1: a, b, c; z2: d.
	_, err := c.UpdateNode(upLog, upZoneNode("c", "r", "z2"), upZoneNode("c", "r", "z1"))
	require.NoError(t, err)
	require.ErrorAs(t, c.UpdateSnapshot(upLog, snap), &ie)
	require.Equal(t, 3, ie.ListLen)
	require.Equal(t, 4, ie.TreeNodes)
	require.Equal(t, []string{"d", "b", "c"}, upListNames(t, snap), "rebuilt from the tree")
	require.Equal(t, upListNames(t, c.Snapshot()), upListNames(t, snap))
}

// An inconsistent list's error reports the snapshot map's size and the
// cache's entry count as of each publication, as upstream's reports them
// as of each UpdateSnapshot: they change without the list changing (a
// pods-first entry made, a ghost's last pod gone), in the cache and in a
// fork alike. Plant L03 (the error recounted only when the map size
// changed) keeps the old entry count; since the rule is shared
// (internal/nodelists.Recount), a fork compared with the cache does not
// show it, so this test checks the counts themselves.
func TestInconsistentListErrorFollowsEntryCount(t *testing.T) {
	c := upNew(t)
	for _, n := range []string{"a", "c"} {
		_, err := c.AddNode(upLog, upZoneNode(n, "r", "z1"))
		require.NoError(t, err)
	}
	p := upPod("p", "ns", "p", "a")
	require.NoError(t, c.AddPod(upLog, p))
	consistent := c.Snapshot()
	counts := func(s *schedcache.Snapshot) [4]int {
		t.Helper()
		var ie *schedcache.InconsistentListError
		require.ErrorAs(t, s.Err(), &ie)
		return [4]int{ie.ListLen, ie.TreeNodes, ie.MapLen, ie.CacheEntries}
	}

	// In a fork: a becomes a ghost of the fork's whose name stays listed
	// in z1 (RemoveNode naming z2), then its last pod leaves: one entry
	// fewer, the same list and map.
	f := consistent.Fork()
	require.ErrorIs(t, f.RemoveNode(upZoneNode("a", "r", "z2")), schedcache.ErrNodeNotFound)
	require.Equal(t, [4]int{1, 2, 1, 2}, counts(f.Snapshot()))
	require.NoError(t, f.RemovePod(p))
	require.Equal(t, [4]int{1, 2, 1, 1}, counts(f.Snapshot()))

	// In the cache, the same ghost; then a pods-first entry (one entry
	// more) and the ghost's last pod leaving (one fewer).
	require.ErrorIs(t, c.RemoveNode(upLog, upZoneNode("a", "r", "z2")), schedcache.ErrNodeNotFound)
	require.Equal(t, [4]int{1, 2, 1, 2}, counts(c.Snapshot()))
	require.NoError(t, c.AddPod(upLog, upPod("q", "ns", "q", "x")))
	require.Equal(t, [4]int{1, 2, 1, 3}, counts(c.Snapshot()))
	require.NoError(t, c.RemovePod(upLog, p))
	require.Equal(t, [4]int{1, 2, 1, 2}, counts(c.Snapshot()))
}
