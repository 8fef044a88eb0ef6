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
// step: errors, pod states, counts, the node list, every node's aggregate,
// the affinity lists, the used-PVC set, and which entries changed.
func TestModelRandomized(t *testing.T) {
	seeds, steps := 12, 600
	if testing.Short() {
		seeds, steps = 4, 300
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, seed, steps) })
		})
	}
}

func runModel(t *testing.T, seed int64, steps int) {
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
			desc = "AddNode " + n.Name
			_, got = c.AddNode(logger, n)
			m.addNode(n)
		case 9:
			name := nodeNames[r.Intn(len(nodeNames))]
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
			if e := m.entries[name]; e != nil && e.node != nil && r.Intn(4) > 0 {
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
		m.endOp()
		require.Equal(t, errClass(want), errClass(got), "step %d %s: error", step, desc)
		snap := c.Snapshot()
		checkModel(t, c, m, snap, prev, uids, fmt.Sprintf("step %d %s", step, desc))
		prev = snap
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
		nz := ni.NonZeroRequested()
		require.Equal(t, []int64{a.nonZero.MilliCPU, a.nonZero.Memory}, []int64{nz.MilliCPU, nz.Memory}, "%s: %s non-zero", at, name)
		for _, p := range e.pods {
			for _, s := range p.Requests().Scalars() {
				var sum int64
				for _, q := range e.pods {
					sum += q.Requests().Scalar(s.Name)
				}
				require.Equal(t, sum, req.Scalar(s.Name), "%s: %s scalar %s", at, name, s.Name)
			}
		}
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
