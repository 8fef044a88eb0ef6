package bench

// Helpers of identity137_test.go: the two sides (upstream v1.37.2's cache,
// snapshot and framework; schedcache's cache, a fwkadapter.Mutable over a
// refreshed snapshot and the same framework), the generated worlds, the
// recorders and the renderings the tests compare as text.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	upcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	upmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	"github.com/schedcache/schedcache/workload"
)

// ---- gates ----

// i37Gates are the switches of one case: upstream's GenericWorkload,
// CompositePodGroup (with TopologyAwareWorkloadScheduling, which it
// depends on) and InterPodAffinityHostnameFastPath gates, mirrored in
// schedcache (WithPodGroups, fwkadapter.SetHostnameFastPath).
type i37Gates struct {
	gw, cpg, fastPath bool
}

func (g i37Gates) String() string {
	return fmt.Sprintf("gw=%t/cpg=%t/fastpath=%t", g.gw, g.cpg, g.fastPath)
}

// i37SetGates sets the process-wide gates to g for t's duration. Upstream
// reads them when a cache, snapshot or plugin is made, so it is called
// before any of them.
func i37SetGates(t *testing.T, g i37Gates) {
	t.Helper()
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                  g.gw,
		features.TopologyAwareWorkloadScheduling:  g.cpg,
		features.CompositePodGroup:                g.cpg,
		features.InterPodAffinityHostnameFastPath: g.fastPath,
	})
	fwkadapter.SetHostnameFastPath(g.fastPath)
	t.Cleanup(func() { fwkadapter.SetHostnameFastPath(false) })
}

// ---- the caches behind the sides ----

// i37Cache is what the tests do to a cache.
type i37Cache interface {
	AddNode(*v1.Node) error
	AddPod(*v1.Pod) error
	RemovePod(*v1.Pod) error
	AssumePod(*v1.Pod) error
	ForgetPod(*v1.Pod) error
	AddPodGroupMember(*v1.Pod) error
	AddPodGroup(*schedulingv1beta1.PodGroup) error
	AddCompositePodGroup(*schedulingv1alpha3.CompositePodGroup) error
}

type i37Up struct{ c upcache.Cache }

func (u i37Up) AddNode(n *v1.Node) error          { u.c.AddNode(i37Log, n); return nil }
func (u i37Up) AddPod(p *v1.Pod) error            { return u.c.AddPod(i37Log, p) }
func (u i37Up) RemovePod(p *v1.Pod) error         { return u.c.RemovePod(i37Log, p) }
func (u i37Up) AssumePod(p *v1.Pod) error         { return u.c.AssumePod(i37Log, p) }
func (u i37Up) ForgetPod(p *v1.Pod) error         { return u.c.ForgetPod(i37Log, p) }
func (u i37Up) AddPodGroupMember(p *v1.Pod) error { u.c.AddPodGroupMember(p); return nil }
func (u i37Up) AddPodGroup(pg *schedulingv1beta1.PodGroup) error {
	u.c.AddPodGroup(pg)
	return nil
}
func (u i37Up) AddCompositePodGroup(c *schedulingv1alpha3.CompositePodGroup) error {
	u.c.AddCompositePodGroup(i37Log, c)
	return nil
}

type i37Sc struct{ c *schedcache.Cache }

func (s i37Sc) AddNode(n *v1.Node) error          { _, err := s.c.AddNode(i37Log, n); return err }
func (s i37Sc) AddPod(p *v1.Pod) error            { return s.c.AddPod(i37Log, p) }
func (s i37Sc) RemovePod(p *v1.Pod) error         { return s.c.RemovePod(i37Log, p) }
func (s i37Sc) AssumePod(p *v1.Pod) error         { return s.c.AssumePod(i37Log, p) }
func (s i37Sc) ForgetPod(p *v1.Pod) error         { return s.c.ForgetPod(i37Log, p) }
func (s i37Sc) AddPodGroupMember(p *v1.Pod) error { return s.c.AddPodGroupMember(p) }
func (s i37Sc) AddPodGroup(pg *schedulingv1beta1.PodGroup) error {
	return s.c.AddPodGroup(pg)
}
func (s i37Sc) AddCompositePodGroup(c *schedulingv1alpha3.CompositePodGroup) error {
	return s.c.AddCompositePodGroup(i37Log, c)
}

