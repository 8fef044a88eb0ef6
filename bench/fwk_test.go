package bench

// The proof of kube/fwkadapter: upstream's in-tree plugins run on a
// schedcache snapshot and on upstream's snapshot of the same cluster, and
// every verdict and score must be identical.

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	upcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	upmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	"github.com/schedcache/schedcache/workload"
)

var flagFwkPods = flag.Int("fwk.pods", 0, "pods TestFwkPluginsIdentical checks (0: 10,000 on 20 nodes with -short, 2,000 on the 5k cluster without)")

// fwkPlugins are the plugins proven identical, with their default weights.
var fwkPlugins = []config.Plugin{
	{Name: names.NodeResourcesFit, Weight: 1},
	{Name: names.NodePorts},
	{Name: names.NodeAffinity, Weight: 2},
	{Name: names.TaintToleration, Weight: 3},
	{Name: names.InterPodAffinity, Weight: 2},
	{Name: names.PodTopologySpread, Weight: 2},
	{Name: names.ImageLocality, Weight: 1},
	{Name: names.VolumeRestrictions},
	{Name: names.DefaultPreemption},
	{Name: names.PrioritySort},
	{Name: names.DefaultBinder},
}

// fwkArgs are upstream's default plugin arguments (v1 defaults), except
// PodTopologySpread's defaulting, which is List with no default
// constraints (system defaults need the workload controllers' objects).
func fwkArgs() []config.PluginConfig {
	return []config.PluginConfig{
		{Name: names.DefaultPreemption, Args: &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}},
		{Name: names.InterPodAffinity, Args: &config.InterPodAffinityArgs{HardPodAffinityWeight: 1}},
		{Name: names.NodeAffinity, Args: &config.NodeAffinityArgs{}},
		{Name: names.NodeResourcesFit, Args: &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
			Type: config.LeastAllocated, Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		}}},
		{Name: names.PodTopologySpread, Args: &config.PodTopologySpreadArgs{DefaultingType: config.ListDefaulting}},
	}
}

// fwkEnv is what both sides share: the objects the plugins read from
// informers (claims, PDBs, namespaces) and the nominated pods.
type fwkEnv struct {
	factory   informers.SharedInformerFactory
	nominator *fakeNominator
	pdbs      []*policy.PodDisruptionBudget
}

// fakeNominator holds a fixed set of nominated pods; read-only after setup.
type fakeNominator struct {
	byNode map[string][]fwk.PodInfo // immutable after newFwkEnv
}

func (n *fakeNominator) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (n *fakeNominator) DeleteNominatedPodIfExists(*v1.Pod)                            {}
func (n *fakeNominator) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo)          {}
func (n *fakeNominator) NominatedPodsForNode(name string) []fwk.PodInfo                { return n.byNode[name] }

// fwkSide is one implementation under the plugins.
type fwkSide struct {
	name       string
	impl       Impl
	fw         framework.Framework
	lister     fwk.SharedLister
	refresh    func() error
	filters    []fwk.FilterPlugin // the plugin instances, reading the framework's cycle state
	preemption *defaultpreemption.DefaultPreemption
}

