// Package faults injects panics into the coordinator and the shards with
// cachetest.WithFaultHooks and checks the failure model of docs/design.md: the
// caller whose operation hit the panic and every caller in flight get a
// *FailedError (wrapping ErrFailed and the *PanicError), later writes and
// Async submissions are refused with ErrFailed, Err() reports it, reads keep
// serving the last published snapshot (still internally consistent), and
// Close (or context cancellation) still stops every goroutine. A panicking
// async error handler must not hurt the cache.
//
// Run: go test -race -short ./tests/faults/
// Long: go test -race ./tests/faults/ -faults.rounds=200
package faults

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
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
	"github.com/schedcache/schedcache/tests/stress/invariant"
	"github.com/schedcache/schedcache/workload"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

var flagRounds = flag.Int("faults.rounds", 0, "rounds of the in-flight tests (default 3 with -short, 20 otherwise)")

func rounds() int {
	if *flagRounds > 0 {
		return *flagRounds
	}
	if testing.Short() {
		return 3
	}
	return 20
}

var logger = klog.Background()

const hangGuard = 20 * time.Second

// injector drives the hooks: a coordinator panic on the next operation of
// kind, or a shard panic on the next request to shard idx. Each fires once.
type injector struct {
	kind  atomic.Pointer[string]
	shard atomic.Int64 // -1: off
	fired atomic.Int64
	value any // what the hook panics with
}

func newInjector(value any) *injector {
	in := &injector{value: value}
	in.shard.Store(-1)
	return in
}

func (in *injector) armKind(kind string) { in.kind.Store(&kind) }
func (in *injector) armShard(idx int)    { in.shard.Store(int64(idx)) }

func (in *injector) option() schedcache.Option {
	return cachetest.WithFaultHooks(func(kind string) {
		if k := in.kind.Load(); k != nil && *k == kind && in.kind.CompareAndSwap(k, nil) {
			in.fired.Add(1)
			in.fire()
		}
	}, func(idx int) {
		if in.shard.CompareAndSwap(int64(idx), -1) {
			in.fired.Add(1)
			in.fire()
		}
	})
}

func (in *injector) fire() {
	if in.value == nil {
		var m map[string]int
		//lint:ignore SA5000 the nil-map write is the runtime panic this fault injects
		m["runtime error"]++
	}
	panic(in.value)
}

// cluster is the state every test starts from.
type cluster struct {
	c        *schedcache.Cache
	cl       *workload.Cluster
	assumed  *v1.Pod // assumed on node 0
	handled  chan schedcache.AsyncError
	in       *injector
	original *schedcache.Snapshot
}

