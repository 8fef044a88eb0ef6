package bind

import (
	"fmt"
	"sync"

	"github.com/puzpuzpuz/xsync/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache"
)

// callQueue is upstream's call queue
// (pkg/scheduler/backend/api_dispatcher/call_queue.go, v1.37.2), shared by
// Sim and ClientDispatcher: one pending call per object UID; a call for an
// object with a pending call of the same type merges into it (the old
// call's outcome is ErrCallOverwritten); a more relevant type overwrites a
// less relevant one, a less relevant one is skipped (ErrCallSkipped, from
// add and on its channel); a no-op call is skipped; a call for an object
// whose call is executing waits until that one finishes. Unlike upstream,
// close reports ErrDispatcherClosed to every call still queued instead of
// dropping it silently.
//
// Contract: every method is safe for concurrent use; none waits for a
// call to execute except pop, which waits for a call to be queued.
type callQueue struct {
	relevances fwk.APICallRelevances // immutable

	mu       sync.Mutex
	cond     *sync.Cond             // signalled when queue grows or closed is set; uses mu
	calls    map[types.UID]*qCall   // guarded by mu: the pending call of each object
	queue    []types.UID            // guarded by mu: objects with a pending call not in flight, FIFO
	inFlight map[types.UID]struct{} // guarded by mu
	nextID   int                    // guarded by mu
	closed   bool                   // guarded by mu

	// Counters, bumped by callers and workers at once.
	added, skipped, overwritten, dropped *xsync.Counter // immutable pointers
}

// qCall is a queued call and where its outcome goes. Immutable once queued.
type qCall struct {
	fwk.APICall
	onFinish chan<- error
	id       int
}

// send delivers the call's outcome without blocking, as upstream.
func (c *qCall) send(err error) {
	if c.onFinish != nil {
		select {
		case c.onFinish <- err:
		default:
		}
	}
}

func newCallQueue(relevances fwk.APICallRelevances) *callQueue {
	if relevances == nil {
		relevances = Relevances
	}
	q := &callQueue{
		relevances: relevances, calls: map[types.UID]*qCall{}, inFlight: map[types.UID]struct{}{},
		added: xsync.NewCounter(), skipped: xsync.NewCounter(), overwritten: xsync.NewCounter(), dropped: xsync.NewCounter(),
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// close refuses later calls and sends ErrDispatcherClosed to the calls
// still queued; pending successors of in-flight calls are dropped by
// their worker's finalize, which sees closed. It reports whether this
// call closed the queue.
func (q *callQueue) close() bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.closed = true
	var dropped []*qCall
	for _, uid := range q.queue {
		if c := q.calls[uid]; c != nil {
			dropped = append(dropped, c)
			delete(q.calls, uid)
		}
	}
	q.queue = nil
	q.cond.Broadcast()
	q.mu.Unlock()
	for _, c := range dropped {
		q.drop(c)
	}
	return true
}

func (q *callQueue) drop(c *qCall) {
	q.dropped.Inc()
	c.send(fmt.Errorf("call was queued when the dispatcher closed: %w", ErrDispatcherClosed))
}

func (q *callQueue) lessRelevant(oldType, newType fwk.APICallType) bool {
	return q.relevances[newType] < q.relevances[oldType]
}

// add queues call (upstream's callQueue.add).
func (q *callQueue) add(call fwk.APICall, opts fwk.APICallOptions) error {
	if call == nil {
		return ErrNilCall
	}
	c := &qCall{APICall: call, onFinish: opts.OnFinish}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		err := fmt.Errorf("call for %s refused: %w", call.UID(), ErrDispatcherClosed)
		c.send(err)
		return err
	}
	q.added.Inc()
	c.id = q.nextID
	q.nextID++
	uid := call.UID()
	old, ok := q.calls[uid]
	if ok {
		if err := q.merge(old, c); err != nil {
			return err
		}
	}
	return q.enqueue(c, ok)
}

