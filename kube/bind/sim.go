package bind

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache"
)

var (
	// ErrSimulatedFailure is the outcome of a call the Sim chose to fail.
	ErrSimulatedFailure = errors.New("bind: simulated API call failure")
	// ErrDispatcherClosed is the outcome of calls still queued when the
	// Sim is closed, and Add's error after Close.
	ErrDispatcherClosed = errors.New("bind: dispatcher closed")
	// ErrNilCall is returned by Add for a nil call.
	ErrNilCall = errors.New("bind: nil API call")
)

// SimOptions configure a Sim.
type SimOptions struct {
	Latency     time.Duration         // how long each call takes
	Jitter      time.Duration         // plus a uniform random [0, Jitter)
	FailureRate float64               // probability in [0, 1] that a call fails with ErrSimulatedFailure
	Seed        int64                 // of the random source (latency jitter and failures)
	Workers     int                   // calls executing at once (default 16)
	Client      clientset.Interface   // when set, calls that do not fail are executed against it
	Relevances  fwk.APICallRelevances // default Relevances (upstream's)
}

// SimCounts is a reading of a Sim's counters.
type SimCounts struct {
	Added, Executed, Failed, Skipped, Overwritten, Dropped int64
}

// Sim is a simulated fwk.APIDispatcher for simulations and tests. Its
// queue follows upstream's call queue (pkg/scheduler/backend/api_dispatcher):
// one pending call per object UID; a call for an object with a pending
// call of the same type merges into it (the old call's outcome is
// ErrCallOverwritten); a more relevant type overwrites a less relevant
// one, a less relevant one is skipped (ErrCallSkipped, from Add and on its
// channel); a no-op call is skipped; a call for an object whose call is
// executing waits until that one finishes. Unlike upstream, each call takes
// Latency (+ Jitter) and fails with probability FailureRate; executing
// against a client is optional; and Close reports ErrDispatcherClosed to
// every call still queued instead of dropping them silently.
//
// Contract: Add, SyncObject, Counts and Close are safe for concurrent use
// and never wait for a call to execute. Outcomes are sent on each call's
// OnFinish channel without blocking, as upstream. Run starts the Workers
// goroutines; Close stops them and waits for them.
type Sim struct {
	opts SimOptions // immutable

	mu       sync.Mutex
	cond     *sync.Cond                // signalled when queue grows or closed is set; uses mu
	calls    map[types.UID]*simCall    // guarded by mu: the pending call of each object
	queue    []types.UID               // guarded by mu: objects with a pending call not in flight, FIFO
	inFlight map[types.UID]struct{}    // guarded by mu
	nextID   int                       // guarded by mu
	rng      *rand.Rand                // guarded by mu
	closed   bool                      // guarded by mu
	running  bool                      // guarded by mu
	ctx      context.Context           // immutable; cancelled by Close
	cancel   context.CancelFunc        // immutable
	wg       sync.WaitGroup            // the workers
	counters map[string]*xsync.Counter // immutable map; counters bumped by callers and workers
}

type simCall struct {
	fwk.APICall
	onFinish chan<- error
	id       int
}

func (c *simCall) send(err error) {
	if c.onFinish != nil {
		select {
		case c.onFinish <- err:
		default:
		}
	}
}

