package actor

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// Clock is the time source of the coordinator (injectable for tests).
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the subset of *time.Timer the coordinator uses.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// OpKind names a coordinator operation.
type OpKind uint8

const (
	OpAssumePod OpKind = iota + 1
	OpFinishBinding
	OpForgetPod
	OpAddPod
	OpUpdatePod
	OpRemovePod
	OpAddNode
	OpUpdateNode
	OpRemoveNode
	OpGetNode // barrier: served after the pending epoch is published
	OpDump    // barrier
	OpSync    // barrier: no effect; replies once everything before it is published
	// OpCommit applies a CommitBatch (commit.go) as one operation, after
	// publishing the pending epoch if it touched the batch's nodes.
	OpCommit
	// OpAssumeIfGen is AssumePod if the node's generation is Gen.
	OpAssumeIfGen
)

var opNames = [...]string{"", "AssumePod", "FinishBinding", "ForgetPod", "AddPod", "UpdatePod", "RemovePod",
	"AddNode", "UpdateNode", "RemoveNode", "GetNode", "Dump", "Sync", "Commit", "AssumePodIfGeneration"}

// barrier reports whether k is served after the pending epoch is
// published, from the run goroutine only (GetNode, Dump, Sync).
func (k OpKind) barrier() bool { return k == OpGetNode || k == OpDump || k == OpSync }

