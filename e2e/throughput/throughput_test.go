package throughput

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	"github.com/schedcache/schedcache/e2e/controlplane"
	"github.com/schedcache/schedcache/kube/cmd/schedcache-scheduler/app"
)

// Client rate limits of the creators, the watcher and both schedulers:
// high enough that client-side throttling is not what is measured.
const (
	clientQPS   = 5000
	clientBurst = 5000
)

// Defaults, each overridden by an environment variable.
const (
	defaultNodes    = 5000 // THROUGHPUT_NODES
	defaultPods     = 3000 // THROUGHPUT_PODS
	defaultRounds   = 1    // THROUGHPUT_ROUNDS: each runs both schedulers, in alternating order
	defaultCreators = 8    // THROUGHPUT_CREATORS: parallel clients creating nodes and pods
)

const (
	namespace      = "default"
	runTimeout     = 10 * time.Minute // one scheduler's run, from the first create
	overallTimeout = 60 * time.Minute
	readyTimeout   = 5 * time.Minute // a scheduler's informers synced
)

// Names of the schedulers measured.
const (
	ours     = "schedcache"
	upstream = "kube-scheduler"
)

var (
	// ErrNotBound is returned when not every pod was bound in time.
	ErrNotBound = errors.New("throughput: pods not bound in time")
	// ErrNotReady is returned when a scheduler did not become ready.
	ErrNotReady = errors.New("throughput: scheduler not ready")
	// ErrNotDeleted is returned when a run's pods were not all deleted.
	ErrNotDeleted = errors.New("throughput: pods not deleted in time")
)

