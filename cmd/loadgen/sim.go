package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/framework"
	"github.com/schedcache/schedcache/internal/hist"
	"github.com/schedcache/schedcache/workload"
)

// Config is one simulation.
type Config struct {
	Nodes, PodsPerNode int
	Seed               int64
	Duration           time.Duration
	Schedulers         int
	Sample             int
	ConfirmDelay       time.Duration
	FailRate           float64
	Shards             int
}

// Latency summarises a histogram.
type Latency struct{ P50, P99, P999, Max time.Duration }

func summarise(h *hist.Histogram) Latency {
	return Latency{h.Quantile(0.5), h.Quantile(0.99), h.Quantile(0.999), h.Max()}
}

// Report is what a simulation did.
type Report struct {
	Config                               Config
	Shards                               int
	InitialPods                          int
	LoadTime                             time.Duration
	LoadRate                             float64
	Elapsed                              time.Duration
	Scheduled, Forgotten, FailedBindings int64
	Conflicts, Unschedulable             int64
	Events, Adds, Removes, NodeUpdates   int64
	PodsPerSec, EventsPerSec             float64
	Assume, Read                         Latency
	FinalPods, FinalNodes, ExpectedPods  int
	AsyncErrors                          int64
	Consistent                           bool
}

type confirmation struct {
	pod *v1.Pod
	due time.Time
}

func run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	logger := klog.Background()
	rep := &Report{Config: cfg}
	fmt.Fprintf(progress, "building cluster: %d nodes x %d pods (seed %d)\n", cfg.Nodes, cfg.PodsPerNode, cfg.Seed)
	cl := workload.Build(workload.ClusterSpec{Nodes: cfg.Nodes, PodsPerNode: cfg.PodsPerNode, Seed: cfg.Seed})
	rep.InitialPods = len(cl.Pods)

	var asyncErrs atomic.Int64
	var firstErr atomic.Value
	opts := []schedcache.Option{schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
		if asyncErrs.Add(1) == 1 {
			firstErr.Store(e.Err)
		}
	})}
	if cfg.Shards > 0 {
		opts = append(opts, schedcache.WithShards(cfg.Shards))
	}
	c, err := schedcache.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	defer c.Close()

	t0 := time.Now()
	for _, n := range cl.Nodes {
		if err := c.AddNodeAsync(n); err != nil {
			return nil, err
		}
	}
	for _, p := range cl.Pods {
		if err := c.AddPodAsync(p); err != nil {
			return nil, err
		}
	}
	if err := c.Sync(); err != nil {
		return nil, err
	}
	rep.LoadTime = time.Since(t0)
	rep.LoadRate = float64(len(cl.Nodes)+len(cl.Pods)) / rep.LoadTime.Seconds()
	fmt.Fprintf(progress, "loaded in %v; scheduling for %v with %d schedulers\n", rep.LoadTime.Round(time.Millisecond), cfg.Duration, cfg.Schedulers)

	confirm := make(chan confirmation, 4096)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var scheduled, forgotten, failed, conflicts, unsched atomic.Int64
	hAssume := make([]*hist.Histogram, cfg.Schedulers)
	hRead := make([]*hist.Histogram, cfg.Schedulers)
	start := time.Now()
	for s := 0; s < cfg.Schedulers; s++ {
		hAssume[s], hRead[s] = hist.New(), hist.New()
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(s)+1000))
			for i := 0; !stop.Load(); i++ {
				pod := workload.NewPod(r, fmt.Sprintf("sched-%d-%d", s, i), "")
				info, err := framework.NewPodInfo(pod)
				if err != nil {
					panic(err)
				}
				tr := time.Now()
				snap := c.Snapshot()
				best := pick(r, snap, info, cfg.Sample)
				hRead[s].Record(time.Since(tr))
				if best == "" {
					unsched.Add(1)
					continue
				}
				pod.Spec.NodeName = best
				ta := time.Now()
				if err := c.AssumePod(logger, pod); err != nil {
					panic(fmt.Sprintf("AssumePod: %v", err))
				}
				hAssume[s].Record(time.Since(ta))
				// Optimistic concurrency: another scheduler may have filled
				// the node since our snapshot. Check on a fresh snapshot.
				if ni, err := c.Snapshot().Get(best); err != nil || overcommitted(ni) {
					conflicts.Add(1)
					mustForget(c, pod, &forgotten)
					continue
				}
				if err := c.FinishBinding(logger, pod); err != nil {
					panic(fmt.Sprintf("FinishBinding: %v", err))
				}
				if r.Float64() < cfg.FailRate {
					failed.Add(1)
					mustForget(c, pod, &forgotten)
					continue
				}
				scheduled.Add(1)
				confirm <- confirmation{pod: pod, due: time.Now().Add(cfg.ConfirmDelay)}
			}
		}(s)
	}

	// The informer: confirms bindings after the delay and deletes an old
	// pod for each one, so the cluster stays at a steady size; one node
	// status update per 100 pod events.
	var adds, removes, nodeUpdates int64
	informerDone := make(chan error, 1)
	go func() {
		r := rand.New(rand.NewPCG(uint64(cfg.Seed), 7))
		live := append([]*v1.Pod(nil), cl.Pods...)
		nodes := append([]*v1.Node(nil), cl.Nodes...)
		events := int64(0)
		for conf := range confirm {
			if d := time.Until(conf.due); d > 0 {
				time.Sleep(d)
			}
			if err := c.AddPodAsync(conf.pod); err != nil {
				informerDone <- err
				return
			}
			adds++
			live = append(live, conf.pod)
			j := r.IntN(len(live))
			victim := live[j]
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
			if err := c.RemovePodAsync(victim); err != nil {
				informerDone <- err
				return
			}
			removes++
			events += 2
			if events%100 < 2 {
				k := r.IntN(len(nodes))
				nn := nodes[k].DeepCopy()
				nn.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(time.Unix(events, 0))}}
				if err := c.UpdateNodeAsync(nodes[k], nn); err != nil {
					informerDone <- err
					return
				}
				nodes[k] = nn
				nodeUpdates++
			}
		}
		informerDone <- nil
	}()

	time.Sleep(cfg.Duration)
	stop.Store(true)
	wg.Wait()
	close(confirm)
	if err := <-informerDone; err != nil {
		return nil, err
	}
	if err := c.Sync(); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(start)
	rep.Shards = cfg.Shards
	if rep.Shards == 0 {
		rep.Shards = max(1, runtime.GOMAXPROCS(0)/2) // the cache's default
	}
	rep.Scheduled, rep.Forgotten, rep.FailedBindings = scheduled.Load(), forgotten.Load(), failed.Load()
	rep.Conflicts, rep.Unschedulable = conflicts.Load(), unsched.Load()
	rep.Adds, rep.Removes, rep.NodeUpdates = adds, removes, nodeUpdates
	rep.Events = adds + removes + nodeUpdates
	rep.PodsPerSec = float64(rep.Scheduled) / rep.Elapsed.Seconds()
	rep.EventsPerSec = float64(rep.Events) / rep.Elapsed.Seconds()
	ha, hr := hist.New(), hist.New()
	for s := range hAssume {
		ha.Merge(hAssume[s])
		hr.Merge(hRead[s])
	}
	rep.Assume, rep.Read = summarise(ha), summarise(hr)
	rep.FinalPods, _ = c.PodCount()
	rep.FinalNodes = c.NodeCount()
	rep.ExpectedPods = rep.InitialPods + int(adds) - int(removes)
	rep.AsyncErrors = asyncErrs.Load()
	rep.Consistent = rep.FinalPods == rep.ExpectedPods && rep.FinalNodes == cfg.Nodes && rep.AsyncErrors == 0 && c.Snapshot().Err() == nil
	if e := firstErr.Load(); e != nil {
		fmt.Fprintln(progress, "first async error:", e)
	}
	return rep, nil
}

