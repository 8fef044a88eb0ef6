// Package fwkpick is a sim.Picker that chooses nodes with upstream's own
// scheduling framework: the real in-tree Filter and Score plugins of
// kube-scheduler v1.37.2's default profile (with its default arguments and
// weights), run by upstream's framework runtime (frameworkruntime.NewFramework,
// RunPreFilterPlugins, RunFilterPluginsWithNominatedPods, RunPreScorePlugins,
// RunScorePlugins) over schedcache snapshots served through kube/fwkadapter.
//
// One scheduling cycle is upstream's schedulePod without extenders: refresh
// the scheduler's snapshot from the published one, PreFilter, then Filter
// the nodes in the snapshot's order from where the last cycle stopped until
// numFeasibleNodesToFind feasible nodes are found (upstream's adaptive
// percentageOfNodesToScore: 10% of 5,000 nodes, never fewer than 100),
// then PreScore and Score on those, and the highest total wins. Upstream
// filters every node on 16 goroutines, stops when it has enough (so the
// nodes examined vary run to run) and breaks score ties with a random
// number. Here filters run in chunks on the same parallelizer, but the
// verdicts are taken in order and only up to the last feasible node
// needed, so the nodes examined are exactly those a one-at-a-time filter
// would examine; and ties go to the scheduler's random source. A
// deterministic sim run therefore stays deterministic, at any
// parallelism.
//
// A NodePicker is a sim.Preemptor: PostFilter runs upstream's
// DefaultPreemption over the published snapshot through a
// fwkadapter.Mutable, and the pods the simulator nominates are counted by
// Filter and try their nominated node first (preempt.go). The queue's
// plugins (PrioritySort, SchedulingGates) are the simulator's own queue
// (sim/queue.go).
//
// Omitted from the default profile (see docs/loadgen.md): the binding
// cycle (Reserve, Permit, PreBind, DefaultBinder: the simulator's
// cache calls stand for them), and the plugins that need objects the
// simulator does not model: VolumeBinding, VolumeZone, NodeVolumeLimits
// (PersistentVolumes, StorageClasses, CSINodes) and DynamicResources.
//
// Rejections are counted per plugin: each node a Filter plugin rejects
// counts one for that plugin (the first plugin that rejects it, in the
// profile's order, as RunFilterPlugins stops there); a PreFilter
// rejection counts every node of the snapshot for its plugin, as upstream's
// diagnosis gives every node that status.
//
// A NodePicker is a sim.Explainer: with loadgen's -explain or
// -explain-rate, ExplainPick runs the same cycle and reports the Filter
// verdicts per plugin (with the statuses' reasons) and the score plugins'
// per-node scores from RunScorePlugins (see ExplainPick).
package fwkpick

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/bench/schedconfig"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	scfw "github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim"
	"github.com/schedcache/schedcache/workload"
)

// Name is the picker's label in sim's reports.
const Name = "upstream-plugins"

// DefaultPlugins are the default profile's Filter and Score plugins this
// picker runs, in the profile's order.
var DefaultPlugins = []string{
	names.NodeName, names.NodeUnschedulable, names.TaintToleration, names.NodeAffinity,
	names.NodePorts, names.NodeResourcesFit, names.VolumeRestrictions, names.PodTopologySpread,
	names.InterPodAffinity, names.NodeResourcesBalancedAllocation, names.ImageLocality,
}

const (
	// minChunk is the fewest nodes filtered in one parallel step.
	minChunk = 32
	// DefaultParallelism is upstream's default parallelism.
	DefaultParallelism = 16
)

// Errors. Every error New returns wraps ErrConfig.
var (
	ErrConfig = errors.New("fwkpick: invalid configuration")
	// ErrClosed: NewNodePicker after Picker.Close, Pick after
	// NodePicker.Close.
	ErrClosed = errors.New("fwkpick: picker closed")
)

// Config is a plain value: what New builds.
type Config struct {
	// Plugins are the plugins to run, a subset of DefaultPlugins (in
	// any order; they run in the profile's); nil: all of them.
	Plugins []string
	// PercentageOfNodesToScore is upstream's setting: 0 adaptive (50%
	// minus 1% per 125 nodes, at least 5%), 1…100 fixed; never fewer
	// than 100 nodes.
	PercentageOfNodesToScore int32
	// Parallelism is the framework's parallelism (filters and scores);
	// 0: 16; 1 runs the filters on the calling goroutine.
	Parallelism int
	// File, when not nil, is a KubeSchedulerConfiguration
	// (schedconfig.Read): its profiles (plugins per extension point,
	// weights, arguments), percentageOfNodesToScore (global and per
	// profile) and parallelism replace the three fields above, which
	// must then be zero (see config.go).
	File *schedconfig.File
	// OutOfTree holds plugins an embedder registers besides the
	// in-tree ones, as kube-scheduler's app.WithPlugin does; File's
	// profiles enable them by name. A name also in-tree is an error.
	OutOfTree frameworkruntime.Registry
	// NoMemo turns the memo off (memo.go): every cycle runs every Filter
	// and Score plugin on every node it examines. The decisions are the
	// same either way; the memo only saves the work.
	NoMemo bool
	// NoCarry turns the carry off (carry.go): every cycle runs
	// InterPodAffinity's PreFilter over the whole cluster. The decisions
	// are the same either way.
	NoCarry bool
}

