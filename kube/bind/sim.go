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
	clientset "k8s.io/client-go/kubernetes"
	fwk "k8s.io/kube-scheduler/framework"
)

var (
	// ErrSimulatedFailure is the outcome of a call the Sim chose to fail.
	ErrSimulatedFailure = errors.New("bind: simulated API call failure")
	// ErrDispatcherClosed is the outcome of calls still queued when a
	// dispatcher (Sim or ClientDispatcher) is closed, and Add's error
	// after Close.
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
	q    *callQueue // immutable pointer; the queue guards itself

	mu      sync.Mutex         // guards running, rng
	running bool               // guarded by mu
	rng     *rand.Rand         // guarded by mu
	ctx     context.Context    // immutable; cancelled by Close
	cancel  context.CancelFunc // immutable
	wg      sync.WaitGroup     // the workers
	// Outcome counters, bumped by the workers.
	executed, failed *xsync.Counter // immutable pointers
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
	return &Sim{
		opts: opts, q: newCallQueue(opts.Relevances), rng: rand.New(rand.NewSource(opts.Seed)),
		ctx: ctx, cancel: cancel, executed: xsync.NewCounter(), failed: xsync.NewCounter(),
	}, nil
}

// Run starts the workers. It does nothing after Close or a first Run.
func (s *Sim) Run() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.ctx.Err() != nil {
		return
	}
	s.running = true
	s.wg.Add(s.opts.Workers)
	for i := 0; i < s.opts.Workers; i++ {
		go s.work() // owned by s: exits when Close closes the queue
	}
}

// Close stops the workers (an executing call is cancelled through its
// context) and waits for them; calls still queued get ErrDispatcherClosed.
func (s *Sim) Close() {
	s.mu.Lock()
	s.cancel() // under mu: a Run after this sees it and starts nothing
	s.mu.Unlock()
	s.q.close()
	s.wg.Wait()
}

// Counts reads the counters.
func (s *Sim) Counts() SimCounts {
	return SimCounts{
		Added: s.q.added.Value(), Executed: s.executed.Value(), Failed: s.failed.Value(),
		Skipped: s.q.skipped.Value(), Overwritten: s.q.overwritten.Value(), Dropped: s.q.dropped.Value(),
	}
}

// Add queues call (upstream's callQueue.add).
func (s *Sim) Add(call fwk.APICall, opts fwk.APICallOptions) error { return s.q.add(call, opts) }

// SyncObject is upstream's callQueue.syncObject.
func (s *Sim) SyncObject(obj metav1.Object) (metav1.Object, error) { return s.q.syncObject(obj) }

func (s *Sim) work() {
	defer s.wg.Done()
	for {
		var d time.Duration
		var fail bool
		c := s.q.pop(func() {
			// The queue's lock orders the draws as the calls are taken.
			s.mu.Lock()
			d = s.opts.Latency
			if s.opts.Jitter > 0 {
				d += time.Duration(s.rng.Int63n(int64(s.opts.Jitter)))
			}
			fail = s.opts.FailureRate > 0 && s.rng.Float64() < s.opts.FailureRate
			s.mu.Unlock()
		})
		if c == nil {
			return
		}
		err := s.execute(c, d, fail)
		if err != nil {
			s.failed.Inc()
		} else {
			s.executed.Inc()
		}
		s.q.finalize(c)
		c.send(err)
	}
}

func (s *Sim) execute(c *qCall, d time.Duration, fail bool) (err error) {
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
