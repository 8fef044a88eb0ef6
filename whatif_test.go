package schedcache_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/cachetest"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/nodeinfo"
)

// whatifCluster starts a cache holding nodes n0..n(nodes-1) in two zones
// and podsPerNode added pods on each.
func whatifCluster(t *testing.T, nodes, podsPerNode int) *schedcache.Cache {
	t.Helper()
	c, err := schedcache.New(context.Background(), schedcache.WithShards(2))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	logger := klog.Background()
	for i := 0; i < nodes; i++ {
		_, err := c.AddNode(logger, exampleNode(fmt.Sprintf("n%d", i), []string{"A", "B"}[i%2]))
		require.NoError(t, err)
		for j := 0; j < podsPerNode; j++ {
			require.NoError(t, c.AddPod(logger, examplePod(fmt.Sprintf("p%d-%d", i, j), fmt.Sprintf("n%d", i), "100m")))
		}
	}
	return c
}

// snapSum renders what a snapshot shows that forks could disturb: pods,
// node totals and generations, in list order.
func snapSum(s *schedcache.Snapshot) string {
	out := fmt.Sprint(s.Epoch(), s.PodCount(), s.NodeCount(), s.NumNodes(), "|")
	s.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		out += fmt.Sprint(ni.NodeName(), ni.Generation(), ni.NumPods(), ni.Requested().MilliCPU, ";")
		return true
	})
	return out
}

