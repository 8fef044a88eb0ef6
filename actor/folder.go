package actor

import "github.com/schedcache/schedcache/internal/snapbuild"

// folder is the goroutine that runs the snapshot builder's pod-log folds
// (snapbuild.FoldQueue's Serve), so that the coordinator only appends to the
// log. Owned by the Coordinator: started by Start, stopped by shutdown
// after the builder's last use. Contract: stop is called once, by the
// owner; it is a handshake.
type folder struct {
	q    snapbuild.FoldQueue // immutable
	done chan struct{}       // closed when the goroutine has returned
}

// startFolder starts the goroutine serving a new queue.
func startFolder() *folder {
	f := &folder{q: snapbuild.NewFoldQueue(), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.q.Serve()
	}()
	return f
}

// stop ends the goroutine after the fold in flight, if any, and waits for
// it.
func (f *folder) stop() {
	f.q.Close()
	<-f.done
}
