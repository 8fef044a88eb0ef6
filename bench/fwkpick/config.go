package fwkpick

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/bench/schedconfig"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	"github.com/schedcache/schedcache/sim"
)

// Profiles from a KubeSchedulerConfiguration (Config.File), and the
// default profile restricted to Config.Plugins otherwise: both become a
// configuration that New turns into the picker's profiles the same way.
//
// Each profile is first built whole by upstream's NewFramework with the
// in-tree registry and Config.OutOfTree, as kube-scheduler's
// scheduler.New would (every extension point, queue sort and binding
// included): what upstream refuses is refused here. The picker's
// frameworks then run the plugins that framework lists at PreFilter,
// Filter, PreScore and Score, in its order and with its weights, named
// explicitly at those points (plus PrioritySort and DefaultBinder, which
// the runtime demands and the picker never calls): the extension points
// the simulator has no use for (PreEnqueue, QueueSort, Reserve, Permit,
// PreBind, Bind, PostBind, placement) are accepted and not run. PostFilter
// runs as the profile sets it (preempt.go): its plugins in its order with
// its arguments (DefaultPreemption's minCandidateNodesPercentage and
// minCandidateNodesAbsolute), and no preemption where it has none.

// Unfed names the plugins that need objects the simulator does not model,
// and which objects: left out of a profile when only upstream's defaults
// enable them, refused when the configuration names them.
var Unfed = map[string]string{
	names.VolumeBinding:    "PersistentVolumes and StorageClasses",
	names.VolumeZone:       "PersistentVolumes and StorageClasses",
	names.NodeVolumeLimits: "CSINodes and CSIDrivers",
	names.DynamicResources: "ResourceClaims and ResourceSlices",
}

// queueAndBinding are the default profile's plugins that serve neither
// Filter nor Score but the queue (PreEnqueue) or the binding cycle
// (Permit): kept in a -plugins profile, which names only Filter and Score
// plugins.
var queueAndBinding = []string{names.SchedulingGates, names.GangScheduling}

// ErrNoProfile is wrapped by the attempt error of a pod whose
// spec.schedulerName no profile of the picker has.
var ErrNoProfile = errors.New("fwkpick: no profile for the pod's schedulerName")

// profile is immutable: one profile as the picker runs it.
type profile struct {
	name    string                       // schedulerName
	cfg     *config.KubeSchedulerProfile // the picker's: run points explicit
	pct     int32                        // resolved percentageOfNodesToScore
	full    *config.KubeSchedulerProfile // cfg plus the binding cycle's points and PreEnqueue: the node pickers' frameworks
	plugins []string                     // run at PreFilter, Filter, PreScore or Score, in the profile's order
	dropped []string                     // Unfed plugins its defaults enabled, left out
	// postFilter is the profile's PostFilter plugins, in order (none: the
	// profile never preempts), and postArgs their arguments as the
	// configuration gives them (defaulted by upstream's scheme).
	postFilter []config.Plugin
	postArgs   []config.PluginConfig
}

// built is what New makes of a Config.
type built struct {
	source   string
	par      int
	profiles []*profile
	raw      frameworkruntime.Registry // in-tree and out-of-tree, as given
	guarded  frameworkruntime.Registry // the picker's: run plugins guarded
}

