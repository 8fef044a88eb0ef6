package actor

import (
	"sync/atomic"

	"github.com/schedcache/schedcache/internal/watchdog"
)

// backlog counts the async errors not yet handed to OnAsyncError and lets
// producers block, without polling and without a lock, while the count is
// above its limit. Contract: add (the coordinator) and done (the
// notifier, one goroutine) never block; wait may be called by any number
// of goroutines at once.
//
// The gate is a channel that done closes, and replaces with a fresh one,
// each time it brings the count back to the limit. A waiter loads the
// channel before it reads the count, so a return to the limit after that
// read closes the very channel it waits on: no wakeup is lost. Only done
// swaps and closes, so each channel is closed once.
type backlog struct {
	limit int64                         // immutable
	n     atomic.Int64                  // atomic: errors not yet delivered
	gate  atomic.Pointer[chan struct{}] // atomic; swapped and closed only by done
}

func newBacklog(limit int64) *backlog {
	b := &backlog{limit: limit}
	ch := make(chan struct{})
	b.gate.Store(&ch)
	return b
}

// load returns the number of errors not yet delivered.
func (b *backlog) load() int64 { return b.n.Load() }

// add counts one more undelivered error.
func (b *backlog) add() { b.n.Add(1) }

// done counts one error as delivered; back at the limit, it releases the
// waiting producers. Called by the notifier only.
func (b *backlog) done() {
	if b.n.Add(-1) == b.limit {
		next := make(chan struct{})
		close(*b.gate.Swap(&next))
	}
}

// wait blocks while the count is above the limit. It returns false if
// stop is closed first.
func (b *backlog) wait(stop <-chan struct{}) bool {
	if b.n.Load() <= b.limit {
		return true
	}
	stalled, stopTimer := watchdog.Timer() // nil unless a test enabled it
	defer stopTimer()
	for {
		gate := *b.gate.Load() // before the count: see the type's doc
		if b.n.Load() <= b.limit {
			return true
		}
		select {
		case <-gate:
		case <-stop:
			return false
		case <-stalled:
			watchdog.Stalled("Submit waiting for OnAsyncError to drain the error backlog")
		}
	}
}
