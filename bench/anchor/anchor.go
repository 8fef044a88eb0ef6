// Package anchor runs upstream's real kube-scheduler v1.37.2 —
// k8s.io/kubernetes/pkg/scheduler.New and Scheduler.Run, with its queue,
// its cache, every plugin of its profile, its binding cycle and its event
// recorder — on a scheduler_perf-shaped workload, in this process, against
// a fake client set standing for the API server, and measures it: pods/s
// over the measured phase and each measured pod's latency from its
// creation to its binding. It is the anchor the issue-29 simulator is
// compared with: same workload, same machine, same run.
//
// A run goes as scheduler_perf's createNodes, createPods, createPods with
// collectMetrics go, without an API server:
//
//  1. The nodes and the initial pods (unbound) are put in the fake client
//     set's tracker; the shared informers (scheduler.NewInformerFactory,
//     as kube-scheduler builds them) are started and synced, then
//     Scheduler.Run, which schedules and binds the initial pods. Nothing
//     is measured yet.
//  2. The measured pods are created through the client set, all at once
//     or at Options.Rate pods/s. Each pod's creation time is taken just
//     before its Create call; its binding time when its pods/binding
//     request reaches the fake API server. The window runs from the first
//     creation to the last binding.
//  3. Everything started is stopped before Run returns: the scheduler
//     (its context cancelled, Run returned), the informers
//     (SharedInformerFactory.Shutdown waits for them), the event
//     broadcaster.
//
// The fake API server (fake.NewSimpleClientset, no field management)
// gives objects resourceVersions and serves pods/binding (see apiServer);
// it does no admission, no defaulting (the templates carry the defaults
// the scheduler reads) and no validation. Its watch channels are
// buffered: client-go's fake watcher panics when more than
// watch.DefaultChanSize events are waiting, so Run raises that
// process-wide variable for the run's duration (to the number of events
// the workload can make) and restores it. Runs are serialized by a
// package lock.
package anchor

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/schedcache/schedcache/sim"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/profile"
)

// Options tune a run. The zero value is kube-scheduler's default
// configuration, pods created all at once, a 30-minute timeout.
type Options struct {
	// Config is the scheduler's configuration (internal type, as
	// LoadConfigFile or DefaultConfig give it); nil is DefaultConfig. It is
	// validated with upstream's validation; a refusal is a *ConfigError.
	Config *config.KubeSchedulerConfiguration
	// ConfigSource names Config in errors (a file name); default
	// "Options.Config".
	ConfigSource string
	// Rate creates the measured pods at this many a second; 0 creates them
	// as fast as the client set takes them.
	Rate float64
	// Timeout bounds the whole run (setup included); 0 is 30 minutes. When
	// it passes before every measured pod is bound, Run returns what it
	// measured and an error wrapping ErrNotAllBound.
	Timeout time.Duration
}

// ErrNotAllBound is wrapped by the error of a run that ended (timeout or
// cancelled context) before every pod was bound.
var ErrNotAllBound = errors.New("not every pod was bound")

// ErrPanic is wrapped by the error of a run whose own code panicked.
var ErrPanic = errors.New("panic")