// resolve turns cfg into a scheduler configuration and its source.
func resolve(cfg Config) (*config.KubeSchedulerConfiguration, [][]string, string, error) {
	if cfg.File != nil {
		if cfg.Plugins != nil || cfg.PercentageOfNodesToScore != 0 || cfg.Parallelism != 0 {
			return nil, nil, "", fmt.Errorf("%w: File sets the profiles, percentageOfNodesToScore and parallelism: leave Plugins, PercentageOfNodesToScore and Parallelism zero", ErrConfig)
		}
		if cfg.File.Config == nil {
			return nil, nil, "", fmt.Errorf("%w: File without a Config", ErrConfig)
		}
		src := cfg.File.Path
		if src == "" {
			src = "Config.File"
		}
		sc := cfg.File.Config.DeepCopy()
		if err := schedconfig.Validate(sc); err != nil {
			return nil, nil, "", fmt.Errorf("%w: %w", ErrConfig, &schedconfig.Error{Source: src, Err: err})
		}
		if len(sc.Extenders) > 0 {
			return nil, nil, "", fmt.Errorf("%w: %s: extenders: the picker calls no extender (it runs the profiles' plugins only)", ErrConfig, src)
		}
		return sc, cfg.File.Written, src, nil
	}
	want := cfg.Plugins
	if want == nil {
		want = DefaultPlugins
	}
	if len(want) == 0 {
		return nil, nil, "", fmt.Errorf("%w: no plugin", ErrConfig)
	}
	for _, p := range want {
		if !slices.Contains(DefaultPlugins, p) {
			return nil, nil, "", fmt.Errorf("%w: unknown plugin %q (have %s)", ErrConfig, p, strings.Join(DefaultPlugins, ","))
		}
	}
	if cfg.PercentageOfNodesToScore < 0 || cfg.PercentageOfNodesToScore > 100 {
		return nil, nil, "", fmt.Errorf("%w: percentage of nodes to score %d not in 0…100", ErrConfig, cfg.PercentageOfNodesToScore)
	}
	if cfg.Parallelism < 0 {
		return nil, nil, "", fmt.Errorf("%w: parallelism %d < 0", ErrConfig, cfg.Parallelism)
	}
	def, err := latest.Default()
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: upstream defaults: %v", ErrConfig, err)
	}
	up := def.Profiles[0]
	var enabled []config.Plugin
	extra := 0
	for _, pl := range up.Plugins.MultiPoint.Enabled {
		// The queue sort; and the plugins of the queue, PostFilter and
		// the binding cycle the picker runs (bind.go, preempt.go):
		// SchedulingGates, DefaultPreemption (whatever plugins run),
		// DefaultBinder, and GangScheduling with the GenericWorkload gate.
		switch {
		case slices.Contains(want, pl.Name):
		case pl.Name == names.PrioritySort || pl.Name == names.DefaultBinder || pl.Name == names.DefaultPreemption || slices.Contains(queueAndBinding, pl.Name):
			extra++
		default:
			continue
		}
		enabled = append(enabled, pl)
	}
	if len(enabled) != len(want)+extra {
		return nil, nil, "", fmt.Errorf("%w: upstream's default profile lacks some of %v", ErrConfig, want)
	}
	pct := cfg.PercentageOfNodesToScore
	par := cfg.Parallelism
	if par == 0 {
		par = DefaultParallelism
	}
	sc := &config.KubeSchedulerConfiguration{
		Parallelism:              int32(par),
		PercentageOfNodesToScore: &pct,
		Profiles: []config.KubeSchedulerProfile{{
			SchedulerName: v1.DefaultSchedulerName,
			Plugins:       &config.Plugins{MultiPoint: config.PluginSet{Enabled: enabled}},
			PluginConfig:  up.PluginConfig,
		}},
	}
	return sc, nil, "-plugins", nil
}

// build makes the picker's profiles of cfg (see above); opts give the
// frameworks it checks with the listers the plugins read.
func build(cfg Config, factoryOpts []frameworkruntime.Option) (*built, error) {
	sc, written, src, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	b := &built{source: src, par: int(sc.Parallelism), raw: plugins.NewInTreeRegistry()}
	if b.par < 1 {
		return nil, fmt.Errorf("%w: %s: parallelism %d < 1", ErrConfig, src, sc.Parallelism)
	}
	if err := b.raw.Merge(cfg.OutOfTree); err != nil {
		return nil, fmt.Errorf("%w: out-of-tree registry: %v", ErrConfig, err)
	}
	global := int32(0)
	if sc.PercentageOfNodesToScore != nil {
		global = *sc.PercentageOfNodesToScore
	}
	run := map[string]bool{}
	for i := range sc.Profiles {
		var w []string
		if i < len(written) {
			w = written[i]
		}
		p, err := b.profile(&sc.Profiles[i], w, global, factoryOpts)
		if err != nil {
			return nil, err
		}
		for _, name := range p.plugins {
			run[name] = true
		}
		b.profiles = append(b.profiles, p)
	}
	b.guarded = frameworkruntime.Registry{}
	for name, f := range b.raw {
		b.guarded[name] = guardFactory(name, f, run[name])
	}
	return b, nil
}

