// Package leaks creates and stops many caches, each exercised with nodes,
// pods, async events (failing ones included), snapshots and barriers, and
// stopped in every way the API allows (Close; context cancellation; both
// at once; Close with producers in flight; after a fault; with a TTL
// expiry loop running), then checks that the goroutine count returns to
// its baseline (runtime.NumGoroutine and goleak) and that the heap returns
// to near its baseline after two GCs: a closed cache retains nothing.
//
// Short form (CI): go test -race -short ./tests/leaks/
// Long form:       go test -race ./tests/leaks/ -leaks.caches=20000 -timeout 0
package leaks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/cachetest"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/workload"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

var (
	flagCaches   = flag.Int("leaks.caches", 1000, "caches to create and stop")
	flagHeapSlop = flag.Int("leaks.heapslop", 8, "MiB the heap may exceed its baseline by at the end")
)

var logger = klog.Background()

const hangGuard = 20 * time.Second

type stopMode int

const (
	viaClose stopMode = iota
	viaCancel
	viaCancelAndClose
	viaCloseWithProducers
	viaFailureThenClose
	viaFailureThenCancel
	numModes
)

var modeNames = [numModes]string{"Close", "context cancel", "cancel+Close", "Close with producers in flight", "failure then Close", "failure then cancel"}

func fresh(template *v1.Pod, uid, node string) *v1.Pod {
	cp := *template
	cp.UID, cp.Name, cp.Spec.NodeName = types.UID(uid), uid, node
	return &cp
}

// lifecycle runs one cache from New to fully stopped.
func lifecycle(t *testing.T, i int, cl *workload.Cluster, handled *atomic.Int64) {
	mode := stopMode(i % int(numModes))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failArmed atomic.Bool
	opts := []schedcache.Option{
		schedcache.WithShards(1 + i%3),
		schedcache.WithMailboxSize(4 + i%64),
		schedcache.WithAsyncErrorHandler(func(schedcache.AsyncError) { handled.Add(1) }),
		cachetest.WithFaultHooks(func(kind string) {
			if kind == "RemoveNode" && failArmed.Load() {
				panic("injected")
			}
		}, nil),
	}
	if i%4 == 0 { // the expiry loop runs
		opts = append(opts, schedcache.WithTTL(time.Millisecond), schedcache.WithPeriod(time.Millisecond))
	}
	c, err := schedcache.New(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	nodes := cl.Nodes[:3]
	for _, n := range nodes {
		if _, err := c.AddNode(logger, n); err != nil {
			t.Fatalf("cache %d: AddNode: %v", i, err)
		}
	}
	for k := 0; k < 10; k++ {
		p := fresh(cl.Pods[k%len(cl.Pods)], fmt.Sprintf("c%d-p%d", i, k), nodes[k%3].Name)
		if k%2 == 0 {
			err = c.AddPod(logger, p)
		} else {
			err = c.AssumePod(logger, p)
			if err == nil {
				err = c.FinishBinding(logger, p)
			}
		}
		if err != nil {
			t.Fatalf("cache %d: %v", i, err)
		}
	}
	for k := 0; k < 10; k++ {
		_ = c.AddPodAsync(fresh(cl.Pods[k%len(cl.Pods)], fmt.Sprintf("c%d-a%d", i, k), nodes[k%3].Name))
		_ = c.RemovePodAsync(fresh(cl.Pods[0], fmt.Sprintf("c%d-missing%d", i, k), nodes[0].Name)) // fails: reaches the handler
	}
	_ = c.UpdateNodeAsync(nodes[0], nodes[0])
	own := schedcache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, own); err != nil {
		t.Fatalf("cache %d: UpdateSnapshot: %v", i, err)
	}
	if _, err := c.Dump(); err != nil {
		t.Fatalf("cache %d: Dump: %v", i, err)
	}
	if _, err := c.GetNode(nodes[1].Name); err != nil {
		t.Fatalf("cache %d: GetNode: %v", i, err)
	}
	_ = c.Snapshot().NumNodes()

	switch mode {
	case viaClose:
		_ = c.Close()
	case viaCancel:
		cancel()
	case viaCancelAndClose:
		go cancel()
		_ = c.Close()
	case viaCloseWithProducers:
		var wg sync.WaitGroup
		for g := 0; g < 3; g++ {
			wg.Go(func() {
				for k := 0; ; k++ {
					p := fresh(cl.Pods[0], fmt.Sprintf("c%d-g%d-%d", i, g, k), nodes[g].Name)
					var err error
					if k%2 == 0 {
						err = c.AddPodAsync(p)
					} else {
						err = c.AddPod(logger, p)
					}
					if errors.Is(err, schedcache.ErrClosed) {
						return
					}
				}
			})
		}
		runtime.Gosched()
		_ = c.Close()
		wg.Wait()
	case viaFailureThenClose, viaFailureThenCancel:
		failArmed.Store(true)
		if err := c.RemoveNode(logger, nodes[2]); !errors.Is(err, schedcache.ErrFailed) {
			t.Fatalf("cache %d: injected fault gave %v", i, err)
		}
		if mode == viaFailureThenClose {
			_ = c.Close()
		} else {
			cancel()
		}
	}
	select {
	case <-c.Done():
	case <-time.After(hangGuard):
		t.Fatalf("cache %d (%s) did not stop", i, modeNames[mode])
	}
}

