package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	upmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/examples"
	"github.com/schedcache/schedcache/kube/fwkadapter"
)

// fitPlacer is a kube/examples.Placer that runs upstream's in-tree
// NodeResourcesFit plugin (PreFilter, Filter, PreScore, Score with the
// LeastAllocated strategy) on the cache's snapshot through kube/fwkadapter,
// and picks the best-scoring node (the first in list order on ties).
// Contract: safe for concurrent use (the plugin keeps its state in the
// per-call CycleState).
type fitPlacer struct {
	fit interface {
		fwk.PreFilterPlugin
		fwk.FilterPlugin
		fwk.PreScorePlugin
		fwk.ScorePlugin
	}
}

// newFitPlacer builds the plugin; its framework runs until ctx ends, and
// done returns once that framework's goroutine has stopped.
func newFitPlacer(ctx context.Context) (p *fitPlacer, done func(), err error) {
	registerMetrics.Do(upmetrics.Register) // the plugin framework records into upstream's metrics
	args := &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
		Type: config.LeastAllocated, Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
	}}
	// A framework needs a queue-sort and a bind plugin; only Fit is run.
	inTree := plugins.NewInTreeRegistry()
	registry := frameworkruntime.Registry{}
	enabled := []config.Plugin{{Name: names.NodeResourcesFit, Weight: 1}, {Name: names.PrioritySort}, {Name: names.DefaultBinder}}
	for _, p := range enabled {
		registry[p.Name] = inTree[p.Name]
	}
	profile := &config.KubeSchedulerProfile{
		SchedulerName: v1.DefaultSchedulerName,
		Plugins:       &config.Plugins{MultiPoint: config.PluginSet{Enabled: enabled}},
		PluginConfig:  []config.PluginConfig{{Name: names.NodeResourcesFit, Args: args}},
	}
	// The framework's metrics recorder flushes every second until ctx ends;
	// done waits for it to stop.
	rec := upmetrics.NewMetricsAsyncRecorder(1000, time.Second, ctx.Done())
	done = func() { <-rec.IsStoppedCh }
	h, err := frameworkruntime.NewFramework(ctx, registry, profile,
		frameworkruntime.WithClientSet(fake.NewClientset()), frameworkruntime.WithMetricsRecorder(rec))
	if err != nil {
		return nil, done, err
	}
	pl, err := registry[names.NodeResourcesFit](ctx, kruntime.Object(args), h)
	if err != nil {
		return nil, done, err
	}
	p = &fitPlacer{}
	var ok bool
	if p.fit, ok = pl.(interface {
		fwk.PreFilterPlugin
		fwk.FilterPlugin
		fwk.PreScorePlugin
		fwk.ScorePlugin
	}); !ok {
		return nil, done, fmt.Errorf("%s lacks a filter or score extension point", names.NodeResourcesFit)
	}
	return p, done, nil
}

// Place implements examples.Placer.
func (p *fitPlacer) Place(ctx context.Context, snap *schedcache.Snapshot, pod *v1.Pod) (string, error) {
	lister, err := fwkadapter.NewLister(snap)
	if err != nil {
		return "", err
	}
	nodes, err := lister.NodeInfos().List()
	if err != nil {
		return "", err
	}
	state := framework.NewCycleState()
	if _, st := p.fit.PreFilter(ctx, state, pod, nodes); !st.IsSuccess() {
		return "", fmt.Errorf("%w: %v", examples.ErrNoNode, st.AsError())
	}
	var feasible []fwk.NodeInfo
	for _, ni := range nodes {
		if p.fit.Filter(ctx, state, pod, ni).IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return "", examples.ErrNoNode
	}
	if st := p.fit.PreScore(ctx, state, pod, feasible); !st.IsSuccess() && !st.IsSkip() {
		return "", st.AsError()
	}
	best, bestScore := "", int64(-1)
	for _, ni := range feasible {
		score, st := p.fit.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			return "", st.AsError()
		}
		if score > bestScore {
			best, bestScore = ni.Node().Name, score
		}
	}
	return best, nil
}

// Example_realPlugin wires everything of the kube module: informers on a
// fake clientset feed the cache, a scheduler places each pod with
// upstream's NodeResourcesFit (Filter and LeastAllocated Score) running on
// the cache's snapshot through kube/fwkadapter, assumes it and binds it
// with BindPod over the simulated dispatcher, and the Prometheus collector
// and the comparer report the end state.
func Example_realPlugin() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	placer, done, err := newFitPlacer(ctx)
	defer done()
	defer cancel()
	if err != nil {
		panic(err)
	}
	if err := examples.Run(ctx, os.Stdout, examples.Config{Nodes: 4, Pods: 8}, placer); err != nil {
		panic(err)
	}
	// Output:
	// scheduled 8 pods on 4 nodes: 0 bindings failed and were forgotten
	//   node-0: 2 pods, 200m CPU requested
	//   node-1: 2 pods, 200m CPU requested
	//   node-2: 2 pods, 200m CPU requested
	//   node-3: 2 pods, 200m CPU requested
	// cache agrees with the informers: true
	// schedcache_bindings_total{result="bound"} 8
	// schedcache_bindings_total{result="forgotten"} 0
	// schedcache_bindings_total{result="refused"} 0
	// scheduler_cache_size{type="assumed_pods"} 0
	// scheduler_cache_size{type="nodes"} 4
	// scheduler_cache_size{type="pods"} 8
}

// The placer's verdicts are the plugin's: a pod that fits on no node's
// allocatable cpu is refused with ErrNoNode; among nodes that fit, the
// least allocated one wins (a node half full loses to an empty one).
func TestFitPlacer(t *testing.T) {
	ctx, placer, c := fitFixture(t)
	got, err := placer.Place(ctx, c.Snapshot(), fitPod("p", "500m", ""))
	require.NoError(t, err)
	require.Equal(t, "b", got, "LeastAllocated prefers the empty node")
	_, err = placer.Place(ctx, c.Snapshot(), fitPod("huge", "3", ""))
	require.ErrorIs(t, err, examples.ErrNoNode, "NodeResourcesFit's Filter refuses every node")
}

// fitNode and fitPod build the small objects of the placer tests: a node
// of 2 CPUs, 4 GiB and 110 pods, and a pod requesting cpu on nodeName.
func fitNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("110")}}}
}

func fitPod(name, cpu, nodeName string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}, Spec: v1.PodSpec{NodeName: nodeName,
		Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

// fitFixture starts a NodeResourcesFit placer and a cache holding nodes a
// and b, with a pod requesting 1 CPU bound to a; both stop when t ends.
func fitFixture(t *testing.T) (context.Context, *fitPlacer, *schedcache.Cache) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	placer, done, err := newFitPlacer(ctx)
	t.Cleanup(done)
	t.Cleanup(cancel)
	require.NoError(t, err)
	c, err := schedcache.New(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for _, n := range []string{"a", "b"} {
		_, err := c.AddNode(discard, fitNode(n))
		require.NoError(t, err)
	}
	require.NoError(t, c.AddPod(discard, fitPod("busy", "1", "a")))
	return ctx, placer, c
}
