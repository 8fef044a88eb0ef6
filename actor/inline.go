package actor

// runInline runs op on the calling goroutine, which holds the token, as a
// batch of one: it applies op, publishes the epoch, answers op (on its
// reply channel, buffered) and gives the token back. It reports false,
// having changed nothing, when op must go through the mailbox instead:
// ops are queued (they come first: an async op its caller submitted
// before this call must be applied before it), the cache failed, or it
// is stopping. A fault fails the cache, as in the coordinator's batch.
//
// Ordering: the run goroutine holds the token from before it applies an
// op taken from the mailbox until that op is published and no longer
// counted in queued, so an op whose enqueue happened before this call is
// either published already or seen in queued here. Publications happen
// in token order, and each before its callers are answered.
func (a *Coordinator) runInline(op *Op) bool {
	// stopping's test with two atomic loads instead of a select (about
	// 60 ns of every inline op in BenchmarkSerialCeiling's profile).
	if a.queued.Load() != 0 || a.failedErr != nil || a.closing.Load() || a.stopped.Load() || a.ctx.Err() != nil {
		a.token <- struct{}{}
		return false
	}
	a.inline = true
	a.stats.batch(1)
	t0 := a.serialStart()
	err := a.handle(op)
	if err == nil {
		err = a.flush()
	}
	if err != nil {
		a.fail(err) // answers op, parked among the waiters
	}
	a.serialBatch(t0, 1)
	a.inline = false
	a.token <- struct{}{}
	return true
}

// lock takes the token for the run goroutine, waiting while a caller runs
// an op inline; unlock gives it back. Both are called by run only.
func (a *Coordinator) lock() {
	if !a.held {
		<-a.token
		a.held = true
	}
}

func (a *Coordinator) unlock() {
	if a.held {
		a.held = false
		a.token <- struct{}{}
	}
}
