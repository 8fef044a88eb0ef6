package bind_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/bind"
	"github.com/schedcache/schedcache/kube/internal/fakeapi"
)

var podsGR = schema.GroupResource{Resource: "pods"}

// sleeps records the backoff delays a dispatcher asks for and returns at
// once (or with ctx's error once it is done), so the tests never wait.
type sleeps struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) get() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

// apiWithPod is a fake API server holding pod, whose bindings set the
// pod's node; the first len(errs) binding attempts fail with errs[i] (nil:
// let it through), later ones go through.
func apiWithPod(t *testing.T, pod *v1.Pod, errs ...error) (*fake.Clientset, *atomic.Int64) {
	t.Helper()
	cs := fake.NewClientset()
	fakeapi.InstallBindingReactor(cs)
	if pod != nil {
		_, err := cs.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	var attempts atomic.Int64
	cs.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		k := attempts.Add(1)
		if k <= int64(len(errs)) && errs[k-1] != nil {
			return true, nil, errs[k-1]
		}
		return false, nil, nil
	})
	return cs, &attempts
}

func newClientDispatcher(t *testing.T, cs clientset.Interface, s *sleeps, steps int) *bind.ClientDispatcher {
	t.Helper()
	b := bind.DefaultClientBackoff
	if steps > 0 {
		b.Steps = steps
	}
	d, err := bind.NewClientDispatcher(cs, bind.ClientOptions{Workers: 2, Backoff: b, Sleep: s.sleep})
	require.NoError(t, err)
	d.Run(context.Background())
	t.Cleanup(d.Close)
	return d
}

func bindVia(t *testing.T, d *bind.ClientDispatcher, b *v1.Binding) error {
	t.Helper()
	ch := make(chan error, 1)
	require.NoError(t, d.Add(bind.NewPodBindingCall(b), fwk.APICallOptions{OnFinish: ch}))
	return wait(t, ch)
}

func nodeOf(t *testing.T, cs clientset.Interface, p *v1.Pod) string {
	t.Helper()
	got, err := cs.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	require.NoError(t, err)
	return got.Spec.NodeName
}

// The outcome of each kind of answer the server may give a binding:
// what is retried, how often, how long it waits, and what is final.
func TestClientDispatcherBindingAnswers(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods/binding"}, "p", errors.New("object was modified"))
	for _, tc := range []struct {
		name      string
		errs      []error
		steps     int
		attempts  int64
		bound     bool
		want      error // errors.Is the outcome; nil: success
		minDelays []time.Duration
	}{
		{name: "success", attempts: 1, bound: true},
		{name: "throttled twice, Retry-After honoured", errs: []error{apierrors.NewTooManyRequests("slow down", 2), apierrors.NewTooManyRequests("slow down", 3)},
			attempts: 3, bound: true, minDelays: []time.Duration{2 * time.Second, 3 * time.Second}},
		{name: "unavailable, internal, server timeout", errs: []error{apierrors.NewServiceUnavailable("later"),
			apierrors.NewInternalError(errors.New("etcd")), apierrors.NewServerTimeout(podsGR, "create", 1)}, attempts: 4, bound: true},
		{name: "conflict with the pod unbound: retried", errs: []error{conflict}, attempts: 2, bound: true},
		{name: "not found: pod gone, final", errs: []error{apierrors.NewNotFound(podsGR, "p")}, attempts: 1, want: bind.ErrPodGone},
		{name: "forbidden: final", errs: []error{apierrors.NewForbidden(podsGR, "p", errors.New("RBAC"))}, attempts: 1, want: errForbidden},
		{name: "unavailable every time: retries exhausted", errs: []error{apierrors.NewServiceUnavailable("1"), apierrors.NewServiceUnavailable("2"),
			apierrors.NewServiceUnavailable("3")}, steps: 3, attempts: 3, want: bind.ErrRetriesExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mkPod("p")
			cs, attempts := apiWithPod(t, p, tc.errs...)
			s := &sleeps{}
			d := newClientDispatcher(t, cs, s, tc.steps)
			err := bindVia(t, d, bindingFor(p, "n1"))
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				var ce *bind.CallError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, int(tc.attempts), ce.Attempts)
				require.Equal(t, "ns/p", ce.Object)
				require.Equal(t, "n1", ce.Node)
				if tc.want == errForbidden {
					require.True(t, apierrors.IsForbidden(err), "%v", err)
				} else {
					require.ErrorIs(t, err, tc.want)
				}
			}
			require.Equal(t, tc.attempts, attempts.Load())
			require.Equal(t, tc.attempts-1, d.Counts().Retries)
			if tc.bound {
				require.Equal(t, "n1", nodeOf(t, cs, p))
			} else {
				require.Empty(t, nodeOf(t, cs, p))
			}
			delays := s.get()
			require.Len(t, delays, int(tc.attempts-1))
			for i, min := range tc.minDelays {
				require.GreaterOrEqual(t, delays[i], min, "delay %d", i)
			}
		})
	}
}

