package bind

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Errors of ClientDispatcher's calls. Each outcome that is not nil is a
// *CallError; these sentinels say why the API server's answer is final.
var (
	// ErrPodGone: the binding was refused because the pod no longer
	// exists, was replaced by another pod of the same name (another UID),
	// or is being deleted. The scheduler forgets the pod and drops it.
	ErrPodGone = errors.New("bind: pod deleted or replaced")
	// ErrBoundElsewhere: the binding was refused because the pod is
	// already bound to another node (another scheduler bound it).
	ErrBoundElsewhere = errors.New("bind: pod already bound to another node")
	// ErrRetriesExhausted: every attempt failed with a retriable error.
	ErrRetriesExhausted = errors.New("bind: retries exhausted")
	// ErrNilClient is NewClientDispatcher's error without a client.
	ErrNilClient = errors.New("bind: nil client")
)

// CallError is the outcome of a call that failed: its type and object,
// how many attempts were made, and the last error (wrapped, so
// apierrors.IsNotFound and friends see through it), joined with
// ErrPodGone, ErrBoundElsewhere, ErrRetriesExhausted or
// ErrDispatcherClosed where one of them applies. Immutable.
type CallError struct {
	Type     fwk.APICallType
	Object   string // namespace/name for a binding, else the UID
	Node     string // a binding's target
	Attempts int
	Err      error
}

