package fwkadapter

import (
	"fmt"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/snapshot"
)

// podsOf returns the UIDs of ni's pods, in order.
func podsOf(ni fwk.NodeInfo) string {
	out := ""
	for _, p := range ni.GetPods() {
		out += string(p.GetPod().UID) + " "
	}
	return out
}

// The NodeInfos a Mutable hands out read as upstream's objects of the
// same origin: those listed in a session follow its mutations and keep
// the state at EndMutations; those listed outside one keep the state at
// StartMutations during the session and follow the Mutable again after
// it, snapshot AssumePod and ForgetPod included.
func TestLiveNodeInfoFollowsItsOrigin(t *testing.T) {
	_, m := mutableFixture(t)
	lg := klog.Background()
	outside, err := m.NodeInfos().Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := m.NodeInfos().List()
	if err := m.StartMutations(); err != nil {
		t.Fatal(err)
	}
	inSession, _ := m.NodeInfos().Get("n1")
	if inSession == outside {
		t.Fatal("a session hands out the NodeInfos of outside it (upstream copies them)")
	}
	if err := m.RemovePod(lg, mkPod("a", "n1", pvc("c1")), "n1"); err != nil {
		t.Fatal(err)
	}
	if got := podsOf(inSession); got != "" {
		t.Fatalf("the NodeInfo listed in the session does not follow its RemovePod: pods %q", got)
	}
	if got, got2 := podsOf(outside), podsOf(listed[0]); got != "a " || got2 != podsOf(outside) {
		t.Fatalf("NodeInfos listed before the session changed in it: %q, %q", got, got2)
	}
	if err := m.AddPod(WrapPod(podInfo(t, mkPod("p", ""))), "n1"); err != nil {
		t.Fatal(err)
	}
	if got := podsOf(inSession); got != "p " {
		t.Fatalf("after AddPod the session's NodeInfo has pods %q", got)
	}
	if err := m.EndMutations(); err != nil {
		t.Fatal(err)
	}
	if got := podsOf(inSession); got != "p " {
		t.Fatalf("the session's NodeInfo does not keep the state at EndMutations: %q", got)
	}
	if got := podsOf(outside); got != "a " {
		t.Fatalf("after EndMutations the outside NodeInfo reads %q", got)
	}
	again, _ := m.NodeInfos().Get("n1")
	if again != outside {
		t.Fatal("after EndMutations Get hands out another instance than before the session")
	}
	// Outside a session the NodeInfos follow snapshot AssumePod/ForgetPod.
	q := mkPod("q", "n1")
	if err := m.AssumePod(WrapPod(podInfo(t, q))); err != nil {
		t.Fatal(err)
	}
	if got := podsOf(outside); got != "a q " {
		t.Fatalf("after a snapshot AssumePod the held NodeInfo reads %q", got)
	}
	if err := m.ForgetPod(lg, q); err != nil {
		t.Fatal(err)
	}
	if got := podsOf(outside); got != "a " {
		t.Fatalf("after a snapshot ForgetPod the held NodeInfo reads %q", got)
	}
}

// In a session every image summary reads NumNodes 0, as upstream's copies
// (NodeInfo.Snapshot() counts a Nodes set they do not have); outside one
// the counts are the cluster's.
func TestLiveNodeInfoSessionImageCounts(t *testing.T) {
	nodes := []*v1.Node{mkNode("n1"), mkNode("n2")}
	for _, n := range nodes {
		n.Status.Images = []v1.ContainerImage{{Names: []string{"img:1"}, SizeBytes: 100 << 20}}
	}
	m, err := NewMutable(snapshot.NewSnapshot(nil, nodes))
	if err != nil {
		t.Fatal(err)
	}
	count := func(ni fwk.NodeInfo) string {
		s := ni.GetImageStates()["img:1"]
		c := ni.Snapshot().GetImageStates()["img:1"]
		return fmt.Sprintf("%d/%d size %d", s.NumNodes, c.NumNodes, s.Size)
	}
	outside, _ := m.NodeInfos().Get("n1")
	if got := count(outside); got != "2/2 size 104857600" {
		t.Fatalf("outside a session: %s", got)
	}
	if err := m.StartMutations(); err != nil {
		t.Fatal(err)
	}
	in, _ := m.NodeInfos().Get("n1")
	if got := count(in); got != "0/0 size 104857600" {
		t.Fatalf("in a session: %s", got)
	}
	if got := count(outside); got != "2/2 size 104857600" {
		t.Fatalf("outside NodeInfo in a session: %s", got)
	}
	if err := m.EndMutations(); err != nil {
		t.Fatal(err)
	}
	if got := count(in); got != "0/0 size 104857600" {
		t.Fatalf("the session's NodeInfo after it: %s", got)
	}
}