func newCluster(t *testing.T, in *injector, opts ...schedcache.Option) *cluster {
	t.Helper()
	k := &cluster{in: in, handled: make(chan schedcache.AsyncError, 1<<16),
		cl: workload.Build(workload.ClusterSpec{Nodes: 24, PodsPerNode: 3, Seed: 7})}
	opts = append([]schedcache.Option{in.option(), schedcache.WithShards(3),
		schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) { k.handled <- e })}, opts...)
	c, err := schedcache.New(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	k.c = c
	for _, n := range k.cl.Nodes {
		if _, err := c.AddNode(logger, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range k.cl.Pods {
		if err := c.AddPod(logger, p); err != nil {
			t.Fatal(err)
		}
	}
	k.assumed = fresh(k.cl.Pods[0], "assumed-0", k.cl.Nodes[0].Name)
	if err := c.AssumePod(logger, k.assumed); err != nil {
		t.Fatal(err)
	}
	k.original = c.Snapshot()
	return k
}

func fresh(template *v1.Pod, uid, node string) *v1.Pod {
	cp := *template
	cp.UID, cp.Name, cp.Spec.NodeName = types.UID(uid), uid, node
	return &cp
}

func bumped(p *v1.Pod) *v1.Pod {
	cp := *p
	cp.ResourceVersion += "+"
	return &cp
}

func bumpedNode(n *v1.Node) *v1.Node {
	cp := *n
	cp.ResourceVersion += "+"
	return &cp
}

// checkFailedErr asserts err is the cache's failure caused by a panic in
// actor with value (nil: any runtime error).
func checkFailedErr(t *testing.T, what string, err error, actor string, value any) {
	t.Helper()
	if !errors.Is(err, schedcache.ErrFailed) {
		t.Fatalf("%s: %v (%T), want an error wrapping ErrFailed", what, err, err)
	}
	var fe *schedcache.FailedError
	if !errors.As(err, &fe) {
		t.Fatalf("%s: %v is not a *FailedError", what, err)
	}
	var pe *schedcache.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: %v does not wrap a *PanicError", what, err)
	}
	if pe.Actor != actor {
		t.Errorf("%s: PanicError.Actor = %q, want %q", what, pe.Actor, actor)
	}
	if value != nil && pe.Value != value {
		t.Errorf("%s: PanicError.Value = %v, want %v", what, pe.Value, value)
	}
	if value == nil && !strings.Contains(fmt.Sprint(pe.Value), "nil map") {
		t.Errorf("%s: PanicError.Value = %v, want the runtime error", what, pe.Value)
	}
	if len(pe.Stack) == 0 {
		t.Errorf("%s: PanicError without a stack", what)
	}
	if !invariant.Typed(err) {
		t.Errorf("%s: untyped", what)
	}
}

// checkFailedState asserts everything that must hold once the cache
// failed: writes, barriers and Async submissions refused with ErrFailed,
// reads answering from last (the last published snapshot, unchanged and
// consistent), Err reporting the failure, Close stopping everything.
func (k *cluster) checkFailedState(t *testing.T, last *schedcache.Snapshot, actor string, value any) {
	t.Helper()
	c := k.c
	lastRender, lastFP := invariant.RenderSnapshot(last), invariant.Fingerprint(last)
	checkFailedErr(t, "Err()", c.Err(), actor, value)
	n0, p0 := k.cl.Nodes[0], k.cl.Pods[0]
	newPod := fresh(p0, "after-failure", n0.Name)
	calls := map[string]func() error{
		"AssumePod":       func() error { return c.AssumePod(logger, newPod) },
		"FinishBinding":   func() error { return c.FinishBinding(logger, k.assumed) },
		"ForgetPod":       func() error { return c.ForgetPod(logger, k.assumed) },
		"AddPod":          func() error { return c.AddPod(logger, newPod) },
		"UpdatePod":       func() error { return c.UpdatePod(logger, p0, bumped(p0)) },
		"RemovePod":       func() error { return c.RemovePod(logger, p0) },
		"AddNode":         func() error { _, err := c.AddNode(logger, bumpedNode(n0)); return err },
		"UpdateNode":      func() error { _, err := c.UpdateNode(logger, n0, bumpedNode(n0)); return err },
		"RemoveNode":      func() error { return c.RemoveNode(logger, n0) },
		"GetNode":         func() error { _, err := c.GetNode(n0.Name); return err },
		"Dump":            func() error { _, err := c.Dump(); return err },
		"Sync":            func() error { return c.Sync() },
		"AddPodAsync":     func() error { return c.AddPodAsync(newPod) },
		"UpdatePodAsync":  func() error { return c.UpdatePodAsync(p0, bumped(p0)) },
		"RemovePodAsync":  func() error { return c.RemovePodAsync(p0) },
		"AddNodeAsync":    func() error { return c.AddNodeAsync(bumpedNode(n0)) },
		"UpdateNodeAsync": func() error { return c.UpdateNodeAsync(n0, bumpedNode(n0)) },
		"RemoveNodeAsync": func() error { return c.RemoveNodeAsync(n0) },
	}
	for name, call := range calls {
		err := guarded(t, name+" after failure", call)
		if !errors.Is(err, schedcache.ErrFailed) {
			t.Errorf("%s after failure: %v, want ErrFailed", name, err)
			continue
		}
		checkFailedErr(t, name+" after failure", err, actor, value)
	}
	// Reads keep answering from the last published snapshot.
	if s := c.Snapshot(); s != last {
		t.Errorf("Snapshot() after failure is epoch %d, want the last published one (epoch %d)", s.Epoch(), last.Epoch())
	}
	if _, err := invariant.CheckSnapshot(last, invariant.Options{RecomputeRequests: true}); err != nil {
		t.Errorf("last published snapshot inconsistent: %v", err)
	}
	if got, err := c.GetPod(p0); err != nil || got != p0 {
		t.Errorf("GetPod after failure = %v, %v", got, err)
	}
	if ok, err := c.IsAssumedPod(k.assumed); err != nil || !ok {
		t.Errorf("IsAssumedPod after failure = %v, %v", ok, err)
	}
	if n, err := c.PodCount(); err != nil || n != last.PodCount() {
		t.Errorf("PodCount after failure = %d, %v; want %d", n, err, last.PodCount())
	}
	if c.NodeCount() != last.NodeCount() {
		t.Errorf("NodeCount after failure = %d, want %d", c.NodeCount(), last.NodeCount())
	}
	own := schedcache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, own); err != nil {
		t.Errorf("UpdateSnapshot after failure: %v", err)
	} else if diff := invariant.Diff(lastRender, invariant.RenderSnapshot(own)); diff != "" {
		t.Errorf("UpdateSnapshot after failure copied another state: %s", diff)
	}
	// Close still stops everything (goleak in TestMain checks the rest).
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(hangGuard):
		t.Fatal("Close hung on a failed cache")
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if invariant.Fingerprint(last) != lastFP || invariant.RenderSnapshot(c.Snapshot()) != lastRender {
		t.Error("the last published snapshot changed")
	}
	if err := c.AddPod(logger, newPod); !errors.Is(err, schedcache.ErrFailed) && !errors.Is(err, schedcache.ErrClosed) {
		t.Errorf("AddPod after failure and Close: %v", err)
	}
}