// NewSim returns a Sim that queues calls; Run starts executing them.
func NewSim(opts SimOptions) (*Sim, error) {
	if opts.FailureRate < 0 || opts.FailureRate > 1 || opts.Latency < 0 || opts.Jitter < 0 || opts.Workers < 0 {
		return nil, fmt.Errorf("bind: invalid SimOptions %+v", opts)
	}
	if opts.Workers == 0 {
		opts.Workers = 16
	}
	if opts.Relevances == nil {
		opts.Relevances = Relevances
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sim{
		opts: opts, calls: map[types.UID]*simCall{}, inFlight: map[types.UID]struct{}{},
		rng: rand.New(rand.NewSource(opts.Seed)), ctx: ctx, cancel: cancel, counters: map[string]*xsync.Counter{},
	}
	for _, k := range []string{"added", "executed", "failed", "skipped", "overwritten", "dropped"} {
		s.counters[k] = xsync.NewCounter()
	}
	s.cond = sync.NewCond(&s.mu)
	return s, nil
}

// Run starts the workers. It does nothing after Close or a first Run.
func (s *Sim) Run() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.closed {
		return
	}
	s.running = true
	s.wg.Add(s.opts.Workers)
	for i := 0; i < s.opts.Workers; i++ {
		go s.work() // owned by s: exits when Close sets closed
	}
}

// Close stops the workers (an executing call is cancelled through its
// context) and waits for them; calls still queued get ErrDispatcherClosed.
func (s *Sim) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.closed = true
	var dropped []*simCall
	for _, uid := range s.queue {
		if c := s.calls[uid]; c != nil {
			dropped = append(dropped, c)
			delete(s.calls, uid)
		}
	}
	s.queue = nil
	// Pending successors of in-flight calls are dropped by their worker's
	// finalize, which sees closed.
	s.cond.Broadcast()
	s.mu.Unlock()
	s.cancel()
	for _, c := range dropped {
		s.counters["dropped"].Inc()
		c.send(fmt.Errorf("call was queued when the dispatcher closed: %w", ErrDispatcherClosed))
	}
	s.wg.Wait()
}

// Counts reads the counters.
func (s *Sim) Counts() SimCounts {
	return SimCounts{
		Added: s.counters["added"].Value(), Executed: s.counters["executed"].Value(), Failed: s.counters["failed"].Value(),
		Skipped: s.counters["skipped"].Value(), Overwritten: s.counters["overwritten"].Value(), Dropped: s.counters["dropped"].Value(),
	}
}

func (s *Sim) lessRelevant(oldType, newType fwk.APICallType) bool {
	return s.opts.Relevances[newType] < s.opts.Relevances[oldType]
}

// skipped wraps fwk's and schedcache's skip sentinels.
func skipped(msg string) error {
	return fmt.Errorf("%s: %w: %w", msg, fwk.ErrCallSkipped, schedcache.ErrCallSkipped)
}

func overwritten(msg string) error {
	return fmt.Errorf("%s: %w: %w", msg, fwk.ErrCallOverwritten, schedcache.ErrCallOverwritten)
}

// Add queues call (upstream's callQueue.add).
func (s *Sim) Add(call fwk.APICall, opts fwk.APICallOptions) error {
	if call == nil {
		return ErrNilCall
	}
	c := &simCall{APICall: call, onFinish: opts.OnFinish}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		err := fmt.Errorf("call for %s refused: %w", call.UID(), ErrDispatcherClosed)
		c.send(err)
		return err
	}
	s.counters["added"].Inc()
	c.id = s.nextID
	s.nextID++
	uid := call.UID()
	old, ok := s.calls[uid]
	if ok {
		if err := s.merge(old, c); err != nil {
			return err
		}
	}
	return s.enqueue(c, ok)
}

// merge is upstream's callQueue.merge; mu is held.
func (s *Sim) merge(old, c *simCall) error {
	if s.lessRelevant(old.CallType(), c.CallType()) {
		err := skipped("a more relevant call is already enqueued for this object")
		s.counters["skipped"].Inc()
		c.send(err)
		return err
	}
	if old.CallType() != c.CallType() {
		if _, ok := s.inFlight[old.UID()]; ok {
			return nil
		}
		s.counters["overwritten"].Inc()
		old.send(overwritten("a more relevant call was enqueued for this object"))
		return nil
	}
	if err := c.Merge(old.APICall); err != nil {
		err = fmt.Errorf("failed to merge API calls: %w", err)
		c.send(err)
		return err
	}
	s.counters["overwritten"].Inc()
	old.send(overwritten("a call of the same type was enqueued for this object"))
	return nil
}

