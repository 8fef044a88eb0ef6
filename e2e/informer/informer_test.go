package informer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/schedcache/schedcache/e2e/controlplane"
	"github.com/schedcache/schedcache/e2e/internal/apitrace"
)

// TestStorm: create, update and delete storms of pods and nodes against
// a production-like apiserver (watch cache on); after each the cache
// equals the API server. A second cache attached in the middle of the
// mixed storm (its initial list races with the writes) converges too.
func TestStorm(t *testing.T) {
	nodes, pods := 300, 3000
	if testing.Short() {
		nodes, pods = 30, 300
	}
	ctx := testContext(t)
	cp := controlplane.MustStart(t, controlplane.Options{})
	c := newCluster(t, ctx, cp, "storm")
	w := newWatcher(t, cp.AdminConfig(), true) // synced on the empty cluster
	rng := rand.New(rand.NewPCG(1, 30))

	// Creates: every node, then pods spread over them (a quarter bound
	// through the binding subresource).
	require.NoError(t, c.createNodes(ctx, 0, nodes))
	require.NoError(t, c.createPods(ctx, "a", pods, func(i int) string { return nodeName(i % nodes) }))
	w.requireConverges(t, ctx, c.admin)
	after := w.adapter.Counts()
	require.EqualValues(t, nodes, after.NodeAdds)
	require.EqualValues(t, pods, after.PodAdds, "assigned adds plus bindings")

	// Mixed: at once, update half the pods, delete a third, create new
	// ones, update half the nodes (labels and allocatable); a second cache
	// is attached meanwhile.
	_, all, err := c.podsOn(ctx, nil)
	require.NoError(t, err)
	perm := sample(rng, all, len(all))
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	upd, del := perm[:len(perm)/2], perm[len(perm)/2:len(perm)/2+len(perm)/3]
	var (
		wg     sync.WaitGroup
		errsMu sync.Mutex
		errs   []error
		w2     *watcher
	)
	run := func(fn func() error) {
		wg.Go(func() {
			if err := fn(); err != nil {
				errsMu.Lock()
				errs = append(errs, err)
				errsMu.Unlock()
			}
		})
	}
	run(func() error { return c.updatePods(ctx, upd, 1) })
	run(func() error { return c.deletePods(ctx, del) })
	run(func() error {
		return c.createPods(ctx, "b", pods/2, func(i int) string { return nodeName((i * 7) % nodes) })
	})
	run(func() error { return c.updateNodes(ctx, sample(rng, nodeNames(0, nodes), nodes/2), 1) })
	w2 = newWatcher(t, cp.AdminConfig(), true)
	wg.Wait()
	require.Empty(t, errs)
	w.requireConverges(t, ctx, c.admin)
	w2.requireConverges(t, ctx, c.admin)

	// Node deletes before their pods (the cache keeps a node that still
	// has pods as a ghost entry until they go, as upstream), then the
	// pods; then everything.
	gone := nodeNames(nodes-nodes/10, nodes)
	on, _, err := c.podsOn(ctx, gone)
	require.NoError(t, err)
	require.NoError(t, c.deleteNodes(ctx, gone))
	require.NoError(t, c.deletePods(ctx, on))
	w.requireConverges(t, ctx, c.admin)

	_, all, err = c.podsOn(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, c.deletePods(ctx, all))
	require.NoError(t, c.deleteNodes(ctx, nodeNames(0, nodes-nodes/10)))
	w.requireConverges(t, ctx, c.admin)
	w2.requireConverges(t, ctx, c.admin)
	for _, x := range []*watcher{w, w2} {
		x.requireNoErrors(t)
		require.Zero(t, x.cache.Snapshot().NumNodes(), "nodes left in the cache of an empty cluster")
	}
	t.Logf("adapter counts: %+v", w.adapter.Counts())
}

// cutOff is the cut-off scenario: a synced cache whose client is cut off
// (connections reset, new ones refused) while pods and nodes are
// created, updated and deleted; then, if compact, etcd is compacted; then
// the client is let back. It returns what the cache must have seen
// deleted.
func cutOff(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, c *cluster, w *watcher, p *controlplane.Proxy, compact bool, nodes, pods int) (deletedPods, deletedNodes int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(2, 30))
	// One event on each watch past its initial state: a watch that ends
	// within a second of its start with no event is an error for the
	// reflector, which then relists at once; with an event the cut ends it
	// as an ordinary close, and the reflector re-watches from its last
	// resource version (with backoff while it is refused).
	require.NoError(t, c.createPods(ctx, "marker", 1, func(int) string { return nodeName(0) }))
	require.NoError(t, c.updateNodes(ctx, []string{nodeName(0)}, 1))
	w.requireConverges(t, ctx, c.admin)

	require.NoError(t, p.Cut())
	gone := nodeNames(nodes-nodes/5, nodes)
	on, all, err := c.podsOn(ctx, gone)
	require.NoError(t, err)
	onSet := map[string]bool{}
	for _, n := range on {
		onSet[n] = true
	}
	var rest []string
	for _, n := range all {
		if !onSet[n] {
			rest = append(rest, n)
		}
	}
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	del, upd := rest[:len(rest)/3], rest[len(rest)/3:len(rest)/3+len(rest)/4]
	require.NoError(t, c.deletePods(ctx, del))
	require.NoError(t, c.deletePods(ctx, on))
	require.NoError(t, c.deleteNodes(ctx, gone))
	require.NoError(t, c.updatePods(ctx, upd, 2))
	require.NoError(t, c.createPods(ctx, "cut", pods/4, func(i int) string { return nodeName(i % (nodes - nodes/5)) }))
	// created and deleted while cut: never seen, so never a tombstone
	require.NoError(t, c.deletePods(ctx, []string{"cut-00001", "cut-00002"}))
	if compact {
		rev, err := cp.CompactEtcd(ctx)
		require.NoError(t, err)
		t.Logf("compacted etcd at revision %d", rev)
	}
	require.NoError(t, p.Restore())
	w.requireConverges(t, ctx, c.admin)
	w.requireNoErrors(t)
	return len(del) + len(on), len(gone)
}