func newFwkSide(t testing.TB, ctx context.Context, name string, env *fwkEnv) *fwkSide {
	t.Helper()
	registerMetrics.Do(upmetrics.Register) // the framework records into upstream's metrics
	impl, err := NewImpl(name, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &fwkSide{name: name, impl: impl}
	logger := klog.Background()
	// The framework gets the snapshot as its mutable lister too, as the
	// scheduler's does (DefaultPreemption's GetVictimsOnNode reads it).
	var mutable fwk.MutableSnapshotSharedLister
	switch name {
	case Upstream:
		snap := upcache.NewEmptySnapshot()
		c := impl.(*upstreamImpl).Cache()
		s.lister, mutable, s.refresh = snap, snap, func() error { return c.UpdateSnapshot(logger, snap) }
	case SchedCache:
		snap := schedcache.NewEmptySnapshot()
		c := impl.(*schedImpl).Cache()
		l, err := fwkadapter.NewLister(snap)
		if err != nil {
			t.Fatal(err)
		}
		m, err := fwkadapter.NewMutable(snap)
		if err != nil {
			t.Fatal(err)
		}
		s.lister, mutable = l, m
		s.refresh = func() error {
			err := c.UpdateSnapshot(logger, snap)
			if _, rerr := m.Reset(logger, snap); rerr != nil {
				return rerr
			}
			return err
		}
	}
	registry := frameworkruntime.Registry{}
	inTree := plugins.NewInTreeRegistry()
	profile := &config.KubeSchedulerProfile{
		SchedulerName: v1.DefaultSchedulerName,
		Plugins:       &config.Plugins{MultiPoint: config.PluginSet{Enabled: fwkPlugins}},
		PluginConfig:  fwkArgs(),
	}
	for _, p := range fwkPlugins {
		registry[p.Name] = inTree[p.Name]
	}
	s.fw, err = frameworkruntime.NewFramework(ctx, registry, profile,
		frameworkruntime.WithSnapshotSharedLister(s.lister),
		frameworkruntime.WithMutableSnapshotLister(mutable),
		frameworkruntime.WithInformerFactory(env.factory),
		frameworkruntime.WithClientSet(fake.NewClientset()),
		frameworkruntime.WithPodNominator(env.nominator),
		frameworkruntime.WithLogger(logger),
	)
	if err != nil {
		t.Fatalf("%s: NewFramework: %v", name, err)
	}
	args := map[string]kruntime.Object{}
	for _, pc := range fwkArgs() {
		args[pc.Name] = pc.Args
	}
	for _, p := range fwkPlugins {
		pl, err := registry[p.Name](ctx, args[p.Name], s.fw)
		if err != nil {
			t.Fatalf("%s: plugin %s: %v", name, p.Name, err)
		}
		if f, ok := pl.(fwk.FilterPlugin); ok && p.Name != names.DefaultPreemption {
			s.filters = append(s.filters, f)
		}
		if dp, ok := pl.(*defaultpreemption.DefaultPreemption); ok {
			s.preemption = dp
		}
	}
	return s
}

func (s *fwkSide) list(t testing.TB) []fwk.NodeInfo {
	t.Helper()
	if err := s.refresh(); err != nil {
		t.Fatalf("%s: refresh: %v", s.name, err)
	}
	l, err := s.lister.NodeInfos().List()
	if err != nil {
		t.Fatalf("%s: List: %v", s.name, err)
	}
	return l
}

func statusString(st *fwk.Status) string {
	if st.IsSuccess() {
		return "ok"
	}
	return fmt.Sprintf("%s/%d/%s", st.Plugin(), st.Code(), strings.Join(st.Reasons(), "|"))
}

// podOutcome is everything the plugins decided about one pod.
type podOutcome struct {
	preFilter string
	filters   map[string]string // node -> every filter plugin's verdict, in order
	nominated map[string]string // node with nominated pods -> RunFilterPluginsWithNominatedPods
	scores    map[string]string // feasible node -> per-plugin normalised scores and total
	best      string            // highest total, ties to the smaller name; "" if none fits
}

// evaluate runs one scheduling cycle of pod on s: PreFilter, every filter
// plugin on every node, the nominated-pods filter where there are
// nominated pods, then PreScore and Score (with normalisation and weights)
// through the framework on the feasible nodes.
func (s *fwkSide) evaluate(t testing.TB, ctx context.Context, pod *v1.Pod, env *fwkEnv) podOutcome {
	nodes := s.list(t)
	state := framework.NewCycleState()
	out := podOutcome{filters: map[string]string{}, nominated: map[string]string{}, scores: map[string]string{}}
	pre, st, _ := s.fw.RunPreFilterPlugins(ctx, state, pod)
	out.preFilter = statusString(st)
	if !st.IsSuccess() {
		return out
	}
	if pre != nil && !pre.AllNodes() {
		out.preFilter += fmt.Sprintf(" nodes=%v", sortedNames(pre.NodeNames.UnsortedList()))
	}
	skip := state.GetSkipFilterPlugins()
	var feasible []fwk.NodeInfo
	var b strings.Builder
	for _, ni := range nodes {
		name := ni.Node().Name
		b.Reset()
		ok := pre == nil || pre.AllNodes() || pre.NodeNames.Has(name)
		for _, f := range s.filters {
			b.WriteString(f.Name())
			b.WriteByte('=')
			if skip.Has(f.Name()) {
				b.WriteString("skip;")
				continue
			}
			fs := f.Filter(ctx, state, pod, ni)
			b.WriteString(statusString(fs))
			b.WriteByte(';')
			ok = ok && fs.IsSuccess()
		}
		out.filters[name] = b.String()
		if len(env.nominator.byNode[name]) > 0 {
			out.nominated[name] = statusString(s.fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni))
		}
		if ok {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return out
	}
	if st := s.fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		out.scores["<prescore>"] = statusString(st)
		return out
	}
	scores, st := s.fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		out.scores["<score>"] = statusString(st)
		return out
	}
	var bestScore int64
	for _, ns := range scores {
		out.scores[ns.Name] = fmt.Sprintf("%d %v", ns.TotalScore, ns.Scores)
		if out.best == "" || ns.TotalScore > bestScore || (ns.TotalScore == bestScore && ns.Name < out.best) {
			out.best, bestScore = ns.Name, ns.TotalScore
		}
	}
	return out
}

