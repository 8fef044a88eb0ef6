package app

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// testPool is a pool over a real workqueue, with a clock the test sets
// and hints: NodeResourcesFit queues on the addition of node "big";
// VolumeBinding (a Pending plugin here) queues on any node addition.
func testPool(t *testing.T) (*pool, *time.Time) {
	t.Helper()
	now := time.Unix(1000, 0)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	t.Cleanup(q.ShutDown)
	onBig := func(_ klog.Logger, _ *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
		if n, ok := newObj.(*v1.Node); ok && n.Name == "big" {
			return fwk.Queue, nil
		}
		return fwk.QueueSkip, nil
	}
	always := func(klog.Logger, *v1.Pod, any, any) (fwk.QueueingHint, error) { return fwk.Queue, nil }
	nodeAdd := fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}
	p := &pool{
		queue:  q,
		hints:  map[string]hintMap{"s": {nodeAdd: {{plugin: "NodeResourcesFit", fn: onBig}, {plugin: "VolumeBinding", fn: always}}}},
		moves:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "moves"}, []string{"event"}),
		logger: klog.Background(), now: func() time.Time { return now },
		sync: func() error { return nil }, pods: map[string]*parked{},
	}
	return p, &now
}

func parkedPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "d", ResourceVersion: "1"}, Spec: v1.PodSpec{SchedulerName: "s"}}
}

func diagnosis(unschedulable, pending []string) *framework.Diagnosis {
	return &framework.Diagnosis{UnschedulablePlugins: sets.New(unschedulable...), PendingPlugins: sets.New(pending...)}
}

func node(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

// Only the hints of the plugins that rejected a pod move it, and only
// when they say Queue; its backoff is waited out.
func TestPoolHints(t *testing.T) {
	p, _ := testPool(t)
	nodeAdd := fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}
	p.park("d/a", parkedPod("a"), diagnosis([]string{"NodeResourcesFit"}, nil), 0)
	p.park("d/b", parkedPod("b"), diagnosis([]string{"NodeAffinity"}, nil), 0)
	require.Equal(t, 2, p.len())

	p.event(nodeAdd, nil, node("small"))
	require.Equal(t, 2, p.len(), "NodeResourcesFit's hint skips a node too small")
	p.event(fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeTaint}, nil, node("big"))
	require.Equal(t, 2, p.len(), "no plugin registered the event")
	p.event(nodeAdd, nil, node("big"))
	require.Equal(t, 1, p.len(), "b's rejector registered no hint for it")
	require.Equal(t, 1, p.queue.Len())
	key, _ := p.queue.Get()
	require.Equal(t, "d/a", key)
	p.queue.Done(key)
	require.Equal(t, float64(1), count(t, p, "NodeAdd"))
}

// A pod no plugin rejected (the cluster had no node) moves on any event;
// a Pending plugin's Queue skips the backoff; an unschedulable plugin's
// waits it out.
func TestPoolStrategies(t *testing.T) {
	p, _ := testPool(t)
	p.park("d/none", parkedPod("none"), nil, 0)
	p.event(fwk.ClusterEvent{Resource: fwk.PersistentVolume, ActionType: fwk.Add}, nil, nil)
	require.Zero(t, p.len())
	require.Equal(t, 1, p.queue.Len())

	p.park("d/pending", parkedPod("pending"), diagnosis(nil, []string{"VolumeBinding"}), time.Hour)
	p.park("d/backoff", parkedPod("backoff"), diagnosis([]string{"VolumeBinding"}, nil), time.Hour)
	p.event(fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, node("x"))
	require.Zero(t, p.len())
	require.Equal(t, 2, p.queue.Len(), "the Pending plugin's pod is queued at once; the other waits an hour")
}

// An event that came while a pod's attempt ran, and that a hint of the
// plugins that rejected it accepts, sends it back after its backoff
// instead of parking it (upstream's in-flight events); other events do
// not.
func TestPoolEventDuringAttempt(t *testing.T) {
	p, _ := testPool(t)
	nodeAdd := fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}
	p.begin()
	p.event(nodeAdd, nil, node("small"))
	p.park("d/a", parkedPod("a"), diagnosis([]string{"NodeResourcesFit"}, nil), 0)
	require.Equal(t, 1, p.len(), "the hint skipped the event: parked")
	p.end()

	p.begin()
	p.event(nodeAdd, nil, node("big"))
	p.park("d/b", parkedPod("b"), diagnosis([]string{"NodeResourcesFit"}, nil), 0)
	require.Zero(t, p.len(), "b is not parked (and the event moved a)")
	require.Equal(t, 2, p.queue.Len())
	for range 2 {
		key, _ := p.queue.Get()
		p.queue.Done(key)
	}

	// Past maxFlight events, the pod goes back whatever they were.
	p.begin()
	for range maxFlight + 1 {
		p.event(fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeTaint}, nil, node("x"))
	}
	p.park("d/c", parkedPod("c"), diagnosis([]string{"NodeResourcesFit"}, nil), 0)
	require.Zero(t, p.len(), "c is not parked")
	key, _ := p.queue.Get()
	require.Equal(t, "d/c", key)
	p.queue.Done(key)

	// park ended the recording: the next attempt starts afresh.
	p.begin()
	p.park("d/d", parkedPod("d"), diagnosis([]string{"NodeResourcesFit"}, nil), 0)
	require.Equal(t, 1, p.len())
}

// A parked pod's own update moves it only if a hint of its rejectors
// says so; a status change does not.
func TestPoolUpdate(t *testing.T) {
	p, _ := testPool(t)
	old := parkedPod("a")
	p.park("d/a", old, diagnosis([]string{"NodeResourcesFit"}, nil), 0)
	upd := old.DeepCopy()
	upd.ResourceVersion = "2"
	upd.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse}}
	require.True(t, p.update("d/a", old, upd))
	require.Equal(t, 1, p.len())
	require.False(t, p.update("d/other", old, upd), "not parked")
}

// The flush moves the pods parked for podMaxInUnschedulable.
func TestPoolFlush(t *testing.T) {
	p, now := testPool(t)
	p.park("d/a", parkedPod("a"), diagnosis([]string{"NodeAffinity"}, nil), 0)
	*now = now.Add(podMaxInUnschedulable - time.Second)
	p.flush()
	require.Equal(t, 1, p.len())
	*now = now.Add(time.Second)
	p.flush()
	require.Zero(t, p.len())
	require.Equal(t, float64(1), count(t, p, "UnschedulableTimeout"))
}

// count is the pool's moves counter for event.
func count(t *testing.T, p *pool, event string) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, p.moves.WithLabelValues(event).Write(&m))
	return m.GetCounter().GetValue()
}
