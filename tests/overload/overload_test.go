// Package overload floods the cache with asynchronous events far faster
// than it can apply them and checks the backpressure contract of
// WithMailboxSize: producers block instead of queueing without bound, so
// the number of accepted-but-unpublished events never exceeds the mailbox
// plus one batch, and every event is applied, in order, none lost. Every
// assertion counts events (accepted, applied, producers inside Submit);
// the live heap is reported, and bounded only where an unbounded queue
// would exceed the bound many times over (the long form): a heap figure
// depends on when the GC last ran.
//
// Each producer p submits, for k = 0..N-1, AddPodAsync(pod p/k) and then
// RemovePodAsync(pod p/(k-1)); at the end exactly one pod per producer
// (p/(N-1)) survives, and any reordering or loss shows up as an async
// error or a wrong survivor set.
//
// Short form (CI): go test -race -short ./tests/overload/
// Long form:       go test ./tests/overload/ -overload.pairs=200000 -overload.out=/tmp/overload.md -timeout 0
package overload

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/cachetest"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/workload"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

var (
	flagProducers = flag.Int("overload.producers", 8, "producer goroutines")
	flagPairs     = flag.Int("overload.pairs", 0, "AddPodAsync/RemovePodAsync pairs per producer (default 4000 with -short, 200000 otherwise)")
	flagMailbox   = flag.Int("overload.mailbox", 64, "WithMailboxSize")
	flagSpin      = flag.Duration("overload.spin", 20*time.Microsecond, "busy-wait per operation in a coordinator fault hook (slows the cache down)")
	flagOut       = flag.String("overload.out", "", "write the sample table (markdown) to this file")
	flagInterval  = flag.Duration("overload.interval", 10*time.Millisecond, "sampling interval")
)

const maxBatch = 256 // the default WithMaxBatch, set explicitly so the bound below holds

type sample struct {
	elapsed   time.Duration
	submitted int64  // events whose Submit returned
	applied   int64  // snapshot epoch minus the epoch before the run: events applied and published
	liveHeap  uint64 // heap the last GC found live (/gc/heap/live:bytes)
}

// perEventBytes measures what one queued event would keep alive if the
// mailbox did not block: the pod object of an add plus its PodInfo (the
// cache's op struct is pooled and not counted), averaged over an add and a
// remove (the remove reuses the add's pod).
func perEventBytes(template *v1.Pod) float64 {
	const n = 20000
	keep := make([]*nodeinfo.PodInfo, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		p := newPod(template, 0, i, "n")
		keep[i], _ = nodeinfo.NewPodInfo(p)
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.TotalAlloc-before.TotalAlloc) / n / 2
}

func newPod(template *v1.Pod, producer, k int, node string) *v1.Pod {
	p := new(v1.Pod)
	*p = *template
	p.UID = types.UID(fmt.Sprintf("p%d-%d", producer, k))
	p.Name = string(p.UID)
	p.Spec.NodeName = node
	return p
}

func TestOverloadBackpressure(t *testing.T) {
	spin := *flagSpin
	t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) { overload(t, spin, *flagOut) })
	if spin != 0 {
		t.Run("spin=0", func(t *testing.T) { overload(t, 0, "") })
	}
}