// Result is what a run measured. Durations are in nanoseconds in JSON.
type Result struct {
	Workload string `json:"workload"`
	Nodes    int    `json:"nodes"`
	InitPods int    `json:"initPods"`
	Pods     int    `json:"pods"`

	// The scheduler's configuration.
	Profiles                 []string `json:"profiles"`
	PercentageOfNodesToScore int32    `json:"percentageOfNodesToScore"`
	Parallelism              int32    `json:"parallelism"`
	Rate                     float64  `json:"rate"` // 0: all at once

	// Setup: nodes and initial pods in the tracker, informers synced,
	// the initial pods bound.
	Setup time.Duration `json:"setupNs"`

	// The measured phase: from the first measured pod's creation to the
	// last one's binding.
	Bound         int           `json:"bound"`
	Window        time.Duration `json:"windowNs"`
	CreateTime    time.Duration `json:"createNs"` // creating the measured pods
	PodsPerSecond float64       `json:"podsPerSecond"`
	// Latency from creation to binding, over the bound measured pods
	// (nearest rank).
	P50 time.Duration `json:"p50Ns"`
	P90 time.Duration `json:"p90Ns"`
	P99 time.Duration `json:"p99Ns"`
	Max time.Duration `json:"maxNs"`

	// Upstream's own histograms over the window, as scheduler_perf reads
	// them (Prometheus' histogram_quantile, buckets doubling from 1 ms):
	// scheduler_scheduling_attempt_duration_seconds{result="scheduled"}
	// (the scheduling algorithm and the binding, one attempt) and
	// scheduler_scheduling_algorithm_duration_seconds (Filter and Score).
	Attempts     uint64        `json:"attempts"`
	AttemptP50   time.Duration `json:"attemptP50Ns"`
	AttemptP90   time.Duration `json:"attemptP90Ns"`
	AttemptP99   time.Duration `json:"attemptP99Ns"`
	AlgorithmP50 time.Duration `json:"algorithmP50Ns"`
	AlgorithmP99 time.Duration `json:"algorithmP99Ns"`

	// The process's CPU time (user and system) over the window, and the
	// pods bound per CPU second: on a machine other work shares, the
	// figure that moves least.
	CPUTime          time.Duration `json:"cpuNs"`
	PodsPerCPUSecond float64       `json:"podsPerCPUSecond"`

	// Garbage collection during the window (runtime.MemStats).
	NumGC        uint32        `json:"numGC"`
	GCPause      time.Duration `json:"gcPauseNs"`
	HeapAllocEnd uint64        `json:"heapAllocEnd"`

	// Placements: nodes holding a measured pod, the most measured pods on
	// one node, the most pods (initial and measured) on one node, measured
	// pods per value of the workload's node label (zones), and bindings the
	// API server refused as the pod was already bound.
	NodesUsed         int            `json:"nodesUsed"`
	MaxMeasuredOnNode int            `json:"maxMeasuredOnNode"`
	MaxPodsOnNode     int            `json:"maxPodsOnNode"`
	MeasuredPerLabel  map[string]int `json:"measuredPerLabel,omitempty"`
	BindingConflicts  int            `json:"bindingConflicts"`
	// A gang workload's gangs: all, those whose every pod is bound, and
	// those with some but not all bound (never, with gang scheduling).
	Gangs        int `json:"gangs,omitempty"`
	GangsPlaced  int `json:"gangsPlaced,omitempty"`
	GangsPartial int `json:"gangsPartial"`
	// Deleted: pods the scheduler deleted, its preemption victims (the
	// preemption workload; 0 elsewhere).
	Deleted             int    `json:"deleted"`
	GOMAXPROCS          int    `json:"gomaxprocs"`
	NumCPU              int    `json:"numCPU"`
	GoVersion           string `json:"goVersion"`
	GOOS                string `json:"goos"`
	GOARCH              string `json:"goarch"`
	KubernetesVersion   string `json:"kubernetesVersion"`
	WatchBufferPerWatch int    `json:"watchBufferPerWatch"`
}

// KubernetesVersion is the k8s.io/kubernetes module the anchor runs.
const KubernetesVersion = "v1.37.2"

var (
	runMu           sync.Mutex // one run at a time: watch.DefaultChanSize is process-wide
	registerMetrics sync.Once
)