func guarded(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("%s hung", what)
		return nil
	}
}

// TestCoordinatorPanicPerOpKind: a panic in the coordinator while applying
// each kind of operation fails the cache; the triggering caller gets the
// *FailedError, nothing of the failed epoch is published.
func TestCoordinatorPanicPerOpKind(t *testing.T) {
	type trigger func(k *cluster) error
	cases := []struct {
		kind string
		do   trigger
	}{
		{"AssumePod", func(k *cluster) error { return k.c.AssumePod(logger, fresh(k.cl.Pods[0], "new", k.cl.Nodes[1].Name)) }},
		{"FinishBinding", func(k *cluster) error { return k.c.FinishBinding(logger, k.assumed) }},
		{"ForgetPod", func(k *cluster) error { return k.c.ForgetPod(logger, k.assumed) }},
		{"AddPod", func(k *cluster) error { return k.c.AddPod(logger, fresh(k.cl.Pods[0], "new", k.cl.Nodes[1].Name)) }},
		{"UpdatePod", func(k *cluster) error { return k.c.UpdatePod(logger, k.cl.Pods[3], bumped(k.cl.Pods[3])) }},
		{"RemovePod", func(k *cluster) error { return k.c.RemovePod(logger, k.cl.Pods[3]) }},
		{"AddNode", func(k *cluster) error { _, err := k.c.AddNode(logger, bumpedNode(k.cl.Nodes[2])); return err }},
		{"UpdateNode", func(k *cluster) error {
			_, err := k.c.UpdateNode(logger, k.cl.Nodes[2], bumpedNode(k.cl.Nodes[2]))
			return err
		}},
		{"RemoveNode", func(k *cluster) error { return k.c.RemoveNode(logger, k.cl.Nodes[2]) }},
	}
	values := []any{"injected string panic", errors.New("injected error panic"), nil}
	for i, tc := range cases {
		value := values[i%len(values)]
		t.Run(tc.kind, func(t *testing.T) {
			k := newCluster(t, newInjector(value))
			before := k.c.Snapshot()
			k.in.armKind(tc.kind)
			err := guarded(t, tc.kind, func() error { return tc.do(k) })
			if k.in.fired.Load() != 1 {
				t.Fatalf("hook fired %d times", k.in.fired.Load())
			}
			checkFailedErr(t, "triggering "+tc.kind, err, "coordinator", value)
			k.checkFailedState(t, before, "coordinator", value)
		})
	}
}

