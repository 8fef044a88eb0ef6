package sim

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/puzpuzpuz/xsync/v3"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
)

// podRecord is what the simulated API server holds for one pod.
type podRecord struct {
	Pod   *v1.Pod // immutable once stored; a new version is a new object
	Node  string  // the node it is bound to (or assumed on); "" while pending
	Bound bool
	// Assumed: a scheduler holds the pod assumed on Node and its binding
	// has not reached the API server yet (the pod is pending there).
	Assumed bool
	// Expiring: assumed with its binding finished, but the binding never
	// reaches the API server; the cache holds it until its TTL expires.
	Expiring bool
}

// nodeRecord is what the simulated API server holds for one node.
type nodeRecord struct {
	Node     *v1.Node // immutable once stored
	Draining bool     // cordoned for a drain or removal: bindings to it are refused
}

// ErrBindRefused is the outcome of a binding the simulated API server
// refuses: its node is gone or being drained.
var ErrBindRefused = errors.New("sim: binding refused: the node is removed or draining")

// Truth is the simulated API server's store: every pod it holds, keyed by
// UID, with its node and whether it is bound, and every node.
//
// Contract: safe for concurrent use (xsync maps); in real-time mode the
// scheduler, dispatcher and API server goroutines write it, an audit reads
// it while they are paused (the world's write lock). nodeMu orders
// bindings (read) against drains and removals (write), so no binding lands
// on a node once it is cordoned.
type Truth struct {
	pods    *xsync.MapOf[string, podRecord]  // concurrent map
	nodes   *xsync.MapOf[string, nodeRecord] // concurrent map
	boundOn *xsync.MapOf[string, int64]      // concurrent map: pods bound to each node
	nodeMu  sync.RWMutex
}

func newTruth() *Truth {
	return &Truth{pods: xsync.NewMapOf[string, podRecord](), nodes: xsync.NewMapOf[string, nodeRecord](),
		boundOn: xsync.NewMapOf[string, int64]()}
}

// store sets (or, with del, deletes) uid's record and keeps boundOn.
func (t *Truth) store(uid string, r podRecord, del bool) {
	var old podRecord
	var had bool
	t.pods.Compute(uid, func(o podRecord, loaded bool) (podRecord, bool) {
		old, had = o, loaded
		return r, del
	})
	if had && old.Bound {
		t.boundOn.Compute(old.Node, func(n int64, _ bool) (int64, bool) { return n - 1, n-1 == 0 })
	}
	if !del && r.Bound {
		t.boundOn.Compute(r.Node, func(n int64, _ bool) (int64, bool) { return n + 1, false })
	}
}

// bound returns the number of pods bound to node.
func (t *Truth) bound(node string) int64 {
	n, _ := t.boundOn.Load(node)
	return n
}

// Bind records pod as bound to node.
func (t *Truth) Bind(pod *v1.Pod, node string) {
	t.store(string(pod.UID), podRecord{Pod: pod, Node: node, Bound: true}, false)
}

// Assume records pod as assumed on node by a scheduler, pending in the API
// server.
func (t *Truth) Assume(pod *v1.Pod, node string) {
	t.store(string(pod.UID), podRecord{Pod: pod, Node: node, Assumed: true}, false)
}

// Expire records pod as assumed on node with a binding that never comes.
func (t *Truth) Expire(pod *v1.Pod, node string) {
	t.store(string(pod.UID), podRecord{Pod: pod, Node: node, Assumed: true, Expiring: true}, false)
}

// tryBind binds the assumed pod uid to node unless the node is gone or
// draining; it returns the bound pod.
func (t *Truth) tryBind(uid, node string) (*v1.Pod, error) {
	t.nodeMu.RLock()
	defer t.nodeMu.RUnlock()
	if n, ok := t.nodes.Load(node); !ok || n.Draining {
		return nil, ErrBindRefused
	}
	r, ok := t.pods.Load(uid)
	if !ok || !r.Assumed || r.Node != node {
		return nil, fmt.Errorf("sim: binding of %s to %s: the pod is not assumed there", uid, node)
	}
	r.Assumed, r.Bound = false, true
	t.store(uid, r, false)
	return r.Pod, nil
}

// Load records pod as bound to its node (the initial cluster).
func (t *Truth) Load(pod *v1.Pod) {
	t.store(string(pod.UID), podRecord{Pod: pod, Node: pod.Spec.NodeName, Bound: true}, false)
}

// LoadNode records node (the initial cluster).
func (t *Truth) LoadNode(n *v1.Node) { t.nodes.Store(n.Name, nodeRecord{Node: n}) }

// setNode stores a new version of a node (or a new node), draining or not.
func (t *Truth) setNode(n *v1.Node, draining bool) {
	t.nodeMu.Lock()
	t.nodes.Store(n.Name, nodeRecord{Node: n, Draining: draining})
	t.nodeMu.Unlock()
}