// ---- sides ----

// i37Side is one implementation under upstream's framework: its cache, the
// one snapshot object the framework gets as both its shared and its
// mutable lister (upstream's scheduler passes its one *Snapshot to
// WithSnapshotSharedLister and WithMutableSnapshotLister; schedcache's is a
// fwkadapter.Mutable), the cache as the framework's PodGroupManager
// (schedcache's through fwkadapter.CacheGroups), and the plugins.
type i37Side struct {
	name  string
	cache i37Cache
	// lister is the snapshot the framework reads and mutates.
	lister fwk.MutableSnapshotSharedLister
	pgm    fwk.PodGroupManager
	// refresh brings the snapshot up to date with the cache, as the
	// scheduler does at the start of each cycle: upstream's
	// UpdateSnapshot; schedcache's UpdateSnapshot of a long-lived snapshot
	// and Mutable.Reset to it.
	refresh func() error
	// snapAssume and snapForget are the snapshot-local AssumePod and
	// ForgetPod of the pod-group cycle, handed upstream's PodInfo (the
	// scheduler's queue holds upstream's PodInfos whatever the snapshot).
	snapAssume func(*framework.PodInfo) error
	snapForget func(*v1.Pod) error
	close      func()

	fw        framework.Framework
	dp        *defaultpreemption.DefaultPreemption // set by the framework's factory
	victims   *i37Victims
	activated *i37Activator
}

// i37NewSide starts side name's cache and snapshot; build makes its
// framework.
func i37NewSide(t *testing.T, name string, g i37Gates) *i37Side {
	t.Helper()
	upmetrics.Register() // the framework and the cache record into upstream's metrics
	s := &i37Side{name: name, victims: &i37Victims{}, activated: &i37Activator{}}
	logger := i37Log
	switch name {
	case Upstream:
		ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), i37Log))
		c := upcache.New(ctx, nil, g.gw, g.cpg)
		snap := upcache.NewEmptySnapshot()
		s.cache, s.lister, s.pgm, s.close = i37Up{c}, snap, c, cancel
		s.refresh = func() error { return c.UpdateSnapshot(logger, snap) }
		s.snapAssume = snap.AssumePod
		s.snapForget = func(p *v1.Pod) error { return snap.ForgetPod(logger, p) }
	case SchedCache:
		c, err := schedcache.New(context.Background(), schedcache.WithPodGroups(g.gw, g.cpg))
		if err != nil {
			t.Fatal(err)
		}
		dst := schedcache.NewEmptySnapshot()
		m, err := fwkadapter.NewMutable(dst)
		if err != nil {
			t.Fatal(err)
		}
		s.cache, s.lister, s.pgm, s.close = i37Sc{c}, m, fwkadapter.CacheGroups(c), func() { _ = c.Close() }
		s.refresh = func() error {
			if err := c.UpdateSnapshot(logger, dst); err != nil {
				return err
			}
			_, err := m.Reset(logger, dst)
			return err
		}
		s.snapAssume = func(pi *framework.PodInfo) error { return m.AssumePod(pi) }
		s.snapForget = func(p *v1.Pod) error { return m.ForgetPod(logger, p) }
	default:
		t.Fatalf("unknown side %q", name)
	}
	t.Cleanup(s.close)
	return s
}

// i37Plugins are the plugins of the sides' profile (multi-point, with
// upstream's default weights); GangScheduling is added with
// GenericWorkload.
var i37Plugins = []config.Plugin{
	{Name: names.NodeUnschedulable},
	{Name: names.NodeName},
	{Name: names.TaintToleration, Weight: 3},
	{Name: names.NodeAffinity, Weight: 2},
	{Name: names.NodePorts},
	{Name: names.NodeResourcesFit, Weight: 1},
	{Name: names.VolumeRestrictions},
	{Name: names.InterPodAffinity, Weight: 2},
	{Name: names.PodTopologySpread, Weight: 2},
	{Name: names.ImageLocality, Weight: 1},
	{Name: names.DefaultPreemption},
	{Name: names.PrioritySort},
	{Name: names.DefaultBinder},
}

