package workload

import (
	"runtime"
	"testing"
)

// BenchmarkBuild5k measures Build(Standard()) and reports the live heap of
// one standard cluster.
func BenchmarkBuild5k(b *testing.B) {
	b.ReportAllocs()
	var c *Cluster
	for b.Loop() {
		c = nil // let the previous cluster go before building the next
		c = Build(Standard())
	}
	b.StopTimer()
	c = nil
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	c = Build(Standard())
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(c)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "live-MiB")
}

func BenchmarkNewPod(b *testing.B) {
	b.ReportAllocs()
	r := NewRand(1)
	for b.Loop() {
		NewPod(r, "pod-x", "node-00000")
	}
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
