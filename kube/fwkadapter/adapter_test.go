package fwkadapter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
)

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func mkNode(name string, images ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "z1"}}}
	n.Status.Allocatable = rl("cpu", "8", "memory", "16Gi", "pods", "110", "example.com/gpu", "4")
	for i, img := range images {
		n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: []string{img}, SizeBytes: int64(100 * (i + 1))})
	}
	return n
}

type podOpt func(*v1.Pod)

func mkPod(uid, node string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid), Labels: map[string]string{"app": "a"}}}
	p.Spec.NodeName = node
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi")}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func hostPort(port int32) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{HostPort: port, ContainerPort: 80}}
	}
}

func gpu(n string) podOpt {
	return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse(n) }
}

func pvc(name string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
}

var sel = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}

func affinity(p *v1.Pod) {
	p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{LabelSelector: sel, TopologyKey: "zone"}},
		PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 3,
			PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: "zone", Namespaces: []string{"x", "y"}}}},
	}}
}

func antiAffinity(p *v1.Pod) {
	p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{LabelSelector: sel, TopologyKey: "kubernetes.io/hostname",
			NamespaceSelector: &metav1.LabelSelector{}}},
	}}
}

func badSelector(p *v1.Pod) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{LabelSelector: bad, TopologyKey: "zone"}},
		PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 1,
			PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: "zone"}}},
	}}
}

func podInfo(t testing.TB, p *v1.Pod) *nodeinfo.PodInfo {
	t.Helper()
	pi, err := nodeinfo.NewPodInfo(p)
	if err != nil {
		t.Fatal(err)
	}
	return pi
}

// shape is everything a plugin can read of a fwk.NodeInfo, in comparable
// form.
type shape struct {
	Node                string
	Pods, Aff, Anti     []string
	Req, NonZero, Alloc [4]int64
	ReqScalars, AllocSc map[v1.ResourceName]int64
	Ports               []string
	Images              map[string]fwk.ImageStateSummary
	PVCs                map[string]int
}

func keys(s []fwk.PodInfo) []string {
	var out []string
	for _, p := range s {
		out = append(out, string(p.GetPod().UID))
	}
	return out
}

func res(r fwk.Resource) [4]int64 {
	return [4]int64{r.GetMilliCPU(), r.GetMemory(), r.GetEphemeralStorage(), int64(r.GetAllowedPodNumber())}
}

func shapeOf(n fwk.NodeInfo) shape {
	s := shape{
		Pods: keys(n.GetPods()), Aff: keys(n.GetPodsWithAffinity()), Anti: keys(n.GetPodsWithRequiredAntiAffinity()),
		Req: res(n.GetRequested()), NonZero: res(n.GetNonZeroRequested()), Alloc: res(n.GetAllocatable()),
		ReqScalars: n.GetRequested().GetScalarResources(), AllocSc: n.GetAllocatable().GetScalarResources(),
		Images: map[string]fwk.ImageStateSummary{}, PVCs: n.GetPVCRefCounts(),
	}
	if n.Node() != nil {
		s.Node = n.Node().Name
	}
	for ip, pps := range n.GetUsedPorts() {
		for pp := range pps {
			s.Ports = append(s.Ports, fmt.Sprintf("%s/%s/%d", ip, pp.Protocol, pp.Port))
		}
	}
	sort.Strings(s.Ports)
	for k, v := range n.GetImageStates() {
		s.Images[k] = *v
	}
	if len(s.ReqScalars) == 0 {
		s.ReqScalars = nil
	}
	if len(s.PVCs) == 0 {
		s.PVCs = nil
	}
	return s
}