// profile checks upstream's profile up and makes the picker's of it.
func (b *built) profile(up *config.KubeSchedulerProfile, written []string, global int32, opts []frameworkruntime.Option) (*profile, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: profile %q: "+format, append([]any{ErrConfig, b.source, up.SchedulerName}, args...)...)
	}
	if up.Plugins == nil {
		up.Plugins = &config.Plugins{}
	}
	sets := schedconfig.PluginSets(up.Plugins)
	for _, s := range sets {
		for _, pl := range s.Set.Enabled {
			if _, ok := b.raw[pl.Name]; !ok {
				return nil, fail("unknown plugin %q (enabled at %s): neither in-tree nor registered out of tree", pl.Name, s.Point)
			}
			if what, ok := Unfed[pl.Name]; ok && slices.Contains(written, pl.Name) {
				return nil, fail("plugin %s (enabled at %s) needs %s, which the simulator does not model: disable it", pl.Name, s.Point, what)
			}
		}
	}
	p := &profile{name: up.SchedulerName, pct: global}
	if up.PercentageOfNodesToScore != nil {
		p.pct = *up.PercentageOfNodesToScore
	}
	for _, s := range sets {
		kept := s.Set.Enabled[:0:0]
		for _, pl := range s.Set.Enabled {
			if _, unfed := Unfed[pl.Name]; unfed {
				if !slices.Contains(p.dropped, pl.Name) {
					p.dropped = append(p.dropped, pl.Name)
				}
				continue
			}
			kept = append(kept, pl)
		}
		s.Set.Enabled = kept
	}
	sort.Strings(p.dropped)
	fw, stop, err := newFramework(guardRegistryFactories(b.raw), up, opts)
	if err != nil {
		return nil, fail("%w", err)
	}
	listed := fw.ListPlugins()
	stop()
	runSets := []config.PluginSet{listed.PreFilter, listed.Filter, listed.PreScore, listed.Score}
	inRun := map[string]bool{}
	for _, s := range runSets {
		for _, pl := range s.Enabled {
			inRun[pl.Name] = true
		}
	}
	bindSets := []config.PluginSet{listed.PreEnqueue, listed.Reserve, listed.Permit, listed.PreBind, listed.Bind, listed.PostBind}
	inBind := map[string]bool{}
	for _, s := range bindSets {
		for _, pl := range s.Enabled {
			inBind[pl.Name] = true
		}
	}
	// The profile's order: as its plugin sets name them (multiPoint
	// first), then any the runtime added.
	for _, s := range sets {
		for _, pl := range s.Set.Enabled {
			if inRun[pl.Name] && !slices.Contains(p.plugins, pl.Name) {
				p.plugins = append(p.plugins, pl.Name)
			}
		}
	}
	for _, s := range runSets {
		for _, pl := range s.Enabled {
			if !slices.Contains(p.plugins, pl.Name) {
				p.plugins = append(p.plugins, pl.Name)
			}
		}
	}
	var pcs, fullPcs []config.PluginConfig
	p.postFilter = slices.Clone(listed.PostFilter.Enabled)
	for _, pc := range up.PluginConfig {
		if inRun[pc.Name] {
			pcs = append(pcs, pc)
		}
		if inRun[pc.Name] || inBind[pc.Name] {
			fullPcs = append(fullPcs, pc)
		}
		if slices.ContainsFunc(p.postFilter, func(pl config.Plugin) bool { return pl.Name == pc.Name }) {
			p.postArgs = append(p.postArgs, pc)
		}
	}
	p.cfg = &config.KubeSchedulerProfile{
		SchedulerName:            up.SchedulerName,
		PercentageOfNodesToScore: up.PercentageOfNodesToScore,
		Plugins: &config.Plugins{
			QueueSort: config.PluginSet{Enabled: []config.Plugin{{Name: names.PrioritySort}}},
			Bind:      config.PluginSet{Enabled: []config.Plugin{{Name: names.DefaultBinder}}},
			PreFilter: listed.PreFilter, Filter: listed.Filter, PreScore: listed.PreScore, Score: listed.Score,
		},
		PluginConfig: pcs,
	}
	// The node pickers' frameworks run the binding cycle too
	// (bind.go): the profile's Reserve, Permit, PreBind, Bind and
	// PostBind plugins, and its PreEnqueue plugins, as upstream's
	// framework lists them (its binder, not always DefaultBinder).
	p.full = p.cfg.DeepCopy()
	fp := p.full.Plugins
	fp.PreEnqueue, fp.Reserve, fp.Permit, fp.PreBind, fp.Bind, fp.PostBind = listed.PreEnqueue, listed.Reserve, listed.Permit, listed.PreBind, listed.Bind, listed.PostBind
	p.full.PluginConfig = fullPcs
	return p, nil
}

