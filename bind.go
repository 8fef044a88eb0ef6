package schedcache

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/actor"
)

// Dispatcher queues BindPod's API calls; see WithDispatcher. The kube
// module adapts upstream's fwk.APIDispatcher to it.
type Dispatcher = actor.Dispatcher

var (
	// ErrNoDispatcher is returned by BindPod when the cache was created
	// without WithDispatcher (upstream's cache dereferences its nil
	// dispatcher there and panics).
	ErrNoDispatcher = errors.New("schedcache: BindPod needs a dispatcher (WithDispatcher)")
	// ErrNilBinding is returned by BindPod for a nil binding.
	ErrNilBinding = errors.New("schedcache: nil binding")
	// ErrCallSkipped marks a call the dispatcher did not queue because it
	// has no effect or a more relevant call for the object is queued
	// (upstream's fwk.ErrCallSkipped). It is an expected outcome.
	ErrCallSkipped = errors.New("schedcache: API call skipped")
	// ErrCallOverwritten marks a queued call replaced by a newer or more
	// relevant one (upstream's fwk.ErrCallOverwritten). It is an expected
	// outcome.
	ErrCallOverwritten = errors.New("schedcache: API call overwritten")
	// ErrDispatcher wraps a panic raised by the dispatcher.
	ErrDispatcher = errors.New("schedcache: dispatcher failed")
)

// IsUnexpectedCallError reports whether err is a failure that needs
// handling: not nil, and neither ErrCallSkipped nor ErrCallOverwritten
// (upstream's fwk.IsUnexpectedError).
func IsUnexpectedCallError(err error) bool {
	return err != nil && !errors.Is(err, ErrCallSkipped) && !errors.Is(err, ErrCallOverwritten)
}

// WithDispatcher sets the dispatcher BindPod queues bindings on
// (upstream: the APIDispatcher given to cache.New, present when the
// SchedulerAsyncAPICalls feature is on).
func WithDispatcher(d Dispatcher) Option {
	return func(o *options) { o.a.Dispatcher = d }
}

// BindPod queues binding on the dispatcher and returns the channel (one
// slot) that receives the call's final outcome: nil when the API call
// succeeded, an error wrapping ErrCallSkipped or ErrCallOverwritten when
// the dispatcher dropped it in favour of another call (expected outcomes),
// or the call's failure. As upstream, nothing is stored in the cache: the
// pod is already assumed, and a caller whose binding fails calls ForgetPod.
//
// The error is non-nil only when the call was not queued for an
// unexpected reason (upstream's contract: a skip is reported on the
// channel alone); then the channel holds the same error, so a caller that
// waits on it never hangs. Beyond upstream, BindPod checks its input
// against the latest snapshot before dispatching (one atomic load and a
// lookup, never waiting for the coordinator): a nil binding
// (ErrNilBinding), an empty UID (ErrEmptyUID) or target (ErrEmptyNodeName),
// a pod the cache does not hold (ErrPodNotFound), holds as added
// (ErrPodNotAssumed) or assumed on another node than the target
// (ErrPodNodeMismatch) are refused with a *PodError; a cache without a
// dispatcher returns ErrNoDispatcher, a closed one ErrClosed, a failed one
// its *FailedError; a panicking dispatcher gives an error wrapping
// ErrDispatcher.
//
// Contract: safe for concurrent use; blocks only as long as the
// dispatcher's DispatchBinding.
func (c *Cache) BindPod(binding *v1.Binding) (<-chan error, error) {
	if err := c.started(); err != nil {
		return nil, err
	}
	onFinish := make(chan error, 1)
	if err := c.checkBinding(binding); err != nil {
		onFinish <- err
		return onFinish, err
	}
	err := c.dispatch(binding, onFinish)
	if IsUnexpectedCallError(err) {
		select {
		case onFinish <- err: // the dispatcher may not have reported it
		default:
		}
		return onFinish, err
	}
	return onFinish, nil
}

func (c *Cache) checkBinding(b *v1.Binding) error {
	if b == nil {
		return ErrNilBinding
	}
	key := string(b.UID)
	if key == "" {
		return &PodError{Op: "BindPod", Key: b.Namespace + "/" + b.Name, Err: ErrEmptyUID}
	}
	if b.Target.Name == "" {
		return &PodError{Op: "BindPod", Key: key, Err: ErrEmptyNodeName}
	}
	if c.a.Closed() {
		return ErrClosed
	}
	if err := c.a.Failed(); err != nil {
		return err
	}
	if c.a.Dispatcher() == nil {
		return ErrNoDispatcher
	}
	e, ok := c.a.Snapshot().Pod(key)
	switch {
	case !ok:
		return &PodError{Op: "BindPod", Key: key, Node: b.Target.Name, Err: ErrPodNotFound}
	case !e.Assumed:
		return &PodError{Op: "BindPod", Key: key, Node: b.Target.Name, Err: ErrPodNotAssumed}
	case e.Pod.Spec.NodeName != b.Target.Name:
		return &PodError{Op: "BindPod", Key: key, Node: b.Target.Name, Err: ErrPodNodeMismatch}
	}
	return nil
}

func (c *Cache) dispatch(b *v1.Binding, onFinish chan<- error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic in DispatchBinding: %v", ErrDispatcher, r)
		}
	}()
	return c.a.Dispatcher().DispatchBinding(b, onFinish)
}
