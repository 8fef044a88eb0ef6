package sim

import (
	"fmt"
	"sort"

	"github.com/puzpuzpuz/xsync/v3"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/framework"
	"github.com/schedcache/schedcache/snapshot"
)

// podRecord is what the simulated API server holds for one pod.
type podRecord struct {
	Pod   *v1.Pod // immutable once stored
	Node  string  // the node it is bound to; "" while pending
	Bound bool
	// Observed: the informer has delivered the bound pod to the cache
	// (AddPod); until then the cache holds it assumed.
	Observed bool
}

// Truth is the simulated API server's store: every pod it holds, keyed by
// UID, with its node and whether it is bound.
//
// Contract: safe for concurrent use (an xsync.MapOf); in real-time mode the
// scheduler goroutines and the informer goroutine write it, the audit reads
// it once they have stopped.
type Truth struct {
	pods *xsync.MapOf[string, podRecord] // concurrent map
}

func newTruth() *Truth { return &Truth{pods: xsync.NewMapOf[string, podRecord]()} }

// Bind records pod as bound to node by the scheduler; the cache is
// expected to hold it assumed until Observed.
func (t *Truth) Bind(pod *v1.Pod, node string) {
	t.pods.Store(string(pod.UID), podRecord{Pod: pod, Node: node, Bound: true})
}

// Load records pod as bound to its node and delivered to the cache (the
// initial cluster).
func (t *Truth) Load(pod *v1.Pod) {
	t.pods.Store(string(pod.UID), podRecord{Pod: pod, Node: pod.Spec.NodeName, Bound: true, Observed: true})
}

// Observed records that the informer delivered pod to the cache.
func (t *Truth) Observed(pod *v1.Pod) {
	t.pods.Compute(string(pod.UID), func(r podRecord, loaded bool) (podRecord, bool) {
		r.Observed = true
		return r, !loaded // a deleted pod stays deleted
	})
}

// Pending records pod as held by the API server without a node (a
// binding that failed).
func (t *Truth) Pending(pod *v1.Pod) {
	t.pods.Store(string(pod.UID), podRecord{Pod: pod})
}

// Delete records the deletion of pod.
func (t *Truth) Delete(pod *v1.Pod) { t.pods.Delete(string(pod.UID)) }

// Len returns the number of pods held.
func (t *Truth) Len() int { return t.pods.Size() }

// AuditResult is a plain value, owned by whoever holds it: what the audit
// found.
type AuditResult struct {
	OK           bool     `json:"ok"`
	PodsChecked  int      `json:"pods_checked"`  // pods of the ground truth
	CachePods    int      `json:"cache_pods"`    // pods the cache holds
	NodesChecked int      `json:"nodes_checked"` // nodes whose totals were compared
	Divergences  int      `json:"divergences"`
	Examples     []string `json:"examples,omitempty"` // the first few, sorted
}

const maxExamples = 10

// audit compares the cache's latest snapshot with the ground truth: every
// bound pod is in the cache on its node, assumed exactly until the
// informer has delivered it; every pending pod
// and every deleted one is absent; every node of the cluster is there; and
// every node's pod count and requested cpu and memory equal the sums over
// the pods the truth binds to it. It must run when nothing writes either
// side.
func audit(c *schedcache.Cache, truth *Truth, nodes []*v1.Node) AuditResult {
	snap := c.Snapshot()
	var res AuditResult
	var problems []string
	report := func(format string, args ...any) {
		res.Divergences++
		if len(problems) < 1000 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	type totals struct{ pods, cpu, mem int64 }
	want := make(map[string]*totals, len(nodes))
	for _, n := range nodes {
		want[n.Name] = &totals{}
	}
	truth.pods.Range(func(uid string, r podRecord) bool {
		res.PodsChecked++
		e, inCache := snap.Pod(uid)
		switch {
		case !r.Bound && inCache:
			report("pod %s: pending in the API server but in the cache on %q (assumed %v)", uid, e.Pod.Spec.NodeName, e.Assumed)
		case !r.Bound:
		case !inCache:
			report("pod %s: bound to %s but missing from the cache", uid, r.Node)
		case e.Pod.Spec.NodeName != r.Node:
			report("pod %s: bound to %s but on %q in the cache", uid, r.Node, e.Pod.Spec.NodeName)
		case r.Observed && e.Assumed:
			report("pod %s: bound and delivered by the informer but still assumed in the cache", uid)
		case !r.Observed && !e.Assumed:
			report("pod %s: bound, not yet delivered by the informer, but not assumed in the cache", uid)
		}
		if !r.Bound {
			return true
		}
		tot := want[r.Node]
		if tot == nil {
			report("pod %s: bound to %s, which is not a node of the cluster", uid, r.Node)
			return true
		}
		info, err := framework.NewPodInfo(r.Pod)
		if err != nil {
			report("pod %s: %v", uid, err)
			return true
		}
		req := info.Requests()
		tot.pods++
		tot.cpu += req.MilliCPU
		tot.mem += req.Memory
		return true
	})
	snap.RangePods(func(uid string, e snapshot.PodEntry) bool {
		res.CachePods++
		if _, ok := truth.pods.Load(uid); !ok {
			report("pod %s: in the cache on %q (assumed %v) but not in the API server", uid, e.Pod.Spec.NodeName, e.Assumed)
		}
		return true
	})
	for _, n := range nodes {
		res.NodesChecked++
		ni, err := snap.Get(n.Name)
		if err != nil {
			report("node %s: missing from the cache: %v", n.Name, err)
			continue
		}
		w := want[n.Name]
		got := ni.Requested()
		if int64(ni.NumPods()) != w.pods || got.MilliCPU != w.cpu || got.Memory != w.mem {
			report("node %s: cache has %d pods, %dm cpu, %d memory; API server %d pods, %dm cpu, %d memory",
				n.Name, ni.NumPods(), got.MilliCPU, got.Memory, w.pods, w.cpu, w.mem)
		}
	}
	if nn := snap.NumNodes(); nn != len(nodes) {
		report("cache lists %d nodes, the cluster has %d", nn, len(nodes))
	}
	if err := snap.Err(); err != nil {
		report("snapshot error: %v", err)
	}
	sort.Strings(problems)
	if len(problems) > maxExamples {
		problems = problems[:maxExamples]
	}
	res.Examples = problems
	res.OK = res.Divergences == 0
	return res
}