// guardRegistryFactories is raw with every factory's panics recovered
// (the plugins themselves unwrapped).
func guardRegistryFactories(raw frameworkruntime.Registry) frameworkruntime.Registry {
	r := make(frameworkruntime.Registry, len(raw))
	for name, f := range raw {
		r[name] = guardFactory(name, f, false)
	}
	return r
}

// newFramework builds a framework of profile with registry over an empty
// snapshot, for checking; stop releases it.
func newFramework(registry frameworkruntime.Registry, profile *config.KubeSchedulerProfile, opts []frameworkruntime.Option) (framework.Framework, func(), error) {
	lister, err := fwkadapter.NewLister(schedcache.NewEmptySnapshot())
	if err != nil {
		return nil, nil, err
	}
	// DefaultPreemption reads the mutable snapshot's PodGroups with
	// GenericWorkload on (pod-group preemption), as it is built.
	mutable, err := fwkadapter.NewMutable(schedcache.NewEmptySnapshot())
	if err != nil {
		return nil, nil, err
	}
	stopCh := make(chan struct{})
	rec := metrics.NewMetricsAsyncRecorder(10, 50*time.Millisecond, stopCh)
	stop := func() {
		close(stopCh)
		<-rec.IsStoppedCh
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stops the recorder NewFramework would start by default at once
	all := append(slices.Clip(opts),
		frameworkruntime.WithSnapshotSharedLister(lister),
		frameworkruntime.WithClientSet(fake.NewClientset()),
		frameworkruntime.WithPodNominator(noNominated{}),
		frameworkruntime.WithPodGroupManager(lister), // no pod groups: DefaultPreemption and GangScheduling read it with GenericWorkload
		frameworkruntime.WithMutableSnapshotLister(mutable),
		frameworkruntime.WithMetricsRecorder(rec),
		frameworkruntime.WithLogger(klog.Background()),
	)
	fw, err := frameworkruntime.NewFramework(ctx, registry, profile.DeepCopy(), all...)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return fw, stop, nil
}

// profileFor returns the profile that schedules pod (its schedulerName;
// "" is default-scheduler, as the API server defaults it), or an attempt
// error naming the name.
func (p *Picker) profileFor(pod *v1.Pod) (int, error) {
	name := pod.Spec.SchedulerName
	if name == "" {
		name = v1.DefaultSchedulerName
	}
	for i, pr := range p.profiles {
		if pr.name == name {
			return i, nil
		}
	}
	return 0, &sim.AttemptError{Reason: "no-profile", Err: fmt.Errorf("%w: %q (profiles: %s); upstream ignores the pod",
		ErrNoProfile, name, strings.Join(p.SchedulerNames(), ", "))}
}

// SchedulerNames returns the profiles' schedulerNames, in the
// configuration's order.
func (p *Picker) SchedulerNames() []string {
	out := make([]string, len(p.profiles))
	for i, pr := range p.profiles {
		out[i] = pr.name
	}
	return out
}

// Dropped returns, per schedulerName, the plugins upstream's defaults
// enabled that the picker leaves out (Unfed); profiles with none are
// absent.
func (p *Picker) Dropped() map[string][]string {
	out := map[string][]string{}
	for _, pr := range p.profiles {
		if len(pr.dropped) > 0 {
			out[pr.name] = slices.Clone(pr.dropped)
		}
	}
	return out
}

// attemptError turns a cycle's error caused by a plugin's panic into the
// attempt's error (sim.ErrAttempt): that pod's attempt fails, the run
// goes on.
func attemptError(err error) error {
	if err != nil && errors.Is(err, ErrPluginPanic) && !errors.Is(err, sim.ErrAttempt) {
		return &sim.AttemptError{Reason: "plugin-panic", Err: err}
	}
	return err
}