// TestShardPanic: a panic in shard i (on the request that carries some
// caller's mutations, or on a Dump or GetNode request) fails the cache the
// same way, with the shard named in the PanicError.
func TestShardPanic(t *testing.T) {
	for idx := 0; idx < 3; idx++ {
		for _, via := range []string{"AddPod", "Dump", "GetNode"} {
			t.Run(fmt.Sprintf("shard %d via %s", idx, via), func(t *testing.T) {
				value := fmt.Sprintf("injected panic in shard %d", idx)
				k := newCluster(t, newInjector(value))
				before := k.c.Snapshot()
				k.in.armShard(idx)
				var err error
				switch via {
				case "AddPod": // add pods on successive nodes until one lands on shard idx
					for i := 0; i < len(k.cl.Nodes) && err == nil; i++ {
						p := fresh(k.cl.Pods[0], fmt.Sprint("probe-", i), k.cl.Nodes[i].Name)
						err = guarded(t, "AddPod", func() error { return k.c.AddPod(logger, p) })
						if err == nil {
							before = k.c.Snapshot()
						}
					}
				case "Dump": // touches every shard
					err = guarded(t, "Dump", func() error { _, err := k.c.Dump(); return err })
				case "GetNode":
					for i := 0; i < len(k.cl.Nodes) && err == nil; i++ {
						err = guarded(t, "GetNode", func() error { _, err := k.c.GetNode(k.cl.Nodes[i].Name); return err })
					}
				}
				if k.in.fired.Load() != 1 {
					t.Fatalf("shard hook fired %d times (last error %v)", k.in.fired.Load(), err)
				}
				actor := fmt.Sprintf("shard %d", idx)
				checkFailedErr(t, "triggering "+via, err, actor, value)
				k.checkFailedState(t, before, actor, value)
			})
		}
	}
}

// TestPanicWithCallersInFlight: 16 goroutines issue synchronous and async
// writes, barriers and reads while a panic is injected (coordinator or
// shard). Every call returns (no hang); every call returns nil or
// ErrFailed with the injected cause; after a goroutine saw ErrFailed, all
// its later calls (Async submissions included) get ErrFailed; a pod whose
// AddPod returned nil is in the final snapshot, one whose AddPod returned
// ErrFailed is not.
func TestPanicWithCallersInFlight(t *testing.T) {
	for round := 0; round < rounds(); round++ {
		for _, where := range []string{"coordinator", "shard"} {
			t.Run(fmt.Sprintf("%s round %d", where, round), func(t *testing.T) {
				inFlight(t, where, round)
			})
		}
	}
}