func (t *Truth) removeNode(name string) {
	t.nodeMu.Lock()
	t.nodes.Delete(name)
	t.nodeMu.Unlock()
}

// update stores a new version of a bound pod.
func (t *Truth) update(pod *v1.Pod) {
	t.pods.Compute(string(pod.UID), func(r podRecord, loaded bool) (podRecord, bool) {
		r.Pod = pod
		return r, !loaded
	})
}

// Pending records pod as held by the API server without a node (a
// binding that failed).
func (t *Truth) Pending(pod *v1.Pod) {
	t.store(string(pod.UID), podRecord{Pod: pod}, false)
}

// Delete records the deletion of pod.
func (t *Truth) Delete(pod *v1.Pod) { t.store(string(pod.UID), podRecord{}, true) }

// Len returns the number of pods held.
func (t *Truth) Len() int { return t.pods.Size() }

// AuditResult is a plain value, owned by whoever holds it: what the audit
// found.
type AuditResult struct {
	OK           bool `json:"ok"`
	PodsChecked  int  `json:"pods_checked"`  // pods of the ground truth
	CachePods    int  `json:"cache_pods"`    // pods the cache holds
	NodesChecked int  `json:"nodes_checked"` // nodes whose totals were compared
	Divergences  int  `json:"divergences"`
	// ExpectedPods and ExpectedNodes are what the cache should hold.
	ExpectedPods  int `json:"expected_pods"`
	ExpectedNodes int `json:"expected_nodes"`
	// GhostNodes are removed nodes the cache keeps for expiring pods.
	GhostNodes int      `json:"ghost_nodes,omitempty"`
	Examples   []string `json:"examples,omitempty"` // the first few, sorted
}

const maxExamples = 10

// expect is a plain value, owned by the audit: what the cache should hold for one pod: nothing (!present),
// or the pod on node, assumed or not, at version rv (checked when not
// assumed); maybe: it may also be absent (an assumed pod whose TTL may
// have expired).
type expect struct {
	present, assumed, maybe bool
	node, rv                string
	pod                     *v1.Pod
}

// expectPod says what the cache should hold for uid. A pod whose events
// the informer still holds (buffered, or dropped since the last relist)
// is expected as the informer last delivered it, or assumed if it never
// delivered it and a scheduler assumed or bound it; any other pod as the
// API server holds it.
func expectPod(uid string, truth *Truth, inf *informer, ttl bool) expect {
	r, inTruth := truth.pods.Load(uid)
	sp := inf.pods[uid]
	key := "p/" + uid
	switch {
	case inTruth && (r.Expiring || (r.Assumed && inf.pend[key] == nil)):
		return expect{present: true, assumed: true, maybe: r.Expiring || ttl, node: r.Node, pod: r.Pod}
	case inf.busy(key) && sp != nil:
		return expect{present: true, node: sp.Spec.NodeName, rv: sp.ResourceVersion, pod: sp}
	case inf.busy(key) && inTruth && (r.Bound || r.Assumed):
		return expect{present: true, assumed: true, maybe: ttl, node: r.Node, pod: r.Pod}
	case inTruth && r.Bound:
		return expect{present: true, node: r.Node, rv: r.Pod.ResourceVersion, pod: r.Pod}
	}
	return expect{}
}

// expectNode returns the node the cache should hold under name, or nil.
func expectNode(name string, truth *Truth, inf *informer) *v1.Node {
	if inf.busy("n/" + name) {
		return inf.nodes[name]
	}
	if r, ok := truth.nodes.Load(name); ok {
		return r.Node
	}
	return nil
}

// reqMemo remembers the requests of the pod objects the last audit
// summed (nodeinfo.NewPodInfo per pod dominates an audit's cost), so that
// audits during a run cost less; it keeps only the objects of the latest
// audit. Owned by the auditor (the run's main goroutine or event loop).
type reqMemo struct {
	prev, next map[*v1.Pod]cpuMem
}

// cpuMem is a plain value: a pod's requested milli-cpu and memory.
type cpuMem struct{ MilliCPU, Memory int64 }

func (m *reqMemo) requests(p *v1.Pod) (cpuMem, error) {
	if r, ok := m.prev[p]; ok {
		m.next[p] = r
		return r, nil
	}
	info, err := nodeinfo.NewPodInfo(p)
	if err != nil {
		return cpuMem{}, err
	}
	req := info.Requests()
	r := cpuMem{req.MilliCPU, req.Memory}
	m.next[p] = r
	return r, nil
}