// ParsePlugins parses -plugins: "default" (every plugin of
// DefaultPlugins) or a comma-separated subset of them.
func ParsePlugins(s string) ([]string, error) {
	if s == "default" {
		return slices.Clone(DefaultPlugins), nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(DefaultPlugins, p) {
			return nil, fmt.Errorf("%w: unknown plugin %q in -plugins %q: want \"default\" or a comma-separated subset of %s",
				ErrConfig, p, s, strings.Join(DefaultPlugins, ","))
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("%w: plugin %q twice in -plugins %q", ErrConfig, p, s)
		}
		out = append(out, p)
	}
	return out, nil
}

// Picker is a sim.Picker running upstream's plugins. Contract: safe for
// concurrent use; each NodePicker it makes has its own framework, plugin
// instances and snapshot, and is used by one goroutine at a time. Close
// closes the node pickers not yet closed.
type Picker struct {
	plugins  []string                        // immutable: the profiles' plugins, each once, in their order
	index    map[string]int                  // immutable: plugin -> rejection slot
	profiles []*profile                      // immutable: the configuration's order
	registry frameworkruntime.Registry       // immutable: the node pickers' (run plugins guarded)
	raw      frameworkruntime.Registry       // immutable: in-tree and out-of-tree, unguarded
	factory  informers.SharedInformerFactory // immutable after New: listers only, never started
	pct      int32                           // immutable: the first profile's
	noMemo   bool                            // immutable
	noCarry  bool                            // immutable
	par      int                             // immutable
	mu       sync.Mutex                      // guards open, closed, rejectedWaits
	open     map[*NodePicker]struct{}        // guarded by mu
	closed   bool                            // guarded by mu
	// rejectedWaits are the waiting pods an out-of-tree plugin rejected
	// (watchHandle), until the node picker waiting for them sees it.
	rejectedWaits   map[types.UID]bool // guarded by mu
	genericWorkload bool               // immutable: the GenericWorkload gate at New
}

var _ sim.Picker = (*Picker)(nil)

var registerMetrics sync.Once

// New returns a Picker for cfg: upstream's default profile (latest.Default:
// the v1 defaults, feature gates applied) restricted to cfg.Plugins, or
// cfg.File's profiles (config.go). A panic of a plugin's factory is an
// error wrapping ErrConfig and ErrPluginPanic.
func New(cfg Config) (*Picker, error) {
	registerMetrics.Do(metrics.Register) // as kube-scheduler: the framework records into its metrics
	factory := workloadInformers()
	b, err := build(cfg, []frameworkruntime.Option{frameworkruntime.WithInformerFactory(factory)})
	if err != nil {
		return nil, err
	}
	p := &Picker{index: map[string]int{}, profiles: b.profiles, registry: b.guarded, raw: b.raw,
		factory: factory, pct: b.profiles[0].pct, par: b.par, noMemo: cfg.NoMemo, noCarry: cfg.NoCarry, open: map[*NodePicker]struct{}{},
		rejectedWaits: map[types.UID]bool{}, genericWorkload: utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)}
	for name := range cfg.OutOfTree {
		p.registry[name] = p.watchFactory(p.registry[name])
	}
	for _, pr := range b.profiles {
		for _, name := range pr.plugins {
			if _, ok := p.index[name]; !ok {
				p.index[name] = len(p.plugins)
				p.plugins = append(p.plugins, name)
			}
		}
	}
	// NodeInfos made from now on carry their fwk views, built once on the
	// shards; the simulator loads its cluster after New, so none is left
	// to build views on every read.
	fwkadapter.Enable()
	return p, nil
}

// workloadInformers returns listers holding what the plugins read of the
// workload package's pods: the namespaces and every claim of every
// namespace (ReadWriteOnce, so VolumeRestrictions finds them and admits
// the pod). The factory is never started: its indexers are filled here.
func workloadInformers() informers.SharedInformerFactory {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	claims := factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer()
	nss := factory.Core().V1().Namespaces().Informer().GetIndexer()
	// The other listers the plugins ask for (services, controllers for
	// PodTopologySpread's system defaults) are made here, empty, as a
	// scheduler's would be before it starts.
	factory.Core().V1().Services().Informer()
	factory.Core().V1().ReplicationControllers().Informer()
	factory.Apps().V1().ReplicaSets().Informer()
	factory.Apps().V1().StatefulSets().Informer()
	for ns := range workload.NumNamespaces {
		name := fmt.Sprintf("ns-%d", ns)
		_ = nss.Add(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}) // a fresh indexer: no error
		for c := range workload.NumClaims {
			_ = claims.Add(&v1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pvc-%03d", c), Namespace: name},
				Spec:       v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}},
			})
		}
	}
	return factory
}

// Name implements sim.Picker.
func (p *Picker) Name() string { return Name }

// Plugins implements sim.Picker: the plugins, in the profile's order.
func (p *Picker) Plugins() []string { return p.plugins }

