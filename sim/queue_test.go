package sim

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim/trace"
)

// scanFit is a test picker: the first node in snapshot order where the
// pod fits by CPU, memory and pod count (no sampling: a pod that fits
// anywhere is placed). With preempt, its node pickers are Preemptors: the
// first node where deleting every pod of a lower priority, the lowest
// first and as few as needed, makes room; the nominations they are told
// are kept per node picker, and a nominated node is tried first.
type scanFit struct {
	preempt bool           // immutable
	made    []*scanFitNode // owned by the run's main goroutine
}

type scanFitNode struct {
	preempt   bool              // immutable
	nominated map[string]string // owned by the scheduler: pod UID -> node
	calls     []string          // owned by the scheduler: the Preempt and Nominate calls
}

func (p *scanFit) Name() string      { return "scan-fit" }
func (p *scanFit) Plugins() []string { return nil }
func (p *scanFit) NewNodePicker(context.Context, PickerConfig) (NodePicker, error) {
	np := &scanFitNode{preempt: p.preempt, nominated: map[string]string{}}
	p.made = append(p.made, np)
	if p.preempt {
		return scanPreemptor{np}, nil
	}
	return np, nil
}

// room says whether pod (requesting want) fits on ni, with the nominated
// pods of another pod counted there.
func (np *scanFitNode) room(ni *nodeinfo.NodeInfo, want nodeinfo.Resource, extraCPU int64) bool {
	req, alloc := ni.Requested(), ni.Allocatable()
	return alloc.MilliCPU-req.MilliCPU-extraCPU >= want.MilliCPU && alloc.Memory-req.Memory >= want.Memory &&
		int64(ni.NumPods()) < alloc.AllowedPodNumber
}

func (np *scanFitNode) Pick(_ context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, _ *rand.Rand, _ []int64) (string, error) {
	want := pod.Requests()
	if n := np.nominated[string(pod.Pod().UID)]; n != "" {
		if ni, err := snap.Get(n); err == nil && ni != nil && np.room(ni, want, 0) {
			return n, nil
		}
	}
	for i := 0; i < snap.NumNodes(); i++ {
		ni := snap.At(i)
		held := int64(0)
		for uid, n := range np.nominated {
			if n == ni.Node().Name && uid != string(pod.Pod().UID) {
				held += 1000 // the test's preemptors ask for whole CPUs; one held is enough to matter
			}
		}
		if np.room(ni, want, held) {
			return ni.Node().Name, nil
		}
	}
	return "", nil
}

func (np *scanFitNode) Close() error { return nil }

// scanPreemptor is a scanFitNode that is a Preemptor.
type scanPreemptor struct{ *scanFitNode }

func (sp scanPreemptor) Preempt(_ context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, _ *rand.Rand) (Preemption, error) {
	sp.calls = append(sp.calls, "preempt "+pod.Pod().Name)
	want, prio := pod.Requests(), priority(pod.Pod())
	for i := 0; i < snap.NumNodes(); i++ {
		ni := snap.At(i)
		var low []*nodeinfo.PodInfo
		for k := 0; k < ni.NumPods(); k++ {
			if priority(ni.PodAt(k).Pod()) < prio {
				low = append(low, ni.PodAt(k))
			}
		}
		sort.Slice(low, func(a, b int) bool { return priority(low[a].Pod()) < priority(low[b].Pod()) })
		req, alloc := ni.Requested(), ni.Allocatable()
		free := alloc.MilliCPU - req.MilliCPU
		var victims []*v1.Pod
		for _, v := range low {
			if free >= want.MilliCPU {
				break
			}
			free += v.Requests().MilliCPU
			victims = append(victims, v.Pod())
		}
		if free >= want.MilliCPU && len(victims) > 0 {
			return Preemption{Node: ni.Node().Name, Victims: victims}, nil
		}
	}
	return Preemption{Clear: true}, nil
}

