package schedcache_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/cachetest"
	"github.com/schedcache/schedcache/internal/watchdog"
)

// Stats counts operations and errors by kind, publications, the assumed,
// pod and node counts (equal to what Dump shows), and the injected clock's
// time of the latest publication.
func TestStatsCounts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &fakeClock{now: t0, made: make(chan struct{})}
	c := newCache(t, schedcache.WithClock(clk))
	st := c.Stats()
	require.Zero(t, st.Publications)
	require.True(t, st.PublishedAt.IsZero())

	_, err := c.AddNode(logger, node("n", "z"))
	require.NoError(t, err)
	a, b, e := pod("a", "n", 100), pod("b", "n", 100), pod("e", "ghost", 100)
	require.NoError(t, c.AssumePod(logger, a))
	require.NoError(t, c.AssumePod(logger, b))
	clk.set(t0.Add(time.Minute))
	require.NoError(t, c.AddPod(logger, e)) // creates a nodeless entry
	require.NoError(t, c.AddPod(logger, b)) // confirms b
	require.Error(t, c.AddPod(logger, b))   // already added
	require.Error(t, c.RemovePod(logger, pod("x", "n", 1)))

	st = c.Stats()
	require.Equal(t, uint64(1), st.Ops[schedcache.OpAddNode])
	require.Equal(t, uint64(2), st.Ops[schedcache.OpAssumePod])
	require.Equal(t, uint64(3), st.Ops[schedcache.OpAddPod])
	require.Equal(t, uint64(1), st.Errors[schedcache.OpAddPod])
	require.Equal(t, uint64(1), st.Errors[schedcache.OpRemovePod])
	require.Zero(t, st.Errors[schedcache.OpAssumePod])
	require.Equal(t, 1, st.AssumedPods)
	require.Equal(t, 3, st.Pods)
	require.Equal(t, 2, st.Nodes)
	require.Equal(t, c.Snapshot().Epoch(), st.Epoch)
	require.Equal(t, t0.Add(time.Minute).UnixNano(), st.PublishedAt.UnixNano())
	require.Equal(t, uint64(5), st.Publications, "one per successful write")
	require.Equal(t, st.Batches, sum(st.BatchSizes[:]))
	require.Equal(t, uint64(7), st.BatchedOps, "7 writes, each a batch of its own")

	d, err := c.Dump()
	require.NoError(t, err)
	require.Len(t, d.AssumedPods, c.Stats().AssumedPods)
	require.Len(t, d.Nodes, c.Stats().Nodes)

	require.NoError(t, c.ForgetPod(logger, a))
	require.NoError(t, c.RemovePod(logger, b))
	st = c.Stats()
	require.Zero(t, st.AssumedPods)
	require.Equal(t, 1, st.Pods)
}

// Async failures are counted and the mailbox depth shows queued ops while
// the coordinator is held.
func TestStatsAsyncAndMailbox(t *testing.T) {
	hold, release := make(chan struct{}), make(chan struct{})
	errs := make(chan schedcache.AsyncError, 8)
	var held atomic.Bool
	c := newCache(t, cachetest.WithFaultHooks(func(kind string) {
		// The first op waits for the test to take it (a send that may not
		// wait lets it through when the coordinator gets there before the
		// test receives); the others go through.
		if kind == "Sync" || !held.CompareAndSwap(false, true) {
			return
		}
		hold <- struct{}{}
		<-release
	}, nil), schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) { errs <- e }))
	go func() { _ = c.RemovePodAsync(pod("first", "n", 1)) }()
	watchdog.Recv(hold, "the coordinator entering the first op") // the coordinator is inside the first op
	for i := 0; i < 3; i++ {
		require.NoError(t, c.RemovePodAsync(pod(string(rune('a'+i)), "n", 1)))
	}
	require.Equal(t, 3, c.Stats().MailboxDepth)
	close(release)
	require.NoError(t, c.Sync())
	for i := 0; i < 4; i++ {
		watchdog.Recv(errs, "an async error")
	}
	st := c.Stats()
	require.Equal(t, uint64(4), st.AsyncErrors)
	require.Equal(t, uint64(4), st.Errors[schedcache.OpRemovePod])
	require.Zero(t, st.MailboxDepth)
}

func sum(xs []uint64) (s uint64) {
	for _, x := range xs {
		s += x
	}
	return s
}

// Expiries are counted and leave the assumed count.
func TestStatsExpired(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &fakeClock{now: t0, made: make(chan struct{})}
	c := newCache(t, schedcache.WithTTL(time.Second), schedcache.WithClock(clk))
	watchdog.Recv(clk.made, "the cache making its expiry timer")
	p := pod("p", "n", 100)
	require.NoError(t, c.AssumePod(logger, p))
	require.NoError(t, c.FinishBinding(logger, p))
	require.Equal(t, 1, c.Stats().AssumedPods)
	clk.set(t0.Add(time.Hour))
	clk.fire(t, c)
	st := c.Stats()
	require.Equal(t, uint64(1), st.Expired)
	require.Zero(t, st.AssumedPods)
	require.Zero(t, st.Pods)
	require.Equal(t, t0.Add(time.Hour).UnixNano(), st.PublishedAt.UnixNano(), "the expiry's publication")
}