var errForbidden = errors.New("forbidden (checked with apierrors.IsForbidden)")

// A conflict is looked into: the pod read back says whether the refusal
// is final.
func TestClientDispatcherConflicts(t *testing.T) {
	ctx := context.Background()
	t.Run("bound here by an earlier attempt: success", func(t *testing.T) {
		p := mkPod("p")
		cs, _ := apiWithPod(t, p)
		require.NoError(t, bindVia(t, newClientDispatcher(t, cs, &sleeps{}, 0), bindingFor(p, "n1")))
		d := newClientDispatcher(t, cs, &sleeps{}, 0)
		require.NoError(t, bindVia(t, d, bindingFor(p, "n1")))
		require.EqualValues(t, 1, d.Counts().Conflicts)
		require.Zero(t, d.Counts().Retries)
	})
	t.Run("bound elsewhere: final", func(t *testing.T) {
		p := mkPod("p")
		cs, _ := apiWithPod(t, p)
		require.NoError(t, bindVia(t, newClientDispatcher(t, cs, &sleeps{}, 0), bindingFor(p, "other")))
		err := bindVia(t, newClientDispatcher(t, cs, &sleeps{}, 0), bindingFor(p, "n1"))
		require.ErrorIs(t, err, bind.ErrBoundElsewhere)
		require.True(t, apierrors.IsConflict(err))
		require.Equal(t, "other", nodeOf(t, cs, p))
	})
	t.Run("replaced by a pod of another UID: pod gone", func(t *testing.T) {
		p := mkPod("p")
		cs, _ := apiWithPod(t, p)
		b := bindingFor(p, "n1")
		b.UID = "uid-of-the-deleted-pod"
		require.ErrorIs(t, bindVia(t, newClientDispatcher(t, cs, &sleeps{}, 0), b), bind.ErrPodGone)
		require.Empty(t, nodeOf(t, cs, p))
	})
	t.Run("being deleted: pod gone", func(t *testing.T) {
		p := mkPod("p")
		now := metav1.Now()
		p.DeletionTimestamp = &now
		cs, _ := apiWithPod(t, p)
		require.ErrorIs(t, bindVia(t, newClientDispatcher(t, cs, &sleeps{}, 0), bindingFor(p, "n1")), bind.ErrPodGone)
	})
	t.Run("deleted between the conflict and the read: pod gone", func(t *testing.T) {
		p := mkPod("p")
		cs, _ := apiWithPod(t, p)
		cs.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() != "binding" {
				return false, nil, nil
			}
			require.NoError(t, cs.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name))
			return true, nil, apierrors.NewConflict(podsGR, p.Name, errors.New("object was modified"))
		})
		require.ErrorIs(t, bindVia(t, newClientDispatcher(t, cs, &sleeps{}, 0), bindingFor(p, "n1")), bind.ErrPodGone)
		_, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err))
	})
}

// A binding the server refuses because the pod was deleted meanwhile
// ends, through the cache and the Binder, with ForgetPod: the assumed pod
// leaves the cache and the node's resources are free again.
func TestClientDispatcherRefusedBindingForgetsPod(t *testing.T) {
	ctx := context.Background()
	p := mkPod("p")
	cs, _ := apiWithPod(t, p)
	require.NoError(t, cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}))
	d := newClientDispatcher(t, cs, &sleeps{}, 0)
	ad, err := bind.NewDispatcher(d)
	require.NoError(t, err)
	c, err := schedcache.New(ctx, schedcache.WithDispatcher(ad))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.AddNode(logger, mkNode("n1"))
	require.NoError(t, err)
	b := bind.NewBinder(c, logger)
	err = b.Bind(ctx, bind.Placement{Pod: p, Node: "n1"})
	require.ErrorIs(t, err, bind.ErrPodGone)
	require.True(t, apierrors.IsNotFound(err))
	_, err = c.GetPod(p)
	require.ErrorIs(t, err, schedcache.ErrPodNotFound)
	ni, err := c.GetNode("n1")
	require.NoError(t, err)
	require.Zero(t, ni.Requested().MilliCPU)
	require.Equal(t, bind.BinderCounts{Forgotten: 1}, b.Counts())
}