func (sp scanPreemptor) Nominate(pod *v1.Pod, node string) {
	sp.calls = append(sp.calls, "nominate "+pod.Name+" "+node)
	if node == "" {
		delete(sp.nominated, string(pod.UID))
		return
	}
	sp.nominated[string(pod.UID)] = node
}

// qPod is a phase pod of priority prio for the queue's unit tests.
func qPod(name string, prio int32) *phasePod {
	return &phasePod{pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}, Spec: v1.PodSpec{Priority: &prio}}}
}

// popAll pops every pod a scheduler would take, in order.
func popAll(q *podQueue) []string {
	var out []string
	for pp := q.pop(); pp != nil; pp = q.pop() {
		out = append(out, pp.pod.Name)
	}
	return out
}

// activeQ is PrioritySort's order: priority first, then the queue
// timestamp, then insertion order; a removed pod is not taken.
func TestQueueOrder(t *testing.T) {
	q := newPodQueue()
	a, b, c, d, e := qPod("a", 0), qPod("b", 10), qPod("c", 0), qPod("d", 10), qPod("e", 5)
	q.addActive(a, 1*time.Second, true)
	q.addActive(b, 3*time.Second, true)
	q.addActive(c, 0, true)
	q.addActive(d, 2*time.Second, true)
	q.addActive(e, 9*time.Second, true)
	x := qPod("x", 100)
	q.addActive(x, 0, true)
	q.remove(x)
	require.Equal(t, 5, q.len())
	require.Equal(t, []string{"d", "b", "e", "c", "a"}, popAll(&q))

	// Equal priority and timestamp: insertion order.
	for _, n := range []string{"p", "q", "r"} {
		q.addActive(qPod(n, 1), 0, true)
	}
	require.Equal(t, []string{"p", "q", "r"}, popAll(&q))
}

// Each unschedulable attempt doubles the backoff from 1 s to at most
// 10 s; a binding error counts its own attempts and takes precedence.
func TestQueueBackoffDuration(t *testing.T) {
	want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for n, w := range want {
		require.Equal(t, w, backoffFor(n), "attempt %d", n)
	}
	require.Equal(t, 10*time.Second, backoffFor(1000))

	pp := qPod("p", 0)
	require.False(t, pp.backingOff(0), "a pod never attempted does not back off")
	pp.failed(1200*time.Millisecond, false) // 1.2 s + 1 s, truncated to 2 s
	require.Equal(t, 2*time.Second, pp.q.expiry)
	require.Equal(t, 3*time.Second, pp.flushAt(), "the flush at the first whole second after the expiry's window ends it")
	require.True(t, pp.backingOff(2999*time.Millisecond))
	require.False(t, pp.backingOff(3*time.Second))
	pp.failed(3*time.Second, false) // second attempt: 2 s
	require.Equal(t, 5*time.Second, pp.q.expiry)
	pp.failed(5500*time.Millisecond, true) // first error: 1 s from 5.5 s
	require.Equal(t, 6*time.Second, pp.q.expiry)
	require.Equal(t, 2, pp.q.unsched)
	pp.failed(7*time.Second, false) // unschedulable again: the errors reset, 3rd attempt: 4 s
	require.Zero(t, pp.q.errs)
	require.Equal(t, 11*time.Second, pp.q.expiry)
}