func sortedNames(s []string) []string { slices.Sort(s); return s }

// diffOutcomes returns the differences between a and b, at most max.
func diffOutcomes(a, b podOutcome, max int) []string {
	var d []string
	add := func(format string, args ...any) {
		if len(d) < max {
			d = append(d, fmt.Sprintf(format, args...))
		}
	}
	if a.preFilter != b.preFilter {
		add("prefilter: %q vs %q", a.preFilter, b.preFilter)
	}
	for _, m := range [][2]map[string]string{{a.filters, b.filters}, {a.nominated, b.nominated}, {a.scores, b.scores}} {
		if len(m[0]) != len(m[1]) {
			add("%d vs %d nodes", len(m[0]), len(m[1]))
		}
		for k, v := range m[0] {
			if w, ok := m[1][k]; !ok || v != w {
				add("node %s: %q vs %q", k, v, w)
			}
		}
	}
	if a.best != b.best {
		add("best node %q vs %q", a.best, b.best)
	}
	return d
}

// fwkCluster returns the objects both caches load: the standard cluster
// of spec, with every 7th node tainted NoSchedule and every 11th
// PreferNoSchedule, and every pod given a priority and a start time (so
// that preemption orders victims deterministically).
func fwkCluster(spec workload.ClusterSpec) (nodes []*v1.Node, pods []*v1.Pod) {
	c := workload.Build(spec)
	nodes = make([]*v1.Node, len(c.Nodes))
	for i, n := range c.Nodes {
		cp := *n
		switch {
		case i%7 == 3:
			cp.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}}
		case i%11 == 5:
			cp.Spec.Taints = []v1.Taint{{Key: "spot", Value: "true", Effect: v1.TaintEffectPreferNoSchedule}}
		}
		nodes[i] = &cp
	}
	pods = make([]*v1.Pod, len(c.Pods))
	start := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	for i, p := range c.Pods {
		cp := *p
		prio := int32(i%4) * 10
		cp.Spec.Priority = &prio
		st := metav1.NewTime(start.Add(time.Duration(i) * time.Second))
		cp.Status.StartTime = &st
		pods[i] = &cp
	}
	return nodes, pods
}

// newFwkEnv makes the informer objects: every claim of the workload in
// every namespace (every 5th ReadWriteOncePod, so that a second user is
// refused through IsPVCUsedByPods), the namespaces with labels, two PDBs,
// and nominated pods on three nodes.
func newFwkEnv(t testing.TB, nodes []*v1.Node) *fwkEnv {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	claims := factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer()
	nss := factory.Core().V1().Namespaces().Informer().GetIndexer()
	for ns := range workload.NumNamespaces {
		nsName := fmt.Sprintf("ns-%d", ns)
		if err := nss.Add(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName, Labels: map[string]string{"team": fmt.Sprint(ns % 3)}}}); err != nil {
			t.Fatal(err)
		}
		for c := range workload.NumClaims {
			mode := v1.ReadWriteOnce
			if c%5 == 0 {
				mode = v1.ReadWriteOncePod
			}
			pvc := &v1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pvc-%03d", c), Namespace: nsName},
				Spec:       v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{mode}},
			}
			if err := claims.Add(pvc); err != nil {
				t.Fatal(err)
			}
		}
	}
	env := &fwkEnv{factory: factory, nominator: &fakeNominator{byNode: map[string][]fwk.PodInfo{}}}
	for i := range 2 {
		env.pdbs = append(env.pdbs, &policy.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pdb-%d", i), Namespace: fmt.Sprintf("ns-%d", i)},
			Spec:       policy.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{}, MinAvailable: &intstr.IntOrString{IntVal: 1}},
			Status:     policy.PodDisruptionBudgetStatus{DisruptionsAllowed: int32(i * 3)},
		})
	}
	r := rand.New(rand.NewPCG(7, 7))
	for k := range 3 {
		node := nodes[(k*len(nodes))/3].Name
		p := workload.NewPod(r, fmt.Sprintf("nominated-%d", k), "")
		p.Status.NominatedNodeName = node
		p.Spec.Containers = slices.Clone(p.Spec.Containers)
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{HostPort: int32(8100 + k), ContainerPort: 80}}
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		env.nominator.byNode[node] = []fwk.PodInfo{pi}
	}
	return env
}

