// Package bind connects schedcache's BindPod to API dispatchers: an
// adapter from upstream kube-scheduler's fwk.APIDispatcher to
// schedcache.Dispatcher (NewDispatcher), the pod binding call
// (PodBindingCall, upstream's apicalls.PodBindingCall), a simulated
// dispatcher with upstream's queueing semantics plus configurable latency
// and failure rate (Sim), and an example binder loop that assumes, binds,
// and finishes or forgets pods as upstream's scheduler does (Binder).
// Semantics are those of k8s.io/kube-scheduler v0.37.2 and
// k8s.io/kubernetes v1.37.2. The package wraps no fwk.APICacher: it makes
// only bindings, so the status patches of APICacher.PatchPodStatus (a
// slice of conditions since v0.37) are not its business.
package bind

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache"
)

// Call types and relevances, equal to upstream's apicalls package
// (k8s.io/kubernetes pkg/scheduler/framework/api_calls), so calls made
// here merge with upstream's own in one dispatcher.
const (
	PodStatusPatch fwk.APICallType = "pod_status_patch"
	PodBinding     fwk.APICallType = "pod_binding"
)

// Relevances are upstream's apicalls.Relevances.
var Relevances = fwk.APICallRelevances{PodStatusPatch: 1, PodBinding: 2}

// PodBindingCall binds a pod (upstream v1.37.2's apicalls.PodBindingCall):
// it is never a no-op, merges nothing and syncs nothing, and its Execute
// retries retriable errors (BindPod). Contract: immutable
// after NewPodBindingCall; safe for concurrent use.
type PodBindingCall struct {
	binding *v1.Binding // immutable
}

// NewPodBindingCall returns the call binding binding.
func NewPodBindingCall(binding *v1.Binding) *PodBindingCall {
	return &PodBindingCall{binding: binding}
}

// CallType returns PodBinding.
func (c *PodBindingCall) CallType() fwk.APICallType { return PodBinding }

// UID returns the bound pod's UID.
func (c *PodBindingCall) UID() types.UID { return c.binding.UID }

// Execute posts the binding, retrying the errors upstream retries
// (BindPod).
func (c *PodBindingCall) Execute(ctx context.Context, client clientset.Interface) error {
	klog.FromContext(ctx).V(3).Info("Attempting to bind pod to node", "pod", klog.KObj(&c.binding.ObjectMeta), "node", c.binding.Target.Name)
	return BindPod(ctx, client, c.binding)
}

// Retriable reports whether an API error is worth another try, as
// upstream's util.Retriable: an internal error, a service unavailable or a
// refused connection.
func Retriable(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || utilnet.IsConnectionRefused(err)
}

// BindPod posts binding, as upstream v1.37's util.BindPod: a Retriable
// error is retried with client-go's retry.DefaultBackoff (at most 4
// tries, 10ms, 50ms and 250ms apart, with 10% jitter); it returns the
// last error. Unlike upstream it stops waiting for the next try when ctx
// is done, returning the last error.
func BindPod(ctx context.Context, client clientset.Interface, binding *v1.Binding) error {
	backoff := retry.DefaultBackoff
	for {
		err := client.CoreV1().Pods(binding.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
		if err == nil || !Retriable(err) || backoff.Steps <= 1 {
			return err
		}
		t := time.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// Sync returns obj unchanged.
func (c *PodBindingCall) Sync(obj metav1.Object) (metav1.Object, error) { return obj, nil }

// Merge does nothing: a newer binding replaces an older one.
func (c *PodBindingCall) Merge(fwk.APICall) error { return nil }

// IsNoOp returns false.
func (c *PodBindingCall) IsNoOp() bool { return false }

// Binding returns the binding.
func (c *PodBindingCall) Binding() *v1.Binding { return c.binding }

// Adapter makes an fwk.APIDispatcher a schedcache.Dispatcher.
//
// Contract: safe for concurrent use if the wrapped dispatcher is (upstream's
// is). DispatchBinding returns Add's error; one wrapping fwk.ErrCallSkipped
// or fwk.ErrCallOverwritten also wraps schedcache.ErrCallSkipped or
// ErrCallOverwritten, so BindPod tells expected outcomes from failures.
// The outcome channel receives the dispatcher's errors as they are (for
// upstream's dispatcher, fwk's sentinels alone): check them with
// IsUnexpectedError or WaitOnFinish, which know both.
type Adapter struct {
	d fwk.APIDispatcher // immutable
}

// ErrNilDispatcher is returned by NewDispatcher for a nil dispatcher.
var ErrNilDispatcher = errors.New("bind: nil dispatcher")

// NewDispatcher adapts d for schedcache.WithDispatcher.
func NewDispatcher(d fwk.APIDispatcher) (*Adapter, error) {
	if d == nil {
		return nil, ErrNilDispatcher
	}
	return &Adapter{d: d}, nil
}

// DispatchBinding queues a PodBindingCall for binding on the dispatcher.
func (a *Adapter) DispatchBinding(binding *v1.Binding, onFinish chan<- error) error {
	return translate(a.d.Add(NewPodBindingCall(binding), fwk.APICallOptions{OnFinish: onFinish}))
}

// translate adds the schedcache sentinel to an fwk lifecycle error.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fwk.ErrCallSkipped) && !errors.Is(err, schedcache.ErrCallSkipped):
		return fmt.Errorf("%w: %w", schedcache.ErrCallSkipped, err)
	case errors.Is(err, fwk.ErrCallOverwritten) && !errors.Is(err, schedcache.ErrCallOverwritten):
		return fmt.Errorf("%w: %w", schedcache.ErrCallOverwritten, err)
	}
	return err
}

// IsUnexpectedError reports whether err needs handling: not nil and not a
// skip or overwrite by either fwk's or schedcache's sentinels.
func IsUnexpectedError(err error) bool {
	return fwk.IsUnexpectedError(err) && schedcache.IsUnexpectedCallError(err)
}

// WaitOnFinish waits for a call's outcome, as upstream's
// APICache.WaitOnFinish: skips and overwrites are success (another call
// took over), any other error is returned, as is ctx's error if it ends
// first.
func WaitOnFinish(ctx context.Context, onFinish <-chan error) error {
	select {
	case err := <-onFinish:
		if IsUnexpectedError(err) {
			return err
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
