package bind_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/e2e/controlplane"
	"github.com/schedcache/schedcache/e2e/internal/leak"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/kube/bind"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock in the cache fails in seconds, with every goroutine's stack
	leak.VerifyTestMain(m)
}

// testTimeout bounds a test's requests and waits: generous, since CI's 2
// cores also run the apiserver and etcd under the race detector. Nothing
// asserts a duration.
const testTimeout = 5 * time.Minute

const namespace = "default"

var logger = klog.Background()

// testContext is a context bound to the test: cancelled at its end, and
// after testTimeout at the latest.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func mkNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}}}
}

func mkPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}}}
}

// env is a cache whose dispatcher is a ClientDispatcher on a client of
// the real apiserver, and a Binder on it, with one node, n1, in the cache
// (the apiserver does not check that a binding's node exists). No
// informer feeds the cache: a bound pod stays assumed.
type env struct {
	cache  *schedcache.Cache      // owned: closed at the test's Cleanup
	disp   *bind.ClientDispatcher // owned: closed at the test's Cleanup, before the cache
	binder *bind.Binder           // immutable
}

func newEnv(t *testing.T, ctx context.Context, client kubernetes.Interface, opts bind.ClientOptions) *env {
	t.Helper()
	d, err := bind.NewClientDispatcher(client, opts)
	require.NoError(t, err)
	ad, err := bind.NewDispatcher(d)
	require.NoError(t, err)
	c, err := schedcache.New(ctx, schedcache.WithTTL(0), schedcache.WithDispatcher(ad))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	d.Run(ctx)
	t.Cleanup(d.Close) // runs before the cache's Close
	_, err = c.AddNode(logger, mkNode("n1"))
	require.NoError(t, err)
	return &env{cache: c, disp: d, binder: bind.NewBinder(c, logger)}
}

func createPod(t *testing.T, ctx context.Context, client kubernetes.Interface, name string) *v1.Pod {
	t.Helper()
	p, err := client.CoreV1().Pods(namespace).Create(ctx, mkPod(name), metav1.CreateOptions{})
	require.NoError(t, err)
	return p
}

// serverNode is the pod's spec.nodeName on the server.
func serverNode(t *testing.T, ctx context.Context, client kubernetes.Interface, name string) string {
	t.Helper()
	p, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	return p.Spec.NodeName
}

// requireForgotten: the pod left the cache (ForgetPod) and n1's
// resources are free again.
func requireForgotten(t *testing.T, e *env, p *v1.Pod) {
	t.Helper()
	_, err := e.cache.GetPod(p)
	require.ErrorIs(t, err, schedcache.ErrPodNotFound)
	ni, err := e.cache.GetNode("n1")
	require.NoError(t, err)
	require.Zero(t, ni.Requested().MilliCPU)
}