func TestListerNilAndErrors(t *testing.T) {
	if _, err := NewLister(nil); !errors.Is(err, ErrNilSnapshot) {
		t.Fatalf("NewLister(nil) = %v", err)
	}
	var l *Lister
	if _, err := l.NodeInfos().List(); !errors.Is(err, ErrNilSnapshot) {
		t.Fatalf("nil List: %v", err)
	}
	if _, err := l.NodeInfos().Get("x"); !errors.Is(err, ErrNilSnapshot) {
		t.Fatalf("nil Get: %v", err)
	}
	if _, err := l.NodeInfos().HavePodsWithAffinityList(); !errors.Is(err, ErrNilSnapshot) {
		t.Fatal("nil affinity list")
	}
	if _, err := l.NodeInfos().HavePodsWithRequiredAntiAffinityList(); !errors.Is(err, ErrNilSnapshot) {
		t.Fatal("nil anti-affinity list")
	}
	if l.StorageInfos().IsPVCUsedByPods("ns/c") {
		t.Fatal("nil snapshot uses a PVC")
	}
	l, err := NewLister(snapshot.NewSnapshot(nil, []*v1.Node{mkNode("n1")}))
	if err != nil {
		t.Fatal(err)
	}
	ni, err := l.NodeInfos().Get("missing")
	if !errors.Is(err, snapshot.ErrNodeInfoNotFound) || ni != nil {
		t.Fatalf("Get(missing) = %v, %v; want a nil interface and ErrNodeInfoNotFound", ni, err)
	}
	if WrapNode(nil) != nil || WrapPod(nil) != nil {
		t.Fatal("wrapping nil gave a non-nil interface")
	}
}

func TestListerMatchesSnapshot(t *testing.T) {
	nodes := []*v1.Node{mkNode("n1", "img-a"), mkNode("n2", "img-a", "img-b"), mkNode("n3")}
	pods := []*v1.Pod{
		mkPod("a", "n1", hostPort(8080), pvc("c1")), mkPod("b", "n1", affinity), mkPod("c", "n2", antiAffinity),
		mkPod("d", "n2", gpu("2")), mkPod("e", "n3"),
	}
	s := snapshot.NewSnapshot(pods, nodes)
	l, _ := NewLister(s)
	var _ fwk.SharedLister = l
	list, err := l.NodeInfos().List()
	if err != nil || len(list) != s.NumNodes() {
		t.Fatalf("List: %d, %v", len(list), err)
	}
	for i, n := range list {
		if n.(*NodeInfo).Unwrap() != s.At(i) {
			t.Fatalf("List()[%d] is not the snapshot's entry %d", i, i)
		}
		got, err := l.NodeInfos().Get(n.Node().Name)
		if err != nil || got.(*NodeInfo).Unwrap() != s.At(i) {
			t.Fatalf("Get(%s) = %v, %v", n.Node().Name, got, err)
		}
	}
	aff, _ := l.NodeInfos().HavePodsWithAffinityList()
	anti, _ := l.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if len(aff) != 2 || len(anti) != 1 || anti[0].Node().Name != "n2" {
		t.Fatalf("affinity lists: %d, %d", len(aff), len(anti))
	}
	if !l.StorageInfos().IsPVCUsedByPods("ns/c1") || l.StorageInfos().IsPVCUsedByPods("ns/c2") {
		t.Fatal("IsPVCUsedByPods")
	}
	if l.Snapshot() != s {
		t.Fatal("Snapshot() is not the adapted snapshot")
	}
}

