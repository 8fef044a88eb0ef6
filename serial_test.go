package schedcache_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache"
)

// tickClock advances 1 µs at every reading, so the serial section's
// durations count the readings inside it.
type tickClock struct{ n atomic.Int64 }

func (c *tickClock) Now() time.Time {
	return time.Unix(0, c.n.Add(int64(time.Microsecond)))
}

func (c *tickClock) NewTimer(time.Duration) schedcache.Timer {
	return &fakeTimer{c: make(chan time.Time)}
}

// SerialStats times the serial section by op kind, publication and batch
// size: every op applied is counted once under its kind and once in a
// batch, the batches' time covers their ops' and publications', and the
// ceiling is ops over held time. Without WithSerialTiming nothing is
// recorded.
func TestSerialStats(t *testing.T) {
	c := newCache(t, schedcache.WithClock(&tickClock{}), schedcache.WithSerialTiming())
	_, err := c.AddNode(logger, node("n", "z"))
	require.NoError(t, err)
	for i := range 20 {
		p := pod(string(rune('a'+i)), "n", 10)
		require.NoError(t, c.AssumePod(logger, p))
		require.NoError(t, c.ForgetPod(logger, p))
	}
	// Async adds from several goroutines make batches of more than one.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				_ = c.AddPodAsync(pod(string(rune('A'+g))+string(rune('a'+i%26))+string(rune('a'+i/26)), "n", 1))
			}
		}()
	}
	wg.Wait()
	require.NoError(t, c.Sync())

	s := c.SerialStats()
	require.True(t, s.Enabled)
	require.Equal(t, uint64(1), s.Apply[schedcache.OpAddNode].Count)
	require.Equal(t, uint64(20), s.Apply[schedcache.OpAssumePod].Count)
	require.Equal(t, uint64(20), s.Apply[schedcache.OpForgetPod].Count)
	require.Equal(t, uint64(200), s.Apply[schedcache.OpAddPod].Count)
	// One clock reading pair around each apply: 1 µs each.
	require.Equal(t, 20*time.Microsecond, s.Apply[schedcache.OpAssumePod].Total)
	require.Equal(t, 1023*time.Nanosecond, s.Apply[schedcache.OpAssumePod].Quantile(0.99)) // the bucket [512ns, 1023ns]
	require.Equal(t, time.Microsecond, s.Apply[schedcache.OpAssumePod].Mean())
	var batched uint64
	for _, h := range s.Batch {
		batched += h.Count
	}
	require.GreaterOrEqual(t, s.Batch[0].Count, uint64(41), "the synchronous calls run as batches of one")
	require.Positive(t, batched)
	require.Greater(t, s.Held(), s.Apply[schedcache.OpAssumePod].Total+s.Publish.Total/2)
	require.Equal(t, uint64(1+20+20+200), s.Ops()-s.Apply[schedcache.OpSync].Count)
	require.InDelta(t, float64(s.Ops())/s.Held().Seconds(), s.Ceiling(), 1e-6)

	off := newCache(t)
	_, err = off.AddNode(logger, node("n", "z"))
	require.NoError(t, err)
	require.Equal(t, schedcache.SerialStats{}, off.SerialStats())
}

// Hold's quantiles are bucket upper edges; an empty Hold reads 0.
func TestHoldQuantile(t *testing.T) {
	var h schedcache.Hold
	require.Zero(t, h.Quantile(0.5))
	require.Zero(t, h.Mean())
	h.Buckets[0], h.Buckets[3], h.Buckets[11] = 1, 8, 1 // 0 ns; 4-7 ns; 1,024-2,047 ns
	h.Count, h.Total = 10, 1100
	require.Equal(t, time.Duration(0), h.Quantile(0.1))
	require.Equal(t, time.Duration(7), h.Quantile(0.5))
	require.Equal(t, time.Duration(7), h.Quantile(0.9))
	require.Equal(t, time.Duration(2047), h.Quantile(1))
	require.Equal(t, time.Duration(110), h.Mean())
}