// i37Args are upstream's default plugin arguments but DefaultPreemption's
// and PodTopologySpread's: the preemption dry run shortlists every
// potential node (MinCandidateNodesPercentage 100), so that its candidates
// do not depend on the random offset and the parallel evaluation order;
// PodTopologySpread has no system default constraints (they need the
// workload controllers' objects).
func i37Args() []config.PluginConfig {
	return []config.PluginConfig{
		{Name: names.DefaultPreemption, Args: &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 100, MinCandidateNodesAbsolute: 100}},
		{Name: names.InterPodAffinity, Args: &config.InterPodAffinityArgs{HardPodAffinityWeight: 1}},
		{Name: names.NodeAffinity, Args: &config.NodeAffinityArgs{}},
		{Name: names.NodeResourcesFit, Args: &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
			Type: config.LeastAllocated, Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		}}},
		{Name: names.PodTopologySpread, Args: &config.PodTopologySpreadArgs{DefaultingType: config.ListDefaulting}},
	}
}

// build makes s's framework on ctx, without the plugins named. The plugins are upstream's in-tree
// ones with the gates' features, except that DefaultPreemption runs its
// preemption synchronously (EnableAsyncPreemption off) and its executor
// records the victims instead of deleting them through the API.
func (s *i37Side) build(t *testing.T, ctx context.Context, env *i37Env, without ...string) {
	t.Helper()
	inTree := plugins.NewInTreeRegistry()
	registry := frameworkruntime.Registry{}
	enabled := slices.DeleteFunc(slices.Clone(i37Plugins), func(p config.Plugin) bool { return slices.Contains(without, p.Name) })
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		enabled = append(enabled, config.Plugin{Name: names.GangScheduling})
	}
	for _, p := range enabled {
		registry[p.Name] = inTree[p.Name]
	}
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	fts.EnableAsyncPreemption = false
	registry[names.DefaultPreemption] = func(ctx context.Context, args kruntime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		pl, err := defaultpreemption.New(ctx, args, fh, fts)
		if err != nil {
			return nil, err
		}
		pl.Executor.PreemptPod = s.victims.preempt
		s.dp = pl
		return pl, nil
	}
	profile := &config.KubeSchedulerProfile{
		SchedulerName: v1.DefaultSchedulerName,
		Plugins:       &config.Plugins{MultiPoint: config.PluginSet{Enabled: enabled}},
		PluginConfig:  i37Args(),
	}
	var err error
	s.fw, err = frameworkruntime.NewFramework(ctx, registry, profile,
		frameworkruntime.WithSnapshotSharedLister(s.lister),
		frameworkruntime.WithMutableSnapshotLister(s.lister),
		frameworkruntime.WithPodGroupManager(s.pgm),
		frameworkruntime.WithInformerFactory(env.factory),
		frameworkruntime.WithClientSet(fake.NewClientset()),
		frameworkruntime.WithPodNominator(env.nominator),
		frameworkruntime.WithPodActivator(s.activated),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithLogger(i37Log),
	)
	if err != nil {
		t.Fatalf("%s: NewFramework: %v", s.name, err)
	}
	if s.dp == nil {
		t.Fatalf("%s: DefaultPreemption was not built", s.name)
	}
}

// load adds w to s's cache: the pod groups and composites first, then the
// nodes, the assigned pods and the unscheduled members.
func (s *i37Side) load(t *testing.T, w *i37World) {
	t.Helper()
	for _, c := range w.composites {
		if err := s.cache.AddCompositePodGroup(c); err != nil {
			t.Fatalf("%s: AddCompositePodGroup %s: %v", s.name, c.Name, err)
		}
	}
	for _, pg := range w.groups {
		if err := s.cache.AddPodGroup(pg); err != nil {
			t.Fatalf("%s: AddPodGroup %s: %v", s.name, pg.Name, err)
		}
	}
	for _, n := range w.nodes {
		if err := s.cache.AddNode(n); err != nil {
			t.Fatalf("%s: AddNode %s: %v", s.name, n.Name, err)
		}
	}
	for _, p := range w.pods {
		if err := s.cache.AddPod(p); err != nil {
			t.Fatalf("%s: AddPod %s: %v", s.name, p.Name, err)
		}
	}
	for _, p := range w.pending {
		if err := s.cache.AddPodGroupMember(p); err != nil {
			t.Fatalf("%s: AddPodGroupMember %s: %v", s.name, p.Name, err)
		}
	}
}