// TestViewMatchesUpstreamAggregation builds each node twice: as a published
// schedcache NodeInfo and by upstream's rules (MutableNodeInfo.AddPodInfo),
// then removes pods from both, and compares everything a plugin reads.
func TestViewMatchesUpstreamAggregation(t *testing.T) {
	node := mkNode("n1", "img-a", "img-b")
	pods := []*v1.Pod{
		mkPod("a", "n1", hostPort(8080), pvc("c1")), mkPod("b", "n1", affinity, pvc("c1")), mkPod("c", "n1", antiAffinity, gpu("1")),
		mkPod("d", "n1", gpu("2"), hostPort(9090)), mkPod("e", "n1", affinity), mkPod("f", "n1", badSelector),
	}
	infos := make([]*nodeinfo.PodInfo, len(pods))
	for i, p := range pods {
		infos[i] = podInfo(t, p)
	}
	st := nodeinfo.NewNodeState(nodeinfo.NextGeneration)
	st.SetNode(node)
	st.SetImageStates(map[string]nodeinfo.ImageStateSummary{"img-a": {Size: 100, NumNodes: 1}, "img-b": {Size: 200, NumNodes: 1}})
	m := NewMutableNodeInfo(node)
	m.imageStates = map[string]*fwk.ImageStateSummary{"img-a": {Size: 100, NumNodes: 1}, "img-b": {Size: 200, NumNodes: 1}}
	for _, pi := range infos {
		st.AddPod(pi)
		m.AddPodInfo(WrapPod(pi))
	}
	check := func(step string) {
		t.Helper()
		view := WrapNode(st.Freeze())
		if got, want := shapeOf(view), shapeOf(m); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: view\n%+v\nupstream rules\n%+v", step, got, want)
		}
		if got, want := shapeOf(view.Snapshot()), shapeOf(m.Snapshot()); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: Snapshot() differs", step)
		}
	}
	check("added")
	for _, i := range []int{1, 0, 5} {
		pi := infos[i]
		if err := st.RemovePod(pi.Key(), pi.HasAffinity(), pi.HasRequiredAntiAffinity(), pi.HasRequiredNonHostScopedAntiAffinity()); err != nil {
			t.Fatal(err)
		}
		if err := m.RemovePod(klog.Background(), pods[i]); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("removed %d", i))
	}
}

func TestPublishedViewIsReadOnly(t *testing.T) {
	node := mkNode("n1", "img-a")
	p := mkPod("a", "n1", hostPort(8080), affinity)
	st := nodeinfo.NewNodeState(nodeinfo.NextGeneration)
	st.SetNode(node)
	st.AddPod(podInfo(t, p))
	ni := st.Freeze()
	view := WrapNode(ni)
	before := shapeOf(view)
	gen := view.GetGeneration()

	if err := view.RemovePod(klog.Background(), p); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("RemovePod on a published view: %v", err)
	}
	view.AddPodInfo(WrapPod(podInfo(t, mkPod("b", "n1"))))
	view.SetNode(mkNode("other"))
	view.GetRequested().SetMaxResource(rl("cpu", "100"))
	if !reflect.DeepEqual(shapeOf(view), before) || view.GetGeneration() != gen {
		t.Fatal("a mutation changed a published view")
	}

	cp := view.Snapshot()
	if err := cp.RemovePod(klog.Background(), p); err != nil {
		t.Fatal(err)
	}
	cp.AddPodInfo(WrapPod(podInfo(t, mkPod("b", "n1", gpu("1")))))
	cp.GetRequested().SetMaxResource(rl("cpu", "100"))
	if !reflect.DeepEqual(shapeOf(view), before) {
		t.Fatal("mutating Snapshot() changed the published view")
	}
	if got := keys(cp.GetPods()); !reflect.DeepEqual(got, []string{"b"}) || cp.GetRequested().GetMilliCPU() != 100_000 {
		t.Fatalf("copy: pods %v, cpu %d", got, cp.GetRequested().GetMilliCPU())
	}
	if cp.GetGeneration() == gen {
		t.Fatal("a change to the copy kept the generation")
	}
	// The views are built once: the same slices on every call.
	p1, p2 := view.GetPods(), view.GetPods()
	i1, i2 := view.GetImageStates(), view.GetImageStates()
	if &p1[0] != &p2[0] || reflect.ValueOf(i1).Pointer() != reflect.ValueOf(i2).Pointer() {
		t.Fatal("views rebuilt per call")
	}
}

