package overload

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/workload"
)

// TestOverloadFailingEventsSlowHandler: the same flood, but every event
// fails (RemovePodAsync of pods the cache never saw, as after an informer
// relist) and the async error handler is slower than the cache (20µs per
// error, e.g. a logger). Backpressure must still hold end to end: the
// failures accepted but not yet handed to the handler must stay bounded
// (the mailbox bounds the events; nothing may buffer the failures without
// limit), and so must the heap. The bound checked is generous: 10 x
// (mailbox + max batch) failures pending at most.
func TestOverloadFailingEventsSlowHandler(t *testing.T) {
	const producers = 4
	N := 5000
	if !testing.Short() {
		N = 100000
	}
	if *flagPairs > 0 {
		N = *flagPairs
	}
	mailbox := *flagMailbox
	cl := workload.Build(workload.ClusterSpec{Nodes: 1, PodsPerNode: 1, Seed: 1})
	var handled atomic.Int64
	c, err := schedcache.New(context.Background(), schedcache.WithMailboxSize(mailbox), schedcache.WithMaxBatch(maxBatch),
		schedcache.WithAsyncErrorHandler(func(schedcache.AsyncError) {
			for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; {
			}
			handled.Add(1)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runtime.GC()
	baseHeap := liveHeap()
	var submitted atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for p := 0; p < producers; p++ {
		wg.Go(func() {
			for k := 0; k < N; k++ {
				if err := c.RemovePodAsync(newPod(cl.Pods[0], p, k, cl.Nodes[0].Name)); err != nil {
					t.Errorf("RemovePodAsync: %v", err)
					return
				}
				submitted.Add(1)
			}
		})
	}
	done := make(chan struct{})
	var maxPending int64
	var peakHeap uint64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(*flagInterval)
		defer tick.Stop()
		for {
			// handled first: submitted(t2) - handled(t1) >= the true backlog.
			h := handled.Load()
			s := submitted.Load()
			maxPending = max(maxPending, s-h)
			peakHeap = max(peakHeap, liveHeap())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	wg.Wait()
	produced := time.Since(start)
	total := int64(producers * N)
	for deadline := time.Now().Add(5 * time.Minute); handled.Load() < total && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(done)
	sampler.Wait()
	drained := time.Since(start)
	if handled.Load() != total {
		t.Fatalf("handler saw %d of %d failures", handled.Load(), total)
	}
	bound := int64(10 * (mailbox + maxBatch))
	t.Logf("%d failing events from %d producers, handler 20µs/error: producers done after %v, handler done after %v; failures pending at most %d (bound %d); live heap baseline %.1f MiB, peak %.1f MiB",
		total, producers, produced.Round(time.Millisecond), drained.Round(time.Millisecond), maxPending, bound, mib(baseHeap), mib(peakHeap))
	if maxPending > bound {
		t.Errorf("up to %d failed events were waiting for the async error handler (bound %d, %s): the coordinator buffers failures without limit while the handler is busy, so producers are never slowed down and memory grows with the flood",
			maxPending, bound, fmt.Sprintf("%.0f%% of all events", 100*float64(maxPending)/float64(total)))
	}
}
