package actor

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/framework"
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
)

var opNames = [...]string{"", "AssumePod", "FinishBinding", "ForgetPod", "AddPod", "UpdatePod", "RemovePod",
	"AddNode", "UpdateNode", "RemoveNode", "GetNode", "Dump", "Sync"}

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
	Info    *framework.PodInfo // AssumePod, AddPod, UpdatePod (new pod)
	Pod     *v1.Pod            // the caller's pod: FinishBinding, ForgetPod, RemovePod, UpdatePod (old pod)
	Key     string             // pod key
	Node    *v1.Node           // AddNode, UpdateNode (new), RemoveNode
	OldNode *v1.Node           // UpdateNode
	Name    string             // GetNode

	async bool
	res   Result
	reply chan Result // cap 1; owned by the Op
}

// Result is the coordinator's answer to one Op.
type Result struct {
	Err  error
	Node *framework.NodeInfo // AddNode, UpdateNode, GetNode
	Dump *Dump               // Dump
}

// Dump is a copy of the whole cache state (upstream's Dump).
type Dump struct {
	Nodes       map[string]*framework.NodeInfo // every entry, ghosts and nodeless ones included
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
	// OpHook, when non-nil, runs on the coordinator goroutine before each
	// operation is applied. ShardHook runs on shard goroutines before each
	// request. Tests use them to inject faults.
	OpHook    func(*Op)
	ShardHook func(shardIdx int, req shard.Request)
	// Dispatcher queues the API calls of BindPod (nil: BindPod refuses).
	Dispatcher Dispatcher
}

// Coordinator is the goroutine that owns a Core and the shards. Contract:
// Do, Submit, Snapshot, Failed and Stop are safe for concurrent use.
// Snapshot never blocks. Do blocks until the operation is published (or the
// coordinator stops); Submit blocks only while the mailbox is full.
type Coordinator struct {
	core      *Core                             // owned by the run goroutine
	shards    []*shard.Shard                    // owned by the run goroutine
	folder    *snapshot.Folder                  // pod-log folds; owned by the run goroutine, stopped by shutdown
	sent      []int                             // scratch: shards sent to in this flush; owned by run
	waiters   []*Op                             // synchronous ops of the current epoch; owned by run
	chunk     []*Op                             // scratch: ops received, not yet handled; owned by run
	asyncErrs []AsyncError                      // not yet handed to the notifier; owned by run
	failedErr error                             // owned by run; mirrored in failed
	opts      Options                           // read-only after New
	clock     Clock                             // read-only after New
	gen       atomic.Int64                      // generation source shared with the shards
	published atomic.Pointer[snapshot.Snapshot] // atomic; stored only by run, after Commit
	failed    atomic.Pointer[FailedError]       // atomic; set once by run when the cache fails
	mailbox   chan *Op                          // callers -> coordinator
	notifyc   chan []AsyncError                 // coordinator -> notifier goroutine
	finalc    chan []AsyncError                 // coordinator -> notifier at shutdown; buffered 1 so shutdown never waits
	notifier  atomic.Int64                      // goroutine id of the notifier (0 before it starts)
	backlog   atomic.Int64                      // async errors not yet delivered to OnAsyncError
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
		core:    NewCore(o.Shards, o.TTL),
		opts:    o,
		clock:   o.Clock,
		mailbox: make(chan *Op, o.MailboxSize),
		chunk:   make([]*Op, 0, prefetchChunk),
		notifyc: make(chan []AsyncError),
		finalc:  make(chan []AsyncError, 1),
		stopc:   make(chan struct{}),
		done:    make(chan struct{}),
		runDone: make(chan struct{}),
		ctx:     ctx,
		stats:   new(counters),
	}
	a.ops.New = func() any { return &Op{reply: make(chan Result, 1)} }
	nextGen := func() int64 { return a.gen.Add(1) }
	for i := 0; i < o.Shards; i++ {
		var hook func(shard.Request)
		if o.ShardHook != nil {
			idx := i
			hook = func(r shard.Request) { o.ShardHook(idx, r) }
		}
		a.shards = append(a.shards, shard.Start(fmt.Sprintf("shard %d", i), shard.NewCore(nextGen), hook))
	}
	a.folder = snapshot.StartFolder()
	a.core.builder.SetFolder(a.folder)
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
func (a *Coordinator) Do(op *Op) Result {
	op.async = false
	if err := a.enqueue(op); err != nil {
		return Result{Err: err}
	}
	// A plain receive, not a select with runDone: every op that reached the
	// mailbox gets exactly one reply, from its flush or from shutdown, which
	// drains the mailbox until no submitter is left before run exits.
	return <-op.reply
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
	// maxBacklog errors behind, producers wait (the coordinator never does,
	// so a handler that calls the cache cannot deadlock it). The handler's
	// own submissions are exempt.
	if a.backlog.Load() > maxBacklog && a.notifier.Load() != goid() {
		for a.backlog.Load() > maxBacklog {
			select {
			case <-a.runDone:
				return ErrClosed
			case <-time.After(50 * time.Microsecond):
			}
		}
	}
	return a.enqueue(op)
}

