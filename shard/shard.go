package shard

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/schedcache/schedcache/nodeinfo"
)

// ErrStopped is returned for requests to a shard that has stopped.
var ErrStopped = errors.New("shard: stopped")

// PanicError reports a panic recovered inside a shard or the coordinator.
// The actor that panicked refuses every later request with the same error.
type PanicError struct {
	Actor string // "shard 3", "coordinator"
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("schedcache: panic in %s: %v", e.Actor, e.Value)
}

// Request is one message from the coordinator to a shard. The shard applies
// Muts, then serves at most one of Flush, Dump or Get. The coordinator must
// not touch Muts until the Response arrives.
type Request struct {
	Muts  []Mutation
	Flush bool
	Dump  bool
	Get   bool
	Slot  int32 // for Get
}

// Response answers one Request. Frozen is owned by the shard and valid until
// the next Request; the NodeInfos are immutable and may be kept for ever.
type Response struct {
	Frozen []Frozen
	Dump   map[int32]*nodeinfo.NodeInfo
	Node   *nodeinfo.NodeInfo
	Err    error
}

// Shard is the goroutine that owns one Core. Contract: exactly one goroutine
// at a time (the owner: the coordinator's token holder, see actor's
// Coordinator) calls Send, Recv, Do, Serve and Stop; ownership passes from
// one goroutine to the next only through a synchronising operation (the
// coordinator's token channel), never while a request is outstanding.
// Requests are served in order; Do blocks until the reply; Serve runs one
// request on the owner's goroutine. Stop is a handshake.
//
// The goroutine exits only when Stop closes reqc, and it replies to every
// request it receives (serve recovers panics), so the owner's sends and
// receives are plain channel operations: a select on a stop channel, which
// cost the cycle's three hand-offs one selectgo each, could never fire.
type Shard struct {
	name    string
	reqc    chan Request  // owner -> shard; closed by Stop
	respc   chan Response // shard -> owner; buffered 1
	done    chan struct{} // closed when the goroutine exits
	stopped bool          // owned by the owner: Stop was called
	core    *Core         // owned by the shard goroutine while a request is outstanding, else by the owner (Serve)
	err     error         // owned as core; sticky once set
	// Hook, when non-nil, runs on the shard goroutine before each request
	// is applied. Tests use it to inject panics.
	Hook func(Request)
}

// Start launches the goroutine that owns core. The caller owns the returned
// Shard and must call Stop.
func Start(name string, core *Core, hook func(Request)) *Shard {
	s := &Shard{
		name:  name,
		reqc:  make(chan Request),
		respc: make(chan Response, 1),
		done:  make(chan struct{}),
		core:  core,
		Hook:  hook,
	}
	go s.run()
	return s
}

func (s *Shard) run() {
	defer close(s.done)
	for req := range s.reqc {
		s.respc <- s.serve(req) // buffered: the owner receives before it sends again
	}
}

func (s *Shard) serve(req Request) (resp Response) {
	if s.err != nil {
		return Response{Err: s.err}
	}
	defer func() {
		if r := recover(); r != nil {
			s.err = &PanicError{Actor: s.name, Value: r, Stack: debug.Stack()}
			resp = Response{Err: s.err}
		}
	}()
	if s.Hook != nil {
		s.Hook(req)
	}
	if err := s.core.Apply(req.Muts); err != nil {
		s.err = err
		return Response{Err: err}
	}
	switch {
	case req.Flush:
		resp.Frozen = s.core.Flush()
	case req.Dump:
		resp.Dump = s.core.Dump()
	case req.Get:
		resp.Node = s.core.Get(req.Slot)
	}
	return resp
}

// Send hands req to the shard without waiting for the reply. Every
// successful Send must be followed by exactly one Recv. After Stop it
// returns ErrStopped.
func (s *Shard) Send(req Request) error {
	if s.stopped {
		return ErrStopped
	}
	s.reqc <- req // the goroutine runs until Stop: it receives
	return nil
}

// Recv waits for the reply to the last Send.
func (s *Shard) Recv() Response {
	if s.stopped {
		select {
		case r := <-s.respc: // replied before Stop
			return r
		default:
			return Response{Err: ErrStopped}
		}
	}
	return <-s.respc // serve always replies, panics included
}

// Serve applies req on the calling goroutine, exactly as the shard's
// goroutine would (the same hook, panic recovery and sticky error), and
// returns its reply. The caller must be the owner with no request
// outstanding (every Send received): the goroutine is then idle on its
// request channel, and the channel operations of the owner's last Recv and
// next Send order its accesses to the core with the caller's. It saves the
// two goroutine hand-offs of Do for a request too small to be worth
// running beside the owner. After Stop it returns ErrStopped.
func (s *Shard) Serve(req Request) Response {
	if s.stopped {
		return Response{Err: ErrStopped}
	}
	return s.serve(req)
}

// Do sends req and waits for its reply.
func (s *Shard) Do(req Request) Response {
	if err := s.Send(req); err != nil {
		return Response{Err: err}
	}
	return s.Recv()
}

// Stop stops the goroutine and waits for it to exit. It is a handshake:
// when Stop returns, the shard touches nothing any more. Calling it again
// does nothing.
func (s *Shard) Stop() {
	if !s.stopped {
		s.stopped = true
		close(s.reqc)
	}
	<-s.done
}