// Profile returns a copy of the first profile as the node pickers run it
// (its PreFilter, Filter, PreScore and Score plugins named explicitly)
// and the registry, unguarded (for tests that build a reference
// framework).
func (p *Picker) Profile() (*config.KubeSchedulerProfile, frameworkruntime.Registry) {
	return p.profiles[0].cfg.DeepCopy(), p.raw
}

// Informers returns the informer factory the frameworks read (never
// started; for reference frameworks in tests).
func (p *Picker) Informers() informers.SharedInformerFactory { return p.factory }

// Close closes every node picker not yet closed; later NewNodePicker
// calls fail with ErrClosed.
func (p *Picker) Close() error {
	p.mu.Lock()
	p.closed = true
	open := make([]*NodePicker, 0, len(p.open))
	for np := range p.open {
		open = append(open, np)
	}
	p.mu.Unlock()
	var first error
	for _, np := range open {
		if err := np.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// NewNodePicker implements sim.Picker: a framework of its own over a
// snapshot of its own.
func (p *Picker) NewNodePicker(ctx context.Context, cfg sim.PickerConfig) (sim.NodePicker, error) {
	return p.NewFrameworkFor(ctx, cfg)
}

// NewFramework is NewNodePicker with its concrete type, for no run (no
// cache: the frameworks' PodGroupManager is nil).
func (p *Picker) NewFramework(ctx context.Context) (*NodePicker, error) {
	return p.NewFrameworkFor(ctx, sim.PickerConfig{})
}

// NewFrameworkFor is NewNodePicker with its concrete type.
func (p *Picker) NewFrameworkFor(ctx context.Context, cfg sim.PickerConfig) (*NodePicker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	snap := schedcache.NewEmptySnapshot()
	lister, err := fwkadapter.NewLister(snap)
	if err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	// upstream's recorder flushes every second; a shorter interval only
	// makes Close quicker.
	rec := metrics.NewMetricsAsyncRecorder(1000, 50*time.Millisecond, stop)
	np := &NodePicker{p: p, snap: snap, lister: lister, stop: stop, rec: rec, nom: fwkadapter.NewNominator()}
	np.bindInit()
	// One waiting-pods map for every profile, as upstream's scheduler.New.
	waiting := frameworkruntime.NewWaitingPodsMap()
	// The pod groups (GenericWorkload): the run's cache, as upstream's
	// scheduler cache; outside a run, the picker's snapshot's.
	var groups fwk.PodGroupManager = lister
	if cfg.Cache != nil {
		groups = fwkadapter.CacheGroups(cfg.Cache)
	}
	// DefaultPreemption, in the profile for its PreEnqueue, reads a
	// mutable snapshot's PodGroups as it is built with GenericWorkload on
	// (pod-group preemption, which these frameworks never run: PostFilter
	// runs in the preemption framework, preempt.go): an empty one.
	mutable, err := fwkadapter.NewMutable(schedcache.NewEmptySnapshot())
	if err != nil {
		close(stop)
		<-rec.IsStoppedCh
		return nil, err
	}
	groupOpts := []frameworkruntime.Option{frameworkruntime.WithPodGroupManager(groups), frameworkruntime.WithMutableSnapshotLister(mutable)}
	// NewFramework's context only stops the metrics recorder it starts
	// by default, which WithMetricsRecorder then replaces (the plugins
	// this picker builds keep no context): a context already done stops
	// that goroutine at once, and Close stops the picker's own.
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cancel()
	build := func(ctx context.Context, prof *config.KubeSchedulerProfile) (framework.Framework, error) {
		return frameworkruntime.NewFramework(ctx, p.registry, prof, append([]frameworkruntime.Option{
			frameworkruntime.WithSnapshotSharedLister(cycleLister{Lister: lister, np: np}),
			frameworkruntime.WithInformerFactory(p.factory),
			frameworkruntime.WithClientSet(np.bind.cs),
			frameworkruntime.WithPodNominator(np.nom),
			frameworkruntime.WithMetricsRecorder(rec),
			frameworkruntime.WithParallelism(p.par),
			frameworkruntime.WithLogger(klog.Background()),
			frameworkruntime.WithPodActivator(np.bind.activator()),
			frameworkruntime.WithWaitingPods(waiting),
		}, groupOpts...)...)
	}
	for _, pr := range p.profiles {
		fw, err := build(fctx, pr.full.DeepCopy())
		var pf profileRun
		if err == nil {
			pf, err = np.profileRun(fctx, pr, fw, build)
		}
		if err != nil {
			close(stop)
			<-rec.IsStoppedCh
			return nil, fmt.Errorf("%w: NewFramework (profile %q): %w", ErrConfig, pr.name, err)
		}
		np.fws = append(np.fws, fw)
		np.runs = append(np.runs, pf)
	}
	np.fw, np.pct, np.run = np.fws[0], p.profiles[0].pct, &np.runs[0]
	p.open[np] = struct{}{}
	return np, nil
}

// noNominated is a PodNominator with no nominated pods (frameworks
// built only to check or list a profile). Stateless.
type noNominated struct{}

func (noNominated) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (noNominated) DeleteNominatedPodIfExists(*v1.Pod)                            {}
func (noNominated) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo)          {}
func (noNominated) NominatedPodsForNode(string) []fwk.PodInfo                     { return nil }

// Decision is a plain value: what one Pick did (recorded when
// NodePicker.Record is on, for tests).
type Decision struct {
	Pod       string
	PreFilter string   // "" success, else the status (see StatusString)
	Start     int      // the index in the filtered node list where filtering began
	Processed []string // the nodes filtered, in order
	Statuses  []string // their filter statuses ("" feasible)
	Best      string
	BestScore int64
}

// StatusString renders a status as Decision does: "" for success, else
// "plugin/code/reasons".
func StatusString(st *fwk.Status) string {
	if st.IsSuccess() {
		return ""
	}
	return fmt.Sprintf("%s/%d/%s", st.Plugin(), st.Code(), strings.Join(st.Reasons(), "|"))
}

// NodePicker runs scheduling cycles for one simulated scheduler.
//
// Contract: used by one goroutine at a time (sim's NodePicker contract);
// Close may be called from any goroutine once, later calls do nothing.
type NodePicker struct {
	p          *Picker                      // immutable
	fws        []framework.Framework        // immutable: one per profile, in p.profiles' order; used by the owner goroutine
	fw         framework.Framework          // owned by the owner goroutine: the framework of the pod being picked (cycle sets it)
	pct        int32                        // owned by the owner goroutine: fw's profile's percentageOfNodesToScore
	snap       *schedcache.Snapshot         // owned by the owner goroutine: the framework's snapshot
	lister     *fwkadapter.Lister           // immutable; reads snap
	stop       chan struct{}                // closed by Close
	rec        *metrics.MetricAsyncRecorder // immutable
	next       int                          // owned by the owner goroutine: upstream's nextStartNodeIndex
	cycles     uint64                       // owned by the owner goroutine
	feasible   []fwk.NodeInfo               // owned by the owner goroutine: reused
	subset     []fwk.NodeInfo               // owned by the owner goroutine: reused
	statuses   []*fwk.Status                // owned by the owner goroutine: a chunk's verdicts, reused
	missed     []int                        // owned by the owner goroutine: a chunk's memo misses, reused
	feasPos    []int                        // owned by the owner goroutine: positions of feasible, reused
	raw        []int64                      // owned by the owner goroutine: a cycle's raw scores, reused
	kept       []keptVerdict                // owned by the owner goroutine: a split chunk's kept verdicts, reused
	scoringIdx []int                        // owned by the owner goroutine: a split cycle's scoring plugins, reused
	all        []fwk.NodeInfo               // owned by the owner goroutine: the snapshot's list (list)
	prev       *schedcache.Snapshot         // owned by the owner goroutine: the published snapshot all was filled from
	// listOverride, when not nil, is what the framework's List and
	// HavePodsWithAffinityList return: set by the carry around one
	// plugin's PreScore (carry.go), nil otherwise.
	listOverride []fwk.NodeInfo         // owned by the owner goroutine
	scores       []fwk.NodePluginScores // owned by the owner goroutine: a cycle's totals, reused
	scoring      []string               // owned by the owner goroutine: a cycle's non-skipped Score plugins, reused
	runs         []profileRun           // immutable after NewFramework: per profile, as fws
	run          *profileRun            // owned by the owner goroutine: fw's (cycle sets it)
	nom          *fwkadapter.Nominator  // immutable pointer: the nominated pods (preempt.go)
	pres         []*preemption          // owned by the owner goroutine: per profile, PostFilter's framework, built on first use (preempt.go)
	bind         bindState              // owned by the owner goroutine: the binding cycle (bind.go)
	// Record keeps the last Decision and PreemptionRecord (tests); set
	// before Pick.
	Record         bool             // owned by the owner goroutine
	Last           Decision         // owned by the owner goroutine
	LastPreemption PreemptionRecord // owned by the owner goroutine
	closeOne       sync.Once
	done           atomic.Bool // atomic: set by Close
}

// Close stops the framework's metrics recorder and waits for it.
func (np *NodePicker) Close() error {
	if np == nil || np.stop == nil {
		return nil
	}
	np.closeOne.Do(func() {
		np.done.Store(true)
		close(np.stop)
		<-np.rec.IsStoppedCh
		np.p.mu.Lock()
		delete(np.p.open, np)
		np.p.mu.Unlock()
	})
	return nil
}

// NumFeasibleNodesToFind is upstream's numFeasibleNodesToFind with the
// percentage of the picker's first profile: how many feasible nodes a
// cycle over n nodes seeks.
func (p *Picker) NumFeasibleNodesToFind(n int) int {
	return fwkadapter.NumFeasibleNodesToFind(p.pct, n)
}

func (np *NodePicker) reject(rej []int64, plugin string, n int) error {
	i, ok := np.p.index[plugin]
	if !ok {
		return fmt.Errorf("fwkpick: rejection by plugin %q, not in the profile", plugin)
	}
	rej[i] += int64(n)
	return nil
}

// Pick implements sim.NodePicker: one scheduling cycle of info's pod on
// published (see the package doc).
//
// A plugin that panics fails this attempt with a *sim.AttemptError
// wrapping a *PanicError (guard.go); so does a panic of the cycle itself.
// A pod whose schedulerName no profile has fails with a *sim.AttemptError
// wrapping ErrNoProfile.
func (np *NodePicker) Pick(ctx context.Context, published *schedcache.Snapshot, info *scfw.PodInfo, r *rand.Rand, rej []int64) (node string, err error) {
	defer recoverCycle(&node, &err)
	if n, ok, err := np.nominatedFirst(ctx, published, info); ok || err != nil {
		if ok && np.Record {
			np.Last = Decision{Pod: info.Pod().Name, Best: n}
		}
		return n, attemptError(err)
	}
	node, err = np.cycle(ctx, published, info, r, rej, nil)
	return node, attemptError(err)
}

// recoverCycle turns a panic of a cycle (outside the guarded plugins)
// into the attempt's error.
func recoverCycle(node *string, err *error) {
	if r := recover(); r != nil {
		*node, *err = "", &sim.AttemptError{Reason: "panic", Err: recovered("", "cycle", r)}
	}
}

var _ sim.Explainer = (*NodePicker)(nil)

// ExplainPick implements sim.Explainer: Pick's cycle, explained from
// upstream's own verdicts. A PreFilter rejection counts every node for
// its plugin (as upstream's diagnosis gives them all its status), nodes a
// PreFilter result leaves out count for the first plugin of the result
// ("node(s) didn't satisfy plugin(s) [...]", upstream's message), and each
// node filtered counts for the plugin its Filter status names, with that
// status's reasons; the nodes upstream would not examine (it stops once
// it has found numFeasibleNodesToFind) are not counted. The scores are
// RunScorePlugins' per node: the total and each plugin's normalised,
// weighted score. A cycle with one feasible node scores nothing, as
// upstream's: that node is the top with score 0 and no plugin's.
func (np *NodePicker) ExplainPick(ctx context.Context, published *schedcache.Snapshot, info *scfw.PodInfo, r *rand.Rand, rej []int64, _ int) (node string, ex sim.Explanation, err error) {
	defer recoverCycle(&node, &err)
	if n, ok, err := np.nominatedFirst(ctx, published, info); ok || err != nil {
		if ok {
			ex.Examined, ex.Feasible, ex.Top = 1, 1, []sim.NodeScore{{Node: n}}
		}
		return n, ex, attemptError(err)
	}
	node, err = np.cycle(ctx, published, info, r, rej, &ex)
	return node, ex, attemptError(err)
}

// reasons is a status's reasons, as an explanation gives them.
func reasons(st *fwk.Status) string { return strings.Join(st.Reasons(), ", ") }

// cycle is Pick, explained into ex when it is not nil.
func (np *NodePicker) cycle(ctx context.Context, published *schedcache.Snapshot, info *scfw.PodInfo, r *rand.Rand, rej []int64, ex *sim.Explanation) (string, error) {
	if np == nil || len(np.fws) == 0 {
		return "", fmt.Errorf("%w: Pick on a NodePicker not made by NewFramework", ErrConfig)
	}
	if np.done.Load() {
		return "", ErrClosed
	}
	if published == nil || info == nil || info.Pod() == nil {
		return "", fmt.Errorf("fwkpick: Pick: nil snapshot or pod")
	}
	if len(rej) != len(np.p.plugins) {
		return "", fmt.Errorf("fwkpick: Pick: %d rejection counters for %d plugins", len(rej), len(np.p.plugins))
	}
	pod := info.Pod()
	if np.Record {
		np.Last = Decision{Pod: pod.Name}
	}
	prof, err := np.p.profileFor(pod)
	if err != nil {
		return "", err
	}
	np.fw, np.pct, np.run = np.fws[prof], np.p.profiles[prof].pct, &np.runs[prof]
	if err := np.snap.CopyFrom(published); err != nil {
		return "", err
	}
	all := np.list(published)
	if len(all) == 0 {
		return "", nil
	}
	state := framework.NewCycleState()
	np.keepCycle(pod, prof, state) // for the binding cycle, if a node is chosen (bind.go)
	np.run.carry.begin(state, published)
	np.cycles++
	state.SetRecordPluginMetrics(np.cycles%10 == 0) // upstream samples 10% of cycles, at random
	pre, st, unsched := np.fw.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return "", st.AsError()
		}
		if np.Record {
			np.Last.PreFilter = StatusString(st)
		}
		plugin := st.Plugin()
		if plugin == "" && unsched.Len() > 0 {
			// PreFilterResults that leave no node: the status names
			// no plugin, the set names them.
			ps := unsched.UnsortedList()
			slices.Sort(ps)
			plugin = ps[0]
		}
		if ex != nil {
			ex.Examined = len(all)
			ex.AddRejection(plugin, int64(len(all)), reasons(st))
		}
		return "", np.reject(rej, plugin, len(all))
	}
	nodes := all
	if !pre.AllNodes() {
		// In the snapshot's order (upstream ranges over the set, a map).
		np.subset = np.subset[:0]
		for _, ni := range all {
			if pre.NodeNames.Has(ni.Node().Name) {
				np.subset = append(np.subset, ni)
			}
		}
		nodes = np.subset
		if out := len(all) - len(nodes); out > 0 {
			ps := unsched.UnsortedList()
			slices.Sort(ps)
			if len(ps) > 0 {
				if err := np.reject(rej, ps[0], out); err != nil {
					return "", err
				}
				if ex != nil {
					ex.Examined += out
					ex.AddRejection(ps[0], int64(out), fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", ps))
				}
			}
		}
		if len(nodes) == 0 {
			return "", nil
		}
	}
	toFind := fwkadapter.NumFeasibleNodesToFind(np.pct, len(nodes))
	if !np.fw.HasScorePlugins() {
		toFind = 1
	}
	feasible, feasPos := np.feasible[:0], np.feasPos[:0]
	start, processed := np.next%len(nodes), 0
	if np.Record {
		np.Last.Start = start
	}
	// Filter in chunks, each on the framework's parallelizer (upstream
	// filters every node in parallel and cancels once it has enough);
	// then take the chunk's verdicts in order up to the last feasible
	// node needed, so the outcome is that of filtering one node at a
	// time, whatever the parallelism. Verdicts past that point are
	// discarded (upstream's overshoot, without its randomness).
	mc, err := np.run.memo.begin(ctx, state, pod, np.lister, len(all))
	if err != nil {
		return "", err
	}
	if mc.t == nil && np.run.split != nil {
		// Unsigned: the split keeps the verdicts of the plugins other
		// than InterPodAffinity and PodTopologySpread (split.go).
		if mc, err = np.run.split.memo.begin(ctx, state, pod, np.lister, len(all)); err != nil {
			return "", err
		}
	}
	for processed < len(nodes) && len(feasible) < toFind {
		n := min(max(toFind-len(feasible), minChunk), len(nodes)-processed)
		if cap(np.statuses) < n {
			np.statuses = make([]*fwk.Status, n)
		}
		statuses, base := np.statuses[:n], processed
		if mc.split {
			np.splitFilter(ctx, state, pod, nodes, start+base, statuses, mc)
		} else {
			// Verdicts the memo holds are taken as they are; the rest are
			// computed, on the parallelizer when there are several.
			missed := np.missed[:0]
			for i := range n {
				pos := (start + base + i) % len(nodes)
				ni := nodes[pos]
				if st, ok := mc.filter(pos, ni); ok && !np.hasNominated(ni) {
					statuses[i] = st
					np.run.memo.stats.FilterHits++
				} else {
					missed = append(missed, i)
				}
			}
			np.missed = missed
			check := func(j int) {
				i := missed[j]
				statuses[i] = np.fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodes[(start+base+i)%len(nodes)])
			}
			if np.p.par == 1 || len(missed) <= 1 {
				for j := range missed {
					check(j)
				}
			} else {
				np.fw.Parallelizer().Until(ctx, len(missed), check, metrics.Filter)
			}
			if mc.t != nil {
				np.run.memo.stats.FilterMisses += int64(len(missed))
				for _, i := range missed {
					pos := (start + base + i) % len(nodes)
					ni := nodes[pos]
					if st := statuses[i]; st.Code() != fwk.Error && !np.hasNominated(ni) {
						mc.keepFilter(pos, len(nodes), ni, st)
					}
				}
			}
		}
		for i := 0; i < n && len(feasible) < toFind; i++ {
			ni, st := nodes[(start+base+i)%len(nodes)], statuses[i]
			statuses[i] = nil
			processed++
			if st.Code() == fwk.Error {
				return "", st.AsError()
			}
			if np.Record {
				np.Last.Processed = append(np.Last.Processed, ni.Node().Name)
				np.Last.Statuses = append(np.Last.Statuses, StatusString(st))
			}
			if ex != nil {
				ex.Examined++
				if !st.IsSuccess() {
					ex.AddRejection(st.Plugin(), 1, reasons(st))
				}
			}
			if st.IsSuccess() {
				feasible = append(feasible, ni)
				feasPos = append(feasPos, (start+base+i)%len(nodes))
			} else if err := np.reject(rej, st.Plugin(), 1); err != nil {
				return "", err
			}
		}
		clear(statuses)
	}
	np.feasible, np.feasPos = feasible[:0], feasPos[:0]
	np.next = (np.next + processed) % len(all)
	if ex != nil {
		ex.Feasible = len(feasible)
	}
	switch len(feasible) {
	case 0:
		return "", nil
	case 1:
		if ex != nil {
			ex.Top = []sim.NodeScore{{Node: feasible[0].Node().Name}}
		}
		return np.record(feasible[0].Node().Name, 0), nil
	}
	if st := np.fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return "", st.AsError()
	}
	scores, err := np.score(ctx, state, pod, feasible, feasPos, mc, ex != nil)
	if err != nil {
		return "", err
	}
	if ex != nil {
		ex.Top = make([]sim.NodeScore, len(scores))
		for i, ns := range scores {
			ps := make(map[string]float64, len(ns.Scores))
			for _, s := range ns.Scores {
				ps[s.Name] = float64(s.Score)
			}
			ex.Top[i] = sim.NodeScore{Node: ns.Name, Score: float64(ns.TotalScore), Plugins: ps}
		}
	}
	best, bestScore, ties := "", int64(0), 0
	for _, ns := range scores {
		switch {
		case best == "" || ns.TotalScore > bestScore:
			best, bestScore, ties = ns.Name, ns.TotalScore, 1
		case ns.TotalScore == bestScore:
			ties++
			if r.IntN(ties) == 0 { // uniformly among the ties, as upstream's random tie-break
				best = ns.Name
			}
		}
	}
	return np.record(best, bestScore), nil
}

