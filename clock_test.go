package schedcache_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/watchdog"
)

type v1Pod = v1.Pod

// fakeClock is a Clock whose time and timer the test moves by hand.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	timer *fakeTimer
	made  chan struct{} // closed when the cache created its timer
}

type fakeTimer struct{ c chan time.Time }

func (t *fakeTimer) C() <-chan time.Time      { return t.c }
func (t *fakeTimer) Reset(time.Duration) bool { return true }
func (t *fakeTimer) Stop() bool               { return true }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(time.Duration) schedcache.Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.timer = &fakeTimer{c: make(chan time.Time)}
	close(f.made)
	return f.timer
}

func (f *fakeClock) set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
}

// fire runs one expiry pass: the send returns once the coordinator took
// the tick, and the Sync that follows is served after the pass.
func (f *fakeClock) fire(t *testing.T, c *schedcache.Cache) {
	f.timer.c <- f.Now()
	require.NoError(t, c.Sync())
}

// TTL expiry is driven by the injected clock alone: a pod expires only at
// a pass strictly after FinishBinding's now + ttl, a second FinishBinding
// re-arms it, and a pod whose binding never finished never expires.
func TestInjectedClockDrivesExpiry(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &fakeClock{now: t0, made: make(chan struct{})}
	c := newCache(t, schedcache.WithTTL(10*time.Second), schedcache.WithClock(clk))
	watchdog.Recv(clk.made, "the cache making its expiry timer")
	_, err := c.AddNode(logger, node("n", ""))
	require.NoError(t, err)
	a, b, never := pod("a", "n", 100), pod("b", "n", 100), pod("never", "n", 100)
	for _, p := range []*v1Pod{a, b, never} {
		require.NoError(t, c.AssumePod(logger, p))
	}
	require.NoError(t, c.FinishBinding(logger, a))
	require.NoError(t, c.FinishBinding(logger, b))
	clk.set(t0.Add(5 * time.Second))
	require.NoError(t, c.FinishBinding(logger, b)) // re-armed: deadline t0+15s

	assumed := func(p *v1Pod) bool {
		ok, err := c.IsAssumedPod(p)
		require.NoError(t, err)
		return ok
	}
	clk.set(t0.Add(10 * time.Second)) // exactly a's deadline: not after it
	clk.fire(t, c)
	require.True(t, assumed(a))
	clk.set(t0.Add(10*time.Second + time.Nanosecond))
	clk.fire(t, c)
	require.False(t, assumed(a), "a expired")
	require.True(t, assumed(b), "b was re-armed")
	clk.set(t0.Add(time.Hour))
	clk.fire(t, c)
	require.False(t, assumed(b))
	require.True(t, assumed(never), "a pod whose binding never finished never expires")
	n, _ := c.PodCount()
	require.Equal(t, 1, n)
	ni, err := c.Snapshot().Get("n")
	require.NoError(t, err)
	require.Equal(t, int64(100), ni.Requested().MilliCPU)
}