// Many goroutines fork the published snapshot of a cache that keeps
// publishing, and change and revert their forks; every base they forked
// stays exactly as it was, and each fork sees its base plus its own
// changes only (run with -race).
func TestForkWhileCachePublishes(t *testing.T) {
	c := whatifCluster(t, 16, 2)
	logger := klog.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the cache keeps publishing
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := examplePod(fmt.Sprintf("churn-%d", i), fmt.Sprintf("n%d", i%16), "10m")
			if err := c.AssumePod(logger, p); err != nil {
				t.Error(err)
				return
			}
			if err := c.ForgetPod(logger, p); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const workers = 8
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			type held struct {
				s   *schedcache.Snapshot
				sum string
			}
			var bases []held
			for r := 0; r < rounds; r++ {
				base := c.Snapshot()
				bases = append(bases, held{base, snapSum(base)})
				f := base.Fork()
				for i := 0; i < 5; i++ {
					if err := f.AssumePod(examplePod(fmt.Sprintf("w%d-%d-%d", w, r, i), fmt.Sprintf("n%d", (w+i)%16), "1")); err != nil {
						errc <- err
						return
					}
				}
				p := f.Point()
				if err := f.AddNode(exampleNode(fmt.Sprintf("extra-%d", w), "C")); err != nil {
					errc <- err
					return
				}
				if got, want := f.Snapshot().NumNodes(), base.NumNodes()+1; got != want {
					errc <- fmt.Errorf("fork lists %d nodes, want %d", got, want)
					return
				}
				if err := f.RevertTo(p); err != nil {
					errc <- err
					return
				}
				if got, want := f.Snapshot().PodCount(), base.PodCount()+5; got != want {
					errc <- fmt.Errorf("fork holds %d pods, want %d", got, want)
					return
				}
			}
			for i, h := range bases {
				if got := snapSum(h.s); got != h.sum {
					errc <- fmt.Errorf("base %d changed:\n%s\n%s", i, h.sum, got)
					return
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		require.NoError(t, <-errc)
	}
	close(stop)
	wg.Wait()
}

// podsOf returns the sorted keys of node's pods in s.
func podsOf(s *schedcache.Snapshot, node string) []string {
	ni, err := s.Get(node)
	if err != nil {
		return nil
	}
	var out []string
	for _, pi := range ni.Pods() {
		out = append(out, pi.Key())
	}
	sortStrings(out)
	return out
}

// A commit applies every kind of pod change of a fork (assume, confirm,
// update, forget, remove, a pod moved to another node) as one operation
// published in one snapshot: the cache then shows what the fork showed.
func TestCommitApplies(t *testing.T) {
	c := whatifCluster(t, 4, 2)
	logger := klog.Background()
	assumed := examplePod("assumed", "n2", "100m")
	require.NoError(t, c.AssumePod(logger, assumed))
	moving := examplePod("moving", "n3", "100m")
	require.NoError(t, c.AssumePod(logger, moving))

	base := c.Snapshot()
	f := base.Fork()
	require.NoError(t, f.AssumePod(examplePod("new-a", "n0", "1")))
	require.NoError(t, f.AddPod(examplePod("new-b", "n1", "1")))
	require.NoError(t, f.ForgetPod(assumed))
	require.NoError(t, f.AddPod(examplePod("moving", "n0", "100m"))) // confirmed on another node
	old, _ := base.Pod("p1-0")
	require.NoError(t, f.UpdatePod(old.Pod, examplePod("p1-0", "n1", "200m")))
	gone, _ := base.Pod("p3-1")
	require.NoError(t, f.RemovePod(gone.Pod))
	want := f.Snapshot()

	before := c.Stats()
	require.NoError(t, c.Commit(context.Background(), f))
	after := c.Stats()
	require.Equal(t, before.Publications+1, after.Publications, "one publication")
	got := c.Snapshot()
	for i := 0; i < 4; i++ {
		n := fmt.Sprintf("n%d", i)
		require.Equal(t, podsOf(want, n), podsOf(got, n), n)
		wn, _ := want.Get(n)
		gn, _ := got.Get(n)
		require.Equal(t, wn.Requested(), gn.Requested(), n)
	}
	require.Equal(t, want.PodCount(), got.PodCount())
	for _, k := range []string{"new-a", "new-b", "moving", "p1-0"} {
		we, _ := want.Pod(k)
		ge, ok := got.Pod(k)
		require.True(t, ok, k)
		require.Equal(t, we.Assumed, ge.Assumed, k)
		require.Same(t, we.Pod, ge.Pod, k)
	}
	for _, k := range []string{"assumed", "p3-1"} {
		_, ok := got.Pod(k)
		require.False(t, ok, k)
	}
	require.Equal(t, before.Ops[schedcache.OpCommit]+1, after.Ops[schedcache.OpCommit])

	// The same fork again: its pods are no longer live as in its base.
	var ce *schedcache.CommitConflictError
	require.ErrorAs(t, c.Commit(context.Background(), f), &ce)
	require.Equal(t, []string{"assumed", "moving", "new-a", "new-b", "p1-0", "p3-1"}, ce.Pods)
	require.Equal(t, got, c.Snapshot(), "nothing applied")
}

// A node changed since the fork's base fails the default check; nothing
// of the commit is applied, the conflict lists the node and Stats counts
// it. CommitIf's weaker check ("still fits") lets the same commit through.
func TestCommitConflicts(t *testing.T) {
	c := whatifCluster(t, 3, 1)
	logger := klog.Background()
	base := c.Snapshot()
	f := base.Fork()
	require.NoError(t, f.AssumePod(examplePod("a", "n0", "1")))
	require.NoError(t, f.AssumePod(examplePod("b", "n1", "1")))
	require.NoError(t, c.AssumePod(logger, examplePod("other", "n0", "100m"))) // n0 changes live

	live := c.Snapshot()
	err := c.Commit(context.Background(), f)
	require.ErrorIs(t, err, schedcache.ErrCommitConflict)
	var ce *schedcache.CommitConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []string{"n0"}, ce.Nodes)
	require.Empty(t, ce.Pods)
	require.Same(t, live, c.Snapshot(), "nothing applied, nothing published")
	require.Equal(t, uint64(1), c.Stats().CommitConflicts)

	fits := schedcache.CommitIf(func(name string, base, live *schedcache.NodeInfo) bool {
		return live != nil && live.Requested().MilliCPU+1000 <= live.Allocatable().MilliCPU
	})
	require.NoError(t, c.Commit(context.Background(), f, fits))
	require.Equal(t, []string{"a", "other", "p0-0"}, podsOf(c.Snapshot(), "n0"))

	// A pod assumed live meanwhile is a pod conflict, whatever the check.
	g := c.Snapshot().Fork()
	require.NoError(t, g.AssumePod(examplePod("x", "n2", "1")))
	require.NoError(t, c.AssumePod(logger, examplePod("x", "n1", "1")))
	require.ErrorAs(t, c.Commit(context.Background(), g, fits), &ce)
	require.Equal(t, []string{"x"}, ce.Pods)

	// A check that panics is a conflict, not a failure of the cache.
	h := c.Snapshot().Fork()
	require.NoError(t, h.AssumePod(examplePod("y", "n2", "1")))
	require.ErrorAs(t, c.Commit(context.Background(), h, schedcache.CommitIf(func(string, *schedcache.NodeInfo, *schedcache.NodeInfo) bool {
		panic("boom")
	})), &ce)
	require.NoError(t, c.Err())

	// Refusals.
	require.ErrorIs(t, c.Commit(context.Background(), nil), schedcache.ErrNilFork)
	k := c.Snapshot().Fork()
	require.NoError(t, k.AddNode(exampleNode("new", "C")))
	require.ErrorIs(t, c.Commit(context.Background(), k), schedcache.ErrForkNodeChanges)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, c.Commit(ctx, h), context.Canceled)
	require.NoError(t, c.Commit(context.Background(), c.Snapshot().Fork()), "an empty fork commits nothing")
}