// The Binder with the production dispatcher on a real apiserver (one for
// all subtests, which use distinct pods): AssumePod, a POST to the pods'
// binding subresource, FinishBinding; bindings the server refuses end
// with ForgetPod.
func TestBinderOnRealServer(t *testing.T) {
	ctx := testContext(t)
	cp := controlplane.MustStart(t, controlplane.Options{})
	client := cp.Client()

	t.Run("bound", func(t *testing.T) {
		e := newEnv(t, ctx, client, bind.ClientOptions{Workers: 2})
		p := createPod(t, ctx, client, "bound")
		require.NoError(t, e.binder.Bind(ctx, bind.Placement{Pod: p, Node: "n1"}))
		require.Equal(t, "n1", serverNode(t, ctx, client, "bound"))
		assumed, err := e.cache.IsAssumedPod(p)
		require.NoError(t, err)
		require.True(t, assumed, "assumed until an informer confirms it")
		ni, err := e.cache.GetNode("n1")
		require.NoError(t, err)
		require.Equal(t, int64(1000), ni.Requested().MilliCPU)
		require.Equal(t, bind.BinderCounts{Bound: 1}, e.binder.Counts())
		require.Equal(t, int64(1), e.disp.Counts().Succeeded)
	})

	t.Run("pod deleted meanwhile: refused, forgotten", func(t *testing.T) {
		e := newEnv(t, ctx, client, bind.ClientOptions{Workers: 2})
		p := createPod(t, ctx, client, "deleted")
		// An unbound pod is deleted at once (no kubelet to wait for).
		require.NoError(t, client.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}))
		err := e.binder.Bind(ctx, bind.Placement{Pod: p, Node: "n1"})
		require.ErrorIs(t, err, bind.ErrPodGone)
		require.True(t, apierrors.IsNotFound(err), "%v", err)
		var ce *bind.CallError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, 1, ce.Attempts, "a refusal is not retried")
		requireForgotten(t, e, p)
		require.Equal(t, bind.BinderCounts{Forgotten: 1}, e.binder.Counts())
	})

	t.Run("pod replaced by another of the same name: refused, forgotten", func(t *testing.T) {
		e := newEnv(t, ctx, client, bind.ClientOptions{Workers: 2})
		old := createPod(t, ctx, client, "replaced")
		require.NoError(t, client.CoreV1().Pods(namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}))
		createPod(t, ctx, client, "replaced")
		// The binding names the old UID: the server's UID precondition
		// fails (409), and the dispatcher reads the new pod back.
		err := e.binder.Bind(ctx, bind.Placement{Pod: old, Node: "n1"})
		require.ErrorIs(t, err, bind.ErrPodGone)
		require.True(t, apierrors.IsConflict(err), "%v", err)
		requireForgotten(t, e, old)
		require.Empty(t, serverNode(t, ctx, client, "replaced"), "the new pod is not bound")
	})

	t.Run("bound elsewhere by someone else: refused, forgotten", func(t *testing.T) {
		e := newEnv(t, ctx, client, bind.ClientOptions{Workers: 2})
		p := createPod(t, ctx, client, "elsewhere")
		require.NoError(t, client.CoreV1().Pods(namespace).Bind(ctx, &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Target:     v1.ObjectReference{Kind: "Node", Name: "n2"}}, metav1.CreateOptions{}))
		err := e.binder.Bind(ctx, bind.Placement{Pod: p, Node: "n1"})
		require.ErrorIs(t, err, bind.ErrBoundElsewhere)
		requireForgotten(t, e, p)
		require.Equal(t, "n2", serverNode(t, ctx, client, "elsewhere"))
	})

	// A binding attempted while the connection is cut (new connections
	// refused) is retried, and goes through once the connection is back.
	t.Run("across a cut connection: retried, bound", func(t *testing.T) {
		proxy := cp.MustNewProxy(t)
		viaProxy, err := kubernetes.NewForConfig(proxy.Config(cp.AdminConfig()))
		require.NoError(t, err)
		p := createPod(t, ctx, client, "cut")
		retried := make(chan struct{}) // closed at the first backoff: an attempt failed
		var once sync.Once
		e := newEnv(t, ctx, viaProxy, bind.ClientOptions{Workers: 1,
			Sleep: func(ctx context.Context, d time.Duration) error {
				once.Do(func() { close(retried) })
				timer := time.NewTimer(d)
				defer timer.Stop()
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-timer.C:
					return nil
				}
			}})
		require.NoError(t, proxy.Cut())
		done := make(chan error, 1)
		go func() { done <- e.binder.Bind(ctx, bind.Placement{Pod: p, Node: "n1"}) }() // owned by the subtest: received below
		select {
		case <-retried:
		case err := <-done:
			t.Fatalf("the binding ended while the connection was cut: %v", err)
		}
		require.NoError(t, proxy.Restore())
		require.NoError(t, <-done)
		require.Equal(t, "n1", serverNode(t, ctx, client, "cut"))
		require.Positive(t, e.disp.Counts().Retries)
		require.Equal(t, bind.BinderCounts{Bound: 1}, e.binder.Counts())
	})
}