// A moved pod goes to the backoff queue while it backs off, else to
// activeQ; a scheduler takes from the backoff queue only with activeQ
// empty, and never from the error backoff queue; the flushes move the
// pods whose backoff is over.
func TestQueueMoves(t *testing.T) {
	q := newPodQueue()
	early, late, errp, fresh := qPod("early", 0), qPod("late", 9), qPod("err", 0), qPod("fresh", 0)
	early.failed(0, false)                   // expiry 1 s
	late.failed(400*time.Millisecond, false) // expiry 1 s as well
	late.failed(500*time.Millisecond, false) // second attempt: expiry 2 s
	errp.failed(0, true)                     // expiry 1 s
	for _, pp := range []*phasePod{early, late} {
		q.unschedulable(pp)
	}
	q.backoffError(errp)
	moved := q.takeUnsched(func(*phasePod) bool { return true })
	require.Len(t, moved, 2)
	require.Empty(t, q.unsched)
	for _, pp := range moved {
		require.True(t, q.requeue(pp, 600*time.Millisecond), "%s backs off", pp.pod.Name)
	}
	require.Equal(t, 3, q.len())

	// A flush at 2 s ends the 1 s expiries: early and err go to activeQ.
	require.Equal(t, 2, q.flushBackoff(2*time.Second))
	q.addActive(fresh, 2*time.Second, true)
	// activeQ (early and err stamped 0 s, before fresh), then, with it
	// empty, the backoff queue's late at once.
	require.Equal(t, []string{"early", "err", "fresh", "late"}, popAll(&q))

	// Not backing off any more: straight to activeQ.
	require.False(t, q.requeue(early, 3*time.Second))
	require.Equal(t, qActive, early.q.where)
	q.remove(early)
	require.Zero(t, q.len())

	// The error backoff queue is never taken early.
	errp.failed(3*time.Second, true)
	q.backoffError(errp)
	require.Nil(t, q.pop())
	require.Zero(t, q.flushBackoff(4*time.Second), "2 errors: 2 s")
	require.Equal(t, 1, q.flushBackoff(6*time.Second))
	require.Equal(t, []string{"err"}, popAll(&q))
}

// A node update is an event only when what the scheduler reads of the
// node changed, not for a heartbeat.
func TestNodeEventful(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
	hb := n.DeepCopy()
	hb.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(5, 0))
	require.False(t, nodeEventful(n, hb))
	nr := n.DeepCopy()
	nr.Status.Conditions[0].Status = v1.ConditionFalse
	require.True(t, nodeEventful(n, nr))
	lb := n.DeepCopy()
	lb.Labels["a"] = "c"
	require.True(t, nodeEventful(n, lb))
	ta := n.DeepCopy()
	ta.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}
	require.True(t, nodeEventful(n, ta))
}

// queueHead is a cluster of nodes of 4 CPUs, one scheduler, no binding
// failures.
const queueHead = `cluster: {seed: 3, allocatable: {cpu: "4", memory: 32Gi, pods: 110}, images: {perNode: 0, poolSize: 0}}
workload: {schedulers: 1, sample: 1, bindingFailureRate: 0, confirmDelay: 1ms}
phases:
`

// An unschedulable pod settles (its phase and the barrier end), then a
// node added and a pod deleted move it back: it is bound once one fits,
// counted unschedulable once. Two runs give one digest.
func TestQueueRequeueOnEvents(t *testing.T) {
	p := writeScenario(t, queueHead+`- createNodes: {count: 2}
- name: fill
  createPods: {count: 2, namespace: a, template: {plain: true, containers: 1, cpu: "3", memory: 1Gi}}
- name: wait
  createPods: {count: 2, namespace: b, template: {plain: true, containers: 1, cpu: "3", memory: 1Gi}}
- barrier: {}
- name: grow
  createNodes: {count: 1}
- sleep: {duration: 1s}
- name: free
  deletePods: {namespace: a, count: 1}
- sleep: {duration: 1s}
- barrier: {}
`)
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{picker: &scanFit{}})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, r.Consistent)
	wait := phaseByName(t, r, "wait")
	require.True(t, wait.Finished)
	require.Equal(t, int64(2), wait.Unschedulable, "both settle unschedulable: the phase ends")
	require.Zero(t, wait.Scheduled)
	var later, again int64
	for _, ph := range r.Phases[4:] {
		later += ph.Scheduled
		again += ph.Unschedulable
	}
	require.Equal(t, int64(2), later, "the node's addition moves them (one fits), the deletion the other")
	require.Zero(t, again, "each counted once, in the phase that found it")
	require.Equal(t, 3, r.Counts.FinalPods)
	require.Equal(t, int64(3), r.Counts.Unschedulable, "attempts: two, then one after the node was added")

	_, r2, _ := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{picker: &scanFit{}})
	require.Equal(t, r.Digest, r2.Digest)
}

