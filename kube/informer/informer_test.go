package informer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/cachetest"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/kube/informer"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

var ctxBg = context.Background()

func mkNode(name, zone string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name)},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU:  resource.MustParse("8"),
			v1.ResourcePods: resource.MustParse("110"),
		}}}
	if zone != "" {
		n.Labels = map[string]string{v1.LabelTopologyZone: zone}
	}
	return n
}

func mkPod(name, nodeName string, milliCPU int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)},
		}}}},
	}
}

// errSink collects the errors the adapter and the cache report.
type errSink struct {
	mu   sync.Mutex
	errs []error
}

func (s *errSink) add(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

func (s *errSink) all() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

func newCache(t *testing.T, sink *errSink, opts ...schedcache.Option) *schedcache.Cache {
	t.Helper()
	opts = append(opts, schedcache.WithAsyncErrorHandler(informer.AsyncErrorHandler(klog.Background(), sink.add)))
	c, err := schedcache.New(ctxBg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// start runs the factory until the test ends and waits for the adapter's
// HasSynced.
func start(t *testing.T, f informers.SharedInformerFactory, a *informer.Adapter) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxBg)
	t.Cleanup(func() { cancel(); f.Shutdown() })
	f.Start(ctx.Done())
	// Polled every millisecond (WaitForCacheSync polls every 100 ms, which
	// would hide a HasSynced that does not wait for the cache).
	require.Eventually(t, a.HasSynced, 10*time.Second, time.Millisecond)
}

func cachedPod(c *schedcache.Cache, p *v1.Pod) (pod *v1.Pod, assumed, ok bool) {
	e, ok := c.Snapshot().Pod(string(p.UID))
	return e.Pod, e.Assumed, ok
}

func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 2*time.Millisecond, msg)
}

// The initial lists are in the cache as soon as HasSynced is true; then
// informer events flow in with upstream's semantics: unassigned pods are
// ignored, a binding (unassigned -> assigned update) confirms the assumed
// pod, updates, deletes and node events are applied.
func TestAttachInitialListAndEvents(t *testing.T) {
	sink := &errSink{}
	// The coordinator is slowed on every add, so that the informers'
	// handlers are done long before the cache has applied their events:
	// a HasSynced that did not wait for the cache would be seen here.
	slow := func(kind string) {
		if kind == "AddNode" || kind == "AddPod" {
			time.Sleep(20 * time.Millisecond)
		}
	}
	c := newCache(t, sink, cachetest.WithFaultHooks(slow, nil))
	n1, n2 := mkNode("n1", "z1"), mkNode("n2", "z2")
	running, pending := mkPod("running", "n1", 100), mkPod("pending", "", 200)
	cs := fake.NewClientset(n1, n2, running, pending)
	f := informers.NewSharedInformerFactory(cs, 0)
	a, err := informer.Attach(c, f, informer.WithErrorHandler(sink.add))
	require.NoError(t, err)
	start(t, f, a)

	// No waiting: HasSynced includes the cache having applied the lists.
	snap := c.Snapshot()
	require.Equal(t, 2, snap.NumNodes())
	_, assumed, ok := cachedPod(c, running)
	require.True(t, ok)
	require.False(t, assumed)
	_, _, ok = cachedPod(c, pending)
	require.False(t, ok, "an unassigned pod never reaches the cache")
	require.Equal(t, int64(1), a.Counts().Unassigned)

	// The scheduler assumes the pending pod; the binding's informer update
	// (unassigned -> assigned) confirms it.
	assumedPod := pending.DeepCopy()
	assumedPod.Spec.NodeName = "n2"
	require.NoError(t, c.AssumePod(klog.Background(), assumedPod))
	_, err = cs.CoreV1().Pods("ns").Update(ctxBg, assumedPod, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool { _, assumed, ok := cachedPod(c, pending); return ok && !assumed }, "binding confirmed the assumed pod")
	require.Equal(t, int64(2), a.Counts().PodAdds)

	// An update of an assigned pod replaces it.
	bigger := running.DeepCopy()
	bigger.Labels = map[string]string{"v": "2"}
	_, err = cs.CoreV1().Pods("ns").Update(ctxBg, bigger, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool { p, _, _ := cachedPod(c, running); return p != nil && p.Labels["v"] == "2" }, "update applied")

	// Node update (zone move) and delete.
	moved := n1.DeepCopy()
	moved.Labels[v1.LabelTopologyZone] = "z3"
	_, err = cs.CoreV1().Nodes().Update(ctxBg, moved, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool {
		ni, err := c.Snapshot().Get("n1")
		return err == nil && ni.Node().Labels[v1.LabelTopologyZone] == "z3"
	}, "node update applied")
	require.NoError(t, cs.CoreV1().Nodes().Delete(ctxBg, "n2", metav1.DeleteOptions{}))
	eventually(t, func() bool { _, err := c.Snapshot().Get("n2"); return err != nil }, "node delete applied")

	// Pod deletes.
	require.NoError(t, cs.CoreV1().Pods("ns").Delete(ctxBg, "running", metav1.DeleteOptions{}))
	require.NoError(t, cs.CoreV1().Pods("ns").Delete(ctxBg, "pending", metav1.DeleteOptions{}))
	eventually(t, func() bool { n, _ := c.PodCount(); return n == 0 }, "pod deletes applied")
	require.NoError(t, c.Sync())
	require.Empty(t, sink.all())
	cnt := a.Counts()
	require.Equal(t, int64(2), cnt.PodDeletes)
	require.Equal(t, int64(2), cnt.NodeAdds)
	require.Equal(t, int64(1), cnt.NodeDeletes)
	require.Zero(t, cnt.WrongType+cnt.SubmitErrors+cnt.Tombstones)
}

