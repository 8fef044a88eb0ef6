package schedcache_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// TestModelRandomized runs long random operation sequences against the
// cache and against the model, and compares every observable after every
// step: errors, pod states, counts, the node list, every node's aggregate
// (every resource kind of Requested and NonZeroRequested, scalars included,
// Allocatable, ports, claims, affinity pods, image counts against the
// registry), the affinity lists, the used-PVC set, and which entries
// changed. At random steps it also refreshes a snapshot kept across steps
// (UpdateSnapshot, skipping epochs) and checks it against the model of
// upstream's refresh and against a new snapshot. Most seeds include the
// node inputs that corrupt upstream's zone tree (3.2, 3.3); the
// consistent ones do not, so their refreshes delete stale entries as a
// consistent tree makes them (the count of entries above the tree's).
func TestModelRandomized(t *testing.T) {
	seeds, consistent, steps := 12, 4, 600
	if testing.Short() {
		seeds, consistent, steps = 4, 1, 300
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, seed, steps, true) })
		})
	}
	for seed := int64(101); seed < int64(101+consistent); seed++ {
		t.Run(fmt.Sprint("consistent,seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, seed, steps, false) })
		})
	}
}

// runModel runs steps random operations; without quirks, node operations
// keep the zone tree consistent (AddNode of a present node keeps its zone,
// UpdateNode and RemoveNode get the stored node object).
func runModel(t *testing.T, seed int64, steps int, quirks bool) {
	r := rand.New(rand.NewSource(seed))
	const ttl, period = 3 * time.Second, time.Second
	c, err := schedcache.New(context.Background(), schedcache.WithTTL(ttl), schedcache.WithPeriod(period),
		schedcache.WithShards(1+int(seed)%3))
	require.NoError(t, err)
	defer c.Close()
	m := newModel(ttl)
	logger := klog.Background()
	start := time.Now()
	passes := 1 // the pass at start
	nodeNames := []string{"n0", "n1", "n2", "n3", "n4", "n5"}
	uids := make([]string, 24)
	for i := range uids {
		uids[i] = fmt.Sprintf("u%02d", i)
	}
	pickNode := func() string {
		if r.Intn(10) == 0 {
			return "ghost-" + fmt.Sprint(r.Intn(2)) // a name that may never be added
		}
		return nodeNames[r.Intn(len(nodeNames))]
	}
	// stored returns the model's stored pod for uid, or a fresh one.
	stored := func(uid string) *v1.Pod {
		if p := m.pods[uid]; p != nil {
			return p.info.Pod()
		}
		return randPod(r, uid, pickNode())
	}
	type held struct {
		snap *schedcache.Snapshot
		fp   string
	}
	var kept []held
	prev := c.Snapshot()
	ll := newLLModel()
	reused := schedcache.NewEmptySnapshot()
	nextRefresh := r.Intn(10)

	for step := 0; step < steps; step++ {
		uid := uids[r.Intn(len(uids))]
		var got, want error
		var desc string
		switch op := r.Intn(13); op {
		case 0, 1:
			node := pickNode()
			if r.Intn(20) == 0 {
				node = ""
			}
			p := randPod(r, uid, node)
			desc = "AssumePod " + uid + "@" + node
			info, _ := nodeinfo.NewPodInfo(p)
			got, want = c.AssumePod(logger, p), m.assume(info)
		case 2:
			p := stored(uid)
			desc = "FinishBinding " + uid
			got = c.FinishBinding(logger, p)
			m.finish(uid, time.Now())
		case 3:
			p := stored(uid)
			if r.Intn(4) == 0 {
				p = p.DeepCopy()
				p.Spec.NodeName = pickNode()
			}
			desc = "ForgetPod " + uid + "@" + p.Spec.NodeName
			got, want = c.ForgetPod(logger, p), m.forget(p)
		case 4, 5:
			node := pickNode()
			if mp := m.pods[uid]; mp != nil && r.Intn(3) > 0 {
				node = mp.info.NodeName()
			}
			p := randPod(r, uid, node)
			desc = "AddPod " + uid + "@" + node
			info, _ := nodeinfo.NewPodInfo(p)
			got, want = c.AddPod(logger, p), m.add(info)
		case 6:
			old := stored(uid)
			np := randPod(r, uid, old.Spec.NodeName)
			if r.Intn(8) == 0 {
				np.Spec.NodeName = pickNode()
			}
			if r.Intn(8) == 0 {
				np.UID = types.UID(uids[r.Intn(len(uids))]) // a rename: to a free UID, or refused
			}
			desc = "UpdatePod " + uid + " -> " + string(np.UID) + "@" + np.Spec.NodeName
			info, _ := nodeinfo.NewPodInfo(np)
			got, want = c.UpdatePod(logger, old, np), m.update(old, info)
		case 7:
			p := stored(uid)
			switch r.Intn(6) {
			case 0:
				p = p.DeepCopy()
				p.Spec.NodeName = ""
			case 1:
				p = p.DeepCopy()
				p.Spec.NodeName = pickNode()
			}
			desc = "RemovePod " + uid + "@" + p.Spec.NodeName
			got, want = c.RemovePod(logger, p), m.remove(p)
		case 8:
			n := randNode(r, nodeNames[r.Intn(len(nodeNames))])
			if e := m.entries[n.Name]; !quirks && e != nil && e.node != nil {
				n.Labels = e.node.Labels // in its zone: not listed twice
			}
			desc = "AddNode " + n.Name
			_, got = c.AddNode(logger, n)
			m.addNode(n)
		case 9:
			name := nodeNames[r.Intn(len(nodeNames))]
			if e := m.entries[name]; !quirks && (e == nil || e.node == nil) {
				n := randNode(r, name) // an informer adds it first
				desc = "AddNode " + n.Name
				_, got = c.AddNode(logger, n)
				m.addNode(n)
				break
			} else if !quirks {
				n := randNode(r, name)
				desc = "UpdateNode " + name
				_, got = c.UpdateNode(logger, e.node, n)
				want = m.updateNode(e.node, n)
				break
			}
			old := randNode(r, name)
			if e := m.entries[name]; e != nil && e.node != nil {
				old = e.node
			}
			n := randNode(r, name)
			switch r.Intn(10) {
			case 0:
				old = nil // accepted with a zoneless n, refused with a zoned one
			case 1:
				old = randNode(r, nodeNames[r.Intn(len(nodeNames))]) // another name, mostly
				if e := m.entries[old.Name]; e != nil && e.node != nil && r.Intn(2) == 0 {
					old = e.node
				}
			}
			desc = "UpdateNode " + name
			_, got = c.UpdateNode(logger, old, n)
			want = m.updateNode(old, n)
		case 10:
			name := nodeNames[r.Intn(len(nodeNames))]
			n := randNode(r, name)
			if e := m.entries[name]; e != nil && e.node != nil && (!quirks || r.Intn(4) > 0) {
				n = e.node
			}
			desc = "RemoveNode " + name
			got, want = c.RemoveNode(logger, n), m.removeNode(n)
		case 11, 12:
			d := time.Duration(r.Intn(2500)) * time.Millisecond
			desc = fmt.Sprint("Advance ", d)
			time.Sleep(d)
			synctest.Wait()
			for ; !start.Add(time.Duration(passes) * period).After(time.Now()); passes++ {
				m.expire(start.Add(time.Duration(passes) * period))
			}
		}
		for name := range m.touched {
			ll.since[name] = true
		}
		m.endOp()
		require.Equal(t, errClass(want), errClass(got), "step %d %s: error", step, desc)
		snap := c.Snapshot()
		checkModel(t, c, m, snap, prev, uids, fmt.Sprintf("step %d %s", step, desc))
		prev = snap
		if step == nextRefresh { // every 1 to 10 steps, skipping epochs
			ll.refresh(t, c, m, reused, snap, fmt.Sprintf("step %d %s: refresh", step, desc))
			nextRefresh += 1 + r.Intn(10)
		}
		if step%25 == 0 {
			kept = append(kept, held{snap, fingerprint(snap)})
		}
	}
	for i, h := range kept {
		require.Equal(t, h.fp, fingerprint(h.snap), "kept snapshot %d changed after it was published", i)
	}
}