// Commit checks the node a changed pod leaves as well as the one it goes
// to: a fork that removes a pod from n1, or moves one from n1 to n2, while
// the cache changes n1 meanwhile conflicts on n1 alone (n2 did not
// change), and nothing is applied. Unchanged, the same forks commit.
func TestCommitConflictOnNodeLeft(t *testing.T) {
	logger := klog.Background()
	for _, tc := range []struct {
		desc string
		fork func(t *testing.T, f *schedcache.Fork, base *schedcache.Snapshot)
	}{{
		desc: "remove a pod from n1",
		fork: func(t *testing.T, f *schedcache.Fork, base *schedcache.Snapshot) {
			e, ok := base.Pod("p1-0")
			require.True(t, ok)
			require.NoError(t, f.RemovePod(e.Pod))
		},
	}, {
		desc: "forget an assumed pod of n1",
		fork: func(t *testing.T, f *schedcache.Fork, base *schedcache.Snapshot) {
			e, ok := base.Pod("a1")
			require.True(t, ok)
			require.NoError(t, f.ForgetPod(e.Pod))
		},
	}, {
		desc: "confirm the pod assumed on n1 on n2",
		fork: func(t *testing.T, f *schedcache.Fork, _ *schedcache.Snapshot) {
			require.NoError(t, f.AddPod(examplePod("a1", "n2", "100m")))
		},
	}, {
		desc: "move an added pod from n1 to n2",
		fork: func(t *testing.T, f *schedcache.Fork, base *schedcache.Snapshot) {
			e, ok := base.Pod("p1-0")
			require.True(t, ok)
			require.NoError(t, f.RemovePod(e.Pod))
			require.NoError(t, f.AddPod(examplePod("p1-0", "n2", "100m")))
		},
	}} {
		t.Run(tc.desc, func(t *testing.T) {
			for _, change := range []bool{true, false} {
				c := whatifCluster(t, 3, 1)
				require.NoError(t, c.AssumePod(logger, examplePod("a1", "n1", "100m")))
				base := c.Snapshot()
				f := base.Fork()
				tc.fork(t, f, base)
				want := commitView(f.Snapshot())
				if !change {
					require.NoError(t, c.Commit(context.Background(), f))
					require.Equal(t, want, commitView(c.Snapshot()))
					continue
				}
				require.NoError(t, c.AssumePod(logger, examplePod("other", "n1", "10m"))) // n1 changes live
				live := c.Snapshot()
				err := c.Commit(context.Background(), f)
				var ce *schedcache.CommitConflictError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, []string{"n1"}, ce.Nodes, "the node the pod left")
				require.Empty(t, ce.Pods)
				require.Same(t, live, c.Snapshot(), "nothing applied, nothing published")
				require.Equal(t, uint64(1), c.Stats().CommitConflicts)
			}
		})
	}
}

