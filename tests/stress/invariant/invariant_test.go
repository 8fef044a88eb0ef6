package invariant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/workload"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

// The checker accepts what a healthy cache publishes, and its fingerprint
// and rendering are stable and sensitive.
func TestCheckerAcceptsCacheSnapshots(t *testing.T) {
	cl := workload.Build(workload.ClusterSpec{Nodes: 30, PodsPerNode: 5, Seed: 3})
	c, err := schedcache.New(context.Background(), schedcache.WithShards(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range cl.Nodes {
		if _, err := c.AddNode(klog.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range cl.Pods {
		if i%3 == 0 {
			err = c.AssumePod(klog.Background(), p)
		} else {
			err = c.AddPod(klog.Background(), p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// A pod on an unknown node makes a nodeless entry.
	ghost := cl.Pods[0].DeepCopy()
	ghost.UID, ghost.Spec.NodeName = "ghost-pod", "no-such-node"
	if err := c.AddPod(klog.Background(), ghost); err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot()
	st, err := CheckSnapshot(s, Options{RecomputeRequests: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Nodes != 30 || st.Pods != 151 || st.PodsOnListedNodes != 150 || st.AssumedPods != 50 {
		t.Fatalf("stats %+v", st)
	}
	d, err := c.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := CheckDump(d, true); err != nil || n != 151 {
		t.Fatalf("CheckDump = %d, %v", n, err)
	}
	fp, r := Fingerprint(s), RenderSnapshot(s)
	if fp != Fingerprint(s) || r != RenderSnapshot(s) {
		t.Fatal("fingerprint or rendering not stable")
	}
	if r1, r2 := RenderDump(d), RenderDump(d); r1 != r2 {
		t.Fatal("dump rendering not stable")
	}
	if err := c.RemovePod(klog.Background(), cl.Pods[1]); err != nil {
		t.Fatal(err)
	}
	s2 := c.Snapshot()
	if Fingerprint(s2) == fp || RenderSnapshot(s2) == r {
		t.Fatal("fingerprint or rendering blind to a removed pod")
	}
	if Diff(r, RenderSnapshot(s2)) == "" || Diff(r, r) != "" {
		t.Fatal("Diff")
	}
}

// The checker rejects a snapshot that breaks the cache's invariants:
// NewSnapshot lists nodeless entries (upstream's standalone semantics),
// which a cache never publishes.
func TestCheckerRejectsNodelessListEntries(t *testing.T) {
	cl := workload.Build(workload.ClusterSpec{Nodes: 3, PodsPerNode: 2, Seed: 1})
	stray := cl.Pods[0].DeepCopy()
	stray.UID, stray.Spec.NodeName = "stray", "unknown"
	s := schedcache.NewSnapshot(append([]*v1.Pod{stray}, cl.Pods...), cl.Nodes)
	_, err := CheckSnapshot(s, Options{})
	if err == nil || !strings.Contains(err.Error(), "list entry") {
		t.Fatalf("CheckSnapshot accepted a nodeless list entry: %v", err)
	}
	ok := schedcache.NewSnapshot(cl.Pods, cl.Nodes)
	if _, err := CheckSnapshot(ok, Options{RecomputeRequests: true}); err != nil {
		t.Fatal(err)
	}
}

func TestExpect(t *testing.T) {
	wrapped := fmt.Errorf("ctx: %w", schedcache.ErrPodNotFound)
	for _, tc := range []struct {
		err, want error
		ok        bool
	}{
		{nil, nil, true},
		{wrapped, schedcache.ErrPodNotFound, true},
		{wrapped, nil, false},
		{nil, schedcache.ErrPodNotFound, false},
		{wrapped, schedcache.ErrClosed, false},
		{errors.New("untyped"), nil, false},
	} {
		if got := Expect("op", tc.err, tc.want) == nil; got != tc.ok {
			t.Errorf("Expect(%v, %v) ok=%v, want %v", tc.err, tc.want, got, tc.ok)
		}
	}
	if Typed(errors.New("x")) || !Typed(wrapped) {
		t.Error("Typed")
	}
}

// CheckImagesNow accepts a new snapshot's image counts and rejects the
// published snapshot's after a node joined with an image other nodes
// hold (their entries keep the counts of their last change), and
// CheckSnapshot does so with ImagesNow.
func TestCheckImagesNow(t *testing.T) {
	cl := workload.Build(workload.ClusterSpec{Nodes: 6, PodsPerNode: 1, Seed: 2})
	c, err := schedcache.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	logger := klog.Background()
	for _, n := range cl.Nodes[:5] {
		if _, err := c.AddNode(logger, n); err != nil {
			t.Fatal(err)
		}
	}
	last := cl.Nodes[5].DeepCopy()
	last.Status.Images = cl.Nodes[0].Status.Images // shares node 0's images
	if _, err := c.AddNode(logger, last); err != nil {
		t.Fatal(err)
	}
	fresh := schedcache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckSnapshot(fresh, Options{RecomputeRequests: true, ImagesNow: true}); err != nil {
		t.Fatalf("new snapshot: %v", err)
	}
	if err := CheckImagesNow(c.Snapshot()); err == nil || !strings.Contains(err.Error(), "listed nodes list it") {
		t.Fatalf("CheckImagesNow accepted the published snapshot's counts of each node's last change: %v", err)
	}
	if _, err := CheckSnapshot(c.Snapshot(), Options{ImagesNow: true}); err == nil {
		t.Fatal("CheckSnapshot with ImagesNow accepted the published snapshot's counts")
	}
	if _, err := CheckSnapshot(c.Snapshot(), Options{}); err != nil {
		t.Fatalf("published snapshot: %v", err)
	}
}

// The checker covers the required non-host-scoped anti-affinity list as
// the other two: it accepts a cache whose pods have hostname-scoped,
// zone-scoped and mixed required anti-affinity, and the snapshots it
// refreshes; it rejects a NodeInfo whose sub-list holds an entry of a pod
// that left (a removal through an object without such terms, which a
// consistent stream never makes); the rendering shows the sub-list.
func TestCheckerNonHostScopedAntiAffinity(t *testing.T) {
	cl := workload.Build(workload.ClusterSpec{Nodes: 12, PodsPerNode: 3, Seed: 4})
	c, err := schedcache.New(context.Background(), schedcache.WithShards(2))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	logger := klog.Background()
	for _, n := range cl.Nodes {
		if _, err := c.AddNode(logger, n); err != nil {
			t.Fatal(err)
		}
	}
	keys := [][]string{{v1.LabelHostname}, {v1.LabelTopologyZone}, {v1.LabelHostname, v1.LabelTopologyZone}, nil}
	nodeIdx := map[string]int{}
	for i, n := range cl.Nodes {
		nodeIdx[n.Name] = i
	}
	var nonHost []*v1.Pod
	for _, p := range cl.Pods {
		p = p.DeepCopy()
		i := nodeIdx[p.Spec.NodeName] // a node's pods are all of one kind
		if ks := keys[i%len(keys)]; ks != nil {
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{}}
			for _, k := range ks {
				p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(
					p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, v1.PodAffinityTerm{TopologyKey: k})
			}
			if i%len(keys) != 0 {
				nonHost = append(nonHost, p)
			}
		}
		if err := c.AddPod(logger, p); err != nil {
			t.Fatal(err)
		}
	}
	fresh := schedcache.NewEmptySnapshot()
	check := func(what string) {
		t.Helper()
		s := c.Snapshot()
		if _, err := CheckSnapshot(s, Options{RecomputeRequests: true}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := c.UpdateSnapshot(logger, fresh); err != nil {
			t.Fatal(err)
		}
		if _, err := CheckSnapshot(fresh, Options{RecomputeRequests: true, ImagesNow: true}); err != nil {
			t.Fatalf("%s: refreshed snapshot: %v", what, err)
		}
	}
	check("initial")
	s := c.Snapshot()
	if n := s.NumNodesWithRequiredNonHostScopedAntiAffinity(); n == 0 || n == s.NumNodesWithRequiredAntiAffinity() {
		t.Fatalf("%d nodes with non-host-scoped anti-affinity pods, %d with anti-affinity pods: the test needs some and fewer",
			n, s.NumNodesWithRequiredAntiAffinity())
	}
	fp, r := Fingerprint(s), RenderSnapshot(s)
	if !strings.Contains(r, "nonHostAnti=["+string(nonHost[0].UID)) {
		t.Fatalf("the rendering lacks the sub-list: %s", r)
	}
	for _, p := range nonHost {
		if err := c.RemovePod(logger, p); err != nil {
			t.Fatal(err)
		}
		check("after removing " + string(p.UID))
	}
	s2 := c.Snapshot()
	if s2.NumNodesWithRequiredNonHostScopedAntiAffinity() != 0 || s2.NumNodesWithRequiredAntiAffinity() == 0 {
		t.Fatalf("lists %d/%d after removing every non-host-scoped pod",
			s2.NumNodesWithRequiredNonHostScopedAntiAffinity(), s2.NumNodesWithRequiredAntiAffinity())
	}
	if Fingerprint(s2) == fp || RenderSnapshot(s2) == r {
		t.Fatal("fingerprint or rendering blind to the removals")
	}

	st := nodeinfo.NewNodeState(nil)
	st.SetNode(cl.Nodes[0])
	pi, err := nodeinfo.NewPodInfo(nonHost[0])
	if err != nil {
		t.Fatal(err)
	}
	st.AddPod(pi)
	if err := CheckNodeInfo(st.Freeze(), true); err != nil {
		t.Fatal(err)
	}
	if err := st.RemovePod(pi.Key(), true, true, false); err != nil {
		t.Fatal(err)
	}
	if err := CheckNodeInfo(st.Freeze(), true); err == nil || !strings.Contains(err.Error(), "sub-lists 0/0/1") {
		t.Fatalf("CheckNodeInfo accepted a stale non-host-scoped entry: %v", err)
	}
}
