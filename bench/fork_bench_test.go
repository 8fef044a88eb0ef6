package bench

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

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
				body(b, base, pods)
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