// AssumePodIfGeneration assumes only on the generation the caller saw.
func TestAssumePodIfGeneration(t *testing.T) {
	c := whatifCluster(t, 2, 1)
	logger := klog.Background()
	ni, err := c.Snapshot().Get("n0")
	require.NoError(t, err)
	gen := ni.Generation()
	require.NoError(t, c.AssumePodIfGeneration(examplePod("a", "n0", "1"), gen))
	err = c.AssumePodIfGeneration(examplePod("b", "n0", "1"), gen) // n0 changed: a
	var ce *schedcache.CommitConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []string{"n0"}, ce.Nodes)
	_, ok := c.Snapshot().Pod("b")
	require.False(t, ok)
	// A change pending in the same epoch is seen too.
	ni, _ = c.Snapshot().Get("n1")
	require.NoError(t, c.AddPodAsync(examplePod("c", "n1", "1")))
	require.ErrorIs(t, c.AssumePodIfGeneration(examplePod("d", "n1", "1"), ni.Generation()), schedcache.ErrCommitConflict)
	st := c.Stats()
	require.Equal(t, uint64(2), st.AssumeConflicts)
	require.Equal(t, uint64(3), st.Ops[schedcache.OpAssumeIfGen])
	require.ErrorIs(t, c.AssumePodIfGeneration(nil, 1), schedcache.ErrNilPod)
	_ = logger
}