func TestMutableBadInput(t *testing.T) {
	m := NewMutableNodeInfo(mkNode("n1"))
	p := mkPod("a", "n1")
	m.AddPodInfo(WrapPod(podInfo(t, p)))
	before := shapeOf(m)
	if err := m.RemovePod(klog.Background(), nil); !errors.Is(err, ErrNilPod) {
		t.Fatalf("nil pod: %v", err)
	}
	noUID := mkPod("", "n1")
	if err := m.RemovePod(klog.Background(), noUID); !errors.Is(err, ErrEmptyUID) {
		t.Fatalf("empty UID: %v", err)
	}
	var nf *PodNotFoundError
	if err := m.RemovePod(klog.Background(), mkPod("zz", "n1")); !errors.Is(err, ErrPodNotFound) || !errors.As(err, &nf) || nf.Node != "n1" {
		t.Fatalf("unknown pod: %v", err)
	}
	m.AddPodInfo(nil)
	m.AddPodInfo(WrapPod(nil))
	m.SetNode(nil)
	if !reflect.DeepEqual(shapeOf(m), before) {
		t.Fatal("bad input changed the copy")
	}
	nodeless := NewMutableNodeInfo(nil)
	if err := nodeless.RemovePod(klog.Background(), p); !errors.Is(err, ErrPodNotFound) {
		t.Fatalf("nodeless: %v", err)
	}
}

