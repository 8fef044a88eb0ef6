package actor

import (
	"fmt"
	"runtime"
	"time"

	"github.com/schedcache/schedcache/internal/errs"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// run is the coordinator's goroutine. It serves the mailbox in its live mode
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
			a.serialMark()
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
//
// One select serves everything. The expiry case is the timer's channel
// between passes and, while a pass has more pods due, stepNow, which is
// always ready. Queued ops keep priority over the pass's steps: a step
// the select picks while the mailbox holds ops is skipped, and the loop
// selects again, so other operations' latency barely moves during an
// expiry storm (W5), while a pass still runs whenever the mailbox is
// empty.
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
		expiry := timerC
		if expiring {
			expiry = a.stepNow
		}
		var err error
		select {
		case op := <-a.mailbox:
			err = a.batchLocked(op)
		case a.notifyChan() <- a.asyncErrs:
			a.asyncErrs = nil
		case <-expiry:
			if expiring && len(a.mailbox) > 0 {
				continue // queued ops go before the pass's next step
			}
			if expiring, err = a.expireStepLocked(); !expiring {
				timer.Reset(a.opts.Period)
			} else {
				// The coordinator and the shards hand each step to one
				// another through runnext, which would keep callers
				// that are runnable on this P waiting for up to a
				// whole time slice (10 ms): yield between steps.
				runtime.Gosched()
			}
		case <-a.stopc:
			return nil
		case <-a.ctx.Done():
			return nil
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
	t0 := a.serialStart()
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
		a.serialMark()
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
	err := a.flush()
	a.serialBatch(t0, taken)
	return err
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
	a.serialApply(op.Kind)
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
		if a.opts.faults.op != nil {
			a.opts.faults.op(op)
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
		case OpRemoveAssumedPod:
			res = c.RemoveAssumedPod(op.Key, op.Pod)
		case OpPodGroupMember, OpPodGroup, OpCompositePodGroup:
			res = c.ApplyGroupOp(op.Kind, op.Pod, op.Group)
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
// their replies in order. A caller running inline, or any token holder
// with a small epoch (smallEpoch), serves the shards on its own goroutine
// instead (Shard.Serve, after the core's part): such an epoch is smaller
// than the two hand-offs per shard it saves.
func (a *Coordinator) publish() error {
	var rd ready
	var ok bool
	if err := guard(func() { rd, ok = a.core.Ready() }); err != nil || !ok {
		return err
	}
	var collect func(i int) ([]shard.Frozen, error)
	if a.inline || smallEpoch(rd) {
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
	var now time.Time
	if a.clock != nil { // Start's callers in this package may leave it unset
		now = a.clock.Now()
	}
	a.stats.published(now, a.core.AssumedCount())
	a.serialPublish(now)
	return nil
}

// smallEpochMuts is the most mutations an epoch may have for its token
// holder to serve the shards on its own goroutine even when it is the run
// goroutine: below it, two goroutine hand-offs per shard cost more than
// the parallel freezing saves (W3's asynchronous confirmations and
// removals reach run a few at a time).
const smallEpochMuts = 32

// smallEpoch reports whether rd has at most smallEpochMuts mutations.
func smallEpoch(rd ready) bool {
	n := 0
	for _, m := range rd.Muts {
		if n += len(m); n > smallEpochMuts {
			return false
		}
	}
	return true
}

// finish answers op: a synchronous caller gets r; an async op's failure
// goes to the error handler.
func (a *Coordinator) finish(op *Op, r Result) {
	a.stats.finished(op, r.Err)
	if op.async {
		if r.Err != nil && a.opts.OnAsyncError != nil {
			a.stats.asyncErrs.Add(1)
			named := asyncPod(op)
			if op.Kind == OpUpdatePod {
				named = op.Pod
			}
			a.asyncErrs = append(a.asyncErrs, AsyncError{Kind: op.Kind, Pod: asyncPod(op), OldPod: asyncOldPod(op), Node: op.Node, OldNode: op.OldNode, Err: errs.Named(r.Err, named)})
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
	a.serialMark() // an expiry step is not a batch: its publication is timed alone
	a.stats.expired.Add(uint64(n))
	return more, a.flush()
}

// shutdown refuses what is queued and stops the shards, the folder and
// the notifier. It runs on run's goroutine, holding the token, after closing is
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