// maxBacklog bounds the async errors waiting for OnAsyncError.
const maxBacklog = 1024

func (a *Coordinator) enqueue(op *Op) error {
	a.submitters.Add(1)
	defer a.submitters.Add(-1)
	if a.closing.Load() {
		return ErrClosed
	}
	a.mailbox <- op // shutdown keeps draining while submitters > 0
	return nil
}

// Stop stops every goroutine and waits for them (a handshake). Operations
// already applied are published first; queued ones get ErrClosed. Called
// from OnAsyncError it cannot wait for the goroutine running the handler,
// which exits as soon as the handler returns.
func (a *Coordinator) Stop() {
	a.stopOnce.Do(func() { close(a.stopc) })
	if id := a.notifier.Load(); id != 0 && id == goid() {
		<-a.runDone // called by the handler: the notifier exits after it returns
		return
	}
	<-a.done
}

func (a *Coordinator) run() {
	defer func() {
		a.shutdown()
		close(a.runDone)
		if a.opts.OnAsyncError == nil {
			close(a.done) // else the notifier closes it when it exits
		}
	}()
	var timer Timer
	var timerC <-chan time.Time
	if a.opts.TTL > 0 {
		timer = a.clock.NewTimer(0) // upstream runs a pass at start
		timerC = timer.C()
		defer timer.Stop()
	}
	expiring := false
	for {
		// Stop and cancellation take priority over queued work, so that a
		// cache whose context is already done applies nothing.
		select {
		case <-a.stopc:
			return
		case <-a.ctx.Done():
			return
		default:
		}
		var notifyc chan []AsyncError
		if len(a.asyncErrs) > 0 && a.opts.OnAsyncError != nil {
			notifyc = a.notifyc
		}
		if expiring {
			select {
			case op := <-a.mailbox:
				a.batch(op)
			case notifyc <- a.asyncErrs:
				a.asyncErrs = nil
			case <-a.stopc:
				return
			case <-a.ctx.Done():
				return
			default:
				if expiring = a.expireStep(); !expiring {
					timer.Reset(a.opts.Period)
				} else {
					// The coordinator and the shards hand each step to one
					// another through runnext, which would keep callers
					// that are runnable on this P waiting for up to a
					// whole time slice (10 ms): yield between steps.
					runtime.Gosched()
				}
			}
			continue
		}
		select {
		case op := <-a.mailbox:
			a.batch(op)
		case notifyc <- a.asyncErrs:
			a.asyncErrs = nil
		case <-timerC:
			if expiring = a.expireStep(); !expiring {
				timer.Reset(a.opts.Period)
			}
		case <-a.stopc:
			return
		case <-a.ctx.Done():
			return
		}
	}
}