// PrioritySort: pods of a higher priority created with others are taken
// first, so they fit without preempting.
func TestQueuePrioritySort(t *testing.T) {
	p := writeScenario(t, queueHead+`- createNodes: {count: 1}
- name: low
  createPods: {count: 4, namespace: low, skipWait: true, template: {plain: true, containers: 1, cpu: "1", memory: 1Gi}}
- name: high
  createPods: {count: 4, namespace: high, template: {plain: true, containers: 1, cpu: "900m", memory: 1Gi, priority: 10}}
- barrier: {}
`)
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{picker: &scanFit{}})
	require.Equal(t, exitOK, code, stderr)
	high := phaseByName(t, r, "high")
	require.Equal(t, int64(4), high.Scheduled)
	require.Zero(t, high.Preemptions, "taken before the low pods, they need no preemption")
	require.Equal(t, int64(4), r.Counts.Unschedulable, "the low pods find no room")
	require.Equal(t, 4, r.Counts.FinalPods)
}

// A pod whose binding failed is attempted again only once its backoff is
// over: at the first whole second after its expiry's window (the trace's
// virtual times).
func TestQueueBindBackoff(t *testing.T) {
	p := writeScenario(t, `cluster: {seed: 8, allocatable: {cpu: "16", memory: 64Gi, pods: 110}, images: {perNode: 0, poolSize: 0}}
workload: {schedulers: 2, sample: 10, bindingFailureRate: 0.2, confirmDelay: 1ms}
phases:
- createNodes: {count: 10}
- createPods: {count: 60, template: {plain: true, containers: 1, cpu: 100m, memory: 100Mi}}
`)
	tr := filepath.Join(t.TempDir(), "t.jsonl")
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-", "-record", tr}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Positive(t, r.Counts.FailedBindings)
	f, err := os.Open(tr)
	require.NoError(t, err)
	defer f.Close()
	rd := trace.NewReader(f)
	forgot := map[string]time.Duration{} // pod -> when its binding failed
	fails := map[string]int{}
	checked := 0
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		at := time.Duration(rec.At)
		switch rec.Op {
		case trace.ForgetPod:
			forgot[rec.Pod.Name] = at
			fails[rec.Pod.Name]++
		case trace.AssumePod:
			if t0, ok := forgot[rec.Pod.Name]; ok {
				due := alignDown(t0+backoffFor(fails[rec.Pod.Name])) + backoffWindow
				require.GreaterOrEqual(t, at, due, "pod %s failed at %v", rec.Pod.Name, t0)
				require.Less(t, at, due+10*time.Millisecond, "taken at its flush: the schedulers are idle")
				delete(forgot, rec.Pod.Name)
				checked++
			}
		}
	}
	require.Equal(t, int(r.Counts.FailedBindings), checked)
}

// Pods unschedulable for more than 5 minutes are attempted again by the
// 30 s flush, with no event: at 5.5 minutes here.
func TestQueueLeftoverFlush(t *testing.T) {
	body := func(sleep string) string {
		return queueHead + `- createNodes: {count: 1}
- createPods: {count: 1, template: {plain: true, containers: 1, cpu: "8", memory: 1Gi}}
- sleep: {duration: ` + sleep + `}
`
	}
	for _, c := range []struct {
		sleep    string
		attempts int64
	}{{"5m29s", 1}, {"5m31s", 2}, {"11m1s", 3}} {
		code, r, stderr := runJSON(t, []string{"-scenario", writeScenario(t, body(c.sleep)), "-json", "-"}, hooks{picker: &scanFit{}})
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, c.attempts, r.Counts.Unschedulable, "after %s", c.sleep)
	}
}