// result is one scheduler's run.
type result struct {
	Scheduler     string  `json:"scheduler"`
	SchedulerName string  `json:"schedulerName"`
	Mode          string  `json:"mode"` // stream: created while it runs; backlog: all created before it starts
	Round         int     `json:"round"`
	Nodes         int     `json:"nodes"`
	Pods          int     `json:"pods"`
	WindowSeconds float64 `json:"windowSeconds"`
	PodsPerSecond float64 `json:"podsPerSecond"`
	CreateSeconds float64 `json:"createSeconds"` // first create to last create returned
	CPUSeconds    float64 `json:"cpuSeconds"`    // the process (apiserver, etcd, creators, watcher, scheduler) over the window
	CPUPerPodMs   float64 `json:"cpuPerPodMs"`
	QPS           float32 `json:"clientQPS"`
	Burst         int     `json:"clientBurst"`
	Creators      int     `json:"creators"`
	GOMAXPROCS    int     `json:"gomaxprocs"`
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// TestThroughput is the measurement; see the package comment.
func TestThroughput(t *testing.T) {
	nodes, pods, rounds, creators := defaultNodes, defaultPods, defaultRounds, defaultCreators
	if os.Getenv("THROUGHPUT") != "1" {
		// The smoke form CI runs: the same code at a size that proves
		// it works (both schedulers bind every pod in both modes), not
		// a measurement.
		nodes, pods, rounds, creators = 50, 40, 1, 2
	}
	nodes = envInt(t, "THROUGHPUT_NODES", nodes)
	pods = envInt(t, "THROUGHPUT_PODS", pods)
	rounds = envInt(t, "THROUGHPUT_ROUNDS", rounds)
	creators = envInt(t, "THROUGHPUT_CREATORS", creators)

	ctx, cancel := context.WithTimeout(context.Background(), overallTimeout)
	defer cancel()
	// Without the TaintNodesByCondition admission plugin a node is
	// created ready, with its status, in one request (as
	// scheduler_perf's nodes are): no node controller runs here to take
	// the not-ready taint off.
	cp := controlplane.MustStart(t, controlplane.Options{APIServerFlags: []string{
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"}})
	cfg := cp.AdminConfig()
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}

	start := time.Now()
	if err := createNodes(ctx, cs, nodes, creators); err != nil {
		t.Fatalf("nodes: %v", err)
	}
	t.Logf("created %d nodes in %v with %d clients", nodes, time.Since(start).Round(time.Millisecond), creators)

	for round := range rounds {
		order := []string{ours, upstream}
		if round%2 == 1 {
			order = []string{upstream, ours}
		}
		for _, backlog := range []bool{false, true} {
			for _, name := range order {
				r, err := measure(ctx, cfg, cs, name, backlog, pods, creators)
				if err != nil {
					t.Fatalf("round %d, %s, %s: %v", round, name, modeName(backlog), err)
				}
				r.Round, r.Nodes = round, nodes
				fmt.Printf("throughput: round %d %-7s %-14s nodes=%d pods=%d window=%.2fs pods/s=%.1f create=%.2fs cpu=%.2fs cpu/pod=%.2fms qps=%v burst=%d creators=%d\n",
					round, r.Mode, r.Scheduler, r.Nodes, r.Pods, r.WindowSeconds, r.PodsPerSecond, r.CreateSeconds, r.CPUSeconds, r.CPUPerPodMs,
					r.QPS, r.Burst, r.Creators)
				line, err := json.Marshal(r)
				if err != nil {
					t.Fatalf("json: %v", err)
				}
				fmt.Printf("throughput-json: %s\n", line)
				if err := deletePods(ctx, cs); err != nil {
					t.Fatalf("round %d, %s, %s: %v", round, name, modeName(backlog), err)
				}
			}
		}
	}
}

// modeName names a run's mode: stream (pods created while the scheduler
// runs, from the first create) or backlog (all created before it starts,
// from its informers synced).
func modeName(backlog bool) string {
	if backlog {
		return "backlog"
	}
	return "stream"
}

// parallel runs f(i) for i in [0, n) on workers goroutines; it returns
// the first error, after every worker stopped.
func parallel(ctx context.Context, n, workers int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// createNodes creates n ready nodes shaped as scheduler_perf's
// node-default: 4 CPUs, 32Gi, 110 pods, a hostname label.
func createNodes(ctx context.Context, cs kubernetes.Interface, n, workers int) error {
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("32Gi"),
		v1.ResourcePods: resource.MustParse("110")}
	return parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("node-%05d", i)
		now := metav1.Now()
		_, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
			Status: v1.NodeStatus{Capacity: res, Allocatable: res, Phase: v1.NodeRunning,
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		return nil
	})
}

// podsBound counts, from a watch of the namespace's pods, those of one
// scheduler that are bound, and closes done at want.
type podsBound struct {
	scheduler string
	want      int
	mu        sync.Mutex
	bound     map[string]bool // guarded by mu
	last      time.Time       // guarded by mu: when the want-th was seen
	done      chan struct{}
}

func (b *podsBound) observe(obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.SchedulerName != b.scheduler || p.Spec.NodeName == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bound[p.Name] {
		return
	}
	b.bound[p.Name] = true
	if len(b.bound) == b.want {
		b.last = time.Now()
		close(b.done)
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// measure starts the named scheduler, waits until it is ready, creates
// pods pods for it and measures from the first create to the last pod
// seen bound; it stops the scheduler before it returns.
func measure(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, which string, backlog bool, pods, creators int) (r result, err error) {
	schedName := v1.DefaultSchedulerName
	if which == ours {
		schedName = app.DefaultSchedulerName
	}
	r = result{Scheduler: which, SchedulerName: schedName, Mode: modeName(backlog), Pods: pods, QPS: cfg.QPS, Burst: cfg.Burst, Creators: creators,
		GOMAXPROCS: gomaxprocs()}

	// The watcher: its own informer on the namespace's pods of this
	// scheduler.
	b := &podsBound{scheduler: schedName, want: pods, bound: map[string]bool{}, done: make(chan struct{})}
	wctx, wstop := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.schedulerName", schedName).String()
		}))
	defer func() { wstop(); factory.Shutdown() }() // Shutdown waits for the informers, which stop with wctx
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.observe,
		UpdateFunc: func(_, obj any) { b.observe(obj) },
	}); err != nil {
		return r, fmt.Errorf("watcher: %w", err)
	}
	factory.Start(wctx.Done())
	if !cache.WaitForCacheSync(wctx.Done(), inf.HasSynced) {
		return r, fmt.Errorf("watcher: %w", ErrNotReady)
	}

	pod := func(i int) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", which, i), Namespace: namespace},
			Spec: v1.PodSpec{SchedulerName: schedName, Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")}}}}}}
	}
	create := func() error {
		c0 := time.Now()
		err := parallel(ctx, pods, creators, func(ctx context.Context, i int) error {
			if _, err := cs.CoreV1().Pods(namespace).Create(ctx, pod(i), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %d: %w", i, err)
			}
			return nil
		})
		r.CreateSeconds = time.Since(c0).Seconds()
		return err
	}
	if backlog {
		if err := create(); err != nil {
			return r, err
		}
	}

	sctx, stop := context.WithCancel(ctx)
	var stopped func() error
	switch which {
	case ours:
		stopped, err = startOurs(sctx, cfg)
	default:
		stopped, err = startUpstream(sctx, cfg)
	}
	defer func() {
		stop()
		if stopped == nil {
			return
		}
		if serr := stopped(); serr != nil && err == nil {
			err = fmt.Errorf("%s stopped: %w", which, serr)
		}
	}()
	if err != nil {
		return r, err
	}

	cpu0, err := cpuTime()
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	if !backlog {
		if err := create(); err != nil {
			return r, err
		}
	}
	select {
	case <-b.done:
	case <-time.After(runTimeout):
		b.mu.Lock()
		n := len(b.bound)
		b.mu.Unlock()
		return r, fmt.Errorf("%w: %d of %d within %v", ErrNotBound, n, pods, runTimeout)
	case <-ctx.Done():
		return r, ctx.Err()
	}
	cpu1, err := cpuTime()
	if err != nil {
		return r, err
	}
	b.mu.Lock()
	window := b.last.Sub(t0)
	b.mu.Unlock()
	r.WindowSeconds = window.Seconds()
	r.PodsPerSecond = float64(pods) / window.Seconds()
	r.CPUSeconds = (cpu1 - cpu0).Seconds()
	r.CPUPerPodMs = r.CPUSeconds * 1000 / float64(pods)
	return r, nil
}