// merge is upstream's callQueue.merge; mu is held.
func (q *callQueue) merge(old, c *qCall) error {
	if q.lessRelevant(old.CallType(), c.CallType()) {
		err := skipped("a more relevant call is already enqueued for this object")
		q.skipped.Inc()
		c.send(err)
		return err
	}
	if old.CallType() != c.CallType() {
		if _, ok := q.inFlight[old.UID()]; ok {
			return nil
		}
		q.overwritten.Inc()
		old.send(overwritten("a more relevant call was enqueued for this object"))
		return nil
	}
	if err := c.Merge(old.APICall); err != nil {
		err = fmt.Errorf("failed to merge API calls: %w", err)
		c.send(err)
		return err
	}
	q.overwritten.Inc()
	old.send(overwritten("a call of the same type was enqueued for this object"))
	return nil
}

// enqueue is upstream's callQueue.enqueue; mu is held.
func (q *callQueue) enqueue(c *qCall, oldPresent bool) error {
	uid := c.UID()
	_, inFlight := q.inFlight[uid]
	if c.IsNoOp() && !inFlight {
		if oldPresent {
			q.removePending(uid)
		}
		err := skipped("call does not need to be executed because it has no effect")
		q.skipped.Inc()
		c.send(err)
		return err
	}
	q.calls[uid] = c
	if oldPresent {
		return nil
	}
	q.queue = append(q.queue, uid)
	q.cond.Signal()
	return nil
}

// removePending drops uid's pending call; mu is held.
func (q *callQueue) removePending(uid types.UID) {
	if _, ok := q.calls[uid]; !ok {
		return
	}
	delete(q.calls, uid)
	if _, ok := q.inFlight[uid]; !ok {
		for i, u := range q.queue {
			if u == uid {
				q.queue = append(q.queue[:i], q.queue[i+1:]...)
				break
			}
		}
	}
}

// syncObject is upstream's callQueue.syncObject.
func (q *callQueue) syncObject(obj metav1.Object) (metav1.Object, error) {
	if obj == nil {
		return nil, ErrNilCall
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	c, ok := q.calls[obj.GetUID()]
	if !ok {
		return obj, nil
	}
	synced, err := c.Sync(obj)
	if _, inFlight := q.inFlight[c.UID()]; c.IsNoOp() && !inFlight {
		q.removePending(c.UID())
		q.skipped.Inc()
		c.send(skipped("call does not need to be executed because after sync it has no effect"))
	}
	return synced, err
}

// pop takes the next call, waiting for one; nil once closed. before, if
// set, runs under the queue's lock once the call is taken.
func (q *callQueue) pop(before func()) *qCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.queue) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil
	}
	uid := q.queue[0]
	q.queue = q.queue[1:]
	c := q.calls[uid]
	q.inFlight[uid] = struct{}{}
	if before != nil {
		before()
	}
	return c
}

// finalize is upstream's callQueue.finalize: a newer call that arrived
// while c executed is queued again (or, after close, dropped).
func (q *callQueue) finalize(c *qCall) {
	q.mu.Lock()
	uid := c.UID()
	delete(q.inFlight, uid)
	next := q.calls[uid]
	var dropped *qCall
	switch {
	case next == nil || next.id == c.id:
		delete(q.calls, uid)
	case q.closed:
		delete(q.calls, uid)
		dropped = next
	default:
		q.queue = append(q.queue, uid)
		q.cond.Signal()
	}
	q.mu.Unlock()
	if dropped != nil {
		q.drop(dropped)
	}
}

// skipped wraps fwk's and schedcache's skip sentinels.
func skipped(msg string) error {
	return fmt.Errorf("%s: %w: %w", msg, fwk.ErrCallSkipped, schedcache.ErrCallSkipped)
}

func overwritten(msg string) error {
	return fmt.Errorf("%s: %w: %w", msg, fwk.ErrCallOverwritten, schedcache.ErrCallOverwritten)
}
