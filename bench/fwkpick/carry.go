package fwkpick

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	scfw "github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim"
)

// The carry: InterPodAffinity's PreFilter state carried from one cycle to
// the next instead of recomputed over the whole cluster.
//
// InterPodAffinity's PreFilter reads every pod of the cluster: it counts,
// per topology pair, the existing pods whose required anti-affinity the
// incoming pod violates and the existing pods matching the incoming pod's
// required affinity and anti-affinity terms. Those counts are sums over
// pods, and upstream keeps them up to date for one pod more or less with
// the plugin's own PreFilterExtensions (AddPod, RemovePod: updateWithPod,
// what preemption and nominated pods use). So for a pod whose
// InterPodAffinity inputs equal those of the pod a state was computed for
// (namespace, labels, affinity, its namespace's labels: the fields
// PreFilter reads of the pod, the namespace lister being immutable after
// New), the state of the current snapshot is the carried state with
// RemovePod for each pod gone from a node that changed since (Snapshot.
// DiffList) and AddPod for each pod new on it. A node whose object
// changed (labels) has all its old pods removed and all its new pods
// added; a snapshot whose node list changed (a node added or removed)
// takes a fresh PreFilter. Pods are compared by identity: a published
// PodInfo is immutable, shared by every version of its node's NodeInfo
// that holds it.
//
// The carry serves only pods with required inter-pod terms of their own:
// for them PreFilter never returns Skip, whatever the counts (it skips
// only a pod without terms when no existing pod's anti-affinity matches
// it), so the carried outcome, success with no PreFilterResult, is the
// fresh one. Terms with a namespace selector (merged by PreFilter from the
// namespace lister) are not carried. The carried state is advanced in
// place and handed to the cycle as it is, not copied: the cycle's Filter
// and Score only read it; what writes to a cycle's state (AddPod for the
// pods nominated to a node, in RunFilterPluginsWithNominatedPods) writes
// to a Clone of it, as upstream's runtime clones the state first; and
// the next advance comes after the cycle has ended. The state holds the
// PodInfo of the pod it was first computed for, whose inputs (all the
// plugins read of it) are the current pod's.
//
// PodTopologySpread's state is carried too, under more conditions
// (carry_spread.go, advance).
//
// The picker hands the carry to the plugin's PreFilter through the cycle
// state (carryKey): the guarded wrapper (guard.go) of a carried plugin
// asks the carry for its PreFilter's outcome. Tested:
// TestFwkPickerCarrySameRun (same digests with the carry on and off).

// carryNames are the plugins whose PreFilter state the carry keeps.
var carryNames = []string{names.InterPodAffinity, names.PodTopologySpread}

// carryKey is the cycle-state key of a cycle's carry.
const carryKey fwk.StateKey = "fwkpick/carry"

// CarryStats is a plain value: what the carry did over a picker's cycles.
type CarryStats struct {
	Hits        int64 // PreFilter states carried (advanced, not recomputed)
	Misses      int64 // PreFilters run (no carried state fit)
	PodUpdates  int64 // AddPod and RemovePod calls that advanced a carried state
	ScoreHits   int64 // PreScores run on the carried contributing nodes only
	ScoreMisses int64 // PreScores run on the whole cluster
	Probes      int64 // PreScores run to find which nodes contribute
	Inexact     int64 // carried PodTopologySpread states whose critical paths were not the fresh ones (recomputed)
}

// Counters returns s as sim's picker counters.
func (s CarryStats) Counters() []sim.PickerCounter {
	return []sim.PickerCounter{
		{Name: "carry hits", Value: s.Hits}, {Name: "carry misses", Value: s.Misses},
		{Name: "carry pod updates", Value: s.PodUpdates},
		{Name: "carry score hits", Value: s.ScoreHits}, {Name: "carry score misses", Value: s.ScoreMisses},
		{Name: "carry probes", Value: s.Probes}, {Name: "carry inexact", Value: s.Inexact},
	}
}