// Tombstones remove pods (whatever their stale object says) and nodes;
// objects of the wrong type anywhere are reported as *TypeError and
// counted; refused submissions are *EventError; nothing panics.
func TestHandlersTombstonesAndBadInput(t *testing.T) {
	sink := &errSink{}
	c := newCache(t, sink)
	a, err := informer.New(c, informer.WithErrorHandler(sink.add))
	require.NoError(t, err)
	n := mkNode("n", "")
	p, q := mkPod("p", "n", 100), mkPod("q", "n", 100)
	a.AddNode(n)
	a.AddPod(p)
	a.AddPod(q)
	require.NoError(t, c.Sync())
	count, _ := c.PodCount()
	require.Equal(t, 2, count)

	a.DeletePod(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: p})
	stale := q.DeepCopy()
	stale.Spec.NodeName = "" // the tombstone's object may be stale: removed anyway
	a.DeletePod(cache.DeletedFinalStateUnknown{Key: "ns/q", Obj: stale})
	require.NoError(t, c.Sync())
	count, _ = c.PodCount()
	require.Zero(t, count)
	a.DeleteNode(cache.DeletedFinalStateUnknown{Key: "n", Obj: n})
	require.NoError(t, c.Sync())
	require.Zero(t, c.NodeCount())
	require.Equal(t, int64(3), a.Counts().Tombstones)
	require.Empty(t, sink.all())

	var nilPod *v1.Pod
	var nilNode *v1.Node
	bad := []func(){
		func() { a.AddPod("not a pod") },
		func() { a.AddPod(nilPod) },
		func() { a.AddPod(n) },
		func() { a.UpdatePod(p, 42) },
		func() { a.UpdatePod(nil, p) },
		func() { a.DeletePod(3.14) },
		func() { a.DeletePod(nilPod) },
		func() { a.DeletePod(cache.DeletedFinalStateUnknown{Key: "x", Obj: n}) },
		func() { a.AddNode(p) },
		func() { a.AddNode(nilNode) },
		func() { a.UpdateNode(n, p) },
		func() { a.UpdateNode("x", n) },
		func() { a.DeleteNode(nil) },
		func() { a.DeleteNode(nilNode) },
		func() { a.DeleteNode(cache.DeletedFinalStateUnknown{Key: "x", Obj: p}) },
	}
	for _, fn := range bad {
		require.NotPanics(t, fn)
	}
	errs := sink.all()
	require.Len(t, errs, len(bad))
	for _, err := range errs {
		var te *informer.TypeError
		require.ErrorAs(t, err, &te)
		require.ErrorIs(t, err, informer.ErrWrongType)
	}
	require.Equal(t, int64(len(bad)), a.Counts().WrongType)

	// Refused at submission: an assigned pod without UID.
	noUID := mkPod("nouid", "n", 1)
	noUID.UID = ""
	a.AddPod(noUID)
	// Failed when applied: removing a pod the cache does not hold goes to
	// the cache's async error handler, routed to the same sink.
	a.DeletePod(mkPod("unknown", "n", 1))
	require.NoError(t, c.Sync())
	eventually(t, func() bool { return len(sink.all()) == len(bad)+2 }, "both errors reported")
	errs = sink.all()[len(bad):]
	var ee *informer.EventError
	require.ErrorAs(t, errs[0], &ee)
	require.ErrorIs(t, errs[0], schedcache.ErrEmptyUID)
	require.ErrorAs(t, errs[1], &ee)
	require.Equal(t, "RemovePod", ee.Op)
	require.ErrorIs(t, errs[1], schedcache.ErrPodNotFound)
	require.Equal(t, int64(1), a.Counts().SubmitErrors)

	// After Close every event is refused with ErrClosed, reported, counted.
	require.NoError(t, c.Close())
	a.AddPod(mkPod("late", "n", 1))
	require.ErrorIs(t, sink.all()[len(sink.all())-1], schedcache.ErrClosed)
	require.Equal(t, int64(2), a.Counts().SubmitErrors)
}

