package actor

// maxBacklog bounds the async errors waiting for OnAsyncError.
const maxBacklog = 1024

// onNotifier reports whether the caller is the async error handler, run by
// the notifier goroutine. goid is asked only while a handler runs.
func (a *Coordinator) onNotifier() bool {
	return a.inHandler.Load() && a.notifier.Load() == goid()
}

// notify delivers async errors to the handler on its own goroutine, so a
// slow handler never stalls the coordinator.
func (a *Coordinator) notify() {
	defer close(a.done)
	a.notifier.Store(goid())
	for errs := range a.notifyc {
		a.deliver(errs)
	}
	a.deliver(<-a.finalc)
}

func (a *Coordinator) deliver(errs []AsyncError) {
	for _, e := range errs {
		a.callHandler(e)
	}
}

// callHandler runs the handler; a panicking handler must not kill the
// notifier, so its panic is dropped.
func (a *Coordinator) callHandler(e AsyncError) {
	a.inHandler.Store(true)
	_ = guard(func() { a.opts.OnAsyncError(e) })
	a.inHandler.Store(false)
	a.backlog.done()
}
