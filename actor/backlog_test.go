package actor

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache/internal/watchdog"
)

// A producer blocks while the backlog is above its limit and is released
// by the delivery that brings it back to the limit, not before; a closed
// stop channel releases it with false.
func TestBacklogBlocksAboveLimit(t *testing.T) {
	b := newBacklog(2)
	stop := make(chan struct{})
	require.True(t, b.wait(stop), "at 0 of 2: no wait")
	for range 4 {
		b.add()
	}
	require.EqualValues(t, 4, b.load())
	released := make(chan bool, 1)
	go func() { released <- b.wait(stop) }()
	b.done() // 3: still above
	select {
	case <-released:
		t.Fatal("wait returned while the backlog was above its limit")
	case <-time.After(20 * time.Millisecond):
	}
	b.done() // 2: at the limit
	require.True(t, <-released)

	b.add() // 3 again: a fresh wait blocks until stop
	go func() { released <- b.wait(stop) }()
	close(stop)
	require.False(t, <-released)
}

// Many producers waiting while the count crosses the limit up and down
// many times are all released once the notifier catches up: no wakeup is
// lost between a waiter's read of the count and a delivery.
func TestBacklogNoLostWakeup(t *testing.T) {
	b := newBacklog(1)
	stop := make(chan struct{})
	const producers, rounds = 8, 2000
	submitted := make(chan struct{}, producers*rounds)
	delivered := make(chan struct{}, producers*rounds)
	released := make(chan bool, producers)
	for range producers {
		go func() {
			ok := true
			for range rounds {
				ok = ok && b.wait(stop)
				submitted <- struct{}{}
			}
			released <- ok
		}()
	}
	go func() { // the coordinator: one error per submission
		for range producers * rounds {
			<-submitted
			b.add()
			delivered <- struct{}{}
		}
	}()
	go func() { // the notifier, lagging behind
		for range producers * rounds {
			<-delivered
			runtime.Gosched()
			b.done()
		}
		close(stop)
	}()
	for range producers {
		require.True(t, watchdog.Recv(released, "a producer released"))
	}
	watchdog.Recv(stop, "the notifier done")
	require.Zero(t, b.load())
}