func overload(t *testing.T, spin time.Duration, out string) {
	P := *flagProducers
	N := *flagPairs
	if N == 0 {
		N = 200000
		if testing.Short() {
			N = 4000
		}
	}
	mailbox := *flagMailbox
	cl := workload.Build(workload.ClusterSpec{Nodes: P, PodsPerNode: 1, Seed: 1})
	template := cl.Pods[0]

	var handlerErrs atomic.Int64
	var firstErr atomic.Value
	opts := []schedcache.Option{
		schedcache.WithMailboxSize(mailbox), schedcache.WithMaxBatch(maxBatch), schedcache.WithShards(2),
		schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
			if handlerErrs.Add(1) == 1 {
				firstErr.Store(fmt.Sprintf("%v %v: %v", e.Kind, e.Pod.UID, e.Err))
			}
		}),
	}
	// The coordinator is held inside its holdAt-th operation (the node
	// adds below count too) until the producers are seen blocked; not
	// when a producer could run out of events first (-overload.pairs): at
	// most holdAt+mailbox+maxBatch events are accepted while it holds.
	var holdAt int64 = 1000
	hold := int64(2*N-1) > holdAt+int64(mailbox+maxBatch)
	if !hold {
		holdAt = -1
	}
	var coordOps atomic.Int64
	release, held := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	defer unhold()
	opts = append(opts, cachetest.WithFaultHooks(func(string) {
		if coordOps.Add(1) == holdAt {
			close(held)
			<-release
		}
		if spin > 0 {
			for t0 := time.Now(); time.Since(t0) < spin; {
			}
		}
	}, nil))
	c, err := schedcache.New(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range cl.Nodes {
		if _, err := c.AddNode(klogger, n); err != nil {
			t.Fatal(err)
		}
	}
	perEvent := perEventBytes(template)
	runtime.GC()
	runtime.GC()
	baseHeap := liveHeap()
	baseEpoch := c.Snapshot().Epoch()
	setupOps := coordOps.Load()

	var submitted atomic.Int64
	var inSubmit atomic.Int64 // producers inside AddPodAsync/RemovePodAsync
	var exited atomic.Int64   // producers that returned
	blocked := make([]time.Duration, P)
	busy := make([]time.Duration, P)
	stop := make(chan struct{})
	var samples []sample
	var sampler sync.WaitGroup
	start := time.Now()
	sampler.Go(func() {
		tick := time.NewTicker(*flagInterval)
		defer tick.Stop()
		for {
			// Submitted first, then applied: submitted(t1) - applied(t2) <=
			// submitted(t1) - applied(t1) <= mailbox + one batch.
			s := sample{elapsed: time.Since(start), submitted: submitted.Load()}
			s.applied = int64(c.Snapshot().Epoch() - baseEpoch)
			s.liveHeap = liveHeap()
			samples = append(samples, s)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	var producers sync.WaitGroup
	for p := 0; p < P; p++ {
		producers.Go(func() {
			defer exited.Add(1)
			node := cl.Nodes[p].Name
			t0 := time.Now()
			var prev *v1.Pod
			for k := 0; k < N; k++ {
				pod := newPod(template, p, k, node)
				s := time.Now()
				inSubmit.Add(1)
				err := c.AddPodAsync(pod)
				inSubmit.Add(-1)
				blocked[p] += time.Since(s)
				if err != nil {
					t.Errorf("producer %d: AddPodAsync(%d): %v", p, k, err)
					return
				}
				submitted.Add(1)
				if prev != nil {
					s = time.Now()
					inSubmit.Add(1)
					err = c.RemovePodAsync(prev)
					inSubmit.Add(-1)
					blocked[p] += time.Since(s)
					if err != nil {
						t.Errorf("producer %d: RemovePodAsync(%d): %v", p, k-1, err)
						return
					}
					submitted.Add(1)
				}
				prev = pod
			}
			busy[p] = time.Since(t0)
		})
	}
	// Producers block: while the coordinator is held, the events it has
	// taken (the ops before the held one, the held one and at most the
	// rest of its batch) plus a full mailbox are all that can be
	// accepted. Once it is held, wait until at least the taken ops plus a
	// full mailbox are accepted (this must happen), every producer is
	// inside Submit, and the accepted count stays the same across 200
	// yields of the processor (a producer whose send went through is
	// seen when it counts it), or until more than the bound got in.
	heldLow := holdAt - setupOps + int64(mailbox)
	heldBound := holdAt - setupOps + maxBatch + int64(mailbox)
	var heldAccepted, heldInside int64
	if hold {
		watchdog.Recv(held, "the coordinator being held")
		heldAccepted = submitted.Load()
		for heldAccepted <= heldBound && exited.Load() == 0 {
			for range 200 {
				runtime.Gosched()
			}
			now := submitted.Load()
			if now == heldAccepted && now >= heldLow && inSubmit.Load() == int64(P) {
				break
			}
			heldAccepted = now
		}
		heldInside = inSubmit.Load()
	}
	unhold()
	if hold && (heldAccepted > heldBound || heldInside != int64(P)) {
		t.Errorf("coordinator held at op %d: %d events accepted with %d of %d producers inside Submit; want at most %d (ops taken %d + batch %d + mailbox %d) with every producer blocked",
			holdAt, heldAccepted, heldInside, P, heldBound, holdAt-setupOps, maxBatch, mailbox)
	}
	producers.Wait()
	produced := time.Since(start)
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	drained := time.Since(start)
	close(stop)
	sampler.Wait()
	samples = append(samples, sample{elapsed: drained, submitted: submitted.Load(), applied: int64(c.Snapshot().Epoch() - baseEpoch)})

	// Nothing lost, nothing reordered.
	total := int64(P) * int64(2*N-1)
	if got := submitted.Load(); got != total {
		t.Fatalf("submitted %d events, want %d", got, total)
	}
	if got := int64(c.Snapshot().Epoch() - baseEpoch); got != total {
		t.Errorf("applied %d events (epoch advance), want %d", got, total)
	}
	if n := handlerErrs.Load(); n != 0 {
		t.Errorf("async error handler saw %d errors, first: %v", n, firstErr.Load())
	}
	if n, _ := c.PodCount(); n != P {
		t.Errorf("PodCount = %d, want %d (one survivor per producer)", n, P)
	}
	snap := c.Snapshot()
	for p := 0; p < P; p++ {
		for k := 0; k < N; k++ {
			_, ok := snap.Pod(fmt.Sprintf("p%d-%d", p, k))
			if want := k == N-1; ok != want {
				t.Errorf("pod p%d-%d present=%v, want %v", p, k, ok, want)
				break
			}
		}
		if got, err := c.GetPod(newPod(template, p, N-1, "")); err != nil || string(got.UID) != fmt.Sprintf("p%d-%d", p, N-1) {
			t.Errorf("GetPod(survivor of producer %d) = %v, %v", p, got, err)
		}
	}

	// Backpressure: the outstanding events never exceeded the mailbox
	// plus one batch in progress, and the heap stayed bounded.
	var maxLag int64
	var peakHeap uint64
	for _, s := range samples {
		maxLag = max(maxLag, s.submitted-s.applied)
		peakHeap = max(peakHeap, s.liveHeap)
	}
	lagBound := int64(mailbox + maxBatch)
	if maxLag > lagBound {
		t.Errorf("up to %d events were accepted but not yet applied; the mailbox (%d) plus one batch (%d) allow %d: submitters were not blocked",
			maxLag, mailbox, maxBatch, lagBound)
	}
	// The heap each GC finds live: a few hundred queued events (< 1 MiB)
	// and the cache; an unbounded queue pins every event until it is
	// applied. The live heap also holds whatever garbage the last GC
	// found still referenced and depends on when that GC ran (a short run
	// once read 10.8 MiB against a former 1.7 + 8 MiB bound), so it is
	// only asserted where the margin is wide both ways: a 64 MiB slack,
	// about 10x the peak of the long form (6.1 MiB), checked only when an
	// unbounded queue would pin at least 4x that slack (the long form:
	// 2.2 GiB).
	const heapSlack = 64 << 20
	heapBound := baseHeap + heapSlack
	unbounded := float64(total) * perEvent // what a queue holding every event would pin
	if unbounded >= 4*heapSlack && peakHeap > heapBound {
		t.Errorf("peak live heap %.1f MiB exceeds the bound %.1f MiB (baseline %.1f MiB + %d MiB); an unbounded queue would pin %.0f MiB",
			mib(peakHeap), mib(heapBound), mib(baseHeap), heapSlack>>20, unbounded/(1<<20))
	}
	var totalBlocked, totalBusy time.Duration
	for p := range blocked {
		totalBlocked += blocked[p]
		totalBusy += busy[p]
	}
	// Reported, not asserted (it is a time ratio); the held phase above
	// proves by counting that producers block.
	frac := float64(totalBlocked) / float64(totalBusy)

	var b strings.Builder
	fmt.Fprintf(&b, "Overload: %d producers x %d AddPodAsync/RemovePodAsync pairs (%d events), mailbox %d, max batch %d, coordinator slowed by %v per event, GOMAXPROCS %d, race %v.\n\n",
		P, N, total, mailbox, maxBatch, spin, runtime.GOMAXPROCS(0), raceEnabled)
	fmt.Fprintf(&b, "| elapsed | submitted | applied (epoch) | outstanding | live heap (MiB) |\n|---:|---:|---:|---:|---:|\n")
	for _, s := range pick(samples, 16) {
		heap := "-"
		if s.liveHeap > 0 {
			heap = fmt.Sprintf("%.1f", mib(s.liveHeap))
		}
		fmt.Fprintf(&b, "| %v | %d | %d | %d | %s |\n", s.elapsed.Round(time.Millisecond), s.submitted, s.applied, s.submitted-s.applied, heap)
	}
	fmt.Fprintf(&b, "\n(Outstanding = submitted - applied; it can read -1 or so because a producer counts an event after its Submit returns.)\n")
	fmt.Fprintf(&b, "\nProducers: %.0f%% of their time blocked in Submit (%v of %v); %.0f events/s submitted, all applied %v after start.\n",
		100*frac, totalBlocked.Round(time.Millisecond), totalBusy.Round(time.Millisecond), float64(total)/produced.Seconds(), drained.Round(time.Millisecond))
	fmt.Fprintf(&b, "Outstanding events: at most %d (bound: mailbox %d + batch %d = %d). Live heap: baseline %.1f MiB, peak %.1f MiB (bound %.1f MiB); an unbounded queue would pin %.0f B/event x %d events = %.1f MiB.\n",
		maxLag, mailbox, maxBatch, lagBound, mib(baseHeap), mib(peakHeap), mib(heapBound), perEvent, total, unbounded/(1<<20))
	if hold {
		fmt.Fprintf(&b, "Coordinator held at op %d: %d events accepted (at least %d: a full mailbox), all %d producers blocked in Submit (bound %d).\n", holdAt, heldAccepted, heldLow, P, heldBound)
	}
	if unbounded < 4*heapSlack {
		fmt.Fprintf(&b, "(At this size the heap bound is not asserted: it would not discriminate from an unbounded queue; the outstanding-events and held-phase counts do. Use -overload.pairs=200000.)\n")
	}
	t.Log("\n" + b.String())
	if out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// liveHeap returns the heap the last GC marked live: garbage waiting for
// the next GC, which the pacer lets grow to the heap goal, is not in it.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// pick returns about n samples evenly spread, always with the last one and
// the one with the highest heap.
func pick(s []sample, n int) []sample {
	if len(s) <= n {
		return s
	}
	peak := 0
	for i := range s {
		if s[i].liveHeap > s[peak].liveHeap {
			peak = i
		}
	}
	var out []sample
	step := float64(len(s)-1) / float64(n-1)
	last := -1
	for j := 0; j < n; j++ {
		i := int(float64(j) * step)
		if last < peak && i > peak {
			out = append(out, s[peak])
		}
		if i != peak || last != peak {
			out = append(out, s[i])
		}
		last = i
	}
	return out
}