func checkModel(t *testing.T, c *schedcache.Cache, m *model, snap, prev *schedcache.Snapshot, uids []string, at string) {
	t.Helper()
	n, _ := c.PodCount()
	require.Equal(t, len(m.pods), n, "%s: PodCount", at)
	require.Equal(t, len(m.entries), c.NodeCount(), "%s: NodeCount", at)
	for _, uid := range uids {
		probe := randPod(rand.New(rand.NewSource(1)), uid, "")
		gp, err := c.GetPod(probe)
		assumed, aerr := c.IsAssumedPod(probe)
		require.NoError(t, aerr)
		if mp := m.pods[uid]; mp != nil {
			require.NoError(t, err, "%s: GetPod %s", at, uid)
			require.Same(t, mp.info.Pod(), gp, "%s: GetPod %s", at, uid)
			require.Equal(t, mp.assumed, assumed, "%s: IsAssumedPod %s", at, uid)
		} else {
			require.ErrorIs(t, err, schedcache.ErrPodNotFound, "%s: GetPod %s", at, uid)
			require.False(t, assumed, "%s: IsAssumedPod %s", at, uid)
		}
	}
	// Node list in zone-tree order, nodeless names skipped.
	var wantList, wantAff, wantAnti []string
	for _, name := range m.tree.List() {
		if e := m.entries[name]; e != nil && e.node != nil {
			wantList = append(wantList, name)
			if len(e.aff) > 0 {
				wantAff = append(wantAff, name)
			}
			if len(e.anti) > 0 {
				wantAnti = append(wantAnti, name)
			}
		}
	}
	var gotList []string
	snap.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		gotList = append(gotList, ni.Node().Name)
		return true
	})
	require.Equal(t, wantList, gotList, "%s: List order", at)
	require.Equal(t, len(wantList), snap.NumNodes())
	require.Equal(t, len(wantList) != m.tree.Count(), snap.Err() != nil, "%s: list consistency error %v", at, snap.Err())
	names := func(nis []*nodeinfo.NodeInfo) []string {
		var out []string
		for _, ni := range nis {
			out = append(out, ni.Node().Name)
		}
		return out
	}
	aff, _ := snap.HavePodsWithAffinityList()
	anti, _ := snap.HavePodsWithRequiredAntiAffinityList()
	require.Equal(t, wantAff, names(aff), "%s: affinity list", at)
	require.Equal(t, wantAnti, names(anti), "%s: anti-affinity list", at)

	usedPVC := map[string]bool{}
	listed := map[string]bool{} // upstream builds the used set by walking its list
	for _, name := range wantList {
		listed[name] = true
	}
	for _, name := range sortedKeys(m.entries) {
		e := m.entries[name]
		ni, err := snap.Get(name)
		if e.node == nil {
			require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound, "%s: Get(%s) of a nodeless entry", at, name)
			continue
		}
		require.NoError(t, err, "%s: Get(%s)", at, name)
		require.Same(t, e.node, ni.Node())
		a := e.aggregate()
		require.Equal(t, keys(e.pods), keys(ni.Pods()), "%s: %s pods", at, name)
		require.Equal(t, keys(e.aff), keys(ni.PodsWithAffinity()), "%s: %s affinity pods", at, name)
		require.Equal(t, keys(e.anti), keys(ni.PodsWithRequiredAntiAffinity()), "%s: %s anti-affinity pods", at, name)
		req := ni.Requested()
		require.Equal(t, []int64{a.requested.MilliCPU, a.requested.Memory, a.requested.EphemeralStorage, 0},
			[]int64{req.MilliCPU, req.Memory, req.EphemeralStorage, req.AllowedPodNumber}, "%s: %s requested", at, name)
		require.Equal(t, a.scalars, req.ScalarResources(), "%s: %s requested scalars", at, name)
		nz := ni.NonZeroRequested()
		require.Equal(t, []int64{a.nonZero.MilliCPU, a.nonZero.Memory, 0, 0}, []int64{nz.MilliCPU, nz.Memory, nz.EphemeralStorage, nz.AllowedPodNumber},
			"%s: %s non-zero", at, name)
		require.Nil(t, nz.ScalarResources(), "%s: %s non-zero scalars", at, name)
		require.True(t, nodeinfo.NewResource(e.node.Status.Allocatable).Equal(ni.Allocatable()), "%s: %s allocatable", at, name)
		require.Equal(t, a.pvc, ni.PVCRefCounts(), "%s: %s PVC counts", at, name)
		wantPorts := nodeinfo.HostPortInfo{}
		for ip, set := range e.ports {
			wantPorts[ip] = map[nodeinfo.ProtocolPort]struct{}{}
			for pp := range set {
				wantPorts[ip][pp] = struct{}{}
			}
		}
		require.Equal(t, wantPorts, ni.UsedPorts(), "%s: %s used ports", at, name)
		require.Equal(t, e.images, ni.ImageStates(), "%s: %s image states", at, name)
		for k := range a.pvc {
			usedPVC[k] = usedPVC[k] || listed[name]
		}
		// Structural sharing: an entry no operation touched keeps the very
		// NodeInfo of the previous snapshot; a touched one has a newer
		// generation.
		if old, err := prev.Get(name); err == nil && old == ni {
			continue
		} else if err == nil {
			require.Greater(t, ni.Generation(), old.Generation(), "%s: %s generation", at, name)
		}
	}
	for _, name := range []string{"ghost-0", "ghost-1", "never"} {
		if e := m.entries[name]; e == nil || e.node == nil {
			_, err := snap.Get(name)
			require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound)
		}
	}
	for i := 0; i < 3; i++ {
		k := fmt.Sprintf("ns/claim-%d", i)
		require.Equal(t, usedPVC[k], snap.IsPVCUsedByPods(k), "%s: IsPVCUsedByPods(%s)", at, k)
	}
}