// audit compares the cache's latest snapshot with what it should hold:
// every pod the API server holds, bound or pending, as the informer's
// delivery state makes it expected (see expectPod; once the informer has
// delivered everything, exactly the API server's state); every cache pod
// expected; every node expected, at its version, with its pod count and
// requested cpu and memory equal to the sums over the pods expected on
// it. It must run when nothing writes the cache, the truth or the
// informer (the world's write lock in real time).
func audit(c *schedcache.Cache, truth *Truth, inf *informer, ttl bool, memo *reqMemo) AuditResult {
	inf.intake()
	memo.next = make(map[*v1.Pod]cpuMem, len(memo.prev))
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
	want := map[string]*totals{}
	wantNodes := map[string]*v1.Node{}
	addNode := func(name string) {
		if _, done := wantNodes[name]; done {
			return
		}
		wantNodes[name] = expectNode(name, truth, inf)
		if wantNodes[name] != nil {
			want[name] = &totals{}
		}
	}
	truth.nodes.Range(func(name string, _ nodeRecord) bool { addNode(name); return true })
	for name := range inf.nodes {
		addNode(name)
	}
	ghosts := map[string]bool{}
	checkPod := func(uid string, x expect) {
		e, inCache := snap.Pod(uid)
		if !x.present {
			if inCache {
				report("pod %s: in the cache on %q (assumed %v) but not expected (the API server does not bind it)", uid, e.Pod.Spec.NodeName, e.Assumed)
			}
			return
		}
		if !inCache && x.maybe {
			return
		}
		switch {
		case !inCache:
			report("pod %s: bound to %s but missing from the cache", uid, x.node)
		case e.Pod.Spec.NodeName != x.node:
			report("pod %s: bound to %s but on %q in the cache", uid, x.node, e.Pod.Spec.NodeName)
		case !x.assumed && e.Assumed:
			report("pod %s: bound and delivered by the informer but still assumed in the cache", uid)
		case x.assumed && !e.Assumed:
			report("pod %s: bound, not yet delivered by the informer, but not assumed in the cache", uid)
		case !x.assumed && e.Pod.ResourceVersion != x.rv:
			report("pod %s: version %q in the cache, %q delivered", uid, e.Pod.ResourceVersion, x.rv)
		}
		res.ExpectedPods++
		tot := want[x.node]
		if tot == nil {
			// An expiring pod stays on its removed node until its TTL,
			// as upstream's cache keeps it (and the node, as a ghost).
			if x.maybe {
				ghosts[x.node] = true
			} else if !inf.busy("p/"+uid) && !inf.busy("n/"+x.node) {
				report("pod %s: on %s, which is not a node of the cluster", uid, x.node)
			}
			return
		}
		req, err := memo.requests(x.pod)
		if err != nil {
			report("pod %s: %v", uid, err)
			return
		}
		tot.pods++
		tot.cpu += req.MilliCPU
		tot.mem += req.Memory
	}
	truth.pods.Range(func(uid string, r podRecord) bool {
		res.PodsChecked++
		checkPod(uid, expectPod(uid, truth, inf, ttl))
		return true
	})
	for uid := range inf.pods {
		if _, ok := truth.pods.Load(uid); !ok {
			checkPod(uid, expectPod(uid, truth, inf, ttl))
		}
	}
	snap.RangePods(func(uid string, e snapshot.PodEntry) bool {
		res.CachePods++
		_, inTruth := truth.pods.Load(uid)
		if !inTruth && inf.pods[uid] == nil {
			report("pod %s: in the cache on %q (assumed %v) but not in the API server", uid, e.Pod.Spec.NodeName, e.Assumed)
		}
		return true
	})
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		res.NodesChecked++
		wn := wantNodes[name]
		ni, err := snap.Get(name)
		if err != nil || ni.Node() == nil {
			report("node %s: missing from the cache: %v", name, err)
			continue
		}
		if got := ni.Node(); got.ResourceVersion != wn.ResourceVersion || got.Spec.Unschedulable != wn.Spec.Unschedulable {
			report("node %s: version %q (unschedulable %v) in the cache, %q (unschedulable %v) expected", name,
				got.ResourceVersion, got.Spec.Unschedulable, wn.ResourceVersion, wn.Spec.Unschedulable)
		}
		w := want[name]
		got := ni.Requested()
		if int64(ni.NumPods()) != w.pods || got.MilliCPU != w.cpu || got.Memory != w.mem {
			report("node %s: cache has %d pods, %dm cpu, %d memory; API server %d pods, %dm cpu, %d memory",
				name, ni.NumPods(), got.MilliCPU, got.Memory, w.pods, w.cpu, w.mem)
		}
	}
	if nn := snap.NumNodes(); nn != len(want) {
		report("cache lists %d nodes, %d expected", nn, len(want))
	}
	res.ExpectedNodes, res.GhostNodes = len(want), len(ghosts)
	if err := snap.Err(); err != nil {
		report("snapshot error: %v", err)
	}
	memo.prev, memo.next = memo.next, nil
	sort.Strings(problems)
	if len(problems) > maxExamples {
		problems = problems[:maxExamples]
	}
	res.Examples = problems
	res.OK = res.Divergences == 0
	return res
}