func inFlight(t *testing.T, where string, round int) {
	value := fmt.Sprintf("injected in-flight panic (%s)", where)
	k := newCluster(t, newInjector(value), schedcache.WithMailboxSize(16))
	c := k.c
	const G = 16
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		committed []*v1.Pod
		refused   []*v1.Pod
		ops       atomic.Int64
		armAt     = int64(50 + 37*round%200)
	)
	for g := 0; g < G; g++ {
		wg.Go(func() {
			sawFailure := false
			for i := 0; ; i++ {
				if n := ops.Add(1); n == armAt {
					if where == "coordinator" {
						k.in.armKind("AddPod")
					} else {
						k.in.armShard(g % 3)
					}
				}
				node := k.cl.Nodes[(g+i)%len(k.cl.Nodes)].Name
				p := fresh(k.cl.Pods[(g+i)%len(k.cl.Pods)], fmt.Sprintf("g%d-%d", g, i), node)
				var err error
				switch i % 6 {
				case 0, 1, 2:
					err = c.AddPod(logger, p)
					mu.Lock()
					if err == nil {
						committed = append(committed, p)
					} else if errors.Is(err, schedcache.ErrFailed) {
						refused = append(refused, p)
					}
					mu.Unlock()
				case 3:
					_, err = c.GetNode(node)
				case 4:
					err = c.Sync()
				case 5: // async: accepted (nil) or refused with ErrFailed
					err = c.AddPodAsync(p)
				}
				if c.Snapshot() == nil {
					t.Error("nil snapshot")
				}
				switch {
				case err == nil && sawFailure:
					t.Errorf("goroutine %d: call %d succeeded after ErrFailed was seen", g, i)
					return
				case err == nil:
				case errors.Is(err, schedcache.ErrFailed):
					var pe *schedcache.PanicError
					if !errors.As(err, &pe) || pe.Value != value {
						t.Errorf("goroutine %d: %v lacks the injected cause", g, err)
						return
					}
					if sawFailure && i%6 == 0 {
						return // a few calls after the failure all failed
					}
					sawFailure = true
				default:
					t.Errorf("goroutine %d: unexpected error %v", g, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatalf("callers hung after the injected panic")
	}
	if k.in.fired.Load() != 1 {
		t.Fatalf("hook fired %d times", k.in.fired.Load())
	}
	last := c.Snapshot()
	if _, err := invariant.CheckSnapshot(last, invariant.Options{}); err != nil {
		t.Errorf("last published snapshot: %v", err)
	}
	for _, p := range committed {
		if e, ok := last.Pod(string(p.UID)); !ok || e.Pod != p {
			t.Errorf("AddPod(%s) returned nil but the last published snapshot lacks it", p.UID)
			break
		}
	}
	for _, p := range refused {
		if _, ok := last.Pod(string(p.UID)); ok {
			t.Errorf("AddPod(%s) returned ErrFailed but the pod is published", p.UID)
			break
		}
	}
	if len(refused) == 0 {
		t.Error("no AddPod saw the failure")
	}
	actor := "coordinator"
	if where == "shard" {
		var pe *schedcache.PanicError
		errors.As(c.Err(), &pe)
		actor = pe.Actor
	}
	k.checkFailedState(t, last, actor, value)
}

// TestAsyncEventsInFailedEpoch: every event accepted by an Async method is
// either published or reported to the async error handler ("the handler
// receives the failures of operations submitted with the Async methods").
// Here the coordinator applies, in one batch, two accepted AddPodAsync
// events and then panics on a RemovePodAsync: the failed epoch is never
// published, so the two add events are lost, and the handler must hear of
// them (with ErrFailed) just as synchronous callers of that epoch get it.
func TestAsyncEventsInFailedEpoch(t *testing.T) {
	var armed, holding atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var mu sync.Mutex
	reported := map[string]error{}
	c, err := schedcache.New(context.Background(),
		schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
			mu.Lock()
			reported[string(e.Pod.UID)] = e.Err
			mu.Unlock()
		}),
		cachetest.WithFaultHooks(func(kind string) {
			if kind == "AddPod" && holding.CompareAndSwap(true, false) {
				entered <- struct{}{}
				<-release
			}
			if kind == "RemovePod" && armed.Load() {
				panic("injected panic in RemovePod")
			}
		}, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := workload.Build(workload.ClusterSpec{Nodes: 2, PodsPerNode: 1, Seed: 1})
	for _, n := range cl.Nodes {
		if _, err := c.AddNode(logger, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddPod(logger, cl.Pods[0]); err != nil {
		t.Fatal(err)
	}
	holding.Store(true)
	armed.Store(true)
	first := fresh(cl.Pods[1], "first", cl.Nodes[1].Name)
	second := fresh(cl.Pods[1], "second", cl.Nodes[1].Name)
	for _, err := range []error{c.AddPodAsync(first)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	watchdog.Recv(entered, "the coordinator entering the hook") // the coordinator is inside the AddPod of "first"; queue the rest of the batch
	if err := c.AddPodAsync(second); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePodAsync(cl.Pods[0]); err != nil {
		t.Fatal(err)
	}
	close(release)
	deadline := time.Now().Add(hangGuard)
	for c.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if c.Err() == nil {
		t.Fatal("cache did not fail")
	}
	if err := c.Close(); err != nil { // the notifier has delivered everything once Close returns
		t.Fatal(err)
	}
	// (Tolerate a notifier that outlives Close - tested separately in
	// tests/leaks - so that this test judges only the lost events.)
	for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		mu.Lock()
		_, ok := reported[string(cl.Pods[0].UID)]
		mu.Unlock()
		if ok {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	s := c.Snapshot()
	mu.Lock()
	defer mu.Unlock()
	if e, ok := reported[string(cl.Pods[0].UID)]; !ok || !errors.Is(e, schedcache.ErrFailed) {
		t.Errorf("the panicking RemovePodAsync was reported as %v, want ErrFailed", e)
	}
	for _, p := range []*v1.Pod{first, second} {
		_, published := s.Pod(string(p.UID))
		e, wasReported := reported[string(p.UID)]
		switch {
		case published && wasReported:
			t.Errorf("AddPodAsync(%s) is published and also reported failed (%v)", p.UID, e)
		case !published && !wasReported:
			t.Errorf("AddPodAsync(%s) was accepted, applied in the failed epoch, never published and never reported to the async error handler: the event is silently lost", p.UID)
		case wasReported && !errors.Is(e, schedcache.ErrFailed):
			t.Errorf("AddPodAsync(%s) reported with %v, want ErrFailed", p.UID, e)
		}
	}
}

// TestPanickingAsyncErrorHandler: a handler that panics on every call does
// not kill the cache or the notifier: every failure still reaches it, in
// order; the cache keeps working and does not report itself failed.
func TestPanickingAsyncErrorHandler(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	c, err := schedcache.New(context.Background(), schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
		mu.Lock()
		seen = append(seen, string(e.Pod.UID))
		mu.Unlock()
		panic("handler panic")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := workload.Build(workload.ClusterSpec{Nodes: 1, PodsPerNode: 1, Seed: 1})
	if _, err := c.AddNode(logger, cl.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := 0; i < n; i++ {
		if err := c.RemovePodAsync(fresh(cl.Pods[0], fmt.Sprint("missing-", i), cl.Nodes[0].Name)); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // sync work interleaved with the panicking handler
			if err := c.AddPod(logger, fresh(cl.Pods[0], fmt.Sprint("ok-", i), cl.Nodes[0].Name)); err != nil {
				t.Fatalf("AddPod while the handler panics: %v", err)
			}
		}
	}
	deadline := time.Now().Add(hangGuard)
	for {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("handler saw %d of %d failures", got, n)
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	for i, uid := range seen {
		if uid != fmt.Sprint("missing-", i) {
			t.Fatalf("failure %d reported for %s: out of order", i, uid)
		}
	}
	mu.Unlock()
	if c.Err() != nil {
		t.Fatalf("a panicking handler failed the cache: %v", c.Err())
	}
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	if cnt, _ := c.PodCount(); cnt != n/10 {
		t.Errorf("PodCount = %d, want %d", cnt, n/10)
	}
	if _, err := invariant.CheckSnapshot(c.Snapshot(), invariant.Options{}); err != nil {
		t.Error(err)
	}
}

// TestFailedCacheStopsOnContextCancel: a failed cache still stops when its
// context is cancelled (no Close call), leaving no goroutine behind.
func TestFailedCacheStopsOnContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := newInjector("boom")
	c, err := schedcache.New(ctx, in.option(), schedcache.WithAsyncErrorHandler(func(schedcache.AsyncError) {}))
	if err != nil {
		t.Fatal(err)
	}
	cl := workload.Build(workload.ClusterSpec{Nodes: 1, PodsPerNode: 2, Seed: 1})
	if _, err := c.AddNode(logger, cl.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	in.armKind("AddPod")
	if err := c.AddPodAsync(cl.Pods[0]); err != nil { // the failure hits an async op
		t.Fatal(err)
	}
	if err := c.AddPod(logger, cl.Pods[1]); !errors.Is(err, schedcache.ErrFailed) {
		t.Fatalf("AddPod after the async failure: %v", err)
	}
	cancel()
	select {
	case <-c.Done():
	case <-time.After(hangGuard):
		t.Fatal("failed cache did not stop on context cancellation")
	}
	if err := c.AddPod(logger, cl.Pods[1]); !errors.Is(err, schedcache.ErrFailed) && !errors.Is(err, schedcache.ErrClosed) {
		t.Errorf("AddPod after stop: %v", err)
	}
}