func (s *i37Side) mustRefresh(t *testing.T) {
	t.Helper()
	if err := s.refresh(); err != nil {
		t.Fatalf("%s: refresh: %v", s.name, err)
	}
}

// i37Victims records the victims the preemption executor was asked to
// preempt (its PreemptPod, called from parallel goroutines).
type i37Victims struct {
	mu   sync.Mutex
	pods []*v1.Pod // guarded by mu
}

func (r *i37Victims) preempt(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods = append(r.pods, victim)
	return false, nil
}

// take returns the victims recorded since the last take, sorted by key.
func (r *i37Victims) take() []*v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.pods
	r.pods = nil
	slices.SortFunc(out, func(a, b *v1.Pod) int { return strings.Compare(i37Key(a), i37Key(b)) })
	return out
}

// i37Activator records the pods plugins activate (fwk.PodActivator).
type i37Activator struct {
	mu    sync.Mutex
	calls []string // guarded by mu
}

func (a *i37Activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, strings.Join(slices.Sorted(maps.Keys(pods)), ","))
}

// take returns the calls since the last take, sorted (a composite's
// children come in a set's order upstream).
func (a *i37Activator) take() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	slices.Sort(a.calls)
	out := strings.Join(a.calls, " | ")
	a.calls = nil
	return out
}

// ---- environment shared by the sides ----

// i37Env holds what both sides' frameworks read besides the caches: the
// informers (the preemptor pods the evaluator re-reads, the PDBs) and the
// nominated pods.
type i37Env struct {
	factory   informers.SharedInformerFactory
	nominator *i37Nominator
}

// i37Nominator holds a fixed set of nominated pods.
type i37Nominator struct {
	byNode map[string][]fwk.PodInfo // immutable after i37NewEnv
}

func (n *i37Nominator) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (n *i37Nominator) DeleteNominatedPodIfExists(*v1.Pod)                            {}
func (n *i37Nominator) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo)          {}
func (n *i37Nominator) NominatedPodsForNode(name string) []fwk.PodInfo                { return n.byNode[name] }

func i37NewEnv(t *testing.T, w *i37World) *i37Env {
	t.Helper()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	pdbs := factory.Policy().V1().PodDisruptionBudgets().Informer().GetIndexer()
	for _, pdb := range w.pdbs {
		if err := pdbs.Add(pdb); err != nil {
			t.Fatal(err)
		}
	}
	factory.Core().V1().Pods().Informer()
	env := &i37Env{factory: factory, nominator: &i37Nominator{byNode: map[string][]fwk.PodInfo{}}}
	for _, p := range w.nominated {
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		env.nominator.byNode[p.Status.NominatedNodeName] = append(env.nominator.byNode[p.Status.NominatedNodeName], pi)
	}
	return env
}

// addPod makes p visible to the evaluator's pod lister.
func (e *i37Env) addPod(t *testing.T, p *v1.Pod) {
	t.Helper()
	if err := e.factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
		t.Fatal(err)
	}
}

// ---- worlds ----

// i37World is a generated cluster: nodes, assigned pods of several
// priorities (some of them pod-group members, a few terminating by
// preemption), pod groups and composites with disruption modes and
// priorities, unscheduled members, PDBs and nominated pods.
type i37World struct {
	nodes      []*v1.Node
	pods       []*v1.Pod // assigned
	pending    []*v1.Pod // unscheduled pod-group members
	groups     []*schedulingv1beta1.PodGroup
	composites []*schedulingv1alpha3.CompositePodGroup
	pdbs       []*policy.PodDisruptionBudget
	nominated  []*v1.Pod
	// terminating is a node with a pod terminating by preemption.
	terminating string
	r           *rand.Rand
}

// i37Log discards what the caches and the framework log.
var i37Log = logr.Discard()

