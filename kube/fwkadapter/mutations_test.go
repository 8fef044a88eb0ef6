package fwkadapter

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/podgroup"
	"github.com/schedcache/schedcache/snapshot"
)

// state is everything the node listers show, in comparable form.
type state struct {
	List, Aff, Anti []string
	Nodes           map[string]shape
	PVC             map[string]bool
}

func stateOf(t *testing.T, l fwk.SharedLister, claims ...string) state {
	t.Helper()
	names := func(ns []fwk.NodeInfo, err error) []string {
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range ns {
			out = append(out, n.Node().Name)
		}
		return out
	}
	st := state{Nodes: map[string]shape{}, PVC: map[string]bool{}}
	st.List = names(l.NodeInfos().List())
	st.Aff = names(l.NodeInfos().HavePodsWithAffinityList())
	st.Anti = names(l.NodeInfos().HavePodsWithRequiredAntiAffinityList())
	for _, name := range st.List {
		n, err := l.NodeInfos().Get(name)
		if err != nil {
			t.Fatal(err)
		}
		st.Nodes[name] = shapeOf(n)
	}
	for _, c := range claims {
		st.PVC[c] = l.StorageInfos().IsPVCUsedByPods(c)
	}
	return st
}

func mutableFixture(t *testing.T) (*snapshot.Snapshot, *Mutable) {
	t.Helper()
	nodes := []*v1.Node{mkNode("n1"), mkNode("n2"), mkNode("n3")}
	pods := []*v1.Pod{mkPod("a", "n1", pvc("c1")), mkPod("b", "n2", affinity), mkPod("c", "n3")}
	s := snapshot.NewSnapshot(pods, nodes)
	m, err := NewMutable(s)
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

// A mutation session (pod-group preemption's: remove victims, add the
// preemptor's pods) changes what every lister shows, lists and PVC use
// included, and EndMutations restores the state before StartMutations
// exactly; the snapshot under it never changes.
func TestMutationSession(t *testing.T) {
	s, m := mutableFixture(t)
	var _ fwk.MutableSnapshotSharedLister = m
	claims := []string{"ns/c1", "ns/c2"}
	before := stateOf(t, m, claims...)
	baseState := stateOf(t, mustLister(t, s), claims...)

	if err := m.StartMutations(); err != nil {
		t.Fatal(err)
	}
	victim := mkPod("a", "n1", pvc("c1"))
	if err := m.RemovePod(klog.Background(), victim, "n1"); err != nil {
		t.Fatal(err)
	}
	if m.StorageInfos().IsPVCUsedByPods("ns/c1") {
		t.Fatal("c1 still used after its only pod was removed")
	}
	preemptor := mkPod("p", "", antiAffinity, pvc("c2")) // unscheduled: AddPod places it on nodeName
	if err := m.AddPod(WrapPod(podInfo(t, preemptor)), "n1"); err != nil {
		t.Fatal(err)
	}
	n1, err := m.NodeInfos().Get("n1")
	if err != nil || len(n1.GetPods()) != 1 || n1.GetPods()[0].GetPod().UID != "p" {
		t.Fatalf("n1 after the session's changes: %v %v", n1, err)
	}
	anti, _ := m.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if len(anti) != 1 || anti[0].Node().Name != "n1" || !m.StorageInfos().IsPVCUsedByPods("ns/c2") {
		t.Fatalf("lists do not follow the session: anti %d, c2 used %v", len(anti), m.StorageInfos().IsPVCUsedByPods("ns/c2"))
	}
	if err := m.EndMutations(); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, m, claims...); !reflect.DeepEqual(before, got) {
		t.Fatalf("EndMutations did not restore the state:\nbefore %+v\nafter  %+v", before, got)
	}
	if got := stateOf(t, mustLister(t, s), claims...); !reflect.DeepEqual(baseState, got) {
		t.Fatal("the snapshot under the Mutable changed")
	}
	// The nodes are the snapshot's own instances again.
	for i := 0; i < s.NumNodes(); i++ {
		ni, _ := m.NodeInfos().Get(s.At(i).Node().Name)
		if ni.(*LiveNodeInfo).Unwrap() != s.At(i) {
			t.Fatalf("node %d is not the snapshot's instance after EndMutations", i)
		}
	}
}