// Add returns s + o.
func (s CarryStats) Add(o CarryStats) CarryStats {
	return CarryStats{s.Hits + o.Hits, s.Misses + o.Misses, s.PodUpdates + o.PodUpdates,
		s.ScoreHits + o.ScoreHits, s.ScoreMisses + o.ScoreMisses, s.Probes + o.Probes, s.Inexact + o.Inexact}
}

// carry is owned by its NodePicker's goroutine.
type carry struct {
	np        *NodePicker                 // immutable: its owner (the cycle's node list, the lister override)
	ns        corelisters.NamespaceLister // immutable
	entries   map[string][]*carried       // by plugin name: PreFilter states, the last used first (at most maxCarried)
	scores    map[string][]*scoreCarry    // by plugin name: PreScore's contributing nodes, the last used first (at most maxCarried)
	published *schedcache.Snapshot        // the cycle's published snapshot (begin sets it)
	sub       []fwk.NodeInfo              // reused: the contributing nodes of a cycle
	stats     CarryStats                  // read by NodePicker.CarryStats on the owner goroutine
}

// scoreCarry is which nodes contribute to a plugin's PreScore for pods
// of one set of inputs. Owned by the carry's goroutine.
type scoreCarry struct {
	pod      *v1.Pod              // the pod the inputs are those of
	nsLabels labels.Set           // its namespace's labels
	snap     *schedcache.Snapshot // the published snapshot contrib reflects; nil: not built
	contrib  []bool               // by position in the node list: the node's contribution is not empty
}

// carried is one plugin's PreFilter state and what it was computed for.
// All its fields are owned by the carry's goroutine.
type carried struct {
	pod      *v1.Pod                 // immutable: the pod it was computed for (its inputs)
	nsLabels labels.Set              // immutable: the pod's namespace's labels then
	snap     *schedcache.Snapshot    // the published snapshot the state reflects
	key      fwk.StateKey            // immutable: the key the plugin wrote it under
	holder   *framework.CycleState   // holds the state under key (AddPod and RemovePod take a cycle state)
	ext      fwk.PreFilterExtensions // immutable: the plugin's AddPod and RemovePod (guarded)
}

// carryMarker is the cycle state's pointer to the cycle's carry.
type carryMarker struct{ c *carry }

// Clone implements fwk.StateData: clones share the carry (the cycle's).
func (m *carryMarker) Clone() fwk.StateData { return m }

func newCarry(np *NodePicker, ns corelisters.NamespaceLister) *carry {
	return &carry{np: np, ns: ns, entries: map[string][]*carried{}, scores: map[string][]*scoreCarry{}}
}

// maxCarried bounds the sets of pod inputs a carry keeps per plugin (pods
// of several templates interleaved); the least recently used goes.
const maxCarried = 8

// take removes and returns the element of *l that match accepts, if any.
func take[T any](l *[]T, match func(T) bool) (T, bool) {
	for i, e := range *l {
		if match(e) {
			*l = append((*l)[:i], (*l)[i+1:]...)
			return e, true
		}
	}
	var zero T
	return zero, false
}

// push puts e first in *l, dropping the last beyond maxCarried.
func push[T any](l *[]T, e T) {
	*l = append([]T{e}, *l...)
	if len(*l) > maxCarried {
		*l = (*l)[:maxCarried]
	}
}

// begin marks state as a cycle on published that the carry serves.
func (c *carry) begin(state fwk.CycleState, published *schedcache.Snapshot) {
	if c == nil {
		return
	}
	c.published = published
	state.Write(carryKey, &carryMarker{c: c})
}

// carryOf returns the carry of the cycle state, or nil.
func carryOf(state fwk.CycleState) *carry {
	d, err := state.Read(carryKey)
	if err != nil {
		return nil
	}
	if m, ok := d.(*carryMarker); ok {
		return m.c
	}
	return nil
}

// carries reports whether the carry keeps plugin name's state.
func carries(name string) bool {
	for _, n := range carryNames {
		if n == name {
			return true
		}
	}
	return false
}