// Commit is linearizable with the other operations: committers race each
// other and a churning writer on shared nodes; each commit assumes a new
// group of pods and often also forgets or moves (forget, then assume on
// other nodes under a new version) a group an earlier commit of the same
// committer applied. Every snapshot readers take holds each commit
// entirely or not at all (a group's pods all present, at one version, or
// all absent), and in the end the cache holds exactly what the commits
// that returned nil left.
func TestCommitLinearizable(t *testing.T) {
	const nodes, committers, batch = 6, 4, 3
	rounds := 80
	if testing.Short() {
		rounds = 25
	}
	c := whatifCluster(t, nodes, 1)
	logger := klog.Background()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // churn on the same nodes
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := examplePod(fmt.Sprintf("churn-%d", i), fmt.Sprintf("n%d", i%nodes), "10m")
			if err := c.AssumePod(logger, p); err != nil {
				t.Error(err)
				return
			}
			if err := c.ForgetPod(logger, p); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	readerErr := make(chan error, 2)
	for range 2 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			var last uint64
			for {
				select {
				case <-stop:
					readerErr <- nil
					return
				default:
				}
				s := c.Snapshot()
				if s.Epoch() < last {
					readerErr <- fmt.Errorf("epoch went back: %d after %d", s.Epoch(), last)
					return
				}
				last = s.Epoch()
				groups := map[string]int{}
				versions := map[string]string{}
				var bad string
				s.RangePods(func(k string, e snapshotPodEntry) bool {
					if len(k) > 2 && k[:2] == "c-" {
						g := k[:len(k)-2]
						groups[g]++
						if v, ok := versions[g]; ok && v != e.Pod.ResourceVersion {
							bad = fmt.Sprintf("snapshot %d holds group %s at versions %s and %s", s.Epoch(), g, v, e.Pod.ResourceVersion)
							return false
						}
						versions[g] = e.Pod.ResourceVersion
					}
					return true
				})
				if bad != "" {
					readerErr <- errors.New(bad)
					return
				}
				for g, n := range groups {
					if n != batch {
						readerErr <- fmt.Errorf("snapshot %d holds %d of the %d pods of group %s", s.Epoch(), n, batch, g)
						return
					}
				}
			}
		}()
	}
	// group is a committer's model of one group of pods it created.
	type group struct {
		prefix  string
		present bool
		ver     int
		node    int // the first pod's node; pod i is on node+i
	}
	type tally struct {
		groups                           []*group
		applied, conflicts, moved, freed int
	}
	tallies := make([]tally, committers)
	var wg sync.WaitGroup
	for w := range committers {
		wg.Go(func() {
			r := rand.New(rand.NewSource(int64(w)))
			tl := &tallies[w]
			mkPod := func(g *group, i, ver, node int) *v1.Pod {
				p := examplePod(fmt.Sprintf("%s-%d", g.prefix, i), fmt.Sprintf("n%d", (node+i)%nodes), "10m")
				p.ResourceVersion = fmt.Sprint(ver)
				return p
			}
			for rd := range rounds {
				base := c.Snapshot()
				f := base.Fork()
				ng := &group{prefix: fmt.Sprintf("c-%d-%03d", w, rd), node: (w + rd) % nodes}
				for i := range batch {
					if err := f.AssumePod(mkPod(ng, i, 0, ng.node)); err != nil {
						t.Error(err)
						return
					}
				}
				var old *group
				move := false
				var present []*group
				for _, g := range tl.groups {
					if g.present {
						present = append(present, g)
					}
				}
				if len(present) > 0 && r.Intn(2) == 0 {
					old, move = present[r.Intn(len(present))], r.Intn(2) == 0
					to := (old.node + 1 + r.Intn(nodes-1)) % nodes
					for i := range batch {
						e, ok := base.Pod(fmt.Sprintf("%s-%d", old.prefix, i))
						if !ok {
							t.Errorf("group %s is present in the model but not in the base", old.prefix)
							return
						}
						if err := f.ForgetPod(e.Pod); err != nil {
							t.Error(err)
							return
						}
						if move {
							if err := f.AssumePod(mkPod(old, i, old.ver+1, to)); err != nil {
								t.Error(err)
								return
							}
						}
					}
					if move {
						old = &group{prefix: old.prefix, present: true, ver: old.ver + 1, node: to}
					}
				}
				err := c.Commit(context.Background(), f)
				if err != nil && !errors.Is(err, schedcache.ErrCommitConflict) {
					t.Error(err)
					return
				}
				if err != nil {
					tl.conflicts++
					ng.present = false
					tl.groups = append(tl.groups, ng)
					continue
				}
				tl.applied++
				ng.present = true
				if old != nil {
					for i, g := range tl.groups {
						if g.prefix == old.prefix {
							if move {
								tl.groups[i] = old
								tl.moved++
							} else {
								g.present = false
								tl.freed++
							}
						}
					}
				}
				tl.groups = append(tl.groups, ng)
			}
		})
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	for range 2 {
		require.NoError(t, <-readerErr)
	}
	final := c.Snapshot()
	var sum tally
	for _, tl := range tallies {
		sum.applied += tl.applied
		sum.conflicts += tl.conflicts
		sum.moved += tl.moved
		sum.freed += tl.freed
		for _, g := range tl.groups {
			for i := range batch {
				e, ok := final.Pod(fmt.Sprintf("%s-%d", g.prefix, i))
				require.Equal(t, g.present, ok, "group %s", g.prefix)
				if ok {
					require.Equal(t, fmt.Sprint(g.ver), e.Pod.ResourceVersion, "group %s", g.prefix)
					require.Equal(t, fmt.Sprintf("n%d", (g.node+i)%nodes), e.Pod.Spec.NodeName, "group %s", g.prefix)
					require.True(t, e.Assumed, "group %s", g.prefix)
				}
			}
		}
	}
	require.Equal(t, uint64(sum.conflicts), c.Stats().CommitConflicts)
	t.Logf("%d commits applied (%d of them moved a group, %d forgot one), %d conflicted", sum.applied, sum.moved, sum.freed, sum.conflicts)
	require.Positive(t, sum.applied)
}

// commitView renders what a snapshot shows of pods and node totals, for
// comparing the cache after a commit with the fork it committed.
func commitView(s *schedcache.Snapshot) string {
	out := fmt.Sprint(s.NumNodes(), s.NodeCount(), s.PodCount(), "|")
	s.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		var keys []string
		for _, pi := range ni.Pods() {
			keys = append(keys, pi.Key())
		}
		sortStrings(keys)
		out += fmt.Sprint(ni.NodeName(), keys, ni.Requested().MilliCPU, ni.NumPodsWithAffinity(), ni.PVCRefCounts(), ";")
		return true
	})
	var pods []string
	s.RangePods(func(k string, e snapshotPodEntry) bool {
		pods = append(pods, fmt.Sprintf("%s:%v:%s:%p", k, e.Assumed, e.Pod.Spec.NodeName, e.Pod))
		return true
	})
	sortStrings(pods)
	return out + fmt.Sprint(pods)
}