var i37Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// i37GroupSpec is one pod group of every namespace of a world: its
// priority (nil: none), disruption mode All, gang MinCount (0: basic
// policy), parent composite ("" none), and whether its object exists.
type i37GroupSpec struct {
	name     string
	priority *int32
	all      bool
	minCount int32
	parent   string
	object   bool
}

func i32p(v int32) *int32 { return &v }

var i37GroupSpecs = []i37GroupSpec{
	{name: "pg-0", priority: i32p(5), all: true, minCount: 2, object: true},
	{name: "pg-1", priority: i32p(15), all: false, minCount: 0, parent: "cpg-0", object: true},
	{name: "pg-2", priority: i32p(25), all: true, minCount: 3, parent: "cpg-0", object: true},
	{name: "pg-3", priority: i32p(32), all: true, minCount: 0, parent: "cpg-1", object: true},
	{name: "pg-4", priority: nil, all: true, minCount: 2, parent: "cpg-missing", object: true},
	{name: "pg-5", object: false},
}

// i37CompositeSpecs: cpg-0 (disruption All, priority 22) under cpg-1
// (Single, priority 8, the root).
var i37CompositeSpecs = []struct {
	name     string
	priority int32
	all      bool
	minGroup int32
	parent   string
}{
	{name: "cpg-0", priority: 22, all: true, minGroup: 2, parent: "cpg-1"},
	{name: "cpg-1", priority: 8, all: false, minGroup: 1},
}

func i37PodGroup(ns string, gs i37GroupSpec, withParent bool) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{}
	pg.Namespace, pg.Name = ns, gs.name
	pg.UID = types.UID("pg-" + ns + "-" + gs.name)
	pg.Spec.Priority = gs.priority
	if gs.all {
		pg.Spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
	} else {
		pg.Spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{Single: &schedulingv1beta1.SingleDisruptionMode{}}
	}
	if gs.minCount > 0 {
		pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: gs.minCount}
	} else {
		pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
	}
	if withParent && gs.parent != "" {
		pg.Spec.ParentCompositePodGroupName = strPtr37(gs.parent)
	}
	return pg
}

func strPtr37(s string) *string { return &s }

// i37BuildWorld generates a world of nodes nodes (30 pods each) under g.
func i37BuildWorld(seed int64, nodes int, g i37Gates) *i37World {
	c := workload.Build(workload.ClusterSpec{Nodes: nodes, PodsPerNode: 30, Seed: seed})
	w := &i37World{nodes: c.Nodes, r: rand.New(rand.NewPCG(uint64(seed), 37))}
	r := w.r
	nss := map[string]bool{}
	w.pods = make([]*v1.Pod, len(c.Pods))
	for i, p := range c.Pods {
		cp := *p
		prio := int32(r.IntN(4)) * 10
		cp.Spec.Priority = &prio
		st := metav1.NewTime(i37Epoch.Add(time.Duration(i) * time.Second))
		cp.Status.StartTime = &st
		if g.gw && r.IntN(100) < 30 {
			// A member; its own priority is its group's pods' (upstream
			// ranks a candidate by its first victim pod's own priority, and
			// a group's pods come in map order).
			k := r.IntN(len(i37GroupSpecs))
			cp.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: strPtr37(i37GroupSpecs[k].name)}
			prio = int32(k%4) * 10
		}
		if i%97 == 5 {
			// Terminating by preemption, at a low priority: a preemptor
			// nominated here is not eligible to preempt again.
			low := int32(1)
			cp.Spec.Priority = &low
			cp.Spec.SchedulingGroup = nil
			cp.DeletionTimestamp = &st
			cp.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
			if w.terminating == "" {
				w.terminating = cp.Spec.NodeName
			}
		}
		nss[cp.Namespace] = true
		w.pods[i] = &cp
	}
	namespaces := slices.Sorted(maps.Keys(nss))
	if g.gw {
		for _, ns := range namespaces {
			for _, gs := range i37GroupSpecs {
				if gs.object {
					w.groups = append(w.groups, i37PodGroup(ns, gs, g.cpg))
				}
			}
			if !g.cpg {
				continue
			}
			for _, cs := range i37CompositeSpecs {
				cpg := &schedulingv1alpha3.CompositePodGroup{}
				cpg.Namespace, cpg.Name = ns, cs.name
				cpg.UID = types.UID("cpg-" + ns + "-" + cs.name)
				cpg.Spec.Priority = i32p(cs.priority)
				if cs.all {
					cpg.Spec.DisruptionMode = &schedulingv1alpha3.CompositeDisruptionMode{All: &schedulingv1alpha3.AllCompositeDisruptionMode{}}
				} else {
					cpg.Spec.DisruptionMode = &schedulingv1alpha3.CompositeDisruptionMode{Single: &schedulingv1alpha3.SingleCompositeDisruptionMode{}}
				}
				cpg.Spec.SchedulingPolicy.Gang = &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: cs.minGroup}
				if cs.parent != "" {
					cpg.Spec.ParentCompositePodGroupName = strPtr37(cs.parent)
				}
				w.composites = append(w.composites, cpg)
			}
		}
	}
	for i, ns := range namespaces[:min(3, len(namespaces))] {
		w.pdbs = append(w.pdbs, &policy.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "pdb-" + ns, Namespace: ns, UID: types.UID("pdb-" + ns)},
			Spec: policy.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: workload.LabelApp, Operator: metav1.LabelSelectorOpExists}}}},
			Status: policy.PodDisruptionBudgetStatus{DisruptionsAllowed: int32(i)},
		})
	}
	for k := range 3 {
		// Nominated pods of a higher priority than any preemptor: they
		// count on their node in every filter run with nominated pods.
		p := workload.NewPod(r, fmt.Sprintf("nominated-%d", k), "")
		prio := int32(40)
		p.Spec.Priority = &prio
		p.Status.NominatedNodeName = c.Nodes[(k*len(c.Nodes))/3+1].Name
		w.nominated = append(w.nominated, p)
	}
	return w
}