// fwkPod returns incoming pod i: the standard pod shape (host ports, PVCs,
// pod affinity and anti-affinity, images) plus, drawn independently,
// tolerations, node affinity or a node selector, topology spread
// constraints, GPU requests and an in-tree volume that conflicts between
// pods on a node.
func fwkPod(r *rand.Rand, i int) *v1.Pod {
	p := workload.NewPod(r, fmt.Sprintf("in-%06d", i), "")
	p.Spec.Containers = slices.Clone(p.Spec.Containers)
	app := p.Labels[workload.LabelApp]
	if r.IntN(100) < 40 {
		p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "batch", Effect: v1.TaintEffectNoSchedule}}
		if r.IntN(2) == 0 {
			p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: "spot", Operator: v1.TolerationOpExists})
		}
	}
	aff := &v1.Affinity{}
	if p.Spec.Affinity != nil {
		aff = p.Spec.Affinity.DeepCopy()
	}
	switch r.IntN(10) {
	case 0, 1:
		aff.NodeAffinity = &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{workload.ZoneA, workload.ZoneC}}}}}}}
	case 2, 3:
		aff.NodeAffinity = &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
			{Weight: 10, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{workload.ZoneB}}}}},
			{Weight: 3, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: v1.LabelHostname, Operator: v1.NodeSelectorOpNotIn, Values: []string{workload.NodeName(0)}}}}},
		}}
	case 4:
		p.Spec.NodeSelector = map[string]string{v1.LabelTopologyZone: workload.ZoneB}
	}
	if r.IntN(100) < 10 {
		// Preferred pod affinity and anti-affinity across namespaces.
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{workload.LabelApp: app}}
		if aff.PodAffinity == nil {
			aff.PodAffinity = &v1.PodAffinity{}
		}
		aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			v1.WeightedPodAffinityTerm{Weight: 7, PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: v1.LabelTopologyZone,
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "1"}}}})
		aff.PodAntiAffinity = &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
			{Weight: 5, PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: v1.LabelHostname}}}}
	}
	if aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
		p.Spec.Affinity = aff
	}
	switch r.IntN(10) {
	case 0, 1:
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{workload.LabelApp: app}}}}
	case 2:
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
			MaxSkew: 2, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{workload.LabelApp: app}}},
			{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: workload.LabelApp, Operator: metav1.LabelSelectorOpExists}}}}}
	}
	if r.IntN(100) < 5 {
		c := &p.Spec.Containers[0]
		c.Resources.Requests = c.Resources.Requests.DeepCopy()
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		c.Resources.Requests[workload.ResourceGPU] = *resource.NewQuantity(int64(1+r.IntN(4)), resource.DecimalSI)
		c.Resources.Limits = v1.ResourceList{workload.ResourceGPU: c.Resources.Requests[workload.ResourceGPU]}
	}
	if r.IntN(100) < 5 {
		p.Spec.Volumes = append(slices.Clone(p.Spec.Volumes), v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{
			AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: fmt.Sprintf("vol-%d", r.IntN(20))}}})
	}
	return p
}