// TestCutOff: the cache's client is cut off while pods and nodes are
// deleted (and others created), then let back.
//
//   - watch-cache: production-like. The reflector resumes its watches
//     from its last resource version, which the apiserver's watch cache
//     still holds: the deletes arrive as ordinary delete events.
//   - compacted: the apiserver serves watches from etcd, and etcd is
//     compacted while the client is away. The resumed watch fails with
//     410 Gone, the reflector relists, and every object deleted meanwhile
//     reaches the cache as a cache.DeletedFinalStateUnknown tombstone.
//
// Either way the cache ends equal to the API server.
func TestCutOff(t *testing.T) {
	nodes, pods := 100, 1500
	if testing.Short() {
		nodes, pods = 10, 120
	}
	for _, tc := range []struct {
		name    string
		compact bool
	}{{"watch-cache", false}, {"compacted", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			cp := controlplane.MustStart(t, controlplane.Options{DisableWatchCache: tc.compact})
			c := newCluster(t, ctx, cp, "cut")
			require.NoError(t, c.createNodes(ctx, 0, nodes))
			require.NoError(t, c.createPods(ctx, "a", pods, func(i int) string { return nodeName(i % nodes) }))
			p := cp.MustNewProxy(t)
			w := newWatcher(t, p.Config(cp.AdminConfig()), true)
			w.requireEqualNow(t, ctx, c.admin)
			synced := len(w.rec.Requests("pods"))

			deletedPods, deletedNodes := cutOff(t, ctx, cp, c, w, p, tc.compact, nodes, pods)
			tp, tn := w.tombstones.get()
			t.Logf("tombstones: %d pods, %d nodes; deleted while cut: %d pods, %d nodes; adapter: %+v",
				tp, tn, deletedPods, deletedNodes, w.adapter.Counts())
			if !tc.compact {
				return
			}
			// The resumed watches failed with 410 Gone and were followed by
			// a relist, for pods and for nodes.
			for _, res := range []string{"pods", "nodes"} {
				require.Positive(t, w.rec.Counts(res).Expired+w.rec.Counts(res).ExpiredListReplies, "no 410 for %s", res)
			}
			relisted := false
			for _, r := range w.rec.Requests("pods")[synced:] {
				relisted = relisted || (r.IsRelist() && r.Status == 200)
			}
			require.True(t, relisted, "no relist of pods after the 410")
			require.Equal(t, deletedPods, tp, "pod tombstones")
			require.Equal(t, deletedNodes, tn, "node tombstones")
			require.EqualValues(t, deletedPods+deletedNodes, w.adapter.Counts().Tombstones)
		})
	}
}

// modes are the reflector's two ways of getting the initial state: a
// watch list (client-go's WatchListClient feature, on by default in
// v0.37: one watch with sendInitialEvents=true that ends the initial
// state with a bookmark) and a list followed by a watch.
var modes = []struct {
	name      string
	watchList bool
}{{"watch-list", true}, {"list", false}}