// batch applies first and whatever else is queued, up to MaxBatch, then
// publishes once and replies to every synchronous caller of the batch. It
// takes the ops from the mailbox a chunk at a time and loads each chunk's
// state (Core.prefetch) before applying its ops in order; it stops taking
// when the mailbox is empty or MaxBatch ops were taken.
func (a *Coordinator) batch(first *Op) {
	chunk := append(a.chunk[:0], first)
	taken := 0
	for {
		chunk = a.receive(chunk, min(prefetchChunk, a.opts.MaxBatch-taken))
		if len(chunk) == 0 {
			break
		}
		taken += len(chunk)
		a.prefetch(chunk)
		for _, op := range chunk {
			a.handle(op)
		}
		clear(chunk)
		chunk = chunk[:0]
	}
	a.chunk = chunk
	a.stats.batch(taken)
	a.flush()
}

// prefetch runs Core.prefetch on ops, turning a panic into the cache's
// failure as apply does (prefetch only reads, so a panic there is a bug).
func (a *Coordinator) prefetch(ops []*Op) {
	if a.failedErr != nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			a.fail(&shard.PanicError{Actor: "coordinator", Value: r, Stack: debug.Stack()})
		}
	}()
	a.core.prefetch(ops)
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

func (a *Coordinator) handle(op *Op) {
	if a.failedErr != nil {
		a.finish(op, Result{Err: a.failedErr})
		return
	}
	switch op.Kind {
	case OpGetNode, OpDump, OpSync:
		a.flush()
		if a.failedErr != nil {
			a.finish(op, Result{Err: a.failedErr})
			return
		}
		a.finish(op, a.serveBarrier(op))
		return
	}
	err, ok := a.apply(op)
	if !ok {
		a.finish(op, Result{Err: a.failedErr})
		return
	}
	if op.async && err != nil {
		a.finish(op, Result{Err: err})
		return
	}
	// Successful async ops wait with the synchronous ones for the epoch's
	// publication: if it fails they are reported, never silently dropped.
	op.res = Result{Err: err}
	a.waiters = append(a.waiters, op)
	if !op.async && (op.Kind == OpAddNode || op.Kind == OpUpdateNode) {
		// The returned NodeInfo must be this operation's result, not that
		// of a later operation on the same node in the same batch.
		a.flush()
	}
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

// apply runs op on the core, turning a panic into the cache's failure.
func (a *Coordinator) apply(op *Op) (err error, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			a.fail(&shard.PanicError{Actor: "coordinator", Value: r, Stack: debug.Stack()})
			ok = false
		}
	}()
	if a.opts.OpHook != nil {
		a.opts.OpHook(op)
	}
	c := a.core
	switch op.Kind {
	case OpAssumePod:
		err = c.AssumePod(op.Info)
	case OpFinishBinding:
		err = c.FinishBinding(op.Key, a.clock.Now())
	case OpForgetPod:
		err = c.ForgetPod(op.Key, op.Pod)
	case OpAddPod:
		err = c.AddPod(op.Info)
	case OpUpdatePod:
		err = c.UpdatePod(op.Pod, op.Info)
	case OpRemovePod:
		err = c.RemovePod(op.Key, op.Pod)
	case OpAddNode:
		c.AddNode(op.Node)
	case OpUpdateNode:
		err = c.UpdateNode(op.OldNode, op.Node)
	case OpRemoveNode:
		err = c.RemoveNode(op.Node)
	default:
		err = fmt.Errorf("schedcache: unknown operation %v", op.Kind)
	}
	return err, true
}

func (a *Coordinator) serveBarrier(op *Op) Result {
	switch op.Kind {
	case OpGetNode:
		idx, slot, ok := a.core.Entry(op.Name)
		if !ok {
			return Result{Err: &NodeError{Op: "GetNode", Name: op.Name, Err: ErrNodeNotFound}}
		}
		resp := a.shards[idx].Do(shard.Request{Get: true, Slot: slot})
		if resp.Err != nil {
			a.fail(resp.Err)
			return Result{Err: a.failedErr}
		}
		return Result{Node: a.core.CurrentImages(op.Name, resp.Node)}
	case OpDump:
		names := a.core.SlotNames()
		d := &Dump{Nodes: make(map[string]*framework.NodeInfo, len(names)), AssumedPods: a.core.AssumedKeys()}
		for _, s := range a.shards {
			resp := s.Do(shard.Request{Dump: true})
			if resp.Err != nil {
				a.fail(resp.Err)
				return Result{Err: a.failedErr}
			}
			for slot, ni := range resp.Dump {
				d.Nodes[names[slot]] = a.core.CurrentImages(names[slot], ni)
			}
		}
		return Result{Dump: d}
	}
	return Result{}
}