// Run runs workload w on upstream's scheduler and measures it. An invalid
// workload or configuration is refused before anything starts (errors
// wrapping ErrInvalidWorkload, ErrInvalidConfig). Every goroutine Run
// starts has stopped when it returns.
func Run(ctx context.Context, w Workload, opts Options) (res Result, err error) {
	if err := w.Validate(); err != nil {
		return Result{}, err
	}
	if opts.Rate < 0 || opts.Rate != opts.Rate {
		return Result{}, fmt.Errorf("anchor: rate must be 0 (all at once) or positive, got %v", opts.Rate)
	}
	if opts.Timeout < 0 {
		return Result{}, fmt.Errorf("anchor: timeout must be 0 (30 minutes) or positive, got %v", opts.Timeout)
	}
	runMu.Lock()
	defer runMu.Unlock()
	restore, err := setGates(w.FeatureGates)
	if err != nil {
		return Result{}, fmt.Errorf("anchor: %w %s: feature gates: %w", ErrInvalidWorkload, w.Name, err)
	}
	defer restore()
	cfg := opts.Config
	src := opts.ConfigSource
	if src == "" {
		src = "Options.Config"
	}
	if cfg == nil {
		if cfg, err = DefaultConfig(); err != nil {
			return Result{}, err
		}
		src = "default configuration"
	} else {
		cfg = cfg.DeepCopy()
	}
	if err := validateConfig(cfg); err != nil {
		return Result{}, &ConfigError{Source: src, Err: err}
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 30 * time.Minute
	}

	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("anchor: %w in run %s: %v", ErrPanic, w.Name, r)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return run(ctx, w, cfg, src, opts.Rate)
}

// watchBuffer is the watch channel size a run needs: every event the run
// can make for one resource waiting at once (a node each, a pod's
// creation, binding and a few status updates), and a margin.
func watchBuffer(w Workload) int {
	n := int64(w.Nodes) + 4*(int64(w.InitPods)+int64(w.Pods)) + 1024
	return int(min(max(n, int64(watch.DefaultChanSize)), 1<<24))
}

