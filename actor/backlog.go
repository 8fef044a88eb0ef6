package actor

import (
	"sync"
	"sync/atomic"

	"github.com/schedcache/schedcache/internal/watchdog"
)

// backlog counts the async errors not yet handed to OnAsyncError and lets
// producers block, without polling, while the count is above its limit.
// Contract: add (the coordinator) and done (the notifier) never block on a
// producer; wait may be called by any number of goroutines at once.
type backlog struct {
	limit int64         // immutable
	n     atomic.Int64  // atomic; written only under mu, read without it by the fast path
	mu    sync.Mutex    // guards open and the transitions of n across limit
	open  chan struct{} // guarded by mu: closed while n <= limit, a fresh open channel while above
}

func newBacklog(limit int64) *backlog {
	b := &backlog{limit: limit, open: make(chan struct{})}
	close(b.open)
	return b
}

// load returns the number of errors not yet delivered.
func (b *backlog) load() int64 { return b.n.Load() }

// add counts one more undelivered error.
func (b *backlog) add() {
	b.mu.Lock()
	if b.n.Add(1) == b.limit+1 {
		b.open = make(chan struct{}) // above the limit: producers wait
	}
	b.mu.Unlock()
}

// done counts one error as delivered.
func (b *backlog) done() {
	b.mu.Lock()
	if b.n.Add(-1) == b.limit {
		close(b.open) // back at the limit: release the waiting producers
	}
	b.mu.Unlock()
}

// wait blocks while the count is above the limit. It returns false if
// stop is closed first.
func (b *backlog) wait(stop <-chan struct{}) bool {
	if b.n.Load() <= b.limit {
		return true
	}
	stalled, stopTimer := watchdog.Timer() // nil unless a test enabled it
	defer stopTimer()
	for b.n.Load() > b.limit {
		b.mu.Lock()
		open := b.open
		b.mu.Unlock()
		select {
		case <-open:
		case <-stop:
			return false
		case <-stalled:
			watchdog.Stalled("Submit waiting for OnAsyncError to drain the error backlog")
		}
	}
	return true
}