// withNodes counts the entries with a node object.
func (m *model) withNodes() int {
	n := 0
	for _, e := range m.entries {
		if e.node != nil {
			n++
		}
	}
	return n
}

// fingerprint renders everything a snapshot shows.
func fingerprint(s *schedcache.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch=%d nodes=%d pods=%d err=%v\n", s.Epoch(), s.NodeCount(), s.PodCount(), s.Err())
	s.Range(func(i int, ni *nodeinfo.NodeInfo) bool {
		fmt.Fprintf(&b, "%d %s gen=%d pods=%v aff=%v anti=%v req=%+v nz=%+v alloc=%+v ports=%v pvc=%v img=%v\n",
			i, ni.Node().Name, ni.Generation(), keys(ni.Pods()), keys(ni.PodsWithAffinity()), keys(ni.PodsWithRequiredAntiAffinity()),
			ni.Requested(), ni.NonZeroRequested(), ni.Allocatable(), ni.UsedPorts(), ni.PVCRefCounts(), ni.ImageStates())
		return true
	})
	var pods []string
	s.RangePods(func(k string, e schedcacheEntry) bool {
		pods = append(pods, fmt.Sprintf("%s:%v:%p", k, e.Assumed, e.Pod))
		return true
	})
	sortStrings(pods)
	fmt.Fprintln(&b, pods)
	return b.String()
}

