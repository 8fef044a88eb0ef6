package informer_test

import (
	"sync/atomic"
	"testing"

	"github.com/puzpuzpuz/xsync/v3"
)

// BenchmarkCounterInc compares the adapter's event counters (xsync.Counter,
// striped) with one atomic.Int64 when every goroutine bumps the same
// counter, as informer handler goroutines and binder workers do. Run with
// -cpu 1,2,4.
func BenchmarkCounterInc(b *testing.B) {
	b.Run("atomic", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
	b.Run("xsync", func(b *testing.B) {
		n := xsync.NewCounter()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Inc()
			}
		})
	})
}