// i37Big gives p one container requesting cpu cores and 4Gi (30 is more
// than any node of the standard shape has free) and no volumes (the
// informers hold no claims).
func i37Big(p *v1.Pod, cpu int) {
	p.Spec.Volumes = nil
	p.Spec.Containers = []v1.Container{{Name: "big", Image: p.Spec.Containers[0].Image, Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI), v1.ResourceMemory: resource.MustParse("4Gi")}}}}
	p.Spec.InitContainers = nil
	p.Spec.Overhead = nil
	p.Spec.RuntimeClassName = nil
}

// ---- rendering ----

func i37Key(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

func i37Keys(ps []*v1.Pod) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = i37Key(p)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// i37Status renders a status: code, plugin and message.
func i37Status(st *fwk.Status) string {
	if st.IsSuccess() && st.Message() == "" {
		return "ok"
	}
	return fmt.Sprintf("%s/%s/%q", st.Code(), st.Plugin(), st.Message())
}

// i37Diff compares two renderings line by line and returns at most max
// differing lines, labelled.
func i37Diff(a, b string, max int) []string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	var d []string
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			x, y = i37Window(x, y)
			d = append(d, fmt.Sprintf("line %d:\n    upstream:   %s\n    schedcache: %s", i, x, y))
			if len(d) == max {
				break
			}
		}
	}
	return d
}

// i37Window cuts two long differing lines to the part around their first
// difference.
func i37Window(x, y string) (string, string) {
	const before, after = 100, 250
	p := 0
	for p < len(x) && p < len(y) && x[p] == y[p] {
		p++
	}
	cut := func(s string) string {
		lo, hi := max(0, p-before), min(len(s), p+after)
		out := s[lo:hi]
		if lo > 0 {
			out = "..." + out
		}
		if hi < len(s) {
			out += "..."
		}
		return out
	}
	if len(x) <= before+after && len(y) <= before+after {
		return x, y
	}
	return cut(x), cut(y)
}

// i37Context returns the context the frameworks run under. Each framework
// starts upstream's metrics recorder goroutine, which stops within its 1s
// flush interval once the context is done: the cancel function waits for
// that, so that goleak finds nothing left.
func i37Context(t *testing.T) (context.Context, func()) {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), i37Log))
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