// Random pod changes on forks of the cache's snapshot (every combination
// of a pod's state before and after: assumed, added, absent, moved,
// updated), committed while the cache changes random nodes meanwhile. A
// simple model decides the outcome: the commit conflicts exactly when a
// node it touches (a changed pod's node in the base or in the fork)
// changed since the fork, and the conflict names exactly those nodes;
// then nothing is applied. Otherwise the cache shows what the fork showed
// plus the live changes.
func TestCommitRandomized(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 30
	}
	c := whatifCluster(t, 5, 2)
	logger := klog.Background()
	r := rand.New(rand.NewSource(7))
	uid := 0
	conflicts, applied := 0, 0
	for round := 0; round < rounds; round++ {
		base := c.Snapshot()
		f := base.Fork()
		for range 1 + r.Intn(8) {
			cur := f.Snapshot()
			var keys []string
			cur.RangePods(func(k string, _ snapshotPodEntry) bool { keys = append(keys, k); return true })
			sortStrings(keys)
			node := fmt.Sprintf("n%d", r.Intn(5))
			var key string
			var e snapshotPodEntry
			if len(keys) > 0 {
				key = keys[r.Intn(len(keys))]
				e, _ = cur.Pod(key)
			}
			switch op := r.Intn(6); {
			case op == 0 || key == "":
				uid++
				_ = f.AssumePod(examplePod(fmt.Sprintf("r%d", uid), node, "100m"))
			case op == 1:
				uid++
				_ = f.AddPod(examplePod(fmt.Sprintf("r%d", uid), node, "200m"))
			case op == 2: // confirm (maybe elsewhere)
				_ = f.AddPod(examplePod(key, node, "300m"))
			case op == 3:
				_ = f.ForgetPod(e.Pod)
			case op == 4:
				_ = f.UpdatePod(e.Pod, examplePod(key, e.Pod.Spec.NodeName, "400m"))
			default:
				_ = f.RemovePod(e.Pod)
			}
		}
		// The model: the nodes of every pod the fork changed, before and
		// after (pod objects are never reused, so a changed pod has another
		// object or assumed state, or is absent on one side).
		fs := f.Snapshot()
		touched := map[string]bool{}
		changed := 0
		seen := map[string]bool{}
		visit := func(k string) {
			if seen[k] {
				return
			}
			seen[k] = true
			b, inBase := base.Pod(k)
			n, inNow := fs.Pod(k)
			if inBase == inNow && (!inBase || (b.Pod == n.Pod && b.Assumed == n.Assumed)) {
				return
			}
			changed++
			if inBase {
				touched[b.Pod.Spec.NodeName] = true
			}
			if inNow {
				touched[n.Pod.Spec.NodeName] = true
			}
		}
		base.RangePods(func(k string, _ snapshotPodEntry) bool { visit(k); return true })
		fs.RangePods(func(k string, _ snapshotPodEntry) bool { visit(k); return true })

		// The cache changes random nodes meanwhile (pods the fork does not
		// know), or none.
		var live []*v1.Pod
		liveNodes := map[string]bool{}
		for range r.Intn(3) {
			uid++
			p := examplePod(fmt.Sprintf("live%d", uid), fmt.Sprintf("n%d", r.Intn(5)), "10m")
			require.NoError(t, c.AssumePod(logger, p))
			live = append(live, p)
			liveNodes[p.Spec.NodeName] = true
		}
		var wantNodes []string
		for n := range liveNodes {
			if touched[n] {
				wantNodes = append(wantNodes, n)
			}
		}
		sortStrings(wantNodes)

		before := c.Snapshot()
		err := c.Commit(context.Background(), f)
		if changed > 0 && len(wantNodes) > 0 {
			conflicts++
			var ce *schedcache.CommitConflictError
			require.ErrorAs(t, err, &ce, "round %d: the cache changed %v, the fork touches %v", round, sortedKeys(liveNodes), sortedKeys(touched))
			require.Equal(t, wantNodes, ce.Nodes, "round %d", round)
			require.Empty(t, ce.Pods, "round %d", round)
			require.Equal(t, commitView(before), commitView(c.Snapshot()), "round %d: nothing applied", round)
			continue
		}
		require.NoError(t, err, "round %d: the cache changed %v, the fork touches %v", round, sortedKeys(liveNodes), sortedKeys(touched))
		applied++
		// Expected: the fork's state plus the live changes, which touched
		// none of its nodes.
		g := fs.Fork()
		for _, p := range live {
			require.NoError(t, g.AssumePod(p))
		}
		require.Equal(t, commitView(g.Snapshot()), commitView(c.Snapshot()), "round %d", round)
	}
	t.Logf("%d commits applied, %d conflicted", applied, conflicts)
	require.Positive(t, conflicts)
	require.Positive(t, applied)
}

