package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
	"github.com/schedcache/schedcache/workload"
)

// forkSink keeps a benchmarked fork on the heap, as a caller's would be.
var forkSink *snapshot.Fork

// BenchmarkFork measures what-if forks (snapshot.Fork) of the loaded
// cache's published snapshot, the operations Cluster Autoscaler's
// ClusterSnapshot performs per simulated scheduling decision:
//   - fork: Snapshot.Fork alone;
//   - fork+revert: Fork, a nested fork point, Revert;
//   - fork+100adds+revert: Fork, a fork point, 100 AddPods of new pods on
//     random nodes, the fork's Snapshot (freezes the changed nodes), Revert;
//   - fork+addnode+revert: Fork, a fork point, AddNode of a new node (a
//     scale-up; the zone tree is rebuilt from the list and the lists
//     rebuilt, O(nodes)), Revert;
//   - fork+2addnodes+revert: Cluster Autoscaler's churn loop on one
//     long-lived fork: a fork point, AddNode, a fork point, AddNode of a
//     second new node, Revert, Revert (nothing reads the list between);
//   - fork+100adds+commit: on one long-lived fork, a fork point, 100
//     AddPods, Commit of the level; the pods are removed again untimed;
//   - fork+drain+revert: Fork, a fork point, RemovePod of every pod of one
//     node (a scale-down simulation), the fork's Snapshot, Revert;
//   - fork+assume+commit: a fork point, one AssumePod, Commit of the level
//     (folded into the fork below), on one long-lived fork, the pod then
//     forgotten (so the fork stays as loaded).
//
// The 50,000-node cluster runs with -bench.50k.
func BenchmarkFork(b *testing.B) {
	for _, spec := range specs(true) {
		run := func(name string, body func(b *testing.B, base *snapshot.Snapshot, pods []*v1.Pod)) {
			b.Run(fmt.Sprintf("op=%s/nodes=%s", name, sizeName(spec)), func(b *testing.B) {
				f := getFixture(b, SchedCache, "fork", spec, Options{})
				base := f.impl.(*schedImpl).Cache().Snapshot()
				r := workload.NewRand(11)
				pods := make([]*v1.Pod, 100)
				for i := range pods {
					pods[i] = workload.NewPod(r, fmt.Sprintf("fork-%d", i), workload.NodeName(r.IntN(spec.Nodes)))
				}
				settleHeap()
				b.ReportAllocs()
				b.ResetTimer()
				m := takeCPU()
				body(b, base, pods)
				m.report(b, b.N) // cpu-ns/op: robust to a loaded box (untimed parts included)
			})
		}
		run("fork", func(b *testing.B, base *snapshot.Snapshot, _ []*v1.Pod) {
			for range b.N {
				forkSink = base.Fork()
			}
		})
		run("fork+revert", func(b *testing.B, base *snapshot.Snapshot, _ []*v1.Pod) {
			for range b.N {
				f := base.Fork()
				f.Fork()
				if err := f.Revert(); err != nil {
					b.Fatal(err)
				}
			}
		})
		run("fork+100adds+revert", func(b *testing.B, base *snapshot.Snapshot, pods []*v1.Pod) {
			for range b.N {
				f := base.Fork()
				f.Fork()
				for _, p := range pods {
					if err := f.AddPod(p); err != nil {
						b.Fatal(err)
					}
				}
				if s := f.Snapshot(); s.PodCount() != base.PodCount()+len(pods) {
					b.Fatal(s.PodCount())
				}
				if err := f.Revert(); err != nil {
					b.Fatal(err)
				}
			}
		})
		run("fork+addnode+revert", func(b *testing.B, base *snapshot.Snapshot, _ []*v1.Pod) {
			node := workload.NewNode(workload.NewRand(3), spec.Nodes+1, workload.NewImagePool(1))
			for range b.N {
				f := base.Fork()
				f.Fork()
				if err := f.AddNode(node); err != nil {
					b.Fatal(err)
				}
				if err := f.Revert(); err != nil {
					b.Fatal(err)
				}
			}
		})
		run("fork+2addnodes+revert", func(b *testing.B, base *snapshot.Snapshot, _ []*v1.Pod) {
			pool := workload.NewImagePool(1)
			n1 := workload.NewNode(workload.NewRand(3), spec.Nodes+1, pool)
			n2 := workload.NewNode(workload.NewRand(4), spec.Nodes+2, pool)
			f := base.Fork()
			for range b.N {
				f.Fork()
				if err := f.AddNode(n1); err != nil {
					b.Fatal(err)
				}
				f.Fork()
				if err := f.AddNode(n2); err != nil {
					b.Fatal(err)
				}
				if err := f.Revert(); err != nil {
					b.Fatal(err)
				}
				if err := f.Revert(); err != nil {
					b.Fatal(err)
				}
			}
			if f.Snapshot().NumNodes() != base.NumNodes() {
				b.Fatal("churn left nodes")
			}
		})
		run("fork+100adds+commit", func(b *testing.B, base *snapshot.Snapshot, pods []*v1.Pod) {
			f := base.Fork()
			for range b.N {
				f.Fork()
				for _, p := range pods {
					if err := f.AddPod(p); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.Commit(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for _, p := range pods {
					if err := f.RemovePod(p); err != nil {
						b.Fatal(err)
					}
				}
				f.Snapshot()
				b.StartTimer()
			}
		})
		run("fork+drain+revert", func(b *testing.B, base *snapshot.Snapshot, _ []*v1.Pod) {
			ni, err := base.Get(workload.NodeName(7))
			if err != nil {
				b.Fatal(err)
			}
			pods := ni.Pods()
			for range b.N {
				f := base.Fork()
				f.Fork()
				for _, pi := range pods {
					if err := f.RemovePod(pi.Pod()); err != nil {
						b.Fatal(err)
					}
				}
				if f.Snapshot().PodCount() != base.PodCount()-len(pods) {
					b.Fatal("drain")
				}
				if err := f.Revert(); err != nil {
					b.Fatal(err)
				}
			}
		})
		run("fork+assume+commit", func(b *testing.B, base *snapshot.Snapshot, pods []*v1.Pod) {
			f := base.Fork()
			for i := range b.N {
				p := pods[i%len(pods)]
				f.Fork()
				if err := f.AssumePod(p); err != nil {
					b.Fatal(err)
				}
				if err := f.Commit(); err != nil {
					b.Fatal(err)
				}
				if err := f.ForgetPod(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkW3Optimistic: W3's placement loop (S scheduler goroutines, each
// pod: take the published snapshot, pick the least-allocated of 50
// sampled nodes that fit, assume) on schedcache, with two ways to assume:
//   - mode=assume: AssumePod, as W3 (a pick made on a stale snapshot goes
//     through: stale-% counts picks whose node received another
//     scheduler's pod after the snapshot was taken, an upper bound);
//   - mode=optimistic: AssumePodIfGeneration with the generation of the
//     picked node in the snapshot; a conflict (the node changed) makes the
//     scheduler pick again on a new snapshot (conflict-% counts them per
//     pod). Nothing is ever placed on a stale view.
//
// Bindings are not finished or confirmed here (W3 measures those); the
// assumed pods are forgotten after the timed region. ns/op is per pod.
func BenchmarkW3Optimistic(b *testing.B) {
	for _, spec := range specs(false) {
		for _, mode := range []string{"assume", "optimistic"} {
			for _, s := range []int{1, 2, 4} {
				b.Run(fmt.Sprintf("mode=%s/nodes=%s/schedulers=%d", mode, sizeName(spec), s), func(b *testing.B) {
					benchW3Optimistic(b, spec, mode == "optimistic", s)
				})
			}
		}
	}
}

func benchW3Optimistic(b *testing.B, spec workload.ClusterSpec, optimistic bool, nSched int) {
	f := getFixture(b, SchedCache, "W3opt", spec, Options{})
	c := f.impl.(*schedImpl).Cache()
	templates := make([]*v1.Pod, b.N)
	cpus, mems := make([]int64, b.N), make([]int64, b.N)
	for i := range templates {
		templates[i] = workload.NewPod(f.rng, fmt.Sprintf("w3o-%08d", f.seq), "")
		f.seq++
		cpus[i], mems[i] = podRequest(templates[i])
	}
	nodeIndex := make(map[string]int, len(f.cluster.Nodes))
	for i, n := range f.cluster.Nodes {
		nodeIndex[n.Name] = i
	}
	lastAssume := make([]atomic.Uint64, len(f.cluster.Nodes))
	placed := make([][]*v1.Pod, nSched)
	var seq, stale, conflicts, unsched atomic.Int64
	var firstErr atomic.Pointer[error]
	fail := func(err error) { firstErr.CompareAndSwap(nil, &err) }
	settleHeap()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for s := range nSched {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(s), 0x35))
			for i := s; i < b.N; i += nSched {
				for attempt := 0; ; attempt++ {
					before := seq.Load()
					snap := c.Snapshot()
					n := snap.NumNodes()
					var best *nodeinfo.NodeInfo
					bestScore := int64(1 << 62)
					for range w3Sample {
						ni := snap.At(rng.IntN(n))
						req, alloc := ni.Requested(), ni.Allocatable()
						if int64(ni.NumPods()) >= alloc.AllowedPodNumber || req.MilliCPU+cpus[i] > alloc.MilliCPU || req.Memory+mems[i] > alloc.Memory {
							continue
						}
						score := (req.MilliCPU+cpus[i])*1000/alloc.MilliCPU + (req.Memory+mems[i])*1000/alloc.Memory
						if score < bestScore {
							best, bestScore = ni, score
						}
					}
					if best == nil {
						unsched.Add(1)
						break
					}
					p := new(v1.Pod)
					*p = *templates[i]
					p.Spec.NodeName = best.NodeName()
					var err error
					if optimistic {
						err = c.AssumePodIfGeneration(p, best.Generation())
					} else {
						err = c.AssumePod(discard, p)
					}
					if errors.Is(err, schedcache.ErrCommitConflict) && attempt < 10 {
						conflicts.Add(1)
						continue
					}
					if err != nil {
						fail(err)
						return
					}
					my := seq.Add(1)
					if prev := lastAssume[nodeIndex[p.Spec.NodeName]].Swap(uint64(my)); int64(prev) > before {
						stale.Add(1)
					}
					placed[s] = append(placed[s], p)
					break
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if p := firstErr.Load(); p != nil {
		b.Fatal(*p)
	}
	for _, ps := range placed { // untimed cleanup: the cluster stays as loaded
		for _, p := range ps {
			if err := c.ForgetPod(discard, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	if scheduled := seq.Load(); scheduled > 0 {
		b.ReportMetric(float64(scheduled)/elapsed.Seconds(), "pods/s")
		b.ReportMetric(100*float64(conflicts.Load())/float64(scheduled), "conflict-%")
		if !optimistic {
			b.ReportMetric(100*float64(stale.Load())/float64(scheduled), "stale-%")
		}
	}
	if u := unsched.Load(); u > 0 {
		b.ReportMetric(float64(u), "unschedulable")
	}
}