// score is RunScorePlugins on feasible (at positions pos of the cycle's
// node list), with the raw scores the memo holds taken as they are: the
// per-node raw scores are RunScorePlugins' (RunRawScorePlugins and
// RunScorePlugins call the same runRawScorePlugins), and the normalizer
// then normalises and weighs them as RunScorePlugins does.
//
// Without perPlugin (no explanation wanted) the memo's path sets only the
// total of each node, in a slice reused by the next cycle.
func (np *NodePicker) score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, feasible []fwk.NodeInfo, pos []int, mc memoCycle, perPlugin bool) ([]fwk.NodePluginScores, error) {
	if mc.t != nil {
		scoring := np.scoring[:0]
		skip := state.GetSkipScorePlugins()
		for _, pl := range np.run.scorePlugins {
			if !skip.Has(pl) {
				scoring = append(scoring, pl)
			}
		}
		np.scoring = scoring
		mc = mc.startScoring(scoring)
	}
	if mc.t == nil {
		scores, st := np.fw.RunScorePlugins(ctx, state, pod, feasible)
		if !st.IsSuccess() {
			return nil, st.AsError()
		}
		return scores, nil
	}
	if mc.split {
		return np.splitScore(ctx, state, pod, feasible, pos, mc, perPlugin)
	}
	k := len(np.scoring)
	raw := slices.Grow(np.raw[:0], len(feasible)*k)[:len(feasible)*k]
	np.raw = raw
	missed := np.missed[:0]
	for i, ni := range feasible {
		if r, ok := mc.score(pos[i], ni); ok {
			copy(raw[i*k:(i+1)*k], r[:k])
		} else {
			missed = append(missed, i)
		}
	}
	np.missed = missed
	np.run.memo.stats.ScoreHits += int64(len(feasible) - len(missed))
	np.run.memo.stats.ScoreMisses += int64(len(missed))
	errs := make([]error, len(missed))
	run := func(j int) {
		i := missed[j]
		rs, st := np.fw.RunRawScorePlugins(ctx, state, pod, feasible[i])
		switch {
		case !st.IsSuccess():
			errs[j] = fmt.Errorf("running Score plugins: %w", st.AsError())
		case len(rs) != k:
			errs[j] = fmt.Errorf("fwkpick: node %s: %d raw scores for plugins %v", feasible[i].Node().Name, len(rs), np.scoring)
		default:
			for q, ps := range rs {
				if ps.Name != np.scoring[q] {
					errs[j] = fmt.Errorf("fwkpick: node %s: raw score %d is %q's, want %q's", feasible[i].Node().Name, q, ps.Name, np.scoring[q])
					return
				}
				raw[i*k+q] = ps.Score
			}
		}
	}
	if np.p.par == 1 || len(missed) <= 1 {
		for j := range missed {
			run(j)
		}
	} else {
		np.fw.Parallelizer().Until(ctx, len(missed), run, metrics.Score)
	}
	for j, i := range missed {
		if errs[j] != nil {
			return nil, errs[j]
		}
		mc.keepScore(pos[i], feasible[i], raw[i*k:(i+1)*k])
	}
	return np.totals(ctx, state, pod, feasible, raw, perPlugin)
}