// carriable reports whether plugin name's state for pod can be carried.
func carriable(name string, pod *v1.Pod) bool {
	switch name {
	case names.InterPodAffinity:
		return carriableIPA(pod)
	case names.PodTopologySpread:
		return carriablePTS(pod)
	}
	return false
}

// carriableIPA reports whether pod's InterPodAffinity state can be
// carried: required terms of its own, no namespace selector, no deferred
// resize.
func carriableIPA(pod *v1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil || resource.IsPodResizeDeferred(pod) {
		return false
	}
	var req []v1.PodAffinityTerm
	var pref []v1.WeightedPodAffinityTerm
	if a.PodAffinity != nil {
		req = append(req, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		pref = append(pref, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
	}
	if a.PodAntiAffinity != nil {
		req = append(req, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		pref = append(pref, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
	}
	if len(req) == 0 {
		return false
	}
	for _, t := range req {
		if t.NamespaceSelector != nil {
			return false
		}
	}
	for _, t := range pref {
		if t.PodAffinityTerm.NamespaceSelector != nil {
			return false
		}
	}
	return true
}

// sameInputs reports whether pod's inputs to plugin name's PreFilter
// (with its namespace's labels nsLabels) are those of was (with wasNS):
// for InterPodAffinity its namespace, labels and affinity; for
// PodTopologySpread those and its spread constraints, node selector and
// tolerations (node affinity and taints policies).
func sameInputs(name string, pod *v1.Pod, nsLabels labels.Set, was *v1.Pod, wasNS labels.Set) bool {
	same := pod.Namespace == was.Namespace &&
		labels.Equals(pod.Labels, was.Labels) &&
		labels.Equals(nsLabels, wasNS) &&
		equality.Semantic.DeepEqual(pod.Spec.Affinity, was.Spec.Affinity)
	if !same || name != names.PodTopologySpread {
		return same
	}
	return equality.Semantic.DeepEqual(pod.Spec.TopologySpreadConstraints, was.Spec.TopologySpreadConstraints) &&
		labels.Equals(pod.Spec.NodeSelector, was.Spec.NodeSelector) &&
		equality.Semantic.DeepEqual(pod.Spec.Tolerations, was.Spec.Tolerations)
}

// preFilter is plugin g's PreFilter for the cycle: the carried state
// advanced to the cycle's snapshot and written into state, or the plugin's
// PreFilter run (and its state kept when it can be carried).
func (c *carry) preFilter(ctx context.Context, g *guarded, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !carriable(g.name, pod) {
		return g.runPreFilter(ctx, state, pod, nodes)
	}
	nsLabels := interpodaffinity.GetNamespaceLabelsSnapshot(klog.FromContext(ctx), pod.Namespace, c.ns)
	list := c.entries[g.name]
	if e, ok := take(&list, func(e *carried) bool { return sameInputs(g.name, pod, nsLabels, e.pod, e.nsLabels) }); ok {
		c.entries[g.name] = list
		if err := c.advance(ctx, g.name, e, pod); err == nil {
			d, err := e.holder.Read(e.key)
			if err == nil && (g.name != names.PodTopologySpread || spreadStateExact(d, c.np.nom.Len() == 0)) {
				state.Write(e.key, d)
				push(&list, e)
				c.entries[g.name] = list
				c.stats.Hits++
				return nil, nil
			}
			if err == nil {
				c.stats.Inexact++
			}
		}
		// Half advanced, unreadable or inexact: dropped, computed afresh.
	}
	c.stats.Misses++
	rec := &recordingState{CycleState: state}
	res, st := g.runPreFilter(ctx, rec, pod, nodes)
	if !st.IsSuccess() || res != nil || len(rec.keys) != 1 || c.published == nil ||
		(g.name == names.PodTopologySpread && !spreadSelectorsSet(rec.vals[0])) {
		return res, st
	}
	ext := g.PreFilterExtensions()
	if ext == nil {
		return res, st
	}
	holder := framework.NewCycleState()
	holder.Write(rec.keys[0], rec.vals[0].Clone())
	push(&list, &carried{pod: pod, nsLabels: nsLabels, snap: c.published, key: rec.keys[0], holder: holder, ext: ext})
	c.entries[g.name] = list
	return res, st
}

// advance brings e's state from e.snap to the cycle's published
// snapshot: RemovePod and AddPod for the pods of the nodes that changed.
//
// For PodTopologySpread, whose PreFilter counts the pods of each eligible
// node, zero included, and leaves terminating pods out, while its AddPod
// counts only the pods it is given, whatever their deletion: a node
// whose name, labels or taints changed (what decides whether and where
// it counts: node affinity, inclusion policies, topology values), or a
// terminating pod among those added or removed, stops the carry (a fresh
// PreFilter). A node whose object changed otherwise (its status) counts
// as before, so only its pods are compared.
func (c *carry) advance(ctx context.Context, name string, e *carried, pod *v1.Pod) error {
	cur := c.published
	if cur == nil {
		return fmt.Errorf("fwkpick: carry: no snapshot")
	}
	if e.snap == cur {
		return nil
	}
	var err error
	add := func(sign int, pi fwk.PodInfo, ni fwk.NodeInfo) {
		if err != nil {
			return
		}
		var st *fwk.Status
		if sign > 0 {
			st = e.ext.AddPod(ctx, e.holder, pod, pi, ni)
		} else {
			st = e.ext.RemovePod(ctx, e.holder, pod, pi, ni)
		}
		c.stats.PodUpdates++
		if !st.IsSuccess() {
			err = st.AsError()
		}
	}
	ok := cur.DiffList(e.snap, func(i int, now *scfw.NodeInfo) {
		old := e.snap.At(i)
		if old == nil || now == nil {
			err = fmt.Errorf("fwkpick: carry: node %d missing", i)
			return
		}
		o, n := fwkadapter.WrapNode(old), fwkadapter.WrapNode(now)
		op, np := o.GetPods(), n.GetPods()
		spread := name == names.PodTopologySpread
		if spread && old.Node() != now.Node() && !sameSpreadNode(old.Node(), now.Node()) {
			err = fmt.Errorf("fwkpick: carry: node %s changed", now.Node().Name)
			return
		}
		if !spread && old.Node() != now.Node() {
			for _, p := range op {
				add(-1, p, o)
			}
			for _, p := range np {
				add(+1, p, n)
			}
			return
		}
		for _, p := range op {
			if !holds(np, p) {
				if spread && p.GetPod().DeletionTimestamp != nil {
					err = fmt.Errorf("fwkpick: carry: terminating pod %s", p.GetPod().Name)
				}
				add(-1, p, o)
			}
		}
		for _, p := range np {
			if !holds(op, p) {
				if spread && p.GetPod().DeletionTimestamp != nil {
					err = fmt.Errorf("fwkpick: carry: terminating pod %s", p.GetPod().Name)
				}
				add(+1, p, n)
			}
		}
	})
	if !ok {
		return fmt.Errorf("fwkpick: carry: the node list changed")
	}
	if err != nil {
		return err
	}
	e.snap = cur
	return nil
}

// sameSpreadNode reports whether a and b have the same name, labels and
// taints.
func sameSpreadNode(a, b *v1.Node) bool {
	return a != nil && b != nil && a.Name == b.Name && labels.Equals(a.Labels, b.Labels) &&
		equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints)
}

// holds reports whether pods has p (by identity).
func holds(pods []fwk.PodInfo, p fwk.PodInfo) bool {
	for _, q := range pods {
		if q == p {
			return true
		}
	}
	return false
}

// recordingState is a cycle state that records what is written to it.
type recordingState struct {
	fwk.CycleState
	keys []fwk.StateKey
	vals []fwk.StateData
}

func (r *recordingState) Write(key fwk.StateKey, val fwk.StateData) {
	r.keys = append(r.keys, key)
	r.vals = append(r.vals, val)
	r.CycleState.Write(key, val)
}

// preScore is plugin g's PreScore for the cycle: run with the framework's
// List and HavePodsWithAffinityList giving only the nodes whose
// contribution to its state is not empty, found for the pod's inputs on
// their second cycle and kept up to date for the nodes that changed since.
//
// InterPodAffinity's PreScore sums, over the nodes of one of those two
// lists, each node's scores (processExistingPod over its pods: the
// node's own NodeInfo and the pod's inputs, nothing else), and skips when
// no node gave any; it reads nothing else of the cluster, not even the
// feasible nodes it is given. So run on the contributing nodes alone it
// writes the same state and skips when the whole cluster would. Which
// nodes contribute is the plugin's own answer: run on a set of nodes it
// skips exactly when none of them contributes, so halving the sets it
// does not skip finds them (probes).
func (c *carry) preScore(ctx context.Context, g *guarded, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	all := c.np.all
	if g.name != names.InterPodAffinity || !carriable(g.name, pod) || c.published == nil || all == nil || c.np.listOverride != nil {
		return g.runPreScore(ctx, state, pod, nodes)
	}
	nsLabels := interpodaffinity.GetNamespaceLabelsSnapshot(klog.FromContext(ctx), pod.Namespace, c.ns)
	list := c.scores[g.name]
	e, ok := take(&list, func(e *scoreCarry) bool { return sameInputs(g.name, pod, nsLabels, e.pod, e.nsLabels) })
	if !ok {
		// The first cycle of these inputs runs plainly: pods that never
		// repeat cost no probes.
		push(&list, &scoreCarry{pod: pod, nsLabels: nsLabels})
		c.scores[g.name] = list
		c.stats.ScoreMisses++
		return g.runPreScore(ctx, state, pod, nodes)
	}
	c.scores[g.name] = list
	var pos []int
	if e.snap == nil || len(e.contrib) != len(all) || !c.published.DiffList(e.snap, func(i int, _ *scfw.NodeInfo) { pos = append(pos, i) }) {
		e.contrib = make([]bool, len(all))
		pos = make([]int, len(all))
		for i := range pos {
			pos[i] = i
		}
	}
	if err := c.probe(ctx, g, pod, e, pos); err != nil {
		c.stats.ScoreMisses++
		return g.runPreScore(ctx, state, pod, nodes)
	}
	e.snap = c.published
	push(&list, e)
	c.scores[g.name] = list
	sub := c.sub[:0]
	for i, ok := range e.contrib {
		if ok {
			sub = append(sub, all[i])
		}
	}
	if sub == nil {
		sub = []fwk.NodeInfo{}
	}
	c.sub = sub
	c.stats.ScoreHits++
	c.np.listOverride = sub
	defer func() { c.np.listOverride = nil }()
	return g.runPreScore(ctx, state, pod, nodes)
}

// probe sets e.contrib for the nodes at positions pos of the cycle's
// list: the plugin's PreScore on them (on a cycle state of its own)
// skips when none contributes; otherwise each half is probed.
func (c *carry) probe(ctx context.Context, g *guarded, pod *v1.Pod, e *scoreCarry, pos []int) error {
	if len(pos) == 0 {
		return nil
	}
	list := make([]fwk.NodeInfo, len(pos))
	for j, i := range pos {
		list[j] = c.np.all[i]
	}
	c.np.listOverride = list
	st := g.runPreScore(ctx, framework.NewCycleState(), pod, list)
	c.np.listOverride = nil
	c.stats.Probes++
	switch {
	case st.IsSkip():
		for _, i := range pos {
			e.contrib[i] = false
		}
		return nil
	case !st.IsSuccess():
		return st.AsError()
	case len(pos) == 1:
		e.contrib[pos[0]] = true
		return nil
	}
	h := len(pos) / 2
	if err := c.probe(ctx, g, pod, e, pos[:h]); err != nil {
		return err
	}
	return c.probe(ctx, g, pod, e, pos[h:])
}
