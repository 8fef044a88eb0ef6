package actor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