func (k OpKind) String() string {
	if int(k) < len(opNames) && k > 0 {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one request to the coordinator. The caller fills it, hands it over
// with Do or Submit, and must not touch it until the reply (Do) or ever
// again (Submit).
type Op struct {
	Kind    OpKind
	Info    *nodeinfo.PodInfo // AssumePod, AddPod, UpdatePod (new pod)
	Pod     *v1.Pod           // the caller's pod: FinishBinding, ForgetPod, RemovePod, UpdatePod (old pod)
	Key     string            // pod key
	Node    *v1.Node          // AddNode, UpdateNode (new), RemoveNode
	OldNode *v1.Node          // UpdateNode
	Name    string            // GetNode
	Batch   *CommitBatch      // Commit
	Gen     int64             // AssumeIfGen: the node generation the caller saw

	async bool
	res   Result
	reply chan Result // cap 1; owned by the Op
}

// Result is the coordinator's answer to one Op.
type Result struct {
	Err  error
	Node *nodeinfo.NodeInfo // AddNode, UpdateNode, GetNode
	Dump *Dump              // Dump
}

// Dump is a copy of the whole cache state (upstream's Dump).
type Dump struct {
	Nodes       map[string]*nodeinfo.NodeInfo // every entry, ghosts and nodeless ones included
	AssumedPods map[string]struct{}
}

// AsyncError reports an operation submitted without waiting that failed.
type AsyncError struct {
	Kind    OpKind
	Pod     *v1.Pod  // the pod of the event (new pod for updates)
	OldPod  *v1.Pod  // UpdatePod
	Node    *v1.Node // node events (new node for updates)
	OldNode *v1.Node
	Err     error
}

// NewOp returns a cleared Op from the coordinator's pool. Release it with
// PutOp once its reply arrived (Do returned). The pool is per coordinator so
// that reply channels never cross a testing/synctest bubble.
func (a *Coordinator) NewOp() *Op { return a.ops.Get().(*Op) }

// PutOp returns op to the pool.
func (a *Coordinator) PutOp(op *Op) {
	reply := op.reply
	*op = Op{reply: reply}
	a.ops.Put(op)
}

// Options configure a Coordinator.
type Options struct {
	Shards       int           // shard goroutines (>= 1)
	TTL          time.Duration // assumed-pod TTL after FinishBinding; 0: never expire
	Period       time.Duration // pause between expiry passes
	Clock        Clock
	MailboxSize  int // bounded mailbox: submitters block when it is full
	MaxBatch     int // operations applied per publication at most
	ExpiryChunk  int // pods expired per step at most, so others interleave
	OnAsyncError func(AsyncError)
	// OpHook, when non-nil, runs on the token holder's goroutine (the
	// coordinator's, or a caller's running inline) before each operation
	// is applied. ShardHook runs before each shard request, on the shard's
	// goroutine or the inline caller's. Tests use them to inject faults.
	OpHook    func(*Op)
	ShardHook func(shardIdx int, req shard.Request)
	// Dispatcher queues the API calls of BindPod (nil: BindPod refuses).
	Dispatcher Dispatcher
}

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
	stats      *counters // written by run only (atomics), read by Stats; behind a pointer so its lines are its own
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
		core:    newCore(o.Shards, o.TTL),
		opts:    o,
		clock:   o.Clock,
		mailbox: make(chan *Op, o.MailboxSize),
		token:   make(chan struct{}, 1),
		chunk:   make([]*Op, 0, prefetchChunk),
		notifyc: make(chan []AsyncError),
		finalc:  make(chan []AsyncError, 1),
		stopc:   make(chan struct{}),
		done:    make(chan struct{}),
		runDone: make(chan struct{}),
		ctx:     ctx,
		stats:   new(counters),
		backlog: newBacklog(maxBacklog),
	}
	a.ops.New = func() any { return &Op{reply: make(chan Result, 1)} }
	a.token <- struct{}{}
	nextGen := func() int64 { return a.gen.Add(1) }
	for i := 0; i < o.Shards; i++ {
		var hook func(shard.Request)
		if o.ShardHook != nil {
			idx := i
			hook = func(r shard.Request) { o.ShardHook(idx, r) }
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
	if a.queued.Load() != 0 || a.failedErr != nil || a.closing.Load() || a.stopping() {
		a.token <- struct{}{}
		return false
	}
	a.inline = true
	a.stats.batch(1)
	err := a.handle(op)
	if err == nil {
		err = a.flush()
	}
	if err != nil {
		a.fail(err) // answers op, parked among the waiters
	}
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

// maxBacklog bounds the async errors waiting for OnAsyncError.
const maxBacklog = 1024

// onNotifier reports whether the caller is the async error handler, run by
// the notifier goroutine. goid is asked only while a handler runs.
func (a *Coordinator) onNotifier() bool {
	return a.inHandler.Load() && a.notifier.Load() == goid()
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
	a.stopOnce.Do(func() { close(a.stopc) })
	if a.onNotifier() {
		watchdog.Wait(a.runDone, "Stop waiting for the coordinator") // called by the handler: the notifier exits after it returns
		return
	}
	watchdog.Wait(a.done, "Stop waiting for the goroutines to exit")
}

// run is the coordinator goroutine. It serves the mailbox in its live mode
// until Stop, cancellation or a failure; a failure switches it to its
// failure mode, which answers every operation with the failure until Stop
// or cancellation. Either way it ends with shutdown.
func (a *Coordinator) run() {
	defer func() {
		close(a.runDone)
		if a.opts.OnAsyncError == nil {
			close(a.done) // else the notifier closes it when it exits
		}
	}()
	cause := a.serve() // returns holding the token if and only if cause != nil
	if cause == nil {
		a.closing.Store(true) // from now on no caller runs inline
		a.lock()              // waits for one that still does
		if a.failedErr == nil {
			cause = a.flush() // publish what was applied before the stop
		}
	}
	if cause != nil {
		a.fail(cause)
		if !a.closing.Load() {
			a.serveFailed()
			a.closing.Store(true)
		}
	}
	a.shutdown()
}

// stopping reports whether Stop or cancellation asked the loop to end. The
// loops check it before each receive, so that they take priority over
// queued work and a cache whose context is already done applies nothing.
func (a *Coordinator) stopping() bool {
	select {
	case <-a.stopc:
		return true
	case <-a.ctx.Done():
		return true
	default:
		return false
	}
}

// notifyChan returns the channel to the notifier while async errors wait for
// it, else nil (a select case that never fires).
func (a *Coordinator) notifyChan() chan []AsyncError {
	if len(a.asyncErrs) > 0 && a.opts.OnAsyncError != nil {
		return a.notifyc
	}
	return nil
}

// serve is the live mode of the loop: it applies and publishes operations
// and runs the expiry passes. It returns nil on Stop or cancellation, or
// the fault (a panic, a shard's failure) that fails the cache; the
// operations the fault left unanswered are in waiters and pending.
func (a *Coordinator) serve() error {
	var timer Timer
	var timerC <-chan time.Time
	if a.opts.TTL > 0 {
		timer = a.clock.NewTimer(0) // upstream runs a pass at start
		timerC = timer.C()
		defer timer.Stop()
	}
	expiring := false
	for !a.stopping() {
		var err error
		if expiring {
			select {
			case op := <-a.mailbox:
				err = a.batchLocked(op)
			case a.notifyChan() <- a.asyncErrs:
				a.asyncErrs = nil
			case <-a.stopc:
				return nil
			case <-a.ctx.Done():
				return nil
			default:
				if expiring, err = a.expireStepLocked(); !expiring {
					timer.Reset(a.opts.Period)
				} else {
					// The coordinator and the shards hand each step to one
					// another through runnext, which would keep callers
					// that are runnable on this P waiting for up to a
					// whole time slice (10 ms): yield between steps.
					runtime.Gosched()
				}
			}
		} else {
			select {
			case op := <-a.mailbox:
				err = a.batchLocked(op)
			case a.notifyChan() <- a.asyncErrs:
				a.asyncErrs = nil
			case <-timerC:
				if expiring, err = a.expireStepLocked(); !expiring {
					timer.Reset(a.opts.Period)
				}
			case <-a.stopc:
				return nil
			case <-a.ctx.Done():
				return nil
			}
		}
		if err != nil {
			return err // the token stays with run for the failure mode
		}
		a.unlock()
	}
	return nil
}

// batchLocked takes the token and runs batch(first), unless a caller
// running inline failed the cache meanwhile: first is then left to the
// failure mode and the failure returned.
func (a *Coordinator) batchLocked(first *Op) error {
	a.lock()
	if a.failedErr != nil {
		a.pending = append(a.pending, first)
		return a.failedErr
	}
	return a.batch(first)
}

// expireStepLocked takes the token and runs expireStep, unless a caller
// running inline failed the cache meanwhile.
func (a *Coordinator) expireStepLocked() (more bool, err error) {
	a.lock()
	if a.failedErr != nil {
		return false, a.failedErr
	}
	return a.expireStep()
}

// serveFailed is the failure mode of the loop: the operations a fault left
// unanswered, and every one received from now on, get the failure; async
// errors still reach the handler. It returns on Stop or cancellation.
func (a *Coordinator) serveFailed() {
	for _, op := range a.pending {
		a.finish(op, Result{Err: a.failedErr})
	}
	a.pending = nil
	for !a.stopping() {
		select {
		case op := <-a.mailbox:
			a.finish(op, Result{Err: a.failedErr})
		case a.notifyChan() <- a.asyncErrs:
			a.asyncErrs = nil
		case <-a.stopc:
		case <-a.ctx.Done():
		}
	}
}

// fail enters the failure mode: it records cause (Failed and Submit see it
// from now on) and answers the operations of the unpublished epoch with
// the failure. The token holder that met the fault calls it: run, with
// the fault serve returned, or a caller running inline. Once failed, a
// later call (run switching to its failure mode) keeps the first cause.
func (a *Coordinator) fail(cause error) {
	if a.failedErr == nil {
		f := &FailedError{Cause: cause}
		a.failedErr = f
		a.failed.Store(f)
	}
	f := a.failedErr
	for _, op := range a.waiters {
		a.finish(op, Result{Err: f})
	}
	clear(a.waiters)
	a.waiters = a.waiters[:0]
}

// batch applies first and whatever else is queued, up to MaxBatch, then
// publishes once and replies to every synchronous caller of the batch. It
// takes the ops from the mailbox a chunk at a time and loads each chunk's
// state (core.prefetch) before applying its ops in order; it stops taking
// when the mailbox is empty or MaxBatch ops were taken. On a fault it
// leaves the chunk's unhandled ops in pending and returns the fault.
func (a *Coordinator) batch(first *Op) error {
	chunk := append(a.chunk[:0], first)
	taken := 0
	// A fault: the ops taken are failed, no longer queued. Otherwise the
	// flushes have uncounted them already.
	defer a.uncount()
	for {
		chunk = a.receive(chunk, min(prefetchChunk, a.opts.MaxBatch-taken))
		if len(chunk) == 0 {
			break
		}
		taken += len(chunk)
		a.counted += int64(len(chunk))
		// prefetch only reads: a panic there is a bug, and fails the cache.
		if err := guard(func() { a.core.prefetch(chunk) }); err != nil {
			a.pending = chunk
			a.stats.batch(taken)
			return err
		}
		for i, op := range chunk {
			if err := a.handle(op); err != nil {
				a.pending = chunk[i+1:]
				a.stats.batch(taken)
				return err
			}
		}
		clear(chunk)
		chunk = chunk[:0]
	}
	a.chunk = chunk
	a.stats.batch(taken)
	return a.flush()
}

// uncount lowers queued by the ops taken from the mailbox and not yet
// uncounted. Called by the token holder.
func (a *Coordinator) uncount() {
	if a.counted != 0 {
		a.queued.Add(-a.counted)
		a.counted = 0
	}
}

// receive appends to ops what the mailbox holds, without waiting, until
// ops holds limit ops.
func (a *Coordinator) receive(ops []*Op, limit int) []*Op {
	for len(ops) < limit {
		select {
		case op := <-a.mailbox:
			ops = append(ops, op)
		default:
			return ops
		}
	}
	return ops
}

// handle applies op, or serves it after a publication if it is a barrier.
// It returns a fault, leaving op among the waiters for fail to answer.
func (a *Coordinator) handle(op *Op) error {
	switch op.Kind {
	case OpGetNode, OpDump, OpSync:
		if err := a.flush(); err != nil {
			return a.park(op, err)
		}
		res, err := a.serveBarrier(op)
		if err != nil {
			return a.park(op, err)
		}
		a.finish(op, res)
		return nil
	}
	if op.Kind == OpCommit && a.core.commitNeedsFlush(op.Batch) ||
		op.Kind == OpAssumeIfGen && a.core.assumeNeedsFlush(op.Info.NodeName()) {
		// The check reads live NodeInfos from the last publication.
		if err := a.flush(); err != nil {
			return a.park(op, err)
		}
	}
	res, err := a.apply(op)
	if err != nil {
		return a.park(op, err)
	}
	if op.async && res != nil {
		a.finish(op, Result{Err: res})
		return nil
	}
	// Successful async ops wait with the synchronous ones for the epoch's
	// publication: if it fails they are reported, never silently dropped.
	op.res = Result{Err: res}
	a.waiters = append(a.waiters, op)
	if !op.async && (op.Kind == OpAddNode || op.Kind == OpUpdateNode) {
		// The returned NodeInfo must be this operation's result, not that
		// of a later operation on the same node in the same batch.
		return a.flush()
	}
	return nil
}

// park leaves op, unanswered, to fail and returns fault.
func (a *Coordinator) park(op *Op, fault error) error {
	a.waiters = append(a.waiters, op)
	return fault
}

func asyncPod(op *Op) *v1.Pod {
	if op.Info != nil {
		return op.Info.Pod()
	}
	return op.Pod
}

func asyncOldPod(op *Op) *v1.Pod {
	if op.Kind == OpUpdatePod {
		return op.Pod
	}
	return nil
}

// apply runs op on the core. res is the operation's own error (the op is
// refused, the cache is fine); fault is a panic that fails the cache.
func (a *Coordinator) apply(op *Op) (res, fault error) {
	fault = guard(func() {
		if a.opts.OpHook != nil {
			a.opts.OpHook(op)
		}
		c := a.core
		switch op.Kind {
		case OpAssumePod:
			res = c.AssumePod(op.Info)
		case OpFinishBinding:
			res = c.FinishBinding(op.Key, a.clock.Now())
		case OpForgetPod:
			res = c.ForgetPod(op.Key, op.Pod)
		case OpAddPod:
			res = c.AddPod(op.Info)
		case OpUpdatePod:
			res = c.UpdatePod(op.Pod, op.Info)
		case OpRemovePod:
			res = c.RemovePod(op.Key, op.Pod)
		case OpAddNode:
			c.AddNode(op.Node)
		case OpUpdateNode:
			res = c.UpdateNode(op.OldNode, op.Node)
		case OpRemoveNode:
			res = c.RemoveNode(op.Node)
		case OpCommit:
			res = c.ApplyCommit(op.Batch)
		case OpAssumeIfGen:
			res = c.AssumePodIfGeneration(op.Info, op.Gen)
		default:
			res = fmt.Errorf("schedcache: unknown operation %v", op.Kind)
		}
	})
	return res, fault
}

// serveBarrier answers a GetNode or Dump from the shards; a shard's error
// is a fault.
func (a *Coordinator) serveBarrier(op *Op) (Result, error) {
	switch op.Kind {
	case OpGetNode:
		idx, slot, ok := a.core.Entry(op.Name)
		if !ok {
			return Result{Err: &NodeError{Op: "GetNode", Name: op.Name, Err: ErrNodeNotFound}}, nil
		}
		resp := a.shards[idx].Do(shard.Request{Get: true, Slot: slot})
		if resp.Err != nil {
			return Result{}, resp.Err
		}
		return Result{Node: a.core.CurrentImages(op.Name, resp.Node)}, nil
	case OpDump:
		names := a.core.SlotNames()
		d := &Dump{Nodes: make(map[string]*nodeinfo.NodeInfo, len(names)), AssumedPods: a.core.AssumedKeys()}
		for _, s := range a.shards {
			resp := s.Do(shard.Request{Dump: true})
			if resp.Err != nil {
				return Result{}, resp.Err
			}
			for slot, ni := range resp.Dump {
				d.Nodes[names[slot]] = a.core.CurrentImages(names[slot], ni)
			}
		}
		return Result{Dump: d}, nil
	}
	return Result{}, nil
}

// flush publishes the epoch, if anything changed, and answers the ops
// waiting for it. It returns a fault, leaving the waiters to fail.
//
// The ops taken from the mailbox so far stop counting in queued between
// the publication and the first reply, so a caller answered sees none of
// its ops queued. Ops of the batch not yet applied are uncounted early,
// which is safe: the token holder keeps the token until it has published
// them, and only a token holder acts on queued (runInline).
func (a *Coordinator) flush() error {
	if err := a.publish(); err != nil {
		return err
	}
	a.uncount()
	var snap *snapshot.Snapshot
	for _, op := range a.waiters {
		res := op.res
		if res.Err == nil && !op.async && (op.Kind == OpAddNode || op.Kind == OpUpdateNode) {
			if snap == nil {
				snap = a.published.Load()
			}
			res.Node, _ = snap.Get(op.Node.Name)
		}
		a.finish(op, res)
	}
	clear(a.waiters)
	a.waiters = a.waiters[:0]
	return nil
}

// publish drives the core's Ready/Advance protocol over the shard
// goroutines: each shard with mutations gets them in one request, the
// core builds its part while the shards apply theirs, and Advance takes
// their replies in order. A caller running inline serves the shards on
// its own goroutine instead (Shard.Serve, after the core's part): an
// epoch of one op is smaller than the two hand-offs per shard it saves.
func (a *Coordinator) publish() error {
	var rd ready
	var ok bool
	if err := guard(func() { rd, ok = a.core.Ready() }); err != nil || !ok {
		return err
	}
	var collect func(i int) ([]shard.Frozen, error)
	if a.inline {
		collect = func(i int) ([]shard.Frozen, error) {
			resp := a.shards[i].Serve(shard.Request{Muts: rd.Muts[i], Flush: true})
			return resp.Frozen, resp.Err
		}
	} else {
		// Send fails only after Stop, which run calls after its last
		// publish; a failed send still lets Advance run, and the shards
		// not sent to report the send's error instead of being waited for.
		var sendErr error
		unsent := len(rd.Muts)
		for i, m := range rd.Muts {
			if len(m) == 0 {
				continue
			}
			if err := a.shards[i].Send(shard.Request{Muts: m, Flush: true}); err != nil {
				sendErr, unsent = err, i
				break
			}
		}
		collect = func(i int) ([]shard.Frozen, error) {
			if i >= unsent {
				return nil, sendErr
			}
			resp := a.shards[i].Recv()
			return resp.Frozen, resp.Err
		}
	}
	snap, err := a.core.Advance(rd, collect)
	if err != nil {
		return err
	}
	a.published.Store(snap)
	a.stats.published(a.clock, a.core.AssumedCount())
	return nil
}

// finish answers op: a synchronous caller gets r; an async op's failure
// goes to the error handler.
func (a *Coordinator) finish(op *Op, r Result) {
	a.stats.finished(op, r.Err)
	if op.async {
		if r.Err != nil && a.opts.OnAsyncError != nil {
			a.stats.asyncErrs.Add(1)
			a.asyncErrs = append(a.asyncErrs, AsyncError{Kind: op.Kind, Pod: asyncPod(op), OldPod: asyncOldPod(op), Node: op.Node, OldNode: op.OldNode, Err: r.Err})
			a.backlog.add()
		}
		a.PutOp(op)
		return
	}
	op.reply <- r
}

// expireStep runs one expiry step and publishes it. more reports whether
// more pods are due now; err is a fault.
func (a *Coordinator) expireStep() (more bool, err error) {
	var n int
	if err := guard(func() { n, more = a.core.Expire(a.clock.Now(), a.opts.ExpiryChunk) }); err != nil {
		return false, err
	}
	a.stats.expired.Add(uint64(n))
	return more, a.flush()
}

// shutdown refuses what is queued and stops the shards, the folder and
// the notifier. It runs on the coordinator goroutine, after closing is
// set and the last epoch is published (or the cache failed).
func (a *Coordinator) shutdown() {
	for {
		select {
		case op := <-a.mailbox:
			a.finish(op, Result{Err: ErrClosed})
			continue
		default:
		}
		if a.submitters.Load() == 0 && len(a.mailbox) == 0 {
			break
		}
		runtime.Gosched()
	}
	for _, s := range a.shards {
		s.Stop()
	}
	a.folder.stop()
	if a.opts.OnAsyncError != nil {
		a.finalc <- a.asyncErrs // buffered: never waits for a busy handler
		a.asyncErrs = nil
		close(a.notifyc)
	}
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