func mustLister(t *testing.T, s *snapshot.Snapshot) *Lister {
	t.Helper()
	l, err := NewLister(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Misuse is refused with upstream's error texts (typed), never a panic,
// and changes nothing.
func TestMutationMisuse(t *testing.T) {
	_, m := mutableFixture(t)
	lg := klog.Background()
	check := func(err, is error, text string) {
		t.Helper()
		if !errors.Is(err, is) || err.Error() != text {
			t.Fatalf("got %v, want %q (%v)", err, text, is)
		}
	}
	check(m.EndMutations(), ErrNoMutationSession, "no mutation session started")
	check(m.AddPod(WrapPod(podInfo(t, mkPod("x", "n1"))), "n1"), ErrOutsideSession, "AddPod() called outside of mutation session")
	check(m.RemovePod(lg, mkPod("a", "n1"), "n1"), ErrOutsideSession, "RemovePod() called outside of mutation session")
	if err := m.StartMutations(); err != nil {
		t.Fatal(err)
	}
	check(m.StartMutations(), ErrStackedMutations, "cannot stack mutations")
	if err := m.AddPod(nil, "n1"); !errors.Is(err, ErrNilPod) {
		t.Fatalf("AddPod(nil) = %v", err)
	}
	if err := m.RemovePod(lg, nil, "n1"); !errors.Is(err, ErrNilPod) {
		t.Fatalf("RemovePod(nil) = %v", err)
	}
	if err := m.RemovePod(lg, mkPod("zz", "n1"), "n1"); err == nil {
		t.Fatal("RemovePod of a pod the node does not hold succeeded")
	}
	if err := m.AddPod(WrapPod(podInfo(t, mkPod("x", ""))), "nowhere"); err == nil {
		t.Fatal("AddPod on a node the snapshot does not hold succeeded")
	}
	if err := m.EndMutations(); err != nil {
		t.Fatal(err)
	}
	check(m.ForgetPod(lg, mkPod("a", "n1")), ErrNotAssumed, `assumed pod "a" not found in the snapshot`)
	if err := m.AssumePod(nil); !errors.Is(err, ErrNilPod) {
		t.Fatalf("AssumePod(nil) = %v", err)
	}
	if err := m.ForgetPod(lg, nil); err == nil {
		t.Fatal("ForgetPod(nil) succeeded")
	}
	if err := m.AssumePod(WrapPod(podInfo(t, mkPod("a", "n1")))); err == nil {
		t.Fatal("AssumePod of a pod the snapshot holds succeeded")
	}
	if m.NumAssumed() != 0 {
		t.Fatal("a refused AssumePod was recorded")
	}
}

// Snapshot AssumePod/ForgetPod (the pod-group cycle's) is last in, first
// out: each ForgetPod restores the state before its AssumePod exactly; out
// of order is refused (upstream would leave its lists wrong).
func TestSnapshotAssumeForgetLIFO(t *testing.T) {
	_, m := mutableFixture(t)
	lg := klog.Background()
	claims := []string{"ns/c1", "ns/c9"}
	s0 := stateOf(t, m, claims...)
	p1 := mkPod("p1", "n3", affinity, pvc("c9"))
	p2 := mkPod("p2", "n3", antiAffinity)
	if err := m.AssumePod(WrapPod(podInfo(t, p1))); err != nil {
		t.Fatal(err)
	}
	s1 := stateOf(t, m, claims...)
	if !s1.PVC["ns/c9"] || len(s1.Aff) != len(s0.Aff)+1 {
		t.Fatalf("AssumePod did not update the lists and claims: %+v", s1)
	}
	if err := m.AssumePod(WrapPod(podInfo(t, p2))); err != nil {
		t.Fatal(err)
	}
	if err := m.ForgetPod(lg, p1); !errors.Is(err, ErrForgetOrder) {
		t.Fatalf("ForgetPod out of order = %v", err)
	}
	if err := m.ForgetPod(lg, p2); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, m, claims...); !reflect.DeepEqual(s1, got) {
		t.Fatal("ForgetPod(p2) did not restore the state after AssumePod(p1)")
	}
	if err := m.ForgetPod(lg, p1); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, m, claims...); !reflect.DeepEqual(s0, got) {
		t.Fatal("ForgetPod(p1) did not restore the initial state")
	}
	// Across a session boundary: assumed before, forgotten inside: refused
	// (upstream leaves a phantom pod that survives its next refresh).
	if err := m.AssumePod(WrapPod(podInfo(t, p1))); err != nil {
		t.Fatal(err)
	}
	if err := m.StartMutations(); err != nil {
		t.Fatal(err)
	}
	if err := m.ForgetPod(lg, p1); !errors.Is(err, ErrSessionOrder) {
		t.Fatalf("ForgetPod across a session = %v", err)
	}
	// Assumed inside a session: EndMutations undoes it.
	if err := m.AssumePod(WrapPod(podInfo(t, p2))); err != nil {
		t.Fatal(err)
	}
	if err := m.EndMutations(); err != nil {
		t.Fatal(err)
	}
	if m.NumAssumed() != 1 {
		t.Fatalf("%d assumed after EndMutations, want 1", m.NumAssumed())
	}
	// Reset (upstream's UpdateSnapshot) forgets the leftover and clears a
	// placement.
	n1, _ := m.NodeInfos().Get("n1")
	if err := m.AssumePlacement(&fwk.Placement{Name: "p", Nodes: []fwk.NodeInfo{n1}}); err != nil {
		t.Fatal(err)
	}
	forgotten, err := m.Reset(lg, m.Base())
	if err != nil || forgotten != 1 || m.NumAssumed() != 0 || m.GetPlacement() != nil {
		t.Fatalf("Reset: %d forgotten, %v, %d assumed, placement %v", forgotten, err, m.NumAssumed(), m.GetPlacement())
	}
	if got := stateOf(t, m, claims...); !reflect.DeepEqual(s0, got) {
		t.Fatal("Reset did not return to the snapshot")
	}
}