func run(ctx context.Context, w Workload, cfg *config.KubeSchedulerConfiguration, src string, rate float64) (res Result, err error) {
	res = Result{
		Workload: w.Name, Nodes: w.Nodes, InitPods: w.InitPods, Pods: w.Pods,
		PercentageOfNodesToScore: derefInt32(cfg.PercentageOfNodesToScore),
		Parallelism:              cfg.Parallelism,
		Rate:                     rate,
		GOMAXPROCS:               runtime.GOMAXPROCS(0),
		NumCPU:                   runtime.NumCPU(),
		GoVersion:                runtime.Version(),
		GOOS:                     runtime.GOOS,
		GOARCH:                   runtime.GOARCH,
		KubernetesVersion:        KubernetesVersion,
	}
	for _, p := range cfg.Profiles {
		res.Profiles = append(res.Profiles, p.SchedulerName)
	}
	start := time.Now()

	// Raise the fake watchers' buffer for this run (see the package doc).
	oldChanSize := watch.DefaultChanSize
	watch.DefaultChanSize = int32(watchBuffer(w))
	res.WatchBufferPerWatch = int(watch.DefaultChanSize)
	defer func() { watch.DefaultChanSize = oldChanSize }()

	api := newAPIServer(w)
	if err := populate(api, w); err != nil {
		return res, err
	}

	registerMetrics.Do(metrics.Register) // before upstream's cache and scheduler exist

	// Everything below stops when schedCtx is cancelled; stop cancels it
	// and waits.
	schedCtx, cancelSched := context.WithCancel(ctx)
	informerFactory := scheduler.NewInformerFactory(api.cs, 0, nil)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: api.cs.EventsV1()})
	schedDone := make(chan struct{})
	started := false
	janitorDone := make(chan struct{})
	janitorStarted := false
	defer func() {
		cancelSched()
		if started {
			<-schedDone
		}
		if janitorStarted {
			<-janitorDone
		}
		informerFactory.Shutdown()
		broadcaster.Shutdown()
	}()
	broadcaster.StartRecordingToSink(schedCtx.Done())

	sched, err := scheduler.New(schedCtx, api.cs, informerFactory, nil,
		profile.NewRecorderFactory(broadcaster),
		scheduler.WithComponentConfigVersion(cfg.TypeMeta.APIVersion),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		scheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds),
		scheduler.WithExtenders(cfg.Extenders...),
		scheduler.WithParallelism(cfg.Parallelism),
	)
	if err != nil {
		return res, &ConfigError{Source: src, Err: fmt.Errorf("scheduler.New: %w", err)}
	}
	informerFactory.Start(schedCtx.Done())
	for typ, ok := range informerFactory.WaitForCacheSync(schedCtx.Done()) {
		if !ok {
			return res, fmt.Errorf("anchor: informer for %v did not sync: %w", typ, context.Cause(schedCtx))
		}
	}
	if err := sched.WaitForHandlersSync(schedCtx); err != nil {
		return res, fmt.Errorf("anchor: scheduler's event handlers did not sync: %w", err)
	}
	started = true
	go func() {
		defer close(schedDone)
		sched.Run(schedCtx)
	}()

	// The fake client set keeps a copy of every request; drop them now
	// and every second while the run lasts.
	janitorStarted = true
	go func() {
		defer close(janitorDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			api.cs.ClearActions()
			select {
			case <-schedCtx.Done():
				return
			case <-t.C:
			}
		}
	}()

	select {
	case <-api.initDone:
	case <-ctx.Done():
		api.mu.Lock()
		n := api.initBound
		api.mu.Unlock()
		return res, fmt.Errorf("anchor: %w: %d of %d initial pods bound before %w",
			ErrNotAllBound, n, w.InitPods, context.Cause(ctx))
	}
	res.Setup = time.Since(start)

	// The measured phase.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	histBefore, cpuBefore := gatherHistograms(), sim.ProcessCPUTime()
	createErr := createMeasured(ctx, api, w, rate)
	api.mu.Lock()
	if api.createdAt[0] > 0 {
		res.CreateTime = time.Duration(api.since() - api.createdAt[0])
	}
	api.mu.Unlock()
	var waitErr error
	if createErr == nil {
		select {
		case <-api.measuredDone:
		case <-ctx.Done():
			waitErr = context.Cause(ctx)
		}
	}
	cpuAfter, histAfter := sim.ProcessCPUTime(), gatherHistograms()
	runtime.ReadMemStats(&after)
	if cpuBefore > 0 && cpuAfter > cpuBefore {
		res.CPUTime = cpuAfter - cpuBefore
	}
	attempt := histAfter[attemptMetric].since(histBefore[attemptMetric])
	res.Attempts = attempt.count()
	res.AttemptP50, res.AttemptP90, res.AttemptP99 = attempt.quantile(0.5), attempt.quantile(0.9), attempt.quantile(0.99)
	algo := histAfter[algorithmMetric].since(histBefore[algorithmMetric])
	res.AlgorithmP50, res.AlgorithmP99 = algo.quantile(0.5), algo.quantile(0.99)
	res.NumGC = after.NumGC - before.NumGC
	res.GCPause = time.Duration(after.PauseTotalNs - before.PauseTotalNs)
	res.HeapAllocEnd = after.HeapAlloc

	summarize(&res, api, w)
	switch {
	case createErr != nil:
		return res, createErr
	case waitErr != nil:
		return res, fmt.Errorf("anchor: %w: %d of %d measured pods bound before %w",
			ErrNotAllBound, res.Bound, w.Pods, waitErr)
	}
	return res, nil
}

// populate puts the namespaces, nodes and initial pods in the tracker,
// before the informers list them.
func populate(api *apiServer, w Workload) error {
	for _, ns := range []string{InitNamespace, MeasuredNamespace} {
		obj := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"kubernetes.io/metadata.name": ns}}}
		if err := api.tracker.Add(obj); err != nil {
			return fmt.Errorf("anchor: namespace %s: %w", ns, err)
		}
	}
	for i := range w.Nodes {
		if err := api.tracker.Add(w.node(i)); err != nil {
			return fmt.Errorf("anchor: node %d: %w", i, err)
		}
	}
	for i := range w.InitPods {
		if err := api.tracker.Add(pod(w.InitPodTemplate, InitNamespace, initPrefix, i)); err != nil {
			return fmt.Errorf("anchor: initial pod %d: %w", i, err)
		}
	}
	if w.GangSize > 0 {
		for g := range w.Pods / w.GangSize {
			if err := api.tracker.Add(w.podGroup(g)); err != nil {
				return fmt.Errorf("anchor: pod group %d: %w", g, err)
			}
		}
	}
	return nil
}