func TestNilArguments(t *testing.T) {
	_, err := informer.New(nil)
	require.ErrorIs(t, err, informer.ErrNilCache)
	c := newCache(t, &errSink{})
	_, err = informer.Attach(c, nil)
	require.ErrorIs(t, err, informer.ErrNilCache)
}

// droppingWatches makes the fake clientset's watches lose
// the events drop selects, and lets the test expire them (a 410 Gone
// error event), which makes the reflectors relist.
type droppingWatches struct {
	mu      sync.Mutex
	drop    func(watch.Event) bool // guarded by mu
	dropped int                    // guarded by mu
	live    []*droppingWatch       // guarded by mu
}

type droppingWatch struct {
	inner  watch.Interface
	out    chan watch.Event
	expire chan struct{}
	stop   chan struct{}
	once   sync.Once
	done   chan struct{} // closed when the forwarding goroutine exits
}

// install wraps the watches of resources (default: pods and nodes).
func (d *droppingWatches) install(cs *fake.Clientset, resources ...string) {
	if len(resources) == 0 {
		resources = []string{"pods", "nodes"}
	}
	for _, res := range resources {
		cs.PrependWatchReactor(res, func(action k8stesting.Action) (bool, watch.Interface, error) {
			gvr := action.GetResource()
			inner, err := cs.Tracker().Watch(gvr, action.GetNamespace())
			if err != nil {
				return false, nil, err
			}
			w := &droppingWatch{inner: inner, out: make(chan watch.Event), expire: make(chan struct{}),
				stop: make(chan struct{}), done: make(chan struct{})}
			d.mu.Lock()
			d.live = append(d.live, w)
			d.mu.Unlock()
			go w.forward(d) // owned by w: exits on Stop or expiry
			return true, w, nil
		})
	}
}

