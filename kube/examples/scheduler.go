package examples

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/bind"
	"github.com/schedcache/schedcache/kube/informer"
	"github.com/schedcache/schedcache/kube/internal/fakeapi"
	"github.com/schedcache/schedcache/kube/metrics"
	"github.com/schedcache/schedcache/nodeinfo"
)

// Placer chooses a node for a pod on an immutable snapshot of the cache.
// bench's Example_realPlugin gives Run a Placer that wraps the snapshot in
// kube/fwkadapter's fwk.SharedLister and runs upstream's NodeResourcesFit
// (Filter, then LeastAllocated Score): it lives in the bench module,
// which may import k8s.io/kubernetes; this module may not. FewestPods is
// a dependency-free stand-in. Contract: Place may be called concurrently;
// it must not modify the snapshot.
type Placer interface {
	Place(ctx context.Context, snap *schedcache.Snapshot, pod *v1.Pod) (string, error)
}

// ErrNoNode is returned by a Placer that finds no node.
var ErrNoNode = errors.New("examples: no node fits")

// FewestPods is a Placer without plugins (see Placer): among the nodes the
// pod fits on (their allocatable pod count, CPU and memory, less what is
// requested there), the one with the fewest pods, by name on ties;
// ErrNoNode when it fits on none.
type FewestPods struct{}

// Place picks the node with the fewest pods among those the pod fits on.
func (FewestPods) Place(_ context.Context, snap *schedcache.Snapshot, pod *v1.Pod) (string, error) {
	pi, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		return "", err
	}
	req := pi.Requests()
	best, bestPods := "", 0
	for i := 0; i < snap.NumNodes(); i++ {
		ni := snap.At(i)
		if !fits(ni, req) {
			continue
		}
		if best == "" || ni.NumPods() < bestPods || (ni.NumPods() == bestPods && ni.NodeName() < best) {
			best, bestPods = ni.NodeName(), ni.NumPods()
		}
	}
	if best == "" {
		return "", ErrNoNode
	}
	return best, nil
}

// fits says whether a pod requesting req fits on ni: one more pod, and its
// CPU and memory, within the node's allocatable.
func fits(ni *nodeinfo.NodeInfo, req nodeinfo.Resource) bool {
	alloc, used := ni.Allocatable(), ni.Requested()
	return int64(ni.NumPods()) < alloc.AllowedPodNumber &&
		used.MilliCPU+req.MilliCPU <= alloc.MilliCPU && used.Memory+req.Memory <= alloc.Memory
}

// Config sizes the example; Validate checks it.
type Config struct {
	Nodes, Pods int
	Latency     time.Duration // of each simulated binding call
	FailureRate float64       // of the simulated bindings, in [0, 1); failed pods are forgotten and retried
	Seed        int64
}

// Limits of Config.
const (
	MaxNodes   = 10_000
	MaxPods    = 1_000_000
	MaxLatency = time.Minute
)

// ErrInvalidConfig is wrapped by Validate's errors.
var ErrInvalidConfig = errors.New("examples: invalid configuration")

// ConfigError is an immutable value naming the Config field at fault; it
// wraps ErrInvalidConfig.
type ConfigError struct {
	Field string // Nodes, Pods, Latency or FailureRate
	Msg   string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Msg }
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// Validate returns the first fault of c as a *ConfigError, or nil.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Nodes < 1 || c.Nodes > MaxNodes:
		return bad("Nodes", "must be 1 to %d, got %d", MaxNodes, c.Nodes)
	case c.Pods < 0 || c.Pods > MaxPods:
		return bad("Pods", "must be 0 to %d, got %d", MaxPods, c.Pods)
	case c.Latency < 0 || c.Latency > MaxLatency:
		return bad("Latency", "must be 0 to %v, got %v", MaxLatency, c.Latency)
	case math.IsNaN(c.FailureRate) || c.FailureRate < 0 || c.FailureRate >= 1:
		return bad("FailureRate", "must be a fraction in [0, 1) (at 1 no binding succeeds), got %v", c.FailureRate)
	}
	return nil
}

func node(i int) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), UID: types.UID(fmt.Sprintf("node-uid-%d", i)),
			Labels: map[string]string{v1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%2)}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")}},
	}
}

func pendingPod(i int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("pod-uid-%d", i))},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")},
		}}}},
	}
}

