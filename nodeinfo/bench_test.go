package nodeinfo

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// typicalPod is a bound two-container pod with cpu and memory requests;
// withStatus adds the kubelet-reported status resources a running pod has.
func typicalPod(uid string, withStatusResources bool) *v1.Pod {
	muts := []func(*v1.Pod){
		withNode("node-1"),
		withContainers(
			ctr("app", rl("cpu", "250m", "memory", "256Mi")),
			ctr("proxy", rl("cpu", "100m", "memory", "128Mi")),
		),
	}
	if withStatusResources {
		muts = append(muts,
			withStatus("app", rl("cpu", "250m", "memory", "256Mi"), rl("cpu", "250m", "memory", "256Mi")),
			withStatus("proxy", rl("cpu", "100m", "memory", "128Mi"), rl("cpu", "100m", "memory", "128Mi")))
	}
	return mkPod(uid, muts...)
}

func BenchmarkNewPodInfo(b *testing.B) {
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
	}{
		{"spec", typicalPod("u", false)},
		{"status", typicalPod("u", true)},
		{"sidecar+init+overhead", mkPod("u",
			withContainers(ctr("app", rl("cpu", "250m", "memory", "256Mi"))),
			withInit(ctr("init", rl("cpu", "1", "memory", "64Mi")), sidecar("side", rl("cpu", "50m", "memory", "32Mi"))),
			withOverhead(rl("cpu", "10m", "memory", "16Mi")))},
		{"gpu+ports+pvc", mkPod("u",
			withContainers(ctr("app", rl("cpu", "4", "memory", "16Gi", "nvidia.com/gpu", "1"))),
			withHostPort("", "", 8080), withPVCs("data"))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewPodInfo(tc.pod); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNodeStateAddRemove(b *testing.B) {
	s := NewNodeState(NextGeneration)
	s.SetNode(mkNode("node-1", rl("cpu", "8", "memory", "32Gi", "pods", "110")))
	for i := range 30 {
		s.AddPod(mustPodInfo(b, typicalPod(fmt.Sprintf("bg-%d", i), true)))
	}
	p := mustPodInfo(b, typicalPod("churn", true))
	b.ReportAllocs()
	for b.Loop() {
		s.AddPod(p)
		if err := s.RemovePod("churn", false, false, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFreeze30Pods(b *testing.B) {
	setup := func(b *testing.B, rich bool) (*NodeState, *PodInfo) {
		s := NewNodeState(NextGeneration)
		s.SetNode(mkNode("node-1", rl("cpu", "8", "memory", "32Gi", "pods", "110", "hugepages-2Mi", "0")))
		s.SetImageStates(map[string]ImageStateSummary{"app:1": {Size: 1 << 28, NumNodes: 10}})
		for i := range 30 {
			pod := typicalPod(fmt.Sprintf("bg-%d", i), true)
			if rich && i%3 == 0 {
				withHostPort("", "", int32(9000+i))(pod)
				withPVCs(fmt.Sprintf("data-%d", i))(pod)
				withContainers(ctr("gpu", rl("nvidia.com/gpu", "1")))(pod)
				withAffinity(requiredAntiAff)(pod)
			}
			s.AddPod(mustPodInfo(b, pod))
		}
		return s, mustPodInfo(b, typicalPod("churn", true))
	}
	// Each iteration changes the node (one pod replaced) and freezes it:
	// the per-node cost of a publication.
	for _, rich := range []bool{false, true} {
		b.Run(fmt.Sprintf("afterPodChange/rich=%v", rich), func(b *testing.B) {
			s, p := setup(b, rich)
			s.AddPod(p)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.RemovePod("churn", false, false, false); err != nil {
					b.Fatal(err)
				}
				s.AddPod(p)
				_ = s.Freeze()
			}
		})
	}
	b.Run("unchanged", func(b *testing.B) {
		s, _ := setup(b, true)
		_ = s.Freeze()
		b.ReportAllocs()
		for b.Loop() {
			_ = s.Freeze()
		}
	})
}

// BenchmarkLoadNum converts one amount as requests are read: memory at
// scale 0 (a whole amount takes the AsInt64 shortcut), cpu at milli scale
// (always the checked conversion); /checked is the checked conversion
// alone, for comparison.
func BenchmarkLoadNum(b *testing.B) {
	for _, tc := range []struct {
		name  string
		in    string
		scale resource.Scale
	}{{"memory=256Mi", "256Mi", 0}, {"cpu=250m", "250m", resource.Milli}, {"cpu=2", "2", resource.Milli}} {
		q := resource.MustParse(tc.in)
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				_ = loadNum(&q, tc.scale)
			}
		})
		b.Run(tc.name+"/checked", func(b *testing.B) {
			for b.Loop() {
				_ = loadNumChecked(&q, tc.scale)
			}
		})
	}
}