// startOurs runs schedcache-scheduler's app as its container would,
// without leader election, HTTP endpoint or permission check (the admin
// identity); it returns once the informers synced. The returned func
// waits for Run to return (after ctx ends).
func startOurs(ctx context.Context, cfg *rest.Config) (func() error, error) {
	sc, err := app.New(ctx, app.Options{RestConfig: cfg, NoLeaderElect: true, HTTPAddr: "off", SkipPermissionCheck: true,
		StartupTimeout: readyTimeout, Logger: klog.Background().WithName(ours)})
	if err != nil {
		return nil, fmt.Errorf("app.New: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }() // owned by the returned func, which waits for it
	wait := func() error { return <-done }
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !sc.Leading() {
		select {
		case err := <-done:
			done <- err
			return nil, fmt.Errorf("%w: Run returned: %v", ErrNotReady, err)
		case <-deadline.C:
			return wait, fmt.Errorf("%w within %v", ErrNotReady, readyTimeout)
		case <-tick.C:
		}
	}
	return wait, nil
}

var registerMetrics sync.Once

// startUpstream builds upstream's kube-scheduler as cmd/kube-scheduler
// does (pkg/scheduler.New with the shared informers and an event
// broadcaster, the default configuration: one profile,
// default-scheduler) on a client from cfg; it returns once the
// informers and the scheduler's handlers synced, with Run started. The
// returned func waits for Run and stops the informers and broadcaster
// (after ctx ends).
func startUpstream(ctx context.Context, cfg *rest.Config) (func() error, error) {
	kcfg, err := latest.Default()
	if err != nil {
		return nil, fmt.Errorf("upstream configuration: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("upstream client: %w", err)
	}
	registerMetrics.Do(metrics.Register)
	factory := scheduler.NewInformerFactory(cs, 0, nil)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	runDone := make(chan struct{})
	started := false
	cleanup := func() error {
		if started {
			<-runDone
		}
		factory.Shutdown()
		broadcaster.Shutdown()
		return nil
	}
	broadcaster.StartRecordingToSink(ctx.Done())
	sched, err := scheduler.New(ctx, cs, factory, nil, profile.NewRecorderFactory(broadcaster),
		scheduler.WithComponentConfigVersion(kcfg.TypeMeta.APIVersion),
		scheduler.WithProfiles(kcfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(kcfg.PercentageOfNodesToScore),
		scheduler.WithPodInitialBackoffSeconds(kcfg.PodInitialBackoffSeconds),
		scheduler.WithPodMaxBackoffSeconds(kcfg.PodMaxBackoffSeconds),
		scheduler.WithParallelism(kcfg.Parallelism))
	if err != nil {
		return cleanup, fmt.Errorf("scheduler.New: %w", err)
	}
	factory.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(sctx.Done()) {
		if !ok {
			return cleanup, fmt.Errorf("%w: informer for %v", ErrNotReady, typ)
		}
	}
	if err := sched.WaitForHandlersSync(sctx); err != nil {
		return cleanup, fmt.Errorf("%w: handlers: %w", ErrNotReady, err)
	}
	started = true
	go func() { // owned by cleanup, which waits for it
		defer close(runDone)
		sched.Run(ctx)
	}()
	return cleanup, nil
}

// deletePods deletes every pod of the namespace, at once (no kubelet
// would confirm a graceful deletion), and waits until none is left.
func deletePods(ctx context.Context, cs kubernetes.Interface) error {
	zero := int64(0)
	if err := cs.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete pods: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		if len(l.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return ErrNotDeleted
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