func mustForget(c *schedcache.Cache, pod *v1.Pod, forgotten *atomic.Int64) {
	if err := c.ForgetPod(klog.Background(), pod); err != nil {
		panic(fmt.Sprintf("ForgetPod: %v", err))
	}
	forgotten.Add(1)
}

func overcommitted(ni *framework.NodeInfo) bool {
	req, alloc := ni.Requested(), ni.Allocatable()
	return req.MilliCPU > alloc.MilliCPU || req.Memory > alloc.Memory || int64(ni.NumPods()) > alloc.AllowedPodNumber
}

// pick returns the least-allocated node among `sample` random nodes of snap
// that fit the pod, or "" if none fits.
func pick(r *rand.Rand, snap *schedcache.Snapshot, info *framework.PodInfo, sample int) string {
	n := snap.NumNodes()
	if n == 0 {
		return ""
	}
	want := info.Requests()
	best, bestScore := "", -1.0
	for i := 0; i < sample; i++ {
		ni := snap.At(r.IntN(n))
		req, alloc := ni.Requested(), ni.Allocatable()
		freeCPU := alloc.MilliCPU - req.MilliCPU - want.MilliCPU
		freeMem := alloc.Memory - req.Memory - want.Memory
		if freeCPU < 0 || freeMem < 0 || int64(ni.NumPods()) >= alloc.AllowedPodNumber {
			continue
		}
		score := float64(freeCPU)/float64(alloc.MilliCPU) + float64(freeMem)/float64(alloc.Memory)
		if score > bestScore {
			best, bestScore = ni.Node().Name, score
		}
	}
	return best
}