func (w *droppingWatch) forward(d *droppingWatches) {
	defer close(w.done)
	defer close(w.out)
	defer w.inner.Stop()
	for {
		select {
		case ev, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			d.mu.Lock()
			drop := d.drop != nil && d.drop(ev)
			if drop {
				d.dropped++
			}
			d.mu.Unlock()
			if drop {
				continue
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		case <-w.expire:
			gone := apierrors.NewResourceExpired("watch expired by the test")
			select {
			case w.out <- watch.Event{Type: watch.Error, Object: &gone.ErrStatus}:
			case <-w.stop:
			}
			return
		case <-w.stop:
			return
		}
	}
}

func (w *droppingWatch) Stop()                          { w.once.Do(func() { close(w.stop) }) }
func (w *droppingWatch) ResultChan() <-chan watch.Event { return w.out }

// expireAll expires every live watch and waits for their goroutines.
func (d *droppingWatches) expireAll() {
	d.mu.Lock()
	live := d.live
	d.live = nil
	d.mu.Unlock()
	for _, w := range live {
		close(w.expire)
		<-w.done
	}
}

func (d *droppingWatches) setDrop(fn func(watch.Event) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drop = fn
}

func (d *droppingWatches) droppedCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// A watch that loses events leaves the cache behind the cluster; the
// relist that follows an expired watch repairs it: missed deletes arrive
// as DeletedFinalStateUnknown tombstones (pods and nodes), missed adds as
// adds, missed updates as updates, and objects that did not change come
// back as updates of identical objects, which the cache accepts.
func TestDroppedEventsRepairedByRelist(t *testing.T) {
	sink := &errSink{}
	c := newCache(t, sink)
	n1, n2 := mkNode("n1", "z1"), mkNode("n2", "z2")
	gone, kept, changed := mkPod("gone", "n1", 100), mkPod("kept", "n1", 100), mkPod("changed", "n2", 100)
	cs := fake.NewClientset(n1, n2, gone, kept, changed)
	dw := &droppingWatches{}
	dw.install(cs)
	f := informers.NewSharedInformerFactory(cs, 0)
	a, err := informer.Attach(c, f, informer.WithErrorHandler(sink.add))
	require.NoError(t, err)
	start(t, f, a)
	require.Equal(t, 2, c.Snapshot().NumNodes())

	dw.setDrop(func(watch.Event) bool { return true }) // lose everything
	require.NoError(t, cs.CoreV1().Pods("ns").Delete(ctxBg, "gone", metav1.DeleteOptions{}))
	require.NoError(t, cs.CoreV1().Nodes().Delete(ctxBg, "n2", metav1.DeleteOptions{}))
	newPod := mkPod("new", "n1", 300)
	_, err = cs.CoreV1().Pods("ns").Create(ctxBg, newPod, metav1.CreateOptions{})
	require.NoError(t, err)
	upd := changed.DeepCopy()
	upd.Labels = map[string]string{"v": "2"}
	_, err = cs.CoreV1().Pods("ns").Update(ctxBg, upd, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool { return dw.droppedCount() == 4 }, "the watches lost the four events")
	require.NoError(t, c.Sync())
	_, _, ok := cachedPod(c, gone)
	require.True(t, ok, "the cache missed the delete")
	require.Equal(t, 2, c.Snapshot().NumNodes())

	before := a.Counts()
	dw.setDrop(nil)
	dw.expireAll() // 410 Gone: the reflectors relist
	eventually(t, func() bool {
		_, _, goneCached := cachedPod(c, gone)
		_, _, newCached := cachedPod(c, newPod)
		p, _, _ := cachedPod(c, changed)
		return !goneCached && newCached && p != nil && p.Labels["v"] == "2" && c.Snapshot().NumNodes() == 1
	}, "the relist repaired the cache")
	require.NoError(t, c.Sync())
	after := a.Counts()
	require.Equal(t, before.Tombstones+2, after.Tombstones, "the missed pod and node deletes came as tombstones")
	require.Greater(t, after.PodUpdates, before.PodUpdates, "existing pods came back as updates")
	n, _ := c.PodCount()
	require.Equal(t, 3, n) // kept, changed, new
	require.Empty(t, sink.all(), "a relist causes no error")
}