// Close (or the end of Run's context) cancels a call waiting out its
// backoff and gives every queued call ErrDispatcherClosed; Add then
// refuses. Each call added gets exactly one outcome.
func TestClientDispatcherCancellation(t *testing.T) {
	for _, how := range []string{"Close", "context"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cs := fake.NewClientset()
			entered := make(chan struct{}, 1)
			cs.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("down")
			})
			blockingSleep := func(ctx context.Context, _ time.Duration) error {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-ctx.Done()
				return ctx.Err()
			}
			d, err := bind.NewClientDispatcher(cs, bind.ClientOptions{Workers: 1, Sleep: blockingSleep})
			require.NoError(t, err)
			d.Run(ctx)
			defer d.Close()
			first, second := make(chan error, 1), make(chan error, 1)
			require.NoError(t, d.Add(bind.NewPodBindingCall(bindingFor(mkPod("a"), "n1")), fwk.APICallOptions{OnFinish: first}))
			<-entered // a's first attempt failed; it waits out its backoff
			require.NoError(t, d.Add(bind.NewPodBindingCall(bindingFor(mkPod("b"), "n1")), fwk.APICallOptions{OnFinish: second}))
			if how == "Close" {
				d.Close()
			} else {
				cancel()
			}
			require.ErrorIs(t, wait(t, first), bind.ErrDispatcherClosed)
			require.ErrorIs(t, wait(t, second), bind.ErrDispatcherClosed)
			d.Close()
			late := make(chan error, 1)
			require.ErrorIs(t, d.Add(bind.NewPodBindingCall(bindingFor(mkPod("c"), "n1")), fwk.APICallOptions{OnFinish: late}), bind.ErrDispatcherClosed)
			require.ErrorIs(t, wait(t, late), bind.ErrDispatcherClosed)
			empty(t, first)
			empty(t, second)
		})
	}
}

// A call of another type (upstream's status patch, say) runs its own
// Execute under the same rules: a conflict is retried there.
type flakyCall struct {
	uid   types.UID
	fails int
	runs  atomic.Int64
}

func (c *flakyCall) CallType() fwk.APICallType { return bind.PodStatusPatch }
func (c *flakyCall) UID() types.UID            { return c.uid }
func (c *flakyCall) Execute(context.Context, clientset.Interface) error {
	if c.runs.Add(1) <= int64(c.fails) {
		return apierrors.NewConflict(podsGR, "p", errors.New("object was modified"))
	}
	return nil
}
func (c *flakyCall) Merge(fwk.APICall) error                       { return nil }
func (c *flakyCall) Sync(obj metav1.Object) (metav1.Object, error) { return obj, nil }
func (c *flakyCall) IsNoOp() bool                                  { return false }

func TestClientDispatcherOtherCalls(t *testing.T) {
	d := newClientDispatcher(t, fake.NewClientset(), &sleeps{}, 0)
	call := &flakyCall{uid: "u", fails: 2}
	ch := make(chan error, 1)
	require.NoError(t, d.Add(call, fwk.APICallOptions{OnFinish: ch}))
	require.NoError(t, wait(t, ch))
	require.EqualValues(t, 3, call.runs.Load())
	require.EqualValues(t, 2, d.Counts().Conflicts)
}

func TestNewClientDispatcherRefuses(t *testing.T) {
	_, err := bind.NewClientDispatcher(nil, bind.ClientOptions{})
	require.ErrorIs(t, err, bind.ErrNilClient)
	_, err = bind.NewClientDispatcher(fake.NewClientset(), bind.ClientOptions{Workers: -1})
	require.Error(t, err)
	_, err = bind.NewClientDispatcher(fake.NewClientset(), bind.ClientOptions{Backoff: kwait.Backoff{Duration: -1}})
	require.Error(t, err)
}

func TestRetriableAPIError(t *testing.T) {
	for _, err := range []error{apierrors.NewTooManyRequests("x", 1), apierrors.NewServiceUnavailable("x"),
		apierrors.NewInternalError(errors.New("x")), apierrors.NewServerTimeout(podsGR, "create", 1), apierrors.NewTimeoutError("x", 1)} {
		require.True(t, bind.RetriableAPIError(err), "%v", err)
	}
	for _, err := range []error{nil, apierrors.NewNotFound(podsGR, "p"), apierrors.NewForbidden(podsGR, "p", errors.New("x")),
		apierrors.NewBadRequest("x"), errors.New("plain"), context.Canceled} {
		require.False(t, bind.RetriableAPIError(err), "%v", err)
	}
}
