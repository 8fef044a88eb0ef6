package fwkadapter

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/podgroup"
	"github.com/schedcache/schedcache/snapshot"
)

// The snapshot's and the cache's pod-group listers answer as upstream's
// (its error texts), and the fwk.PodGroupManager's hierarchy and root
// follow the composite parents.
func TestGroupListers(t *testing.T) {
	c, err := schedcache.New(context.Background(), schedcache.WithPodGroups(true, true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lg := klog.Background()
	parent := "top"
	pg := &schedulingv1beta1.PodGroup{}
	pg.Namespace, pg.Name = "ns", "g"
	pg.Spec.ParentCompositePodGroupName = &parent
	cpg := &schedulingv1alpha3.CompositePodGroup{}
	cpg.Namespace, cpg.Name = "ns", "top"
	if err := c.AddPodGroup(pg); err != nil {
		t.Fatal(err)
	}
	if err := c.AddCompositePodGroup(lg, cpg); err != nil {
		t.Fatal(err)
	}
	g := "g"
	m := mkPod("m1", "")
	m.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &g}
	if err := c.AddPodGroupMember(m); err != nil {
		t.Fatal(err)
	}

	l, _ := NewLister(c.Snapshot())
	var sl fwk.SharedLister = l
	st, err := sl.PodGroupStates().Get("ns", "g")
	if err != nil || st.AllPodsCount() != 1 || len(st.UnscheduledPods()) != 1 {
		t.Fatalf("PodGroupStates: %v %v", st, err)
	}
	if got, err := sl.PodGroups().Get("ns", "g"); err != nil || got != pg {
		t.Fatalf("PodGroups: %v %v", got, err)
	}
	cs, err := sl.CompositePodGroupStates().Get("ns", "top")
	if err != nil || len(cs.GetChildren()) != 1 || cs.GetChildren()[0] != fwk.PodGroupKey("ns", "g") {
		t.Fatalf("CompositePodGroupStates: %v %v", cs, err)
	}
	if got, err := sl.CompositePodGroups().Get("ns", "top"); err != nil || got != cpg {
		t.Fatalf("CompositePodGroups: %v %v", got, err)
	}
	// Upstream's snapshot texts.
	if _, err := sl.PodGroupStates().Get("ns", "none"); err == nil || err.Error() != "pod group state not found for pod group ns/none" {
		t.Fatalf("missing group: %v", err)
	}
	if _, err := sl.CompositePodGroups().Get("ns", "none"); err == nil || err.Error() != "composite pod group not found in snapshot: compositepodgroup/ns/none" {
		t.Fatalf("missing composite: %v", err)
	}

	mgr := CacheGroups(c)
	root, ok, err := mgr.GetRootKeyForGroup(fwk.PodGroupKey("ns", "g"))
	if err != nil || !ok || root != fwk.CompositePodGroupKey("ns", "top") {
		t.Fatalf("root: %v %v %v", root, ok, err)
	}
	h, err := mgr.BuildHierarchySnapshotFromPod(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.PodGroupStates().Get("ns", "g"); err != nil {
		t.Fatalf("hierarchy lacks the pod's group: %v", err)
	}
	if _, _, err := mgr.GetRootKeyForGroup(fwk.PodKey("ns", "p")); !errors.Is(err, podgroup.ErrBadKey) {
		t.Fatalf("a pod key: %v", err)
	}
	// The cache's own texts.
	if _, err := mgr.PodGroupStates().Get("ns", "none"); err == nil || err.Error() != "pod group state not found for pod group ns/none" {
		t.Fatalf("cache missing group: %v", err)
	}
	if _, err := mgr.CompositePodGroups().Get("ns", "none"); err == nil ||
		err.Error() != "composite pod group state not found for composite pod group compositepodgroup/ns/none" {
		t.Fatalf("cache missing composite: %v", err)
	}
}

// The non-host-scoped anti-affinity lists read empty unless the hostname
// fast path is on, as upstream's behind its gate.
func TestNonHostScopedListFollowsGate(t *testing.T) {
	zone := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{LabelSelector: sel, TopologyKey: "zone"}},
		}}
	}
	s := snapshot.NewSnapshot([]*v1.Pod{mkPod("z", "n1", zone), mkPod("h", "n2", antiAffinity)}, []*v1.Node{mkNode("n1"), mkNode("n2")})
	l, _ := NewLister(s)
	check := func(on bool, wantNodes, wantPods int) {
		t.Helper()
		SetHostnameFastPath(on)
		list, err := l.NodeInfos().HavePodsWithRequiredNonHostScopedAntiAffinityList()
		if err != nil || len(list) != wantNodes {
			t.Fatalf("gate %v: list %d nodes, %v", on, len(list), err)
		}
		n1, _ := l.NodeInfos().Get("n1")
		if got := len(n1.GetPodsWithRequiredNonHostScopedAntiAffinity()); got != wantPods {
			t.Fatalf("gate %v: n1 lists %d pods", on, got)
		}
		if got := len(n1.Snapshot().GetPodsWithRequiredNonHostScopedAntiAffinity()); got != wantPods {
			t.Fatalf("gate %v: n1's copy lists %d pods", on, got)
		}
	}
	defer SetHostnameFastPath(false)
	check(false, 0, 0)
	check(true, 1, 1)
}