// totals normalises raw (len(feasible) rows of the scoring plugins' raw
// scores) into the nodes' totals, and per plugin with perPlugin; without
// it the result is a slice the next cycle reuses.
func (np *NodePicker) totals(ctx context.Context, state fwk.CycleState, pod *v1.Pod, feasible []fwk.NodeInfo, raw []int64, perPlugin bool) ([]fwk.NodePluginScores, error) {
	var scores []fwk.NodePluginScores
	if perPlugin {
		scores = make([]fwk.NodePluginScores, len(feasible))
	} else {
		scores = slices.Grow(np.scores[:0], len(feasible))[:len(feasible)]
		np.scores = scores
	}
	for i, ni := range feasible {
		scores[i] = fwk.NodePluginScores{Name: ni.Node().Name}
	}
	if err := np.run.norm.normalize(ctx, state, pod, raw, scores, perPlugin); err != nil {
		return nil, err
	}
	return scores, nil
}

// hasNominated reports whether pods are nominated to ni's node (the
// memo never serves such a node: its Filter counts them).
func (np *NodePicker) hasNominated(ni fwk.NodeInfo) bool {
	return np.nom.Has(ni.Node().Name)
}

// list returns the snapshot's nodes in list order, as the lister's List,
// in a slice of np's own, refilled in place from published (np.snap's
// source): the positions whose NodeInfo changed since the last cycle's
// published snapshot when the order is the same (Snapshot.DiffList), else
// all of them. The lister's List would build a new slice whenever a node
// changed, that is every cycle after a binding. The framework's List
// returns this slice (cycleLister): it is refilled only between cycles.
func (np *NodePicker) list(published *schedcache.Snapshot) []fwk.NodeInfo {
	if np.all != nil && published.DiffList(np.prev, func(i int, ni *scfw.NodeInfo) {
		np.all[i] = fwkadapter.WrapNode(ni)
	}) {
		np.prev = published
		return np.all
	}
	n := np.snap.NumNodes()
	np.all = slices.Grow(np.all[:0], n)[:n]
	np.snap.Range(func(i int, ni *scfw.NodeInfo) bool {
		np.all[i] = fwkadapter.WrapNode(ni)
		return true
	})
	np.prev = published
	return np.all
}