func TestAffinityTermsOncePerPod(t *testing.T) {
	p := mkPod("a", "n1", affinity)
	pi := podInfo(t, p)
	ext, ok := pi.Extension().(*podTerms)
	if !ok {
		t.Fatalf("NewPodInfo did not precompute the terms: %T", pi.Extension())
	}
	v := WrapPod(pi)
	want, _ := fwk.GetAffinityTerms(p, fwk.GetPodAffinityTerms(p.Spec.Affinity))
	if got := v.GetRequiredAffinityTerms(); !reflect.DeepEqual(got, want) || &got[0] != &ext.requiredAffinity[0] {
		t.Fatalf("required affinity terms: %+v", got)
	}
	wantW, _ := fwk.GetWeightedAffinityTerms(p, p.Spec.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	if got := v.GetPreferredAffinityTerms(); !reflect.DeepEqual(got, wantW) || !got[0].Namespaces.Has("x") {
		t.Fatalf("preferred affinity terms: %+v", got)
	}
	if v.GetRequiredAntiAffinityTerms() != nil || v.GetPreferredAntiAffinityTerms() != nil {
		t.Fatal("anti-affinity terms of a pod without any")
	}
	if plain := podInfo(t, mkPod("b", "n1")); plain.Extension() != nil {
		t.Fatal("a pod without pod affinity got an extension")
	}
	// A selector that fails to parse: that category is nil, the others are
	// kept, and the error is upstream's.
	bad := WrapPod(podInfo(t, mkPod("c", "n1", badSelector))).(*PodInfo)
	if bad.AffinityParseError() == nil || bad.GetRequiredAntiAffinityTerms() != nil || len(bad.GetPreferredAntiAffinityTerms()) != 1 {
		t.Fatalf("bad selector: err %v, required %v", bad.AffinityParseError(), bad.GetRequiredAntiAffinityTerms())
	}
	r := v.CalculateResource()
	if r.Resource.GetMilliCPU() != 100 || r.Non0CPU != 100 || r.Non0Mem != 64<<20 {
		t.Fatalf("CalculateResource = %+v", r)
	}
}

func TestConcurrentReaders(t *testing.T) {
	nodes := []*v1.Node{mkNode("n1", "img-a"), mkNode("n2", "img-b")}
	var pods []*v1.Pod
	for i := range 40 {
		pods = append(pods, mkPod(fmt.Sprint(i), nodes[i%2].Name, hostPort(int32(8000+i)), affinity))
	}
	l, _ := NewLister(snapshot.NewSnapshot(pods, nodes))
	var wg sync.WaitGroup
	results := make([][]shape, 8)
	for g := range 8 {
		wg.Go(func() {
			list, _ := l.NodeInfos().List()
			for _, n := range list {
				results[g] = append(results[g], shapeOf(n))
			}
		})
	}
	wg.Wait()
	for g := 1; g < 8; g++ {
		if !reflect.DeepEqual(results[g], results[0]) {
			t.Fatalf("reader %d saw different views", g)
		}
	}
	if len(results[0][0].Pods) != 20 || len(results[0][0].Ports) != 20 {
		t.Fatalf("views: %d pods, %d ports", len(results[0][0].Pods), len(results[0][0].Ports))
	}
}

// TestListerKeepsListUntilChange: a long-lived Lister over a snapshot the
// caller refreshes returns its last list while nothing changed and a new
// one after a change; a list handed out never changes.
func TestListerKeepsListUntilChange(t *testing.T) {
	c, err := schedcache.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	logger := klog.Background()
	for _, n := range []*v1.Node{mkNode("n1"), mkNode("n2")} {
		if _, err := c.AddNode(logger, n); err != nil {
			t.Fatal(err)
		}
	}
	snap := schedcache.NewEmptySnapshot()
	l, _ := NewLister(snap)
	if err := c.UpdateSnapshot(logger, snap); err != nil {
		t.Fatal(err)
	}
	first, _ := l.NodeInfos().List()
	if err := c.UpdateSnapshot(logger, snap); err != nil {
		t.Fatal(err)
	}
	again, _ := l.NodeInfos().List()
	if len(first) != 2 || &first[0] != &again[0] {
		t.Fatal("an unchanged snapshot's list was rebuilt")
	}
	if err := c.AddPod(logger, mkPod("a", "n2", affinity)); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateSnapshot(logger, snap); err != nil {
		t.Fatal(err)
	}
	after, _ := l.NodeInfos().List()
	if &after[0] == &first[0] {
		t.Fatal("the list was not rebuilt after a change")
	}
	pods := 0
	for i := range after {
		pods += len(after[i].GetPods())
		if len(first[i].GetPods()) != 0 {
			t.Fatal("a list handed out before the change shows the new pod")
		}
		if after[i].(*NodeInfo).Unwrap() != snap.At(i) {
			t.Fatalf("entry %d is not the snapshot's", i)
		}
	}
	if pods != 1 {
		t.Fatalf("%d pods after adding one", pods)
	}
	// The cache built the PodInfo (on this goroutine, in AddPod) with the
	// terms already parsed.
	aff, _ := l.NodeInfos().HavePodsWithAffinityList()
	aff2, _ := l.NodeInfos().HavePodsWithAffinityList()
	if len(aff) != 1 || aff[0].Node().Name != "n2" || &aff[0] != &aff2[0] {
		t.Fatalf("affinity list %v not kept", aff)
	}
	if anti, _ := l.NodeInfos().HavePodsWithRequiredAntiAffinityList(); anti != nil {
		t.Fatalf("anti-affinity list %v", anti)
	}
	ni, _ := l.NodeInfos().Get("n2")
	if _, ok := ni.(*NodeInfo).Unwrap().PodAt(0).Extension().(*podTerms); !ok || len(ni.GetPods()[0].GetRequiredAffinityTerms()) != 1 {
		t.Fatal("the cache's PodInfo has no precomputed affinity terms")
	}
}

// TestNilSafe: every type's methods answer on a nil receiver without a
// panic, mutations with a typed error where they have one.
func TestNilSafe(t *testing.T) {
	var m *MutableNodeInfo
	var n *NodeInfo
	var p *PodInfo
	pod := mkPod("a", "n1")
	for _, ni := range []fwk.NodeInfo{m, n} {
		_ = shapeOf(ni)
		_ = ni.String()
		_ = ni.GetGeneration()
		_ = ni.GetNodeDeclaredFeatures()
		ni.AddPodInfo(WrapPod(podInfo(t, pod)))
		ni.SetNode(mkNode("x"))
		if err := ni.RemovePod(klog.Background(), pod); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("%T: RemovePod on nil: %v", ni, err)
		}
		if c := ni.Snapshot(); c == nil || len(c.GetPods()) != 0 {
			t.Fatalf("%T: Snapshot of nil: %v", ni, c)
		}
	}
	if p.GetPod() != nil || p.GetRequiredAffinityTerms() != nil || p.AffinityParseError() != nil ||
		p.CalculateResource().Resource.GetMilliCPU() != 0 {
		t.Fatal("nil PodInfo")
	}
	var r *Resource
	r.SetMaxResource(rl("cpu", "1"))
	if r.GetMilliCPU() != 0 || r.GetScalarResources() != nil || r.Clone() == nil {
		t.Fatal("nil Resource")
	}
}