func (e *CallError) Error() string {
	what := string(e.Type) + " " + e.Object
	if e.Node != "" {
		what += " to node " + e.Node
	}
	return fmt.Sprintf("%s failed after %d attempt(s): %v", what, e.Attempts, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// ClientOptions configure a ClientDispatcher. The zero value of a field
// means its default.
type ClientOptions struct {
	// Workers is how many calls execute at once (default 16, upstream's
	// dispatcher's parallelism).
	Workers int
	// Backoff spaces the attempts of one call: Steps is the most
	// attempts (default: 100 ms doubling to at most 5 s, 10% jitter, 8
	// attempts, about 14 s in all). A server's Retry-After (throttling)
	// lengthens the wait to what it asks, up to Cap.
	Backoff wait.Backoff
	// AttemptTimeout bounds each request (default 30 s).
	AttemptTimeout time.Duration
	// Relevances default to upstream's (Relevances).
	Relevances fwk.APICallRelevances
	// Logger (default klog.Background()).
	Logger klog.Logger
	// Sleep waits d or until ctx ends (tests; default a timer).
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultClientBackoff is ClientOptions.Backoff's default.
var DefaultClientBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 8, Cap: 5 * time.Second}

// ClientCounts is a reading of a ClientDispatcher's counters.
type ClientCounts struct {
	Added, Succeeded, Failed int64
	Skipped, Overwritten     int64 // the queue's lifecycle outcomes
	Dropped                  int64 // calls queued at shutdown
	Retries                  int64 // attempts after the first, over all calls
	Throttled                int64 // answers 429 Too Many Requests
	Conflicts                int64 // answers 409 Conflict
}

// ClientDispatcher is the production fwk.APIDispatcher: upstream's call
// queue (one pending call per object, merges, skips and overwrites; see
// Sim for the rules) executing the calls against an API server through
// client-go, with retries.
//
// A binding (PodBindingCall) is posted to the pods/binding subresource
// once per attempt. Retried: throttling (429, waiting at least what
// Retry-After asks), server timeouts, internal errors, unavailable
// servers, and lost, refused or reset connections. A conflict (409) is
// looked into: the pod is read back, and if it is gone, replaced (other
// UID) or being deleted the outcome is ErrPodGone; if it is bound to the
// binding's node already (an earlier attempt whose answer was lost) the
// outcome is success; if it is bound elsewhere, ErrBoundElsewhere;
// otherwise the binding is tried again. NotFound is final (ErrPodGone);
// so are Forbidden, Unauthorized, Invalid and the other client errors.
// Other calls (an upstream PodStatusPatch, say) run their own Execute
// under the same retry rules, a conflict included.
//
// Contract: Add, SyncObject, Counts and Close are safe for concurrent use
// and never wait for a call to execute. Outcomes go to each call's
// OnFinish channel without blocking, as upstream; every call added gets
// one outcome (ErrDispatcherClosed for calls still queued at shutdown).
// Run starts the workers, which stop when Run's context ends or Close is
// called: an executing call is cancelled (its request and its backoff),
// the queued ones get ErrDispatcherClosed. Close waits for the workers.
type ClientDispatcher struct {
	client clientset.Interface // immutable
	opts   ClientOptions       // immutable, defaults applied
	q      *callQueue          // immutable pointer; the queue guards itself

	mu      sync.Mutex         // guards running and stop
	running bool               // guarded by mu
	stop    context.CancelFunc // guarded by mu: cancels the workers' context; nil before Run
	closed  bool               // guarded by mu
	wg      sync.WaitGroup     // the workers and Run's context watcher
	// Counters, bumped by the workers at once.
	succeeded, failed, retries, throttled, conflicts *xsync.Counter // immutable pointers
}

var _ fwk.APIDispatcher = (*ClientDispatcher)(nil)

// NewClientDispatcher returns a dispatcher executing calls against
// client; Run starts it.
func NewClientDispatcher(client clientset.Interface, opts ClientOptions) (*ClientDispatcher, error) {
	if client == nil {
		return nil, ErrNilClient
	}
	if opts.Workers < 0 || opts.AttemptTimeout < 0 || opts.Backoff.Steps < 0 || opts.Backoff.Duration < 0 ||
		opts.Backoff.Factor < 0 || opts.Backoff.Jitter < 0 || opts.Backoff.Cap < 0 {
		return nil, fmt.Errorf("bind: invalid ClientOptions: negative workers, timeout or backoff field in %+v", opts)
	}
	if opts.Workers == 0 {
		opts.Workers = 16
	}
	if opts.Backoff == (wait.Backoff{}) {
		opts.Backoff = DefaultClientBackoff
	}
	if opts.Backoff.Steps == 0 {
		opts.Backoff.Steps = 1
	}
	if opts.AttemptTimeout == 0 {
		opts.AttemptTimeout = 30 * time.Second
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	return &ClientDispatcher{
		client: client, opts: opts, q: newCallQueue(opts.Relevances),
		succeeded: xsync.NewCounter(), failed: xsync.NewCounter(), retries: xsync.NewCounter(),
		throttled: xsync.NewCounter(), conflicts: xsync.NewCounter(),
	}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run starts the workers; they stop when ctx ends or Close is called. It
// returns at once, and does nothing after Close or a first Run.
func (d *ClientDispatcher) Run(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running || d.closed {
		return
	}
	d.running = true
	ctx, d.stop = context.WithCancel(ctx)
	d.wg.Add(d.opts.Workers + 1)
	for i := 0; i < d.opts.Workers; i++ {
		go d.work(ctx) // owned by d: exits once the queue is closed
	}
	go func() { // owned by d: closes the queue when ctx ends, so the workers exit
		defer d.wg.Done()
		<-ctx.Done()
		d.q.close()
	}()
}

// Close stops the workers, cancelling the executing calls, and waits for
// them; the calls still queued get ErrDispatcherClosed, and Add refuses
// later calls with it.
func (d *ClientDispatcher) Close() {
	d.mu.Lock()
	d.closed = true
	if d.stop != nil {
		d.stop()
	}
	d.mu.Unlock()
	d.q.close()
	d.wg.Wait()
}

// Add queues call (upstream's call queue rules; see Sim).
func (d *ClientDispatcher) Add(call fwk.APICall, opts fwk.APICallOptions) error {
	return d.q.add(call, opts)
}

// SyncObject is upstream's APIDispatcher.SyncObject.
func (d *ClientDispatcher) SyncObject(obj metav1.Object) (metav1.Object, error) {
	return d.q.syncObject(obj)
}

// Counts reads the counters.
func (d *ClientDispatcher) Counts() ClientCounts {
	return ClientCounts{
		Added: d.q.added.Value(), Succeeded: d.succeeded.Value(), Failed: d.failed.Value(),
		Skipped: d.q.skipped.Value(), Overwritten: d.q.overwritten.Value(), Dropped: d.q.dropped.Value(),
		Retries: d.retries.Value(), Throttled: d.throttled.Value(), Conflicts: d.conflicts.Value(),
	}
}

func (d *ClientDispatcher) work(ctx context.Context) {
	defer d.wg.Done()
	for {
		c := d.q.pop(nil)
		if c == nil {
			return
		}
		err := d.execute(ctx, c)
		if err != nil {
			d.failed.Inc()
		} else {
			d.succeeded.Inc()
		}
		d.q.finalize(c)
		c.send(err)
	}
}

// verdict is what one attempt's error means.
type verdict int

const (
	final verdict = iota // success, or a final failure
	again                // try again after the backoff
)

// execute runs c's attempts; nil or a *CallError.
func (d *ClientDispatcher) execute(ctx context.Context, c *qCall) (err error) {
	ce := &CallError{Type: c.CallType(), Object: string(c.UID())}
	var binding *v1.Binding
	if bc, ok := c.APICall.(*PodBindingCall); ok && bc.binding != nil {
		binding = bc.binding
		ce.Object, ce.Node = binding.Namespace+"/"+binding.Name, binding.Target.Name
	}
	defer func() {
		if r := recover(); r != nil {
			ce.Err = fmt.Errorf("bind: API call %s panicked: %v", c.CallType(), r)
			err = ce
		}
	}()
	backoff := d.opts.Backoff
	logger := d.opts.Logger.WithValues("call", c.CallType(), "object", ce.Object)
	for {
		ce.Attempts++
		var err error
		var v verdict
		if binding != nil {
			v, err = d.bindOnce(ctx, binding)
		} else {
			v, err = d.attempt(ctx, c.APICall)
		}
		if err == nil {
			return nil
		}
		ce.Err = err
		if ctx.Err() != nil {
			ce.Err = errors.Join(err, fmt.Errorf("%w: %w", ErrDispatcherClosed, ctx.Err()))
			return ce
		}
		if v == final {
			return ce
		}
		if backoff.Steps <= 1 {
			ce.Err = errors.Join(err, ErrRetriesExhausted)
			return ce
		}
		delay := backoff.Step()
		if s, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(s)*time.Second > delay {
			delay = time.Duration(s) * time.Second
			if backoff.Cap > 0 && delay > backoff.Cap {
				delay = backoff.Cap
			}
		}
		logger.V(2).Info("API call failed, retrying", "attempt", ce.Attempts, "after", delay, "err", err)
		d.retries.Inc()
		if serr := d.opts.Sleep(ctx, delay); serr != nil {
			ce.Err = errors.Join(err, fmt.Errorf("%w: %w", ErrDispatcherClosed, serr))
			return ce
		}
	}
}

// attempt runs a call's own Execute once.
func (d *ClientDispatcher) attempt(ctx context.Context, call fwk.APICall) (verdict, error) {
	actx, cancel := context.WithTimeout(ctx, d.opts.AttemptTimeout)
	defer cancel()
	err := call.Execute(actx, d.client)
	d.count(err)
	if err == nil {
		return final, nil
	}
	if apierrors.IsConflict(err) || RetriableAPIError(err) {
		return again, err
	}
	return final, err
}

func (d *ClientDispatcher) count(err error) {
	switch {
	case apierrors.IsTooManyRequests(err):
		d.throttled.Inc()
	case apierrors.IsConflict(err):
		d.conflicts.Inc()
	}
}

// bindOnce posts binding once and judges the answer.
func (d *ClientDispatcher) bindOnce(ctx context.Context, binding *v1.Binding) (verdict, error) {
	actx, cancel := context.WithTimeout(ctx, d.opts.AttemptTimeout)
	defer cancel()
	err := d.client.CoreV1().Pods(binding.Namespace).Bind(actx, binding, metav1.CreateOptions{})
	d.count(err)
	switch {
	case err == nil:
		return final, nil
	case apierrors.IsNotFound(err):
		return final, fmt.Errorf("%w: %w", ErrPodGone, err)
	case apierrors.IsConflict(err):
		return d.judgeConflict(actx, binding, err)
	case RetriableAPIError(err):
		return again, err
	}
	return final, err
}

// judgeConflict reads the pod back after a refused binding: a conflict is
// final unless the pod is still there, unbound and not being deleted.
func (d *ClientDispatcher) judgeConflict(ctx context.Context, binding *v1.Binding, conflict error) (verdict, error) {
	pod, err := d.client.CoreV1().Pods(binding.Namespace).Get(ctx, binding.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return final, fmt.Errorf("%w: %w", ErrPodGone, conflict)
	case err != nil:
		// The read failed: judge by the read's error whether to retry.
		if RetriableAPIError(err) {
			return again, errors.Join(conflict, err)
		}
		return final, errors.Join(conflict, err)
	case binding.UID != "" && pod.UID != binding.UID:
		return final, fmt.Errorf("%w (now UID %s): %w", ErrPodGone, pod.UID, conflict)
	case pod.DeletionTimestamp != nil:
		return final, fmt.Errorf("%w (being deleted): %w", ErrPodGone, conflict)
	case pod.Spec.NodeName == binding.Target.Name:
		return final, nil // bound here already: an earlier attempt went through
	case pod.Spec.NodeName != "":
		return final, fmt.Errorf("%w (%q): %w", ErrBoundElsewhere, pod.Spec.NodeName, conflict)
	case len(pod.Spec.SchedulingGates) > 0:
		return final, conflict // the server refuses gated pods until they are ungated
	}
	return again, conflict
}

// RetriableAPIError reports whether a request's error is worth another
// try: throttling (429), a server timeout or a gateway timeout, an
// internal error, an unavailable server, a refused or reset connection, a
// connection that ended early, or a network timeout. Upstream's
// Retriable is narrower (internal errors, unavailable servers, refused
// connections).
func RetriableAPIError(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) {
		return true
	}
	if _, ok := apierrors.SuggestsClientDelay(err); ok {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}
