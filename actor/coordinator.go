package actor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// Coordinator is the goroutine that owns a core and the shards. Contract:
// Do, Submit, Snapshot, Failed and Stop are safe for concurrent use.
// Snapshot never blocks. Do blocks until the operation is published (or the
// coordinator stops); Submit blocks only while the mailbox is full.
//
// Ownership of the state (the core, the shards, the epoch's waiters) goes
// with the token, a channel holding one value while nobody owns it: the
// run goroutine takes it for every batch, expiry step and shutdown, and a
// synchronous caller that finds it free and nothing queued takes it and
// runs its own operation and the publication on its goroutine (Do's inline
// path), with no hand-off. Taking and giving back the token are channel
// operations, so each owner's accesses happen before the next owner's.
type Coordinator struct {
	core      *core                             // owned by the token holder
	shards    []*shard.Shard                    // owned by the token holder (the shards' owner)
	folder    *folder                           // pod-log folds; the queue is used by the token holder; stopped by shutdown
	waiters   []*Op                             // ops of the current epoch waiting for its publication; owned by the token holder
	chunk     []*Op                             // scratch: ops received, not yet handled; owned by the token holder
	pending   []*Op                             // ops taken from the mailbox when the cache failed, not yet answered; owned by the token holder
	asyncErrs []AsyncError                      // not yet handed to the notifier; owned by run (only run applies async ops)
	failedErr *FailedError                      // owned by the token holder: set once, when an owner meets a fault; mirrored in failed
	inline    bool                              // owned by the token holder: a caller runs the epoch on its goroutine (shards served with Serve)
	held      bool                              // owned by run: run holds the token
	token     chan struct{}                     // cap 1: holds a value while nobody owns the state above
	queued    atomic.Int64                      // atomic: ops sent to the mailbox, not yet applied and published (or failed); lowered before their replies
	counted   int64                             // owned by the token holder: ops taken from the mailbox still counted in queued
	opts      Options                           // read-only after New
	clock     Clock                             // read-only after New
	gen       atomic.Int64                      // generation source shared with the shards
	published atomic.Pointer[snapshot.Snapshot] // atomic; stored only by run, after Commit
	failed    atomic.Pointer[FailedError]       // atomic; set once by run when the cache fails
	mailbox   chan *Op                          // callers -> coordinator
	notifyc   chan []AsyncError                 // coordinator -> notifier goroutine
	finalc    chan []AsyncError                 // coordinator -> notifier at shutdown; buffered 1 so shutdown never waits
	notifier  atomic.Int64                      // atomic: goroutine id of the notifier (0 before it starts)
	inHandler atomic.Bool                       // atomic: the notifier is running OnAsyncError
	backlog   *backlog                          // async errors not yet delivered to OnAsyncError; immutable pointer
	runDone   chan struct{}                     // closed when run (coordinator and shards) has exited
	stopc     chan struct{}                     // closed once by Stop
	stopped   atomic.Bool                       // atomic: set by Stop before it closes stopc (runInline's cheap check)
	stepNow   chan time.Time                    // closed at Start: serve's expiry case while a pass has more pods due
	stopOnce  sync.Once                         // guards close(stopc)
	done      chan struct{}                     // closed when every goroutine (run, shards, notifier) has exited
	ctx       context.Context                   // New's context; run stops when it is done
	ops       sync.Pool                         // *Op with their reply channels
	// closing is set when shutdown starts; submitters counts callers
	// between their closing check and the end of their mailbox send.
	// Shutdown drains the mailbox until no submitter is left, so an op
	// either gets a reply (or reaches OnAsyncError) or is refused.
	closing    atomic.Bool
	submitters atomic.Int64
	stats      *counters    // written by run only (atomics), read by Stats; behind a pointer so its lines are its own
	serial     *serialHists // nil unless Options.SerialTiming; written by the token holder (atomics), read by SerialStats
	mark       time.Time    // owned by the token holder: the serial timing's last reading (serial.go)
}

