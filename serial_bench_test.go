package schedcache_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
)

// BenchmarkSerialCeiling measures the serial section (the coordinator's
// token: applying ops, publishing, answering) with callers that do
// nothing but issue ops, on the loaded standard cluster (5,000 nodes,
// 150,000 pods), GOMAXPROCS callers or 8 times as many (contention: more
// callers than cores wait for the token). Reported per run (WithSerialTiming):
//
//   - ops/s: the ops the callers got through;
//   - held-ns/op: token time per op (batches' total over ops applied);
//   - ceiling-ops/s: 1e9 / held-ns/op, the ops per second the serial
//     section allows on any number of cores at this mix and batching;
//   - ops/batch: the mean batch size (an op run inline is a batch of one,
//     also when its epoch is handed over: see ops/pub);
//   - ops/pub: ops per publication (group commit: a batch of the mailbox
//     also publishes the epochs handed over to it by callers running inline);
//   - cpu-ns/loop: the process's CPU time (getrusage: callers, the
//     serial section, the folder, GC) per loop iteration (b.N counts
//     iterations: two ops, or W3's three). Unlike the wall-clock figures
//     above it barely moves when other processes take the CPU away
//     mid-section, so it compares two builds on a loaded machine;
//   - gc-cycles: garbage collections during the run (a window that ends
//     before the first would flatter the figure);
//   - for mix=w3, ceiling-pods/s: the ceiling over the loop's 3 ops per
//     pod (W3's AssumePod and confirming AddPod, plus the removal that
//     keeps the cluster's size: a bound below W3's own, whose pods stay).
//
// Mixes: assume-forget (synchronous AssumePod and ForgetPod: the inline
// path, batches of one unless callers contend), add-remove-async
// (AddPodAsync and RemovePodAsync: mailbox batches), w3 (W3's per-pod
// ops: a synchronous AssumePod, the confirming AddPodAsync; the pod is
// then removed asynchronously, outside the count of per-pod ops, to keep
// the cluster's size).
func BenchmarkSerialCeiling(b *testing.B) {
	cl := standardCluster()
	for _, mix := range []string{"assume-forget", "add-remove-async", "w3"} {
		for _, callers := range []int{1, 8} {
			b.Run(fmt.Sprintf("mix=%s/callers=%dxGOMAXPROCS", mix, callers), func(b *testing.B) {
				c := loadedCache(b, schedcache.WithSerialTiming())
				defer c.Close()
				var seq atomic.Int64
				before, pubs0 := c.SerialStats(), c.Stats().Publications
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				gc0 := ms.NumGC
				b.ReportAllocs()
				b.SetParallelism(callers)
				b.ResetTimer()
				cpu0, cpuOK := processCPU()
				b.RunParallel(func(pb *testing.PB) {
					id := seq.Add(1)
					pods := make([]*v1.Pod, 256)
					for i := range pods {
						pods[i] = pod(fmt.Sprintf("serial-%d-%d", id, i), cl.Nodes[(int(id)*7919+i*31)%len(cl.Nodes)].Name, 10)
					}
					for i := 0; pb.Next(); i++ {
						p := pods[i%len(pods)]
						var err error
						switch mix {
						case "assume-forget":
							if err = c.AssumePod(logger, p); err == nil {
								err = c.ForgetPod(logger, p)
							}
						case "add-remove-async":
							if err = c.AddPodAsync(p); err == nil {
								err = c.RemovePodAsync(p)
							}
						case "w3":
							if err = c.AssumePod(logger, p); err == nil {
								if err = c.AddPodAsync(p); err == nil {
									err = c.RemovePodAsync(p)
								}
							}
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
				if err := c.Sync(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if cpu1, ok := processCPU(); ok && cpuOK {
					b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/loop")
				}
				s, pubs := c.SerialStats(), c.Stats().Publications-pubs0
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.NumGC-gc0), "gc-cycles")
				ops := s.Ops() - before.Ops()
				held := s.Held() - before.Held()
				var batches uint64
				for i := range s.Batch {
					batches += s.Batch[i].Count - before.Batch[i].Count
				}
				if ops == 0 || held <= 0 || batches == 0 {
					b.Fatalf("nothing recorded: %d ops, %v held, %d batches", ops, held, batches)
				}
				heldPerOp := float64(held.Nanoseconds()) / float64(ops)
				b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "ops/s")
				b.ReportMetric(heldPerOp, "held-ns/op")
				b.ReportMetric(1e9/heldPerOp, "ceiling-ops/s")
				b.ReportMetric(float64(ops)/float64(batches), "ops/batch")
				if pubs > 0 {
					b.ReportMetric(float64(ops)/float64(pubs), "ops/pub")
				}
				if mix == "w3" {
					b.ReportMetric(1e9/heldPerOp/3, "ceiling-pods/s")
				}
				logSerial(b, before, s)
			})
		}
	}
}

// logSerial logs the serial section between two readings: the mean time
// applying each op kind, per publication, and per batch by size bucket.
func logSerial(b *testing.B, before, after schedcache.SerialStats) {
	b.Helper()
	mean := func(x, y schedcache.Hold) string {
		n := y.Count - x.Count
		if n == 0 {
			return ""
		}
		return fmt.Sprintf("%d x %v", n, (y.Total-x.Total)/time.Duration(n))
	}
	for k := range schedcache.NumOpKinds {
		if m := mean(before.Apply[k], after.Apply[k]); m != "" {
			b.Logf("apply %-16v %s", schedcache.OpKind(k), m)
		}
	}
	b.Logf("publish          %s", mean(before.Publish, after.Publish))
	for i, bound := range schedcache.BatchBuckets {
		if m := mean(before.Batch[i], after.Batch[i]); m != "" {
			b.Logf("batch <= %-7d %s", bound, m)
		}
	}
}
