package bind_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/kube/bind"
	"github.com/schedcache/schedcache/kube/internal/fakeapi"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

var logger = klog.Background()

func mkPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(100, resource.DecimalSI)},
		}}}},
	}
}

func mkNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("8"), v1.ResourcePods: resource.MustParse("110")}}}
}

func bindingFor(p *v1.Pod, node string) *v1.Binding {
	return &v1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Target: v1.ObjectReference{Kind: "Node", Name: node}}
}

func newSim(t *testing.T, o bind.SimOptions) *bind.Sim {
	t.Helper()
	s, err := bind.NewSim(o)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func wait(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome")
		return nil
	}
}

func empty(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("unexpected outcome %v", err)
	default:
	}
}

// statusCall is a less relevant call type (upstream's status patch
// relevance) that can be made a no-op.
type statusCall struct {
	uid  types.UID
	noop bool
}

func (c *statusCall) CallType() fwk.APICallType                          { return bind.PodStatusPatch }
func (c *statusCall) UID() types.UID                                     { return c.uid }
func (c *statusCall) Execute(context.Context, clientset.Interface) error { return nil }
func (c *statusCall) Merge(fwk.APICall) error                            { return nil }
func (c *statusCall) Sync(obj metav1.Object) (metav1.Object, error)      { return obj, nil }
func (c *statusCall) IsNoOp() bool                                       { return c.noop }

// The Sim's queue follows upstream's: same-type calls merge (the older is
// overwritten), a less relevant call is skipped, a more relevant one
// overwrites, a no-op is skipped, and each object executes once.
func TestSimMergeSkipOverwrite(t *testing.T) {
	s := newSim(t, bind.SimOptions{})
	p := mkPod("p")
	first, second := make(chan error, 1), make(chan error, 1)
	require.NoError(t, s.Add(bind.NewPodBindingCall(bindingFor(p, "n1")), fwk.APICallOptions{OnFinish: first}))
	require.NoError(t, s.Add(bind.NewPodBindingCall(bindingFor(p, "n2")), fwk.APICallOptions{OnFinish: second}))
	err := wait(t, first)
	require.ErrorIs(t, err, fwk.ErrCallOverwritten)
	require.ErrorIs(t, err, schedcache.ErrCallOverwritten)

	less := make(chan error, 1)
	err = s.Add(&statusCall{uid: p.UID}, fwk.APICallOptions{OnFinish: less})
	require.ErrorIs(t, err, fwk.ErrCallSkipped)
	require.ErrorIs(t, wait(t, less), schedcache.ErrCallSkipped)

	q := mkPod("q")
	patch, bindq := make(chan error, 1), make(chan error, 1)
	require.NoError(t, s.Add(&statusCall{uid: q.UID}, fwk.APICallOptions{OnFinish: patch}))
	require.NoError(t, s.Add(bind.NewPodBindingCall(bindingFor(q, "n1")), fwk.APICallOptions{OnFinish: bindq}))
	require.ErrorIs(t, wait(t, patch), fwk.ErrCallOverwritten)

	noop := make(chan error, 1)
	require.ErrorIs(t, s.Add(&statusCall{uid: "r", noop: true}, fwk.APICallOptions{OnFinish: noop}), fwk.ErrCallSkipped)
	require.ErrorIs(t, wait(t, noop), fwk.ErrCallSkipped)

	empty(t, second)
	s.Run()
	require.NoError(t, wait(t, second))
	require.NoError(t, wait(t, bindq))
	c := s.Counts()
	require.Equal(t, int64(2), c.Executed)
	require.Equal(t, int64(2), c.Overwritten)
	require.Equal(t, int64(2), c.Skipped)
}

// blockingCall is a binding-type call whose Execute signals started and
// waits for release.
type blockingCall struct {
	uid              types.UID
	started, release chan struct{}
}

