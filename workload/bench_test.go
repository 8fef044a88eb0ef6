package workload

import (
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkBuild5k measures Build(Standard()) and reports the live heap of
// one standard cluster.
func BenchmarkBuild5k(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Build(Standard())
	}
	b.StopTimer()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	c := Build(Standard())
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(c)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "live-MiB")
}

var podSink *v1.Pod

func BenchmarkNewPod(b *testing.B) {
	b.ReportAllocs()
	r := NewRand(1)
	for b.Loop() {
		podSink = NewPod(r, "pod-x", "node-00000")
	}
	podSink = nil
}

func BenchmarkInformerChurnNext(b *testing.B) {
	s := NewInformerChurn(standard(), 1)
	b.ReportAllocs()
	for b.Loop() {
		s.Next()
	}
}

func BenchmarkNodeChurnNext(b *testing.B) {
	s := NewNodeChurn(standard(), 1)
	b.ReportAllocs()
	for b.Loop() {
		s.Next()
	}
}

func BenchmarkZipfNext(b *testing.B) {
	z := NewZipf(NewRand(1), 5000, 1.01)
	b.ReportAllocs()
	for b.Loop() {
		z.Next()
	}
}
