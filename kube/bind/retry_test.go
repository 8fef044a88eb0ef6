package bind_test

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/schedcache/schedcache/kube/bind"
)

// failingBinds makes the first n pods/binding creates on a fake clientset
// fail with err, counting every attempt; later ones succeed. fn, if set,
// runs on each attempt.
func failingBinds(n int, err error, fn func()) (*fake.Clientset, *atomic.Int64) {
	cs := fake.NewClientset()
	var attempts atomic.Int64
	cs.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		k := attempts.Add(1)
		if fn != nil {
			fn()
		}
		if k <= int64(n) {
			return true, nil, err
		}
		return true, nil, nil
	})
	return cs, &attempts
}

// PodBindingCall.Execute retries what upstream v1.37.2's util.BindPod
// retries (internal errors, unavailable servers, refused connections) up
// to retry.DefaultBackoff's 4 tries, and nothing else. In a synctest
// bubble: the backoff passes on the fake clock.
func TestPodBindingCallRetries(t *testing.T) {
	ctx := context.Background()
	gr := schema.GroupResource{Resource: "pods"}
	internal := apierrors.NewInternalError(errors.New("etcd hiccup"))
	for _, tc := range []struct {
		name     string
		failures int
		err      error
		attempts int64
		wantErr  bool
	}{
		{"internal error, then success", 2, internal, 3, false},
		{"service unavailable, then success", 3, apierrors.NewServiceUnavailable("later"), 4, false},
		{"connection refused, then success", 1, &wrapped{syscall.ECONNREFUSED}, 2, false},
		{"retriable, every try fails", 10, internal, 4, true},
		{"conflict: not retried", 10, apierrors.NewConflict(gr, "p", errors.New("already bound")), 1, true},
		{"not found: not retried", 10, apierrors.NewNotFound(gr, "p"), 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cs, attempts := failingBinds(tc.failures, tc.err, nil)
				err := bind.NewPodBindingCall(bindingFor(mkPod("p"), "n")).Execute(ctx, cs)
				require.Equal(t, tc.attempts, attempts.Load())
				if tc.wantErr {
					require.ErrorIs(t, err, tc.err)
				} else {
					require.NoError(t, err)
				}
			})
		})
	}
	require.True(t, bind.Retriable(internal))
	require.False(t, bind.Retriable(nil))
}

// wrapped is a connection error as the client returns one.
type wrapped struct{ errno syscall.Errno }

func (w *wrapped) Error() string { return "dial tcp: " + w.errno.Error() }
func (w *wrapped) Unwrap() error { return w.errno }

// A done context ends the retries at once, with the last error.
func TestBindPodStopsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	internal := apierrors.NewInternalError(errors.New("etcd hiccup"))
	cs, attempts := failingBinds(10, internal, cancel) // the first attempt cancels ctx
	err := bind.BindPod(ctx, cs, &v1.Binding{})
	require.ErrorIs(t, err, internal)
	require.Equal(t, int64(1), attempts.Load())
}