// enqueue is upstream's callQueue.enqueue; mu is held.
func (s *Sim) enqueue(c *simCall, oldPresent bool) error {
	uid := c.UID()
	_, inFlight := s.inFlight[uid]
	if c.IsNoOp() && !inFlight {
		if oldPresent {
			s.removePending(uid)
		}
		err := skipped("call does not need to be executed because it has no effect")
		s.counters["skipped"].Inc()
		c.send(err)
		return err
	}
	s.calls[uid] = c
	if oldPresent {
		return nil
	}
	s.queue = append(s.queue, uid)
	s.cond.Signal()
	return nil
}

func (s *Sim) removePending(uid types.UID) {
	if _, ok := s.calls[uid]; !ok {
		return
	}
	delete(s.calls, uid)
	if _, ok := s.inFlight[uid]; !ok {
		for i, u := range s.queue {
			if u == uid {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				break
			}
		}
	}
}

// SyncObject is upstream's callQueue.syncObject.
func (s *Sim) SyncObject(obj metav1.Object) (metav1.Object, error) {
	if obj == nil {
		return nil, ErrNilCall
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.calls[obj.GetUID()]
	if !ok {
		return obj, nil
	}
	synced, err := c.Sync(obj)
	if _, inFlight := s.inFlight[c.UID()]; c.IsNoOp() && !inFlight {
		s.removePending(c.UID())
		s.counters["skipped"].Inc()
		c.send(skipped("call does not need to be executed because after sync it has no effect"))
	}
	return synced, err
}

// pop takes the next call, waiting for one; nil once closed.
func (s *Sim) pop() (*simCall, time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 && !s.closed {
		s.cond.Wait()
	}
	if s.closed {
		return nil, 0, false
	}
	uid := s.queue[0]
	s.queue = s.queue[1:]
	c := s.calls[uid]
	s.inFlight[uid] = struct{}{}
	d := s.opts.Latency
	if s.opts.Jitter > 0 {
		d += time.Duration(s.rng.Int63n(int64(s.opts.Jitter)))
	}
	fail := s.opts.FailureRate > 0 && s.rng.Float64() < s.opts.FailureRate
	return c, d, fail
}

// finalize is upstream's callQueue.finalize: a newer call that arrived
// while c executed is queued again (or, after Close, dropped).
func (s *Sim) finalize(c *simCall) (dropped *simCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	uid := c.UID()
	delete(s.inFlight, uid)
	next := s.calls[uid]
	switch {
	case next == nil || next.id == c.id:
		delete(s.calls, uid)
	case s.closed:
		delete(s.calls, uid)
		return next
	default:
		s.queue = append(s.queue, uid)
		s.cond.Signal()
	}
	return nil
}

func (s *Sim) work() {
	defer s.wg.Done()
	for {
		c, d, fail := s.pop()
		if c == nil {
			return
		}
		err := s.execute(c, d, fail)
		if err != nil {
			s.counters["failed"].Inc()
		} else {
			s.counters["executed"].Inc()
		}
		if next := s.finalize(c); next != nil {
			s.counters["dropped"].Inc()
			next.send(fmt.Errorf("call was queued when the dispatcher closed: %w", ErrDispatcherClosed))
		}
		c.send(err)
	}
}

func (s *Sim) execute(c *simCall, d time.Duration, fail bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bind: API call %s panicked: %v", c.CallType(), r)
		}
	}()
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return fmt.Errorf("call cancelled: %w", ErrDispatcherClosed)
		}
	}
	if fail {
		return fmt.Errorf("%s for %s: %w", c.CallType(), c.UID(), ErrSimulatedFailure)
	}
	if s.opts.Client != nil {
		return c.Execute(s.ctx, s.opts.Client)
	}
	return nil
}