func (c *blockingCall) CallType() fwk.APICallType { return bind.PodBinding }
func (c *blockingCall) UID() types.UID            { return c.uid }
func (c *blockingCall) Execute(ctx context.Context, _ clientset.Interface) error {
	close(c.started)
	<-c.release
	return nil
}
func (c *blockingCall) Merge(fwk.APICall) error                       { return nil }
func (c *blockingCall) Sync(obj metav1.Object) (metav1.Object, error) { return obj, nil }
func (c *blockingCall) IsNoOp() bool                                  { return false }

// A call for an object whose call is executing is held until that one
// finishes, then runs (upstream's in-flight rule); as upstream, the
// executing call's channel already got ErrCallOverwritten.
func TestSimInFlightThenNext(t *testing.T) {
	s := newSim(t, bind.SimOptions{Workers: 4, Client: fake.NewClientset()})
	s.Run()
	c1 := &blockingCall{uid: "u", started: make(chan struct{}), release: make(chan struct{})}
	c2 := &blockingCall{uid: "u", started: make(chan struct{}), release: make(chan struct{})}
	first, second := make(chan error, 1), make(chan error, 1)
	require.NoError(t, s.Add(c1, fwk.APICallOptions{OnFinish: first}))
	watchdog.Recv(c1.started, "the first call starting")
	require.NoError(t, s.Add(c2, fwk.APICallOptions{OnFinish: second}))
	require.ErrorIs(t, wait(t, first), fwk.ErrCallOverwritten)
	select {
	case <-c2.started:
		t.Fatal("the second call started while the first was executing")
	case <-time.After(20 * time.Millisecond):
	}
	close(c1.release)
	watchdog.Recv(c2.started, "the second call starting")
	close(c2.release)
	require.NoError(t, wait(t, second))
	require.Eventually(t, func() bool { return s.Counts().Executed == 2 }, 10*time.Second, time.Millisecond)
}

// Failure rate 1 fails every call; Close reports queued calls and
// refuses new ones.
func TestSimFailuresAndClose(t *testing.T) {
	s := newSim(t, bind.SimOptions{FailureRate: 1})
	s.Run()
	ch := make(chan error, 1)
	require.NoError(t, s.Add(bind.NewPodBindingCall(bindingFor(mkPod("p"), "n")), fwk.APICallOptions{OnFinish: ch}))
	require.ErrorIs(t, wait(t, ch), bind.ErrSimulatedFailure)

	idle := newSim(t, bind.SimOptions{})
	queued := make(chan error, 1)
	require.NoError(t, idle.Add(bind.NewPodBindingCall(bindingFor(mkPod("q"), "n")), fwk.APICallOptions{OnFinish: queued}))
	idle.Close()
	require.ErrorIs(t, wait(t, queued), bind.ErrDispatcherClosed)
	late := make(chan error, 1)
	require.ErrorIs(t, idle.Add(bind.NewPodBindingCall(bindingFor(mkPod("r"), "n")), fwk.APICallOptions{OnFinish: late}), bind.ErrDispatcherClosed)
	require.ErrorIs(t, idle.Add(nil, fwk.APICallOptions{}), bind.ErrNilCall)

	_, err := bind.NewSim(bind.SimOptions{FailureRate: 2})
	require.Error(t, err)
	_, err = bind.NewDispatcher(nil)
	require.ErrorIs(t, err, bind.ErrNilDispatcher)
}

// fwkOnly is an fwk.APIDispatcher that answers with fwk's sentinels alone,
// as upstream's does.
type fwkOnly struct{ err error }

func (d fwkOnly) Add(_ fwk.APICall, o fwk.APICallOptions) error {
	o.OnFinish <- d.err
	return d.err
}
func (d fwkOnly) SyncObject(obj metav1.Object) (metav1.Object, error) { return obj, nil }