// Placements limit GetNodeInPlacement, ListNodesInPlacement and
// NumNodesInPlacement; the nodes listed are current (they show pods
// assumed after the placement was set, as upstream's in-place NodeInfos
// do).
func TestPlacements(t *testing.T) {
	_, m := mutableFixture(t)
	if m.NumNodesInPlacement() != 3 || m.GetPlacement() != nil {
		t.Fatal("no placement: every node")
	}
	n1, _ := m.NodeInfos().Get("n1")
	n2, _ := m.NodeInfos().Get("n2")
	pl := &fwk.Placement{Name: "two", Nodes: []fwk.NodeInfo{n2, n1}}
	if err := m.AssumePlacement(pl); err != nil {
		t.Fatal(err)
	}
	if m.GetPlacement() != pl || m.NumNodesInPlacement() != 2 {
		t.Fatal("placement not assumed")
	}
	if _, err := m.GetNodeInPlacement("n3"); err == nil || err.Error() != `node "n3" not found in placement` {
		t.Fatalf("GetNodeInPlacement(n3) = %v", err)
	}
	if err := m.AssumePod(WrapPod(podInfo(t, mkPod("q", "n1")))); err != nil {
		t.Fatal(err)
	}
	list, err := m.ListNodesInPlacement()
	if err != nil || len(list) != 2 || list[0].Node().Name != "n2" || list[1].Node().Name != "n1" || len(list[1].GetPods()) != 2 {
		t.Fatalf("ListNodesInPlacement: %v %v", list, err)
	}
	got, err := m.GetNodeInPlacement("n1")
	if err != nil || len(got.GetPods()) != 2 {
		t.Fatalf("GetNodeInPlacement(n1): %v %v", got, err)
	}
	// Every node: no placement.
	all, _ := m.NodeInfos().List()
	if err := m.AssumePlacement(&fwk.Placement{Nodes: all}); err != nil || m.GetPlacement() != nil {
		t.Fatalf("an all-node placement: %v, %v", err, m.GetPlacement())
	}
	// A node the snapshot does not hold, or another instance of one.
	stranger := WrapNode(podlessNode(t, "n9"))
	if err := m.AssumePlacement(&fwk.Placement{Nodes: []fwk.NodeInfo{stranger}}); !errors.Is(err, ErrPlacement) ||
		err.Error() != "node n9 in placement is not present in snapshot: "+ErrPlacement.Error() {
		t.Fatalf("placement with a stranger: %v", err)
	}
	other := WrapNode(podlessNode(t, "n1"))
	if err := m.AssumePlacement(&fwk.Placement{Nodes: []fwk.NodeInfo{other}}); !errors.Is(err, ErrPlacement) {
		t.Fatalf("placement with another instance: %v", err)
	}
	if m.GetPlacement() != nil {
		t.Fatal("a refused placement was kept")
	}
	m.ForgetPlacement()
}