// cycleLister is the framework's SharedLister: the picker's lister, with
// NodeInfos().List() answered by NodePicker.list's slice.
type cycleLister struct {
	*fwkadapter.Lister
	np *NodePicker
}

func (l cycleLister) NodeInfos() fwk.NodeInfoLister {
	return cycleNodes{NodeInfoLister: l.Lister.NodeInfos(), np: l.np}
}

type cycleNodes struct {
	fwk.NodeInfoLister
	np *NodePicker
}

// List returns the cycle's node list (never changed during a cycle), or
// the carry's list around a carried PreScore.
func (l cycleNodes) List() ([]fwk.NodeInfo, error) {
	if l.np.listOverride != nil {
		return l.np.listOverride, nil
	}
	if l.np.all == nil {
		return l.NodeInfoLister.List()
	}
	return l.np.all, nil
}

// HavePodsWithAffinityList is the lister's, or the carry's list around a
// carried PreScore.
func (l cycleNodes) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	if l.np.listOverride != nil {
		return l.np.listOverride, nil
	}
	return l.NodeInfoLister.HavePodsWithAffinityList()
}

var _ sim.Counting = (*NodePicker)(nil)

// Counters implements sim.Counting: the memo's and the carry's counts,
// summed over the profiles (none for one that is off).
func (np *NodePicker) Counters() []sim.PickerCounter {
	var out []sim.PickerCounter
	if !np.p.noMemo {
		out = np.MemoStats().Counters()
	}
	if !np.p.noCarry {
		out = append(out, np.CarryStats().Counters()...)
	}
	return out
}

