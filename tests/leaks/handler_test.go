package leaks

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/workload"
)

// slowHandler records whether it is running and how often it was called.
type slowHandler struct {
	calls   atomic.Int64
	running atomic.Int64
	entered chan struct{}
	delay   time.Duration
}

func (h *slowHandler) handle(schedcache.AsyncError) {
	h.running.Add(1)
	defer h.running.Add(-1)
	if h.calls.Add(1) == 1 {
		close(h.entered)
	}
	time.Sleep(h.delay)
}

// startWithBusyHandler returns a cache whose async error handler is busy
// (inside its first of 10 slow calls) when the function returns.
func startWithBusyHandler(t *testing.T, ctx context.Context) (*schedcache.Cache, *slowHandler) {
	t.Helper()
	h := &slowHandler{entered: make(chan struct{}), delay: 20 * time.Millisecond}
	c, err := schedcache.New(ctx, schedcache.WithAsyncErrorHandler(h.handle))
	if err != nil {
		t.Fatal(err)
	}
	cl := workload.Build(workload.ClusterSpec{Nodes: 1, PodsPerNode: 1, Seed: 1})
	for i := 0; i < 10; i++ {
		if err := c.RemovePodAsync(fresh(cl.Pods[0], "missing-"+string(rune('a'+i)), cl.Nodes[0].Name)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-h.entered:
	case <-time.After(hangGuard):
		t.Fatal("handler never called")
	}
	return c, h
}

// afterStop asserts that once the cache reported itself stopped (Close
// returned, or Done closed), its handler is not running and is never
// called again: the cache's goroutines are all gone.
func (h *slowHandler) afterStop(t *testing.T, what string) {
	t.Helper()
	running, calls := h.running.Load(), h.calls.Load()
	time.Sleep(100 * time.Millisecond)
	if running != 0 || h.calls.Load() != calls {
		t.Errorf("%s, yet the async error handler was still running (%d) and was called %d more times afterwards: the notifier goroutine outlives the cache",
			what, running, h.calls.Load()-calls)
	}
	// Let the stray notifier finish so that goleak judges only this test.
	for h.running.Load() != 0 || h.calls.Load() < 10 {
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCloseWaitsForBusyHandler: "Close stops every goroutine of the cache
// and waits for them" - also when the async error handler happens to be
// running (on its own goroutine) when Close is called from elsewhere.
func TestCloseWaitsForBusyHandler(t *testing.T) {
	c, h := startWithBusyHandler(t, context.Background())
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(hangGuard):
		t.Fatal("Close hung")
	}
	h.afterStop(t, "Close returned")
}

// TestDoneAfterBusyHandler: after context cancellation, Done ("closed once
// the cache has stopped") is the only way to wait for the cache; it must
// not close while the cache's notifier still calls the handler.
func TestDoneAfterBusyHandler(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, h := startWithBusyHandler(t, ctx)
	cancel()
	select {
	case <-c.Done():
	case <-time.After(hangGuard):
		t.Fatal("Done never closed")
	}
	h.afterStop(t, "Done closed")
}
