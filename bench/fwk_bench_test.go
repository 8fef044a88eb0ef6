package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	"github.com/schedcache/schedcache/workload"
)

// BenchmarkFwkList: what serving a snapshot as fwk.SharedLister costs, on
// the loaded standard 5k cluster.
//
//   - take+List: today's read of a full node list (Cache.Snapshot, then
//     Snapshot.List: a new []*NodeInfo).
//   - fwkList/unchanged: upstream's pattern, a long-lived Lister over the
//     scheduler's own snapshot, refreshed (CopyFrom, what UpdateSnapshot
//     does) and listed; nothing changed, so List() checks its last list
//     node by node and returns it.
//   - fwkList/changed: the same, but each refresh alternates between two
//     published snapshots that differ in one node, so every List() builds
//     a new []fwk.NodeInfo (16 bytes a node against 8 for take+List).
func BenchmarkFwkList(b *testing.B) {
	spec := workload.Standard()
	run := func(name string, setup func(b *testing.B, c *schedcache.Cache) func()) {
		b.Run(name+"/nodes="+sizeName(spec), func(b *testing.B) {
			f := getFixture(b, SchedCache, "fwklist", spec, Options{})
			op := setup(b, f.impl.(*schedImpl).Cache())
			settleHeap()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				op()
			}
		})
	}
	run("take+List", func(b *testing.B, c *schedcache.Cache) func() {
		return func() {
			if l, err := c.Snapshot().List(); err != nil || len(l) != spec.Nodes {
				b.Fatal(len(l), err)
			}
		}
	})
	fwkList := func(b *testing.B, c *schedcache.Cache, sources []*schedcache.Snapshot) func() {
		snap := schedcache.NewEmptySnapshot()
		lister, err := fwkadapter.NewLister(snap)
		if err != nil {
			b.Fatal(err)
		}
		i := 0
		return func() {
			if err := snap.CopyFrom(sources[i%len(sources)]); err != nil {
				b.Fatal(err)
			}
			i++
			if l, err := lister.NodeInfos().List(); err != nil || len(l) != spec.Nodes {
				b.Fatal(len(l), err)
			}
		}
	}
	run("fwkList/unchanged", func(b *testing.B, c *schedcache.Cache) func() {
		return fwkList(b, c, []*schedcache.Snapshot{c.Snapshot()})
	})
	run("fwkList/changed", func(b *testing.B, c *schedcache.Cache) func() {
		s1 := c.Snapshot()
		pod := workload.NewPod(workload.NewRand(5), "fwklist-probe", workload.NodeName(17))
		if err := c.AssumePod(discard, pod); err != nil {
			b.Fatal(err)
		}
		s2 := c.Snapshot()
		if err := c.ForgetPod(discard, pod); err != nil {
			b.Fatal(err)
		}
		return fwkList(b, c, []*schedcache.Snapshot{s1, s2})
	})
}

// BenchmarkSchedulingCycle: one full scheduling cycle of the upstream
// framework, the plugins of TestFwkPluginsIdentical, on each snapshot:
// refresh the scheduler's snapshot (UpdateSnapshot), List, PreFilter,
// Filter on every node, PreScore and Score (normalised, weighted) on the
// feasible ones, pick the best, and assume the pod there (forgetting the
// oldest of more than 200 assumed pods, so the cluster stays as loaded).
// Filters run on one goroutine, so the figure is the cycle's CPU cost.
// Both implementations in the same run; pods from fwkPod.
func BenchmarkSchedulingCycle(b *testing.B) {
	spec := workload.Standard()
	releaseFixture()
	nodes, existing := fwkCluster(spec)
	env := newFwkEnv(b, nodes)
	for _, impl := range Impls {
		b.Run(fmt.Sprintf("impl=%s/nodes=%s", impl, sizeName(spec)), func(b *testing.B) {
			ctx, cancel := fwkContext(b)
			defer cancel()
			s := newFwkSide(b, ctx, impl, env)
			defer s.impl.Close()
			for _, n := range nodes {
				if err := s.impl.AddNode(n); err != nil {
					b.Fatal(err)
				}
			}
			for _, p := range existing {
				if err := s.impl.Submit(workload.Event{Kind: workload.AddPod, Pod: p}); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.impl.Flush(); err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(11, 11))
			pods := make([]*v1.Pod, b.N+1)
			for i := range pods {
				pods[i] = fwkPod(r, i)
			}
			var assumed []*v1.Pod
			cycle := func(pod *v1.Pod) {
				best := s.cycle(b, pod)
				if best == "" {
					return
				}
				placed := pod.DeepCopy()
				placed.Spec.NodeName = best
				if err := s.impl.AssumePod(placed); err != nil {
					b.Fatal(err)
				}
				if assumed = append(assumed, placed); len(assumed) > 200 {
					if err := s.impl.ForgetPod(assumed[0]); err != nil {
						b.Fatal(err)
					}
					assumed = assumed[1:]
				}
			}
			cycle(pods[b.N]) // warm-up: the first refresh is a full clone upstream
			settleHeap()
			b.ReportAllocs()
			b.ResetTimer()
			stopProfile := timedProfile(b)
			start := time.Now()
			for i := range b.N {
				cycle(pods[i])
			}
			elapsed := time.Since(start)
			stopProfile()
			b.StopTimer() // stopping the framework and the cache is not part of a cycle
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
		})
	}
}

// cycle runs one scheduling cycle of pod through the framework and
// returns the best node, "" if none fits.
func (s *fwkSide) cycle(b *testing.B, pod *v1.Pod) string {
	ctx := b.Context()
	nodes := s.list(b)
	state := framework.NewCycleState()
	pre, st, _ := s.fw.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() {
		return ""
	}
	feasible := make([]fwk.NodeInfo, 0, len(nodes))
	for _, ni := range nodes {
		if pre != nil && !pre.AllNodes() && !pre.NodeNames.Has(ni.Node().Name) {
			continue
		}
		if s.fw.RunFilterPlugins(ctx, state, pod, ni).IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return ""
	}
	if st := s.fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return ""
	}
	scores, st := s.fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return ""
	}
	best, bestScore := "", int64(0)
	for _, ns := range scores {
		if best == "" || ns.TotalScore > bestScore || (ns.TotalScore == bestScore && ns.Name < best) {
			best, bestScore = ns.Name, ns.TotalScore
		}
	}
	return best
}