// TestBookmarks checks how the reflector uses watch bookmarks against a
// real apiserver (watch cache on, which sends them), in both modes:
//
//   - every watch the reflector opens sets allowWatchBookmarks=true;
//   - with watch lists, the initial state ends with the
//     k8s.io/initial-events-end bookmark, and the adapter's HasSynced is
//     true only once it came, for pods and for nodes; without, the first
//     request is a list and the watch starts at its resource version;
//   - bookmarks are not events: the handlers saw exactly one add per
//     object, nothing else;
//   - (long form) the apiserver's periodic bookmarks (every minute or so)
//     reach the watches, and the cache still equals the API server.
func TestBookmarks(t *testing.T) {
	ctx := testContext(t)
	cp := controlplane.MustStart(t, controlplane.Options{})
	c := newCluster(t, ctx, cp, "bookmarks")
	nodes, pods := 10, 100
	require.NoError(t, c.createNodes(ctx, 0, nodes))
	require.NoError(t, c.createPods(ctx, "a", pods, func(i int) string { return nodeName(i % nodes) }))
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, m.watchList)
			w := newWatcher(t, cp.AdminConfig(), false)
			w.factory.Start(w.ctx.Done())
			var atSync map[string]apitrace.Counts
			require.Eventually(t, func() bool {
				// Read the counts first: if HasSynced is then true, they
				// were taken before it became true.
				counts := map[string]apitrace.Counts{"pods": w.rec.Counts("pods"), "nodes": w.rec.Counts("nodes")}
				if !w.adapter.HasSynced() {
					return false
				}
				atSync = counts
				return true
			}, convergeTimeout, 10*time.Millisecond)
			w.requireEqualNow(t, ctx, c.admin)

			for _, res := range []string{"pods", "nodes"} {
				reqs := w.rec.Requests(res)
				require.NotEmpty(t, reqs)
				for _, r := range reqs {
					if r.Watch {
						require.True(t, r.AllowWatchBookmarks, "%s watch without allowWatchBookmarks: %+v", res, r)
					}
				}
				if m.watchList {
					require.True(t, reqs[0].Watch && reqs[0].SendInitialEvents, "%s: first request %+v", res, reqs[0])
					require.Equal(t, string(metav1.ResourceVersionMatchNotOlderThan), reqs[0].ResourceVersionMatch)
					require.GreaterOrEqual(t, atSync[res].InitialEventsEnds, 1, "%s: HasSynced before the initial-events-end bookmark", res)
				} else {
					require.False(t, reqs[0].Watch, "%s: first request %+v", res, reqs[0])
					require.Zero(t, w.rec.Counts(res).InitialEventsEnds)
				}
			}
			n := w.adapter.Counts()
			require.EqualValues(t, pods, n.PodAdds)
			require.EqualValues(t, nodes, n.NodeAdds)
			require.Zero(t, n.PodUpdates+n.PodDeletes+n.NodeUpdates+n.NodeDeletes+n.Tombstones, "events besides the initial adds: %+v", n)

			if testing.Short() {
				return
			}
			// The apiserver's watch cache sends each watch a bookmark
			// about every minute (the first came after 61 s and 121 s in
			// the two modes here; the deadline leaves room).
			require.Eventually(t, func() bool {
				b := w.rec.Counts("pods")
				return b.Bookmarks > b.InitialEventsEnds
			}, 5*time.Minute, time.Second, "no periodic bookmark")
			require.Equal(t, n, w.adapter.Counts(), "a bookmark reached the handlers")
			w.requireEqualNow(t, ctx, c.admin)
		})
	}
}

// TestHasSynced checks the adapter's HasSynced on a real apiserver, in
// both reflector modes: false before the informers start and while the
// apiserver cannot be reached; once true, the cache holds the initial
// state in full at once (no waiting: the pods and nodes that existed
// before the start, unassigned pods left out as the comparer does); and
// it stays true when the client is cut off later.
func TestHasSynced(t *testing.T) {
	ctx := testContext(t)
	cp := controlplane.MustStart(t, controlplane.Options{})
	c := newCluster(t, ctx, cp, "synced")
	nodes, pods := 20, 200
	require.NoError(t, c.createNodes(ctx, 0, nodes))
	require.NoError(t, c.createPods(ctx, "a", pods, func(i int) string { return nodeName(i % nodes) }))
	for i := range 10 { // pods no scheduler placed: in the API, not in the node cache
		_, err := c.admin.CoreV1().Pods(c.ns).Create(ctx, c.newPod(fmt.Sprintf("pending-%d", i), ""), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, m.watchList)
			p := cp.MustNewProxy(t)
			require.NoError(t, p.Cut())
			w := newWatcher(t, p.Config(cp.AdminConfig()), false)
			require.False(t, w.adapter.HasSynced(), "synced before the informers started")
			w.factory.Start(w.ctx.Done())
			// Both informers tried and failed to reach the apiserver.
			require.Eventually(t, func() bool {
				return failed(w.rec.Requests("pods")) >= 2 && failed(w.rec.Requests("nodes")) >= 2
			}, convergeTimeout, 50*time.Millisecond)
			require.False(t, w.adapter.HasSynced(), "synced with the apiserver unreachable")
			require.Zero(t, w.cache.Snapshot().NumNodes())

			require.NoError(t, p.Restore())
			sctx, cancel := context.WithTimeout(ctx, convergeTimeout)
			defer cancel()
			require.True(t, cache.WaitForCacheSync(sctx.Done(), w.adapter.HasSynced))
			w.requireEqualNow(t, ctx, c.admin)
			require.EqualValues(t, pods, w.adapter.Counts().PodAdds)

			require.NoError(t, p.Cut())
			require.True(t, w.adapter.HasSynced(), "HasSynced went back to false")
			require.NoError(t, p.Restore())
			w.requireNoErrors(t)
		})
	}
}

// failed counts the requests that got no response.
func failed(reqs []apitrace.Request) int {
	n := 0
	for _, r := range reqs {
		if r.Status == 0 {
			n++
		}
	}
	return n
}