// Start launches the coordinator, its shards, the pod-log folder and (if
// OnAsyncError is set) the notifier goroutine. They stop on Stop or when ctx is done.
func Start(ctx context.Context, o Options) *Coordinator {
	if o.Shards < 1 {
		o.Shards = 1
	}
	if o.MailboxSize < 1 {
		o.MailboxSize = 1024
	}
	if o.MaxBatch < 1 {
		o.MaxBatch = 256
	}
	if o.ExpiryChunk < 1 {
		o.ExpiryChunk = 64
	}
	if o.Period <= 0 {
		o.Period = time.Second
	}
	a := &Coordinator{
		core:    newCore(o.Shards, o.TTL).withGroups(o.GenericWorkload, o.CompositePodGroup),
		opts:    o,
		clock:   o.Clock,
		mailbox: make(chan *Op, o.MailboxSize),
		token:   make(chan struct{}, 1),
		chunk:   make([]*Op, 0, prefetchChunk),
		notifyc: make(chan []AsyncError),
		finalc:  make(chan []AsyncError, 1),
		stopc:   make(chan struct{}),
		stepNow: make(chan time.Time),
		done:    make(chan struct{}),
		runDone: make(chan struct{}),
		ctx:     ctx,
		stats:   new(counters),
		serial:  newSerialHists(o.SerialTiming && o.Clock != nil),
		backlog: newBacklog(maxBacklog),
	}
	close(a.stepNow)
	a.ops.New = func() any { return &Op{reply: make(chan Result, 1)} }
	a.token <- struct{}{}
	nextGen := func() int64 { return a.gen.Add(1) }
	for i := 0; i < o.Shards; i++ {
		var hook func(shard.Request)
		if o.faults.shard != nil {
			idx := i
			hook = func(r shard.Request) { o.faults.shard(idx, r) }
		}
		a.shards = append(a.shards, shard.Start(fmt.Sprintf("shard %d", i), shard.NewCore(nextGen), hook))
	}
	a.folder = startFolder()
	a.core.builder.SetFoldQueue(a.folder.q)
	a.published.Store(a.core.Last())
	if a.opts.OnAsyncError != nil {
		go a.notify()
	}
	go a.run()
	return a
}

// Snapshot returns the latest published snapshot: one atomic load.
func (a *Coordinator) Snapshot() *snapshot.Snapshot { return a.published.Load() }

// Failed returns the error that failed the cache, or nil.
func (a *Coordinator) Failed() error {
	if f := a.failed.Load(); f != nil {
		return f
	}
	return nil
}

// Done is closed when the coordinator has stopped.
func (a *Coordinator) Done() <-chan struct{} { return a.done }

// Do hands op to the coordinator and waits until it is applied and
// published. It returns ErrClosed if the coordinator stopped first.
//
// When nothing is queued and nobody holds the token, Do takes it and runs
// the op and its publication itself (runInline); otherwise the op goes
// through the mailbox and is batched with the others. Barriers (GetNode,
// Dump, Sync) always take the mailbox: a barrier is then served after
// whatever the run goroutine has taken, an expiry tick included.
func (a *Coordinator) Do(op *Op) Result {
	op.async = false
	if !op.Kind.barrier() && a.queued.Load() == 0 && a.failed.Load() == nil {
		select {
		case <-a.token:
			if a.runInline(op) {
				return <-op.reply // answered by runInline: never waits
			}
		default:
		}
	}
	if err := a.enqueue(op); err != nil {
		return Result{Err: err}
	}
	// A plain receive, not a select with runDone: every op that reached the
	// mailbox gets exactly one reply, from its flush or from shutdown, which
	// drains the mailbox until no submitter is left before run exits. (A
	// test binary's watchdog turns a reply that never comes into a failure.)
	return awaitReply(op)
}

// awaitReply receives op's reply; with a test binary's watchdog on, a
// reply that never comes fails the test with every goroutine's stack.
func awaitReply(op *Op) Result {
	if watchdog.Limit() == 0 {
		return <-op.reply
	}
	return watchdog.Recv(op.reply, "waiting for the reply to "+op.Kind.String())
}

// Submit hands op to the coordinator without waiting for its result; it
// blocks while the mailbox is full. Failures go to Options.OnAsyncError.
// After Submit the op belongs to the coordinator.
func (a *Coordinator) Submit(op *Op) error {
	if err := a.Failed(); err != nil {
		return err
	}
	op.async = true
	// Backpressure for failures: while the error handler is more than
	// maxBacklog errors behind, producers block (the coordinator never does,
	// so a handler that calls the cache cannot deadlock it). The handler's
	// own submissions are exempt: it is the one draining the backlog.
	if a.backlog.load() > maxBacklog && !a.onNotifier() {
		if !a.backlog.wait(a.runDone) {
			return ErrClosed
		}
	}
	return a.enqueue(op)
}

func (a *Coordinator) enqueue(op *Op) error {
	a.submitters.Add(1)
	defer a.submitters.Add(-1)
	if a.closing.Load() {
		return ErrClosed
	}
	// Counted before the send: runInline must see it until op is published.
	a.queued.Add(1)
	// Shutdown keeps draining the mailbox while submitters > 0.
	watchdog.Send(a.mailbox, op, "sending to the mailbox")
	return nil
}

// Stop stops every goroutine and waits for them (a handshake). Operations
// already applied are published first; queued ones get ErrClosed. Called
// from OnAsyncError it cannot wait for the goroutine running the handler,
// which exits as soon as the handler returns.
func (a *Coordinator) Stop() {
	a.stopOnce.Do(func() {
		a.stopped.Store(true)
		close(a.stopc)
	})
	if a.onNotifier() {
		watchdog.Wait(a.runDone, "Stop waiting for the coordinator") // called by the handler: the notifier exits after it returns
		return
	}
	watchdog.Wait(a.done, "Stop waiting for the goroutines to exit")
}