// Gated pods wait, settled, until ungatePods removes their gates; then
// they are scheduled. Real-time mode refuses gates.
func TestQueueGatedPods(t *testing.T) {
	p := writeScenario(t, queueHead+`- createNodes: {count: 2}
- name: gated
  createPods: {count: 3, namespace: g, template: {plain: true, containers: 1, cpu: "1", memory: 1Gi, schedulingGates: [example.com/hold]}}
- name: wait
  sleep: {duration: 10s}
- name: open
  ungatePods: {namespace: g, count: 2}
- barrier: {}
- name: rest
  ungatePods: {namespace: g, all: true}
- name: done
  barrier: {}
`)
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{picker: &scanFit{}})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, r.Consistent)
	gated, wait, open, rest := phaseByName(t, r, "gated"), phaseByName(t, r, "wait"), phaseByName(t, r, "open"), phaseByName(t, r, "rest")
	require.Equal(t, int64(3), gated.Pods)
	require.Zero(t, gated.Scheduled+wait.Scheduled, "gated pods are not scheduled")
	require.Zero(t, gated.EndSeconds-gated.StartSeconds, "gated pods are settled")
	require.Equal(t, int64(2), open.Ungated)
	require.Equal(t, "g", open.Namespace)
	require.Equal(t, int64(1), rest.Ungated)
	require.Equal(t, 3, r.Counts.FinalPods)

	_, err := parseFlags([]string{"-scenario", p, "-deterministic=false"}, io.Discard)
	require.ErrorContains(t, err, "scheduling gates (template.schedulingGates) run in deterministic mode only")
}

// A picker that is a Preemptor runs PostFilter instead of the stand-in:
// its victims are deleted through the API server, the pod is nominated
// (every node picker is told) and waits, unsettled, until the deletions
// move it back; it is then bound to its node, and its nomination is
// forgotten as it is assumed.
func TestQueuePreemptor(t *testing.T) {
	p := writeScenario(t, `cluster: {seed: 3, allocatable: {cpu: "4", memory: 32Gi, pods: 110}, images: {perNode: 0, poolSize: 0}}
workload: {schedulers: 2, sample: 2, bindingFailureRate: 0, confirmDelay: 1ms}
phases:
- createNodes: {count: 2}
- name: low
  createPods: {count: 8, namespace: low, template: {plain: true, containers: 1, cpu: "1", memory: 1Gi}}
- name: high
  createPods: {count: 1, namespace: high, template: {plain: true, containers: 1, cpu: "2", memory: 1Gi, priority: 10}}
`)
	picker := &scanFit{preempt: true}
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{picker: picker})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, r.Consistent)
	high := phaseByName(t, r, "high")
	require.True(t, high.Finished)
	require.Equal(t, int64(1), high.Scheduled, "the preemptor's phase waits for it")
	require.Equal(t, int64(1), high.Preemptions)
	require.Equal(t, int64(2), high.Victims)
	require.Zero(t, high.Unschedulable, "a preemptor waiting for its victims is not unschedulable")
	require.Equal(t, 7, r.Counts.FinalPods)
	require.Len(t, picker.made, 2)
	pre := "preempt " + "ph2-000000"
	var preempted bool
	for _, np := range picker.made {
		require.Equal(t, []string{"nominate ph2-000000 node-00000", "nominate ph2-000000 "}, filterNominate(np.calls),
			"every node picker is told the nomination, then that it is forgotten")
		for _, c := range np.calls {
			preempted = preempted || c == pre
		}
		require.Empty(t, np.nominated)
	}
	require.True(t, preempted)
}

func filterNominate(calls []string) []string {
	var out []string
	for _, c := range calls {
		if len(c) > 8 && c[:8] == "nominate" {
			out = append(out, c)
		}
	}
	return out
}