var _ = errors.Is

type schedcacheEntry = snapshotPodEntry

// llModel is what upstream's long-lived snapshot holds when refreshed by
// UpdateSnapshot at some steps only (semantics 5.2): the entries it cloned,
// each with the image counts of the refresh that cloned it, and its list,
// rebuilt from the tree only on membership changes.
type llModel struct {
	inited  bool
	entries map[string]llEntry
	order   []string
	since   map[string]bool // entries changed since the last refresh
	pvcRefs map[string]int  // usedPVCRefCounts (v1.37): summed at a list rebuild, moved by the pending delta otherwise
}

type llEntry struct {
	ni     *nodeinfo.NodeInfo                    // the published entry it was cloned from (images aside)
	images map[string]nodeinfo.ImageStateSummary // the counts when cloned
}

func newLLModel() *llModel {
	return &llModel{entries: map[string]llEntry{}, since: map[string]bool{}, pvcRefs: map[string]int{}}
}

// refresh refreshes s (the long-lived snapshot) and a new snapshot from the
// cache, whose latest publication is pub, and checks both against the model.
func (ll *llModel) refresh(t *testing.T, c *schedcache.Cache, m *model, s, pub *schedcache.Snapshot, at string) {
	t.Helper()
	logger := klog.Background()
	live := func(name string) bool { e := m.entries[name]; return e != nil && e.node != nil }
	inLL := func(name string) bool { _, ok := ll.entries[name]; return ok }
	treeList := func() []string {
		var out []string
		for _, name := range m.tree.List() {
			if inLL(name) {
				out = append(out, name)
			}
		}
		return out
	}
	clone := func(name string) {
		ni, err := pub.Get(name)
		require.NoError(t, err, "%s: published Get(%s)", at, name)
		ll.entries[name] = llEntry{ni: ni, images: m.imagesNow(m.entries[name])}
	}
	err := c.UpdateSnapshot(logger, s)
	require.Equal(t, pub.Epoch(), s.Epoch(), "%s: epoch", at)

	cloned := map[string]bool{}
	rebuilt := true
	var wantErr *schedcache.InconsistentListError
	if !ll.inited {
		// A first refresh is a new snapshot: every node, the tree's order.
		ll.inited = true
		for name := range m.entries {
			if live(name) {
				clone(name)
				cloned[name] = true
			}
		}
		ll.order = treeList()
		if m.withNodes() == 0 {
			// Nothing to clone: upstream applies the pending delta, every
			// change since the start for the only snapshot.
			rebuilt = false
			ll.pvcRefs = map[string]int{}
			neg := false
			for _, v := range m.pvcCum {
				neg = neg || v < 0
			}
			for k, v := range m.pvcCum {
				if v > 0 && !neg {
					ll.pvcRefs[k] = v
				}
			}
		}
		if len(ll.order) != m.tree.Count() {
			require.ErrorIs(t, err, schedcache.ErrInconsistentList, "%s", at)
			err = nil
		}
	} else {
		all := false
		for name := range ll.since {
			if !live(name) {
				continue // removed or nodeless: the removal pass decides
			}
			all = all || !inLL(name)
			clone(name)
			cloned[name] = true
		}
		if excess := len(ll.entries) - m.tree.Count(); excess > 0 {
			var stale []string
			for _, name := range sortedKeys(ll.entries) {
				if !live(name) {
					stale = append(stale, name)
				}
			}
			if len(stale) > excess {
				// Upstream deletes excess of them in Go's map order: take
				// the ones s dropped, checking there are excess of them.
				var dropped []string
				for _, name := range stale {
					if _, err := s.Get(name); err != nil {
						dropped = append(dropped, name)
					}
				}
				require.Len(t, dropped, excess, "%s: stale entries %v, %d to delete, deleted %v", at, stale, excess, dropped)
				stale = dropped
			}
			for _, name := range stale {
				delete(ll.entries, name)
			}
			all = true
		}
		if !all {
			// v1.37: the pending delta moves the counts; a count below
			// zero rebuilds every list, as a new node would.
			for k, d := range m.pvcDelta {
				ll.pvcRefs[k] += d
				if ll.pvcRefs[k] < 0 {
					all = true
				}
				if ll.pvcRefs[k] <= 0 {
					delete(ll.pvcRefs, k)
				}
			}
		}
		rebuilt = all
		if all {
			ll.order = treeList()
		}
		if len(ll.order) != m.tree.Count() {
			wantErr = &schedcache.InconsistentListError{ListLen: len(ll.order), TreeNodes: m.tree.Count(), MapLen: len(ll.entries), CacheEntries: len(m.entries)}
			ll.order = treeList()
			rebuilt = true
		}
	}
	clear(ll.since)
	clear(m.pvcDelta)
	if rebuilt {
		ll.pvcRefs = map[string]int{}
		for _, name := range ll.order {
			for k, c := range ll.entries[name].ni.PVCRefCounts() {
				ll.pvcRefs[k] += c
			}
		}
	}
	if wantErr != nil {
		var ie *schedcache.InconsistentListError
		require.ErrorAs(t, err, &ie, "%s", at)
		require.Equal(t, *wantErr, *ie, "%s: the counts of the inconsistent list", at)
		require.ErrorIs(t, s.Err(), schedcache.ErrInconsistentList, "%s: Err", at)
	} else {
		require.NoError(t, err, "%s", at)
	}

	// The long-lived snapshot against the model.
	names := func(nis []*nodeinfo.NodeInfo) []string {
		var out []string
		for _, ni := range nis {
			out = append(out, ni.Node().Name)
		}
		return out
	}
	var gotList []string
	s.Range(func(_ int, ni *nodeinfo.NodeInfo) bool { gotList = append(gotList, ni.Node().Name); return true })
	require.Equal(t, ll.order, gotList, "%s: list", at)
	require.Equal(t, len(ll.order), s.NumNodes(), "%s: NumNodes", at)
	for name, le := range ll.entries {
		ni, err := s.Get(name)
		require.NoError(t, err, "%s: Get(%s)", at, name)
		require.Equal(t, nodeFP(le.ni), nodeFP(ni), "%s: %s", at, name)
		require.Equal(t, le.images, ni.ImageStates(), "%s: %s image states (cloned now: %v)", at, name, cloned[name])
	}
	for _, name := range append(sortedKeys(m.entries), "ghost-0", "ghost-1", "never") {
		if !inLL(name) {
			_, err := s.Get(name)
			require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound, "%s: Get(%s)", at, name)
		}
	}
	var wantAff, wantAnti []string
	wantPVC := map[string]bool{}
	for _, name := range ll.order {
		ni := ll.entries[name].ni
		if ni.NumPodsWithAffinity() > 0 {
			wantAff = append(wantAff, name)
		}
		if ni.NumPodsWithRequiredAntiAffinity() > 0 {
			wantAnti = append(wantAnti, name)
		}
	}
	for k, c := range ll.pvcRefs {
		wantPVC[k] = true
		require.Equal(t, c, s.PVCRefCount(k), "%s: PVCRefCount(%s)", at, k)
	}
	aff, _ := s.HavePodsWithAffinityList()
	anti, _ := s.HavePodsWithRequiredAntiAffinityList()
	require.Equal(t, wantAff, names(aff), "%s: affinity list", at)
	require.Equal(t, wantAnti, names(anti), "%s: anti-affinity list", at)
	gotPVC := []string{}
	s.RangeUsedPVCs(func(k string) bool { gotPVC = append(gotPVC, k); return true })
	sortStrings(gotPVC)
	require.Equal(t, sortedKeys(wantPVC), gotPVC, "%s: used PVCs", at)
	require.Equal(t, pub.PodCount(), s.PodCount(), "%s: PodCount", at)
	require.Equal(t, pub.NodeCount(), s.NodeCount(), "%s: NodeCount", at)

	// A new snapshot: the published one with every image count now.
	fresh := schedcache.NewEmptySnapshot()
	ferr := c.UpdateSnapshot(logger, fresh)
	require.Equal(t, pub.Err() != nil, ferr != nil, "%s: new snapshot error %v", at, ferr)
	var pubList, freshList []string
	pub.Range(func(_ int, ni *nodeinfo.NodeInfo) bool { pubList = append(pubList, ni.Node().Name); return true })
	fresh.Range(func(_ int, ni *nodeinfo.NodeInfo) bool { freshList = append(freshList, ni.Node().Name); return true })
	require.Equal(t, pubList, freshList, "%s: new snapshot list", at)
	for name, e := range m.entries {
		if e.node == nil {
			continue
		}
		want, _ := pub.Get(name)
		got, err := fresh.Get(name)
		require.NoError(t, err, "%s: new snapshot Get(%s)", at, name)
		require.Equal(t, nodeFP(want), nodeFP(got), "%s: new snapshot %s", at, name)
		require.Equal(t, m.imagesNow(e), got.ImageStates(), "%s: new snapshot %s image states", at, name)
		// The long-lived snapshot shows what the new one shows for a node
		// the refresh cloned (semantics 5.2: a clone taken now).
		if cloned[name] {
			mine, _ := s.Get(name)
			require.Equal(t, nodeFP(got), nodeFP(mine), "%s: %s cloned now", at, name)
			require.Equal(t, got.ImageStates(), mine.ImageStates(), "%s: %s cloned now", at, name)
		}
	}
	// A rebuilt list of a snapshot holding exactly the live nodes is the
	// new snapshot's list.
	if rebuilt && len(ll.entries) == len(pubList) && m.tree.Count() == len(pubList) {
		require.Equal(t, freshList, gotList, "%s: a rebuilt list", at)
	}
}

// nodeFP renders what a NodeInfo shows except its image states.
func nodeFP(ni *nodeinfo.NodeInfo) string {
	return fmt.Sprintf("%s@%p gen=%d pods=%v aff=%v anti=%v req=%v scalars=%v nz=%v alloc=%v ports=%v pvc=%v",
		ni.Node().Name, ni.Node(), ni.Generation(), keys(ni.Pods()), keys(ni.PodsWithAffinity()), keys(ni.PodsWithRequiredAntiAffinity()),
		ni.Requested(), ni.Requested().ScalarResources(), ni.NonZeroRequested(), ni.Allocatable(), ni.UsedPorts(), ni.PVCRefCounts())
}