// A placement takes the NodeInfos handed out now: one listed outside a
// session is another instance inside it, as upstream's.
func TestPlacementInstances(t *testing.T) {
	_, m := mutableFixture(t)
	outside, _ := m.NodeInfos().Get("n1")
	if err := m.AssumePlacement(&fwk.Placement{Nodes: []fwk.NodeInfo{outside}}); err != nil {
		t.Fatal(err)
	}
	list, _ := m.ListNodesInPlacement()
	if len(list) != 1 || list[0] != outside {
		t.Fatalf("ListNodesInPlacement: %v", list)
	}
	if err := m.StartMutations(); err != nil {
		t.Fatal(err)
	}
	err := m.AssumePlacement(&fwk.Placement{Nodes: []fwk.NodeInfo{outside}})
	if err == nil || err.Error() != "node n1 in placement is not the same instance as in the snapshot: "+ErrPlacement.Error() {
		t.Fatalf("a NodeInfo from outside the session: %v", err)
	}
	in, _ := m.NodeInfos().Get("n1")
	if err := m.AssumePlacement(&fwk.Placement{Nodes: []fwk.NodeInfo{in}}); err != nil {
		t.Fatal(err)
	}
}

// Upstream's snapshot ForgetPod removes the pod's host ports from its
// node's set though another pod there uses them (the set has no counts);
// the ports removed by later pods' ForgetPods stay removed when an
// earlier pod is forgotten; EndMutations restores them.
func TestSnapshotForgetDropsSharedPorts(t *testing.T) {
	nodes := []*v1.Node{mkNode("n1"), mkNode("n2")}
	owners := []*v1.Pod{mkPod("o1", "n1", hostPort(81)), mkPod("o2", "n2", hostPort(82))}
	m, err := NewMutable(snapshot.NewSnapshot(owners, nodes))
	if err != nil {
		t.Fatal(err)
	}
	lg := klog.Background()
	ports := func() string {
		a, _ := m.NodeInfos().Get("n1")
		b, _ := m.NodeInfos().Get("n2")
		return fmt.Sprintf("n1 %v n2 %v", a.GetUsedPorts(), b.GetUsedPorts())
	}
	const all = "n1 map[0.0.0.0:map[{TCP 81}:{}]] n2 map[0.0.0.0:map[{TCP 82}:{}]]"
	if got := ports(); got != all {
		t.Fatal(got)
	}
	a, b := mkPod("a", "n1", hostPort(81)), mkPod("b", "n2", hostPort(82))
	for _, p := range []*v1.Pod{a, b} {
		if err := m.AssumePod(WrapPod(podInfo(t, p))); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.ForgetPod(lg, b); err != nil {
		t.Fatal(err)
	}
	if got, want := ports(), "n1 map[0.0.0.0:map[{TCP 81}:{}]] n2 map[]"; got != want {
		t.Fatalf("after ForgetPod(b): %s, want %s", got, want)
	}
	if err := m.ForgetPod(lg, a); err != nil {
		t.Fatal(err)
	}
	if got, want := ports(), "n1 map[] n2 map[]"; got != want {
		t.Fatalf("after ForgetPod(a): %s, want %s", got, want)
	}
	// In a session the removals are undone by EndMutations.
	if _, err := m.Reset(lg, snapshot.NewSnapshot(owners, nodes)); err != nil {
		t.Fatal(err)
	}
	if err := m.StartMutations(); err != nil {
		t.Fatal(err)
	}
	if err := m.AssumePod(WrapPod(podInfo(t, a))); err != nil {
		t.Fatal(err)
	}
	if err := m.ForgetPod(lg, a); err != nil {
		t.Fatal(err)
	}
	if got, want := ports(), "n1 map[] n2 map[0.0.0.0:map[{TCP 82}:{}]]"; got != want {
		t.Fatalf("in a session after ForgetPod(a): %s, want %s", got, want)
	}
	if err := m.EndMutations(); err != nil {
		t.Fatal(err)
	}
	if got := ports(); got != all {
		t.Fatalf("after EndMutations: %s", got)
	}
}

// The handles are safe for the concurrent readers of a scheduling cycle
// (run with -race): many goroutines list and read while no one mutates.
func TestLiveNodeInfoConcurrentReads(t *testing.T) {
	_, m := mutableFixture(t)
	for round := range 3 {
		if round == 1 {
			if err := m.StartMutations(); err != nil {
				t.Fatal(err)
			}
			if err := m.RemovePod(klog.Background(), mkPod("a", "n1", pvc("c1")), "n1"); err != nil {
				t.Fatal(err)
			}
		}
		if round == 2 {
			if err := m.EndMutations(); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				list, _ := m.NodeInfos().List()
				for _, ni := range list {
					_ = ni.GetPods()
					_ = ni.GetRequested().GetMilliCPU()
					_ = ni.GetImageStates()
				}
				aff, _ := m.NodeInfos().HavePodsWithAffinityList()
				_ = len(aff)
				_, _ = m.NodeInfos().Get("n2")
			}()
		}
		wg.Wait()
	}
}