// Run schedules cfg.Pods pending pods onto cfg.Nodes nodes of a fake
// cluster with placer and writes what happened to out. A pod the placer
// finds no node for (ErrNoNode: the nodes are full) stays pending and is
// reported. It returns once every other pod is bound and confirmed by the
// informer, or ctx ends; every goroutine it started has stopped when it
// returns. An invalid cfg is a *ConfigError, before any work.
func Run(ctx context.Context, out io.Writer, cfg Config, placer Placer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The fake API server: nodes, pending pods, and bindings that set the
	// pod's node.
	cs := fake.NewClientset()
	fakeapi.InstallBindingReactor(cs)
	for i := 0; i < cfg.Nodes; i++ {
		if _, err := cs.CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	pending := make([]*v1.Pod, cfg.Pods)
	for i := range pending {
		pending[i] = pendingPod(i)
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pending[i], metav1.CreateOptions{}); err != nil {
			return err
		}
	}

	// BindPod's dispatcher: a simulated fwk.APIDispatcher executing the
	// bindings against the fake API server, behind the fwk adapter.
	sim, err := bind.NewSim(bind.SimOptions{Latency: cfg.Latency, FailureRate: cfg.FailureRate, Seed: cfg.Seed, Client: cs})
	if err != nil {
		return err
	}
	defer sim.Close()
	sim.Run()
	dispatcher, err := bind.NewDispatcher(sim)
	if err != nil {
		return err
	}

	// The cache, with async (informer) failures routed like the handlers'.
	c, err := schedcache.New(ctx, schedcache.WithDispatcher(dispatcher),
		schedcache.WithAsyncErrorHandler(informer.AsyncErrorHandler(logger, nil)))
	if err != nil {
		return err
	}
	defer c.Close()

	// Informers feeding the cache.
	factory := informers.NewSharedInformerFactory(cs, 0)
	adapter, err := informer.Attach(c, factory, informer.WithLogger(logger))
	if err != nil {
		return err
	}
	defer func() {
		cancel() // stops the informers; Shutdown waits for them
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), adapter.HasSynced) {
		return fmt.Errorf("informers did not sync: %w", ctx.Err())
	}

	// Metrics.
	binder := bind.NewBinder(c, logger)
	collector, err := metrics.NewCollector(c, metrics.WithInformer(adapter), metrics.WithBinder(binder))
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collector); err != nil {
		return err
	}

	// Scheduling: place each pod on the latest snapshot and bind it; a
	// failed binding was forgotten by the binder, so the pod is placed
	// again. A pod that fits on no node stays pending.
	queue := append([]*v1.Pod(nil), pending...)
	unschedulable := 0
	for rounds := 0; len(queue) > 0; rounds++ {
		if rounds > 100 {
			return fmt.Errorf("%d pods still unbound after 100 rounds", len(queue))
		}
		var retry []*v1.Pod
		for _, p := range queue {
			nodeName, err := placer.Place(ctx, c.Snapshot(), p)
			if errors.Is(err, ErrNoNode) {
				unschedulable++
				continue
			}
			if err != nil {
				return err
			}
			if err := binder.Bind(ctx, bind.Placement{Pod: p, Node: nodeName}); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				retry = append(retry, p)
			}
		}
		queue = retry
	}

	// Wait until the informer confirmed every binding (no assumed pod left).
	bound := cfg.Pods - unschedulable
	for st := c.Stats(); st.AssumedPods > 0 || st.Pods < bound; st = c.Stats() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}

	bc := binder.Counts()
	if unschedulable == 0 {
		fmt.Fprintf(out, "scheduled %d pods on %d nodes: %d bindings failed and were forgotten\n", cfg.Pods, cfg.Nodes, bc.Forgotten)
	} else {
		fmt.Fprintf(out, "scheduled %d of %d pods on %d nodes: %d bindings failed and were forgotten; %d pods stay pending: no node fits them\n",
			bound, cfg.Pods, cfg.Nodes, bc.Forgotten, unschedulable)
	}
	snap := c.Snapshot()
	for i := 0; i < snap.NumNodes(); i++ {
		ni := snap.At(i)
		fmt.Fprintf(out, "  %s: %d pods, %dm CPU requested\n", ni.NodeName(), ni.NumPods(), ni.Requested().MilliCPU)
	}
	cmp := &metrics.Comparer{NodeLister: factory.Core().V1().Nodes().Lister(), PodLister: factory.Core().V1().Pods().Lister(), Cache: c}
	diff, err := cmp.Compare(logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "cache agrees with the informers: %v\n", diff.Empty())
	return writeMetrics(out, reg, "scheduler_cache_size", "schedcache_bindings_total")
}

// writeMetrics prints the named metric families, one sample a line.
func writeMetrics(out io.Writer, reg *prometheus.Registry, names ...string) error {
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	var lines []string
	for _, mf := range mfs {
		if !contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			lines = append(lines, fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(labels, ","), v))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}