// fwkCompare loads the cluster into both caches and checks pods incoming
// pods: each is evaluated on both, the outcomes must be equal, and the pod
// is then assumed on the best node in both caches (the oldest of more than
// 200 assumed pods is forgotten), so the snapshots evolve.
// loadSides adds nodes, then the existing pods, to every side's cache.
func loadSides(t *testing.T, nodes []*v1.Node, existing []*v1.Pod, sides ...*fwkSide) {
	t.Helper()
	for _, s := range sides {
		for _, n := range nodes {
			if err := s.impl.AddNode(n); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range existing {
			if err := s.impl.AddPod(p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func fwkCompare(t *testing.T, spec workload.ClusterSpec, pods int) {
	ctx, cancel := fwkContext(t)
	defer cancel()
	nodes, existing := fwkCluster(spec)
	env := newFwkEnv(t, nodes)
	up := newFwkSide(t, ctx, Upstream, env)
	defer up.impl.Close()
	sc := newFwkSide(t, ctx, SchedCache, env)
	defer sc.impl.Close()
	loadSides(t, nodes, existing, up, sc)
	r := rand.New(rand.NewPCG(uint64(spec.Nodes), 15))
	var assumed []*v1.Pod
	verdicts := map[string]int{}
	mismatches := 0
	for i := range pods {
		pod := fwkPod(r, i)
		a := up.evaluate(t, ctx, pod, env)
		b := sc.evaluate(t, ctx, pod, env)
		if d := diffOutcomes(a, b, 5); len(d) > 0 {
			mismatches++
			if mismatches <= 5 {
				t.Errorf("pod %d (%s): upstream vs schedcache:\n  %s", i, pod.Name, strings.Join(d, "\n  "))
			}
			continue
		}
		for _, v := range a.filters {
			for _, part := range strings.Split(v, ";") {
				if name, verdict, _ := strings.Cut(part, "="); verdict != "ok" && verdict != "skip" && name != "" {
					verdicts[name]++
				}
			}
		}
		if a.preFilter != "ok" {
			verdicts["prefilter:"+strings.SplitN(a.preFilter, "/", 2)[0]]++
		}
		for _, v := range a.scores {
			if strings.Contains(v, "{"+names.ImageLocality+" ") && !strings.Contains(v, "{"+names.ImageLocality+" 0}") {
				verdicts["<image-locality-scored>"]++
				break
			}
		}
		if a.best == "" {
			verdicts["<unschedulable>"]++
			continue
		}
		verdicts["<scheduled>"]++
		placed := pod.DeepCopy()
		placed.Spec.NodeName = a.best
		assumed = append(assumed, placed)
		for _, s := range []*fwkSide{up, sc} {
			if err := s.impl.AssumePod(placed); err != nil {
				t.Fatalf("%s: assume: %v", s.name, err)
			}
			if len(assumed) > 200 {
				if err := s.impl.ForgetPod(assumed[0]); err != nil {
					t.Fatalf("%s: forget: %v", s.name, err)
				}
			}
		}
		if len(assumed) > 200 {
			assumed = assumed[1:]
		}
	}
	if mismatches > 0 {
		t.Fatalf("%d of %d pods had different outcomes", mismatches, pods)
	}
	t.Logf("%d pods on %d nodes identical; rejections by plugin and outcomes: %v", pods, len(nodes), verdicts)
	// Every plugin must have had its say: a test whose pods no plugin
	// rejects proves little.
	for _, p := range []string{names.NodeResourcesFit, names.NodePorts, names.NodeAffinity, names.TaintToleration,
		names.InterPodAffinity, names.PodTopologySpread, names.VolumeRestrictions} {
		if verdicts[p] == 0 {
			t.Errorf("no pod was rejected by %s", p)
		}
	}
	if verdicts["<image-locality-scored>"] == 0 {
		t.Error("ImageLocality never scored above 0")
	}
}

// TestFwkPluginsIdentical: NodeResourcesFit, NodePorts, NodeAffinity,
// TaintToleration, InterPodAffinity, PodTopologySpread, ImageLocality and
// VolumeRestrictions give identical verdicts (every plugin on every node)
// and identical scores (through the framework runtime, normalised and
// weighted) on schedcache's snapshot and on upstream's, pod after pod.
func TestFwkPluginsIdentical(t *testing.T) {
	spec, pods := workload.ClusterSpec{Nodes: 20, PodsPerNode: 30, Seed: 1}, 10_000
	if !testing.Short() {
		spec, pods = workload.Standard(), 2_000
	}
	if *flagFwkPods > 0 {
		pods = *flagFwkPods
	}
	fwkCompare(t, spec, pods)
}

// TestFwkPreemptionDryRun: DefaultPreemption's dry run (GetVictimsOnNode,
// then SelectVictimsOnNode on a Snapshot() of each node with a clone of
// the cycle state, as DryRunPreemption does) picks the same victims on both, on every node of
// the loaded cluster, for high-priority pods that fit nowhere; and the
// published schedcache NodeInfos are unchanged afterwards.
func TestFwkPreemptionDryRun(t *testing.T) {
	spec := workload.ClusterSpec{Nodes: 50, PodsPerNode: 30, Seed: 1}
	if !testing.Short() {
		spec = workload.Standard()
	}
	ctx, cancel := fwkContext(t)
	defer cancel()
	nodes, existing := fwkCluster(spec)
	env := newFwkEnv(t, nodes)
	env.nominator.byNode = map[string][]fwk.PodInfo{}
	up := newFwkSide(t, ctx, Upstream, env)
	defer up.impl.Close()
	sc := newFwkSide(t, ctx, SchedCache, env)
	defer sc.impl.Close()
	loadSides(t, nodes, existing, up, sc)
	r := rand.New(rand.NewPCG(3, 3))
	prio := int32(25)
	victimsTotal, nodesWithVictims := 0, 0
	for k := range 4 {
		pod := workload.NewPod(r, fmt.Sprintf("preemptor-%d", k), "")
		pod.Spec.Priority = &prio
		pod.Spec.Containers = []v1.Container{{Name: "big", Image: pod.Spec.Containers[0].Image, Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(fmt.Sprintf("%d", 30+4*k)), v1.ResourceMemory: resource.MustParse("8Gi")}}}}
		if k%2 == 1 {
			pod.Spec.Containers[0].Ports = []v1.ContainerPort{{HostPort: workload.HostPortMin + int32(k), ContainerPort: 80}}
			pod.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{workload.LabelApp: "app-001"}}, TopologyKey: v1.LabelHostname}}}}
		}
		results := [2]map[string]string{{}, {}}
		var before map[string]string
		for si, s := range []*fwkSide{up, sc} {
			list := s.list(t)
			state := framework.NewCycleState()
			if _, st, _ := s.fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
				results[si]["<prefilter>"] = statusString(st)
				continue
			}
			if si == 1 {
				before = nodeFingerprints(list)
			}
			for _, ni := range list {
				fits := s.fw.RunFilterPlugins(ctx, state, pod, ni)
				possible, err := s.preemption.Evaluator.GetVictimsOnNode(ctx, ni)
				if err != nil {
					t.Fatalf("%s: GetVictimsOnNode(%s): %v", s.name, ni.Node().Name, err)
				}
				victims, violating, st := s.preemption.SelectVictimsOnNode(ctx, state.Clone(), pod, ni.Snapshot(), possible, env.pdbs)
				names := make([]string, len(victims))
				for i, v := range victims {
					names[i] = v.Name
				}
				results[si][ni.Node().Name] = fmt.Sprintf("fits=%s victims=%v violating=%d status=%s", statusString(fits), names, violating, statusString(st))
				if si == 0 && len(victims) > 0 {
					victimsTotal += len(victims)
					nodesWithVictims++
				}
			}
			if si == 1 {
				if after := nodeFingerprints(list); !mapsEqual(before, after) {
					t.Fatal("the dry run changed published schedcache NodeInfos")
				}
			}
		}
		if d := diffOutcomes(podOutcome{filters: results[0]}, podOutcome{filters: results[1]}, 5); len(d) > 0 {
			t.Fatalf("preemptor %d: upstream vs schedcache:\n  %s", k, strings.Join(d, "\n  "))
		}
	}
	if nodesWithVictims == 0 {
		t.Fatal("no node had victims: the dry run was not exercised")
	}
	t.Logf("%d nodes x 4 preemptors identical; %d victims on %d (node, preemptor) pairs", len(nodes), victimsTotal, nodesWithVictims)
}

// fwkContext returns the context the frameworks run under. Each framework
// starts upstream's metrics recorder goroutine, which stops within its 1s
// flush interval once the context is done: cancel waits for that, so that
// goleak finds nothing left.
func fwkContext(t testing.TB) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, func() {
		cancel()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			buf := make([]byte, 1<<20)
			if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "MetricAsyncRecorder).run") {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Error("upstream's metrics recorder did not stop")
	}
}

func nodeFingerprints(list []fwk.NodeInfo) map[string]string {
	m := make(map[string]string, len(list))
	for _, ni := range list {
		m[ni.Node().Name] = fmt.Sprintf("%d %d %d %d %d", len(ni.GetPods()), ni.GetRequested().GetMilliCPU(),
			ni.GetRequested().GetMemory(), ni.GetUsedPorts().Len(), ni.GetGeneration())
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