// CarryStats returns what the carry did in np's cycles so far, over its
// profiles (zero when it is off).
func (np *NodePicker) CarryStats() CarryStats {
	var st CarryStats
	for _, r := range np.runs {
		if r.carry != nil {
			st = st.Add(r.carry.stats)
		}
	}
	return st
}

// MemoStats returns what the memo did in np's cycles so far, over its
// profiles (zero when the memo is off).
func (np *NodePicker) MemoStats() MemoStats {
	var st MemoStats
	for _, r := range np.runs {
		if r.memo != nil {
			st = st.Add(r.memo.stats)
		}
		if r.split != nil {
			st = st.Add(r.split.memo.stats)
		}
	}
	return st
}

// profileRun is what a NodePicker keeps per profile besides its
// framework: the memo and normalizer (nil with the memo off, or for a
// profile with a plugin the memo does not know) and the Score plugins.
type profileRun struct {
	memo         *memo       // owned by the owner goroutine
	split        *split      // owned by the owner goroutine; nil: no split (split.go)
	norm         *normalizer // owned by the owner goroutine
	scorePlugins []string    // immutable: the profile's Score plugins, in order
	carry        *carry      // owned by the owner goroutine; nil: off, or the profile has no carried plugin (carry.go)
}

// profileRun builds pr's run state for its framework fw.
func (np *NodePicker) profileRun(ctx context.Context, pr *profile, fw framework.Framework,
	build func(context.Context, *config.KubeSchedulerProfile) (framework.Framework, error)) (profileRun, error) {
	var run profileRun
	score := fw.ListPlugins().Score.Enabled
	for _, pl := range score {
		run.scorePlugins = append(run.scorePlugins, pl.Name)
	}
	if !np.p.noCarry {
		for _, pl := range pr.plugins {
			if carries(pl) {
				run.carry = newCarry(np, np.p.factory.Core().V1().Namespaces().Lister())
				break
			}
		}
	}
	if np.p.noMemo {
		return run, nil
	}
	m, err := newMemo(ctx, pr.cfg, pr.plugins, build)
	if err != nil || m == nil {
		return run, err
	}
	if run.norm, err = newNormalizer(ctx, np.p.registry, pr.cfg, score, fw); err != nil {
		return run, err
	}
	if run.split, err = newSplit(ctx, np, pr, fw, build); err != nil {
		return run, err
	}
	run.memo = m
	return run, nil
}

func (np *NodePicker) record(best string, score int64) string {
	if np.Record {
		np.Last.Best, np.Last.BestScore = best, score
	}
	return best
}