// A node removed in the epoch still pending when the conditional assume
// arrives is seen as changed (the check reads the live state, not the
// last publication).
func TestAssumePodIfGenerationRemovedNode(t *testing.T) {
	c := whatifCluster(t, 2, 0)
	ni, err := c.Snapshot().Get("n1")
	require.NoError(t, err)
	require.NoError(t, c.RemoveNodeAsync(ni.Node()))
	err = c.AssumePodIfGeneration(examplePod("a", "n1", "1"), ni.Generation())
	require.ErrorIs(t, err, schedcache.ErrCommitConflict)
	require.Equal(t, 1, c.NodeCount())
}

// A fork of a snapshot the caller owns and refreshes keeps the state it
// was forked from: later refreshes do not reach it, and the fork's
// changes do not reach the owned snapshot.
func TestForkOfOwnedSnapshot(t *testing.T) {
	c := whatifCluster(t, 2, 1)
	logger := klog.Background()
	owned := schedcache.NewEmptySnapshot()
	require.NoError(t, c.UpdateSnapshot(logger, owned))
	f := owned.Fork()
	sum := snapSum(f.Base())
	require.NoError(t, f.AssumePod(examplePod("x", "n0", "1")))
	require.NoError(t, c.AddPod(logger, examplePod("y", "n1", "1")))
	require.NoError(t, c.UpdateSnapshot(logger, owned))
	require.Equal(t, sum, snapSum(f.Base()), "the refresh did not reach the fork's base")
	_, ok := f.Snapshot().Pod("y")
	require.False(t, ok)
	_, ok = owned.Pod("x")
	require.False(t, ok)
	_, ok = owned.Pod("y")
	require.True(t, ok)
	require.Equal(t, 3, f.Snapshot().PodCount())
	require.ErrorIs(t, f.Snapshot().CopyFrom(owned), schedcache.ErrSnapshotPublished, "a fork's snapshots are read-only")
}

// Commit's ctx is checked again when the commit's turn comes: a commit
// queued behind a busy coordinator whose ctx is cancelled meanwhile is
// not applied and returns ctx's error, not an unknown outcome.
func TestCommitContextDoneBeforeItsTurn(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var hold atomic.Bool
	c, err := schedcache.New(context.Background(), cachetest.WithFaultHooks(func(kind string) {
		if kind == "AddPod" && hold.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
	}, nil))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	logger := klog.Background()
	_, err = c.AddNode(logger, exampleNode("n0", "A"))
	require.NoError(t, err)
	f := c.Snapshot().Fork()
	require.NoError(t, f.AssumePod(examplePod("a", "n0", "1")))

	hold.Store(true)
	require.NoError(t, c.AddPodAsync(examplePod("q", "n0", "1")))
	watchdog.Recv(entered, "the coordinator holding AddPod")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Commit(ctx, f) }()
	require.Eventually(t, func() bool { return c.Stats().MailboxDepth == 1 }, 10*time.Second, time.Millisecond, "the commit is queued")
	cancel()
	close(release)
	require.ErrorIs(t, watchdog.Recv(done, "Commit returning"), context.Canceled)
	_, err = c.GetPod(examplePod("a", "n0", "1"))
	require.ErrorIs(t, err, schedcache.ErrPodNotFound, "not applied")
	require.NoError(t, c.Sync())
	require.Equal(t, []string{"q"}, podsOf(c.Snapshot(), "n0"))

	// The same change, forked again from now, with a live ctx applies.
	g := c.Snapshot().Fork()
	require.NoError(t, g.AssumePod(examplePod("a", "n0", "1")))
	require.NoError(t, c.Commit(context.Background(), g))
	require.Equal(t, []string{"a", "q"}, podsOf(c.Snapshot(), "n0"))
}