// setGates sets the feature gates gates and returns what restores the
// previous values.
func setGates(gates map[string]bool) (func(), error) {
	if len(gates) == 0 {
		return func() {}, nil
	}
	old := map[string]bool{}
	for name := range gates {
		old[name] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(name))
	}
	// Tried on a copy first: a refused SetFromMap keeps what it was given,
	// and every later call is refused with it.
	if err := utilfeature.DefaultMutableFeatureGate.DeepCopy().SetFromMap(gates); err != nil {
		return nil, err
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		return nil, err
	}
	return func() { _ = utilfeature.DefaultMutableFeatureGate.SetFromMap(old) }, nil
}

// createMeasured creates the measured pods through the client set, all at
// once or at rate pods/s.
func createMeasured(ctx context.Context, api *apiServer, w Workload, rate float64) error {
	pods := api.cs.CoreV1().Pods(MeasuredNamespace)
	begin := time.Now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for i := range w.Pods {
		if rate > 0 {
			due := begin.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				select {
				case <-timer.C:
				case <-ctx.Done():
					return fmt.Errorf("anchor: %w: %d of %d measured pods created before %w",
						ErrNotAllBound, i, w.Pods, context.Cause(ctx))
				}
			}
		} else if i%256 == 0 && ctx.Err() != nil {
			return fmt.Errorf("anchor: %w: %d of %d measured pods created before %w",
				ErrNotAllBound, i, w.Pods, context.Cause(ctx))
		}
		p := pod(w.PodTemplate, MeasuredNamespace, measuredPrefix, i)
		if w.GangSize > 0 {
			name := w.gangName(i)
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &name}
		}
		api.created(i)
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("anchor: creating measured pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// summarize fills res's measured figures from what api recorded.
func summarize(res *Result, api *apiServer, w Workload) {
	api.mu.Lock()
	defer api.mu.Unlock()
	lat := make([]time.Duration, 0, api.measuredBound)
	perNode := map[string]int{}
	nodeLabel := map[string]string{}
	if w.NodeLabelKey != "" {
		res.MeasuredPerLabel = map[string]int{}
		for i := range w.Nodes {
			n := w.node(i)
			nodeLabel[n.Name] = n.Labels[w.NodeLabelKey]
		}
	}
	for i, b := range api.boundAt {
		if b == 0 {
			continue
		}
		lat = append(lat, time.Duration(b-api.createdAt[i]))
		perNode[api.nodeOf[i]]++
		if res.MeasuredPerLabel != nil {
			res.MeasuredPerLabel[nodeLabel[api.nodeOf[i]]]++
		}
	}
	res.Bound = api.measuredBound
	res.BindingConflicts = api.conflicts
	if w.GangSize > 0 {
		res.Gangs = w.Pods / w.GangSize
		for g := range res.Gangs {
			n := 0
			for i := g * w.GangSize; i < (g+1)*w.GangSize; i++ {
				if api.boundAt[i] != 0 {
					n++
				}
			}
			switch n {
			case w.GangSize:
				res.GangsPlaced++
			case 0:
			default:
				res.GangsPartial++
			}
		}
	}
	res.Deleted = api.deleted
	res.NodesUsed = len(perNode)
	for _, n := range perNode {
		res.MaxMeasuredOnNode = max(res.MaxMeasuredOnNode, n)
	}
	for _, n := range api.podsOn {
		res.MaxPodsOnNode = max(res.MaxPodsOnNode, n)
	}
	if len(lat) == 0 {
		return
	}
	res.Window = time.Duration(api.lastBind - api.createdAt[0])
	if res.Window > 0 {
		res.PodsPerSecond = float64(len(lat)) / res.Window.Seconds()
	}
	if res.CPUTime > 0 {
		res.PodsPerCPUSecond = float64(len(lat)) / res.CPUTime.Seconds()
	}
	slices.Sort(lat)
	res.P50, res.P90, res.P99 = rank(lat, 50), rank(lat, 90), rank(lat, 99)
	res.Max = lat[len(lat)-1]
}

// rank is the p-th percentile of sorted d, nearest rank.
func rank(d []time.Duration, p int) time.Duration {
	i := (len(d)*p + 99) / 100 // ceil(len*p/100)
	return d[max(i-1, 0)]
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
