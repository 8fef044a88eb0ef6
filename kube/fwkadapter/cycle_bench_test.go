package fwkadapter

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
	"github.com/schedcache/schedcache/workload"
)

// BenchmarkPodGroupCycle is bench's op=podgroup-cycle on a Mutable alone
// (no upstream): 100 snapshot AssumePods on 100 nodes of workload.Standard,
// each node read back, then the 100 ForgetPods in reverse order. For
// profiling; bench/mutations_bench_test.go compares with upstream.
func BenchmarkPodGroupCycle(b *testing.B) {
	cl := workload.Build(workload.Standard())
	candidates := make([]string, 100)
	for i := range candidates {
		candidates[i] = cl.Nodes[(i*7919)%len(cl.Nodes)].Name
	}
	r := workload.NewRand(17)
	group := make([]*v1.Pod, 100)
	infos := make([]*PodInfo, 100)
	for i := range group {
		group[i] = workload.NewPod(r, fmt.Sprintf("gang-%d", i), candidates[i])
		pi, err := nodeinfo.NewPodInfo(group[i])
		if err != nil {
			b.Fatal(err)
		}
		infos[i] = WrapPod(pi).(*PodInfo)
	}
	m, err := NewMutable(snapshot.NewSnapshot(cl.Pods, cl.Nodes))
	if err != nil {
		b.Fatal(err)
	}
	lg := klog.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i, pi := range infos {
			if err := m.AssumePod(pi); err != nil {
				b.Fatal(err)
			}
			if _, err := m.NodeInfos().Get(candidates[i]); err != nil {
				b.Fatal(err)
			}
		}
		for i := len(group) - 1; i >= 0; i-- {
			if err := m.ForgetPod(lg, group[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
}