// settleGoroutines waits until NumGoroutine is at most want, returning the
// last count seen.
func settleGoroutines(want int, wait time.Duration) int {
	deadline := time.Now().Add(wait)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func TestCreateAndCloseManyCaches(t *testing.T) {
	cl := workload.Build(workload.ClusterSpec{Nodes: 3, PodsPerNode: 4, Seed: 1})
	var handled atomic.Int64
	g0 := runtime.NumGoroutine()
	// Warm up lazily initialised globals (vocabularies, klog, pools) so
	// that the baseline reflects steady state.
	for i := 0; i < int(numModes); i++ {
		lifecycle(t, i, cl, &handled)
	}
	baseG := settleGoroutines(g0, 5*time.Second)
	if baseG > g0 {
		t.Fatalf("warm-up left %d goroutines, %d before", baseG, g0)
	}
	baseHeap := heapAlloc()

	N := *flagCaches
	start := time.Now()
	maxG, checks := 0, 0
	var peakHeap uint64
	for i := 0; i < N; i++ {
		lifecycle(t, i, cl, &handled)
		if t.Failed() {
			return
		}
		if (i+1)%100 == 0 { // a leak must not accumulate along the way
			checks++
			n := settleGoroutines(baseG, 5*time.Second)
			maxG = max(maxG, n)
			if n > baseG {
				t.Fatalf("after %d caches: %d goroutines, baseline %d", i+1, n, baseG)
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peakHeap = max(peakHeap, ms.HeapAlloc)
		}
	}
	elapsed := time.Since(start)
	n := settleGoroutines(baseG, 5*time.Second)
	if n > baseG {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("after %d caches: %d goroutines, baseline %d\n%s", N, n, baseG, buf)
	}
	goleak.VerifyNone(t, goleak.IgnoreCurrent())
	endHeap := heapAlloc()
	slop := uint64(*flagHeapSlop) << 20
	grown := int64(endHeap) - int64(baseHeap)
	if endHeap > baseHeap+slop {
		t.Errorf("heap after %d caches: %.2f MiB, baseline %.2f MiB (+%.2f MiB, allowed +%d MiB): closed caches retain %.0f B each",
			N, mib(endHeap), mib(baseHeap), float64(grown)/(1<<20), *flagHeapSlop, float64(grown)/float64(N))
	}
	t.Logf("%d caches (%s, in rotation) created, exercised and stopped in %v; goroutines: baseline %d, at the %d checkpoints at most %d, at the end %d; heap (after 2 GCs): baseline %.2f MiB, end %.2f MiB (%+.2f MiB, %+.0f B per cache), highest sampled %.2f MiB; async failures handled %d",
		N, joinModes(), elapsed.Round(time.Millisecond), baseG, checks, maxG, n, mib(baseHeap), mib(endHeap), float64(grown)/(1<<20), float64(grown)/float64(N), mib(peakHeap), handled.Load())
}

func joinModes() string {
	s := ""
	for i, m := range modeNames {
		if i > 0 {
			s += ", "
		}
		s += m
	}
	return s
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