// flush publishes the epoch (if anything changed) and replies to its
// synchronous callers.
func (a *Coordinator) flush() {
	c := a.core
	if a.failedErr == nil && c.Dirty() {
		muts := c.PendingMutations()
		a.sent = a.sent[:0]
		for i, s := range a.shards {
			if len(muts[i]) == 0 {
				continue
			}
			if err := s.Send(shard.Request{Muts: muts[i], Flush: true}); err != nil {
				a.fail(err)
				break
			}
			a.sent = append(a.sent, i)
		}
		if a.failedErr == nil {
			a.buildMeta()
		}
		for _, i := range a.sent {
			resp := a.shards[i].Recv()
			if resp.Err != nil {
				a.fail(resp.Err)
				continue
			}
			if a.failedErr == nil {
				c.ApplyFrozen(resp.Frozen)
			}
		}
		c.ResetMutations()
		if a.failedErr == nil {
			a.published.Store(c.Commit())
			a.stats.published(a.clock, c.AssumedCount())
		}
	}
	var snap *snapshot.Snapshot
	for _, op := range a.waiters {
		res := op.res
		if a.failedErr != nil {
			res = Result{Err: a.failedErr}
		} else if res.Err == nil && !op.async && (op.Kind == OpAddNode || op.Kind == OpUpdateNode) {
			if snap == nil {
				snap = a.published.Load()
			}
			res.Node, _ = snap.Get(op.Node.Name)
		}
		a.finish(op, res)
	}
	clear(a.waiters)
	a.waiters = a.waiters[:0]
}

// buildMeta runs the coordinator's part of a flush while the shards apply
// the epoch (BuildMeta, then loading what ApplyFrozen will copy), turning a
// panic into the cache's failure.
func (a *Coordinator) buildMeta() {
	defer func() {
		if r := recover(); r != nil {
			a.fail(&shard.PanicError{Actor: "coordinator", Value: r, Stack: debug.Stack()})
		}
	}()
	a.core.BuildMeta()
	a.core.PrefetchFrozen()
}

// finish answers op: a synchronous caller gets r; an async op's failure
// goes to the error handler.
func (a *Coordinator) finish(op *Op, r Result) {
	a.stats.finished(op, r.Err)
	if op.async {
		if r.Err != nil && a.opts.OnAsyncError != nil {
			a.stats.asyncErrs.Add(1)
			a.asyncErrs = append(a.asyncErrs, AsyncError{Kind: op.Kind, Pod: asyncPod(op), OldPod: asyncOldPod(op), Node: op.Node, OldNode: op.OldNode, Err: r.Err})
			a.backlog.Add(1)
		}
		a.PutOp(op)
		return
	}
	op.reply <- r
}

func (a *Coordinator) fail(cause error) {
	if a.failedErr != nil {
		return
	}
	f := &FailedError{Cause: cause}
	a.failedErr = f
	a.failed.Store(f)
}

func (a *Coordinator) expireStep() (more bool) {
	if a.failedErr != nil {
		return false
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				a.fail(&shard.PanicError{Actor: "coordinator", Value: r, Stack: debug.Stack()})
			}
		}()
		n, m := a.core.Expire(a.clock.Now(), a.opts.ExpiryChunk)
		a.stats.expired.Add(uint64(n))
		more = m
	}()
	a.flush()
	return more && a.failedErr == nil
}

// shutdown publishes what was applied, refuses what is queued, and stops
// the shards. It runs on the coordinator goroutine.
func (a *Coordinator) shutdown() {
	a.closing.Store(true)
	a.flush()
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
	a.folder.Stop()
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

func (a *Coordinator) callHandler(e AsyncError) {
	defer a.backlog.Add(-1)
	defer func() { _ = recover() }() // a panicking handler must not kill the notifier
	a.opts.OnAsyncError(e)
}