func podlessNode(t *testing.T, name string) *nodeinfo.NodeInfo {
	t.Helper()
	s := snapshot.NewSnapshot(nil, []*v1.Node{mkNode(name)})
	return s.At(0)
}

// Pod-group members assumed in the snapshot move to the group's assumed
// pods, and back when forgotten; a session's changes to groups end with it.
func TestMutationsPodGroups(t *testing.T) {
	g := "g"
	member := func(uid, node string) *v1.Pod {
		p := mkPod(uid, node)
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &g}
		return p
	}
	tbl := podgroup.NewTable(true, false).Edit()
	for _, p := range []*v1.Pod{member("m1", ""), member("m2", "")} {
		if err := tbl.AddMember(p); err != nil {
			t.Fatal(err)
		}
	}
	s := snapshot.NewSnapshot([]*v1.Pod{mkPod("a", "n1")}, []*v1.Node{mkNode("n1")}).WithPodGroups(tbl.Done())
	m, err := NewMutable(s)
	if err != nil {
		t.Fatal(err)
	}
	assumed := func() int {
		st, err := m.PodGroupStates().Get("ns", "g")
		if err != nil {
			t.Fatal(err)
		}
		return len(st.AssumedPods())
	}
	if err := m.AssumePod(WrapPod(podInfo(t, member("m1", "n1")))); err != nil {
		t.Fatal(err)
	}
	if assumed() != 1 {
		t.Fatal("the member is not assumed in its group")
	}
	if err := m.StartMutations(); err != nil {
		t.Fatal(err)
	}
	if err := m.AddPod(WrapPod(podInfo(t, member("m2", ""))), "n1"); err != nil {
		t.Fatal(err)
	}
	if err := m.EndMutations(); err != nil {
		t.Fatal(err)
	}
	if err := m.ForgetPod(klog.Background(), member("m1", "n1")); err != nil {
		t.Fatal(err)
	}
	if assumed() != 0 {
		t.Fatal("the member is still assumed after ForgetPod")
	}
	st, _ := m.PodGroupStates().Get("ns", "g")
	if st.AllPodsCount() != 2 || len(st.UnscheduledPods()) != 2 {
		t.Fatalf("group after the cycle: %d pods, %d unscheduled", st.AllPodsCount(), len(st.UnscheduledPods()))
	}
}

// Start and end of a session allocate the same whatever was mutated in
// it: they take and revert one fork point.
func TestMutationSessionCostIndependentOfChanges(t *testing.T) {
	var nodes []*v1.Node
	var pods []*v1.Pod
	for i := range 500 {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, mkNode(name))
		pods = append(pods, mkPod(fmt.Sprintf("v%d", i), name))
	}
	m, err := NewMutable(snapshot.NewSnapshot(pods, nodes))
	if err != nil {
		t.Fatal(err)
	}
	lg := klog.Background()
	cost := func(changes int) float64 {
		var startEnd float64
		for range 5 {
			_ = m.StartMutations()
			for i := range changes {
				_ = m.RemovePod(lg, pods[i], nodes[i].Name)
			}
			startEnd += testing.AllocsPerRun(1, func() {
				_ = m.EndMutations()
				_ = m.StartMutations()
			})
			_ = m.EndMutations()
		}
		return startEnd / 5
	}
	small, large := cost(1), cost(400)
	if large > small+2 {
		t.Fatalf("EndMutations+StartMutations: %.0f allocations after 1 change, %.0f after 400", small, large)
	}
}

// Many goroutines, each with its own Mutable over one published snapshot,
// mutate at once; the snapshot never changes (run with -race).
func TestMutablesConcurrent(t *testing.T) {
	s, _ := mutableFixture(t)
	claims := []string{"ns/c1"}
	want := stateOf(t, mustLister(t, s), claims...)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := NewMutable(s)
			if err != nil {
				errs <- err
				return
			}
			for i := range 200 {
				if err := m.StartMutations(); err != nil {
					errs <- err
					return
				}
				_ = m.RemovePod(klog.Background(), mkPod("a", "n1", pvc("c1")), "n1")
				pi, err := nodeinfo.NewPodInfo(mkPod(fmt.Sprintf("w%d-%d", w, i), "n2"))
				if err == nil {
					_ = m.AddPod(WrapPod(pi), "n2")
				}
				if err := m.EndMutations(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := stateOf(t, mustLister(t, s), claims...); !reflect.DeepEqual(want, got) {
		t.Fatal("the shared snapshot changed")
	}
}