// Through the adapter, BindPod keeps upstream's contract: a skip is no
// error (the channel says it), an unexpected refusal is.
func TestBindPodThroughAdapter(t *testing.T) {
	skip := fmt.Errorf("x: %w", fwk.ErrCallSkipped)
	for name, tc := range map[string]struct {
		addErr  error
		wantErr bool
	}{"skipped": {skip, false}, "refused": {errors.New("boom"), true}} {
		t.Run(name, func(t *testing.T) {
			d, err := bind.NewDispatcher(fwkOnly{tc.addErr})
			require.NoError(t, err)
			c, err := schedcache.New(context.Background(), schedcache.WithDispatcher(d))
			require.NoError(t, err)
			defer c.Close()
			p := mkPod("p")
			p.Spec.NodeName = "n"
			require.NoError(t, c.AssumePod(logger, p))
			ch, err := c.BindPod(bindingFor(p, "n"))
			require.Equal(t, tc.wantErr, err != nil, "BindPod error %v", err)
			out := wait(t, ch)
			require.Equal(t, tc.wantErr, bind.IsUnexpectedError(out))
			require.Equal(t, tc.wantErr, bind.WaitOnFinish(context.Background(), chanOf(out)) != nil)
		})
	}
}

func chanOf(err error) <-chan error {
	ch := make(chan error, 1)
	ch <- err
	return ch
}

// The binder loop: with every call failing, every pod is forgotten and the
// cache holds nothing; with a fake API server, pods are bound there and
// stay assumed (binding finished) until an informer confirms them.
func TestBinderLoop(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rate      float64
		wantBound int
	}{{"all fail", 1, 0}, {"none fail", 0, 20}, {"some fail", 0.5, -1}} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			fakeapi.InstallBindingReactor(cs)
			pods := make([]*v1.Pod, 20)
			for i := range pods {
				pods[i] = mkPod(fmt.Sprint("p", i))
				_, err := cs.CoreV1().Pods("ns").Create(context.Background(), pods[i], metav1.CreateOptions{})
				require.NoError(t, err)
			}
			sim := newSim(t, bind.SimOptions{FailureRate: tc.rate, Seed: 7, Client: cs, Latency: time.Millisecond, Jitter: time.Millisecond})
			sim.Run()
			d, err := bind.NewDispatcher(sim)
			require.NoError(t, err)
			c, err := schedcache.New(context.Background(), schedcache.WithDispatcher(d))
			require.NoError(t, err)
			defer c.Close()
			_, err = c.AddNode(logger, mkNode("n"))
			require.NoError(t, err)

			in := make(chan bind.Placement)
			b := bind.NewBinder(c, logger)
			var mu sync.Mutex
			var failed []error
			done := make(chan struct{})
			go func() {
				defer close(done)
				b.Run(context.Background(), in, 4, func(_ bind.Placement, err error) {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				})
			}()
			for _, p := range pods {
				in <- bind.Placement{Pod: p, Node: "n"}
			}
			in <- bind.Placement{} // bad input: counted as refused, no panic
			close(in)
			watchdog.Recv(done, "the binder returning")

			cnt := b.Counts()
			require.Equal(t, int64(len(pods)), cnt.Bound+cnt.Forgotten)
			require.Equal(t, int64(1), cnt.Refused)
			if tc.wantBound >= 0 {
				require.Equal(t, int64(tc.wantBound), cnt.Bound)
			} else {
				require.NotZero(t, cnt.Bound)
				require.NotZero(t, cnt.Forgotten)
			}
			require.Len(t, failed, int(cnt.Forgotten)+1)
			for _, err := range failed {
				if !errors.Is(err, bind.ErrNilPlacement) {
					require.ErrorIs(t, err, bind.ErrSimulatedFailure)
				}
			}
			st := c.Stats()
			require.Equal(t, int(cnt.Bound), st.AssumedPods, "bound pods stay assumed until confirmed")
			require.Equal(t, int(cnt.Bound), st.Pods, "forgotten pods left the cache")
			boundInAPI := 0
			for _, p := range pods {
				got, err := cs.CoreV1().Pods("ns").Get(context.Background(), p.Name, metav1.GetOptions{})
				require.NoError(t, err)
				_, cached := c.Snapshot().Pod(string(p.UID))
				require.Equal(t, got.Spec.NodeName == "n", cached, "a pod is bound in the API iff the cache kept it")
				if cached {
					boundInAPI++
				}
			}
			require.Equal(t, int(cnt.Bound), boundInAPI)
		})
	}
}
