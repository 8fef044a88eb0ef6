package sim

import (
	"container/heap"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache/workload"
)

type actKind uint8

const (
	actPodUpdate  actKind = iota // Poisson: a delivered pod gets a new version
	actPodDelete                 // Poisson: a delivered pod is deleted
	actNodeAdd                   // Poisson: a new node joins
	actNodeRemove                // Poisson: a node is drained, then removed
	actDrain                     // Poisson: a node is drained, then uncordoned after DrainFor
	actNotReady                  // Poisson: a node goes NotReady for NotReadyFor
	actZoneMove                  // Poisson: a node's zone label changes
	actZoneOutage                // periodic: every node of a zone goes NotReady for ZoneOutageFor
	actEvict                     // follow-up: evict the pods of a cordoned node
	actRemove                    // follow-up: remove an evicted node
	actUncordon                  // follow-up: uncordon a drained node
	actReady                     // follow-up: a NotReady node (or zone) is Ready again
	actExpiry                    // once: the expiry storm
	actComplete                  // a running pod completes (lifecycle.go)
)

// action is a plain value owned by the apiServer's owner: one churn step
// due at a time.
type action struct {
	at     time.Duration
	seq    uint64
	kind   actKind
	node   string
	remove bool     // actEvict: remove the node afterwards
	nodes  []string // actReady of a zone outage
	pod    *v1.Pod  // actComplete
	failed bool     // actComplete: the pod ends Failed
}

// actionHeap is a min-heap by (at, seq), owned by the apiServer's owner.
type actionHeap []action

func (q actionHeap) Len() int { return len(q) }
func (q actionHeap) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q actionHeap) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *actionHeap) Push(x any)   { *q = append(*q, x.(action)) }
func (q *actionHeap) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// ChurnCounts is a plain value, owned by whoever holds it: what the
// simulated API server changed.
type ChurnCounts struct {
	PodUpdates     int64 `json:"pod_updates"`
	PodDeletes     int64 `json:"pod_deletes"` // beyond the one per confirmation
	NodeAdds       int64 `json:"node_adds"`
	NodeRemoves    int64 `json:"node_removes"`
	Drains         int64 `json:"drains"`
	Evictions      int64 `json:"evictions"`
	NotReady       int64 `json:"not_ready"`
	ZoneOutages    int64 `json:"zone_outages"`
	ZoneMoves      int64 `json:"zone_moves"`
	Heartbeats     int64 `json:"heartbeats"`
	Postponed      int64 `json:"postponed"` // evictions or removals waiting for the informer
	ExpiryAssumed  int64 `json:"expiry_assumed"`
	ConfirmDeletes int64 `json:"confirm_deletes"` // one old pod per confirmation
}

type nodeState uint8

const (
	nsReady nodeState = iota
	nsNotReady
	nsDraining
	nsRemoved
)

// apiServer is the simulated API server's own actors: the controller that
// deletes an old pod per confirmed one, node heartbeats, and the churn of
// the scenario (pod updates and deletes, nodes added, removed, drained,
// NotReady, moved between zones, zone outages, the expiry storm). It
// writes the truth and emits the watch events.
//
// Contract: used by one goroutine at a time (the API server goroutine in
// real time, the event loop in deterministic mode), which also owns the
// informer.
type apiServer struct {
	cfg    Config                                         // immutable
	truth  *Truth                                         // shared, concurrent
	inf    *informer                                      // owned with the apiServer
	cl     *workload.Cluster                              // immutable: the generated cluster, for new nodes and pods of its shape
	zones  []string                                       // immutable: the zones of the initial cluster, sorted
	assume func(p *v1.Pod, node string) error             // immutable: the expiry storm's AssumePod + FinishBinding
	note   func(at time.Duration, what, obj, node string) // immutable; nil: none
	// onComplete is called as a pod completes (lifecycle.go), before its
	// deletion; immutable once the run starts; nil: none.
	onComplete func(now time.Duration, p *v1.Pod, failed bool)

	r        *rand.Rand           // owned
	live     []*v1.Pod            // owned: delivered pods, candidates for updates and deletes
	gone     map[string]bool      // owned: UIDs in live that were evicted
	names    []string             // owned: every node ever, in order of arrival
	state    map[string]nodeState // owned
	timeline actionHeap           // owned
	seq      uint64               // owned
	nodeIdx  int                  // owned: the next new node's index
	rv       uint64               // owned: the next resource version
	events   int64                // owned: pod events delivered, for heartbeats
	stopped  bool                 // owned: no new churn (the run is over)
	counts   ChurnCounts          // owned
	life     *lifecycle           // owned (its submits: concurrent); nil: no pod lifecycle
}

func newAPIServer(cfg Config, truth *Truth, inf *informer, cl *workload.Cluster) *apiServer {
	a := &apiServer{
		cfg: cfg, truth: truth, inf: inf, cl: cl,
		r:       rand.New(rand.NewPCG(uint64(cfg.Seed), 0xa9)),
		live:    append([]*v1.Pod(nil), cl.Pods...),
		gone:    map[string]bool{},
		state:   make(map[string]nodeState, len(cl.Nodes)),
		names:   make([]string, 0, len(cl.Nodes)),
		nodeIdx: len(cl.Nodes), rv: 1000,
		life: newLifecycle(cfg),
	}
	zs := map[string]bool{}
	for _, n := range cl.Nodes {
		a.names = append(a.names, n.Name)
		a.state[n.Name] = nsReady
		zs[n.Labels[v1.LabelTopologyZone]] = true
	}
	for z := range zs {
		a.zones = append(a.zones, z)
	}
	sort.Strings(a.zones)
	for _, k := range []actKind{actPodUpdate, actPodDelete, actNodeAdd, actNodeRemove, actDrain, actNotReady, actZoneMove} {
		if rate := a.rate(k); rate > 0 {
			a.push(action{at: a.gap(rate), kind: k})
		}
	}
	if cfg.ZoneOutageEvery > 0 {
		a.push(action{at: cfg.ZoneOutageEvery, kind: actZoneOutage})
	}
	if cfg.ExpiryPods > 0 {
		a.push(action{at: cfg.ExpiryAt, kind: actExpiry})
	}
	return a
}

func (a *apiServer) rate(k actKind) float64 {
	switch k {
	case actPodUpdate:
		return a.cfg.PodUpdateRate
	case actPodDelete:
		return a.cfg.PodDeleteRate
	case actNodeAdd:
		return a.cfg.NodeAddRate
	case actNodeRemove:
		return a.cfg.NodeRemoveRate
	case actDrain:
		return a.cfg.DrainRate
	case actNotReady:
		return a.cfg.NotReadyRate
	case actZoneMove:
		return a.cfg.ZoneMoveRate
	}
	return 0
}

func (a *apiServer) gap(rate float64) time.Duration {
	return max(time.Duration(a.r.ExpFloat64()/rate*float64(time.Second)), 1)
}

func (a *apiServer) push(x action) {
	x.seq = a.seq
	a.seq++
	heap.Push(&a.timeline, x)
}

// next returns when the next action is due, or -1.
func (a *apiServer) next() time.Duration {
	if a.stopped || len(a.timeline) == 0 {
		return -1
	}
	return a.timeline[0].at
}

// stop ends the churn: no action runs any more.
func (a *apiServer) stop() { a.stopped = true }

func (a *apiServer) noted(at time.Duration, what, obj, node string) {
	if a.note != nil {
		a.note(at, what, obj, node)
	}
}

func (a *apiServer) nextRV() string {
	a.rv++
	return strconv.FormatUint(a.rv, 10)
}

// runDue runs every action due by now.
func (a *apiServer) runDue(now time.Duration) error {
	for !a.stopped && len(a.timeline) > 0 && a.timeline[0].at <= now {
		x := heap.Pop(&a.timeline).(action)
		if rate := a.rate(x.kind); rate > 0 {
			a.push(action{at: x.at + a.gap(rate), kind: x.kind})
		}
		if err := a.do(x); err != nil {
			return err
		}
	}
	return nil
}

func (a *apiServer) do(x action) error {
	now := x.at
	switch x.kind {
	case actPodUpdate:
		i, ok := a.pickLive()
		if !ok {
			return nil
		}
		old := a.live[i]
		np := *old
		np.Labels = maps.Clone(old.Labels)
		if np.Labels == nil {
			np.Labels = map[string]string{}
		}
		np.ResourceVersion = a.nextRV()
		np.Labels["sim.schedcache.io/revision"] = np.ResourceVersion
		a.live[i] = &np
		a.truth.update(&np)
		a.inf.emitPod(now, &np, false)
		a.counts.PodUpdates++
		a.noted(now, "api-update", np.Name, np.ResourceVersion)
	case actPodDelete:
		if v := a.popLive(); v != nil {
			a.deletePod(now, v)
			a.counts.PodDeletes++
		}
	case actNodeAdd:
		a.addNode(now)
	case actNodeRemove, actDrain:
		name, ok := a.pickNode(nsReady)
		if !ok {
			return nil
		}
		a.setNode(now, name, nsDraining, func(n *v1.Node) {
			n.Spec.Unschedulable = true
			// A node of cluster.unschedulable is cordoned already: one taint.
			n.Spec.Taints = append(withoutTaint(n.Spec.Taints, v1.TaintNodeUnschedulable), v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
		})
		a.counts.Drains++
		a.push(action{at: now + a.cfg.DrainGrace, kind: actEvict, node: name, remove: x.kind == actNodeRemove})
	case actEvict:
		pods, unseen := a.podsOn(x.node)
		if unseen {
			// A binding to the node is not delivered yet: wait for it, so
			// that every pod of the node is deleted after it was seen.
			a.counts.Postponed++
			a.push(action{at: now + max(a.cfg.DrainGrace, time.Millisecond), kind: actEvict, node: x.node, remove: x.remove})
			return nil
		}
		for _, p := range pods {
			a.gone[string(p.UID)] = true
			a.deletePod(now, p)
			a.counts.Evictions++
		}
		switch {
		case x.remove:
			a.push(action{at: now + max(a.cfg.DrainGrace, time.Millisecond), kind: actRemove, node: x.node})
		case a.cfg.DrainFor > 0:
			a.push(action{at: now + a.cfg.DrainFor, kind: actUncordon, node: x.node})
		}
	case actRemove:
		if a.onNodeInStore(x.node) {
			a.counts.Postponed++
			a.push(action{at: now + max(a.cfg.DrainGrace, time.Millisecond), kind: actRemove, node: x.node})
			return nil
		}
		r, ok := a.truth.nodes.Load(x.node)
		if !ok {
			return nil
		}
		a.truth.removeNode(x.node)
		a.state[x.node] = nsRemoved
		a.inf.emitNode(now, r.Node, true)
		a.counts.NodeRemoves++
		a.noted(now, "api-node-remove", "", x.node)
	case actUncordon:
		if a.state[x.node] != nsDraining {
			return nil
		}
		a.setNode(now, x.node, nsReady, func(n *v1.Node) {
			n.Spec.Unschedulable = false
			n.Spec.Taints = withoutTaint(n.Spec.Taints, v1.TaintNodeUnschedulable)
		})
	case actNotReady:
		name, ok := a.pickNode(nsReady)
		if !ok {
			return nil
		}
		a.notReady(now, name)
		a.push(action{at: now + a.cfg.NotReadyFor, kind: actReady, nodes: []string{name}})
	case actZoneOutage:
		zone := a.zones[int(a.counts.ZoneOutages)%len(a.zones)]
		a.counts.ZoneOutages++
		var down []string
		for _, name := range a.names {
			if a.state[name] != nsReady {
				continue
			}
			if r, ok := a.truth.nodes.Load(name); ok && r.Node.Labels[v1.LabelTopologyZone] == zone {
				a.notReady(now, name)
				down = append(down, name)
			}
		}
		a.noted(now, "api-zone-outage", zone, strconv.Itoa(len(down)))
		a.push(action{at: now + a.cfg.ZoneOutageFor, kind: actReady, nodes: down})
		a.push(action{at: now + a.cfg.ZoneOutageEvery, kind: actZoneOutage})
	case actReady:
		for _, name := range x.nodes {
			if a.state[name] != nsNotReady {
				continue
			}
			a.setNode(now, name, nsReady, func(n *v1.Node) {
				n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(virtualEpoch.Add(now))}}
				n.Spec.Taints = withoutTaint(n.Spec.Taints, v1.TaintNodeNotReady)
			})
		}
	case actZoneMove:
		name, ok := a.pickNode(nsReady)
		if !ok || len(a.zones) < 2 {
			return nil
		}
		r, _ := a.truth.nodes.Load(name)
		cur := r.Node.Labels[v1.LabelTopologyZone]
		zone := a.zones[a.r.IntN(len(a.zones))]
		if zone == cur {
			zone = a.zones[(a.r.IntN(len(a.zones)-1)+1+indexOf(a.zones, cur))%len(a.zones)]
		}
		a.setNode(now, name, nsReady, func(n *v1.Node) {
			n.Labels = maps.Clone(n.Labels)
			n.Labels[v1.LabelTopologyZone] = zone
		})
		a.counts.ZoneMoves++
	case actComplete:
		a.complete(now, x)
	case actExpiry:
		for i := 0; i < a.cfg.ExpiryPods; i++ {
			name, ok := a.pickNode(nsReady)
			if !ok {
				break
			}
			pod := a.cl.NewPod(a.r, fmt.Sprintf("expiry-%d", i), name)
			a.truth.Expire(pod, name)
			if err := a.assume(pod, name); err != nil {
				return fmt.Errorf("expiry storm: %w", err)
			}
			a.counts.ExpiryAssumed++
		}
	}
	return nil
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return 0
}

func withoutTaint(ts []v1.Taint, key string) []v1.Taint {
	var out []v1.Taint
	for _, t := range ts {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}

func (a *apiServer) notReady(now time.Duration, name string) {
	a.setNode(now, name, nsNotReady, func(n *v1.Node) {
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "NodeStatusUnknown", LastHeartbeatTime: metav1.NewTime(virtualEpoch.Add(now))}}
		n.Spec.Taints = append(append([]v1.Taint(nil), n.Spec.Taints...), v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule})
	})
	a.counts.NotReady++
}

// setNode stores a new version of node name made by mutate (on a shallow
// copy: mutate replaces what it changes) and emits it.
func (a *apiServer) setNode(now time.Duration, name string, st nodeState, mutate func(n *v1.Node)) {
	r, ok := a.truth.nodes.Load(name)
	if !ok {
		return
	}
	nn := *r.Node
	mutate(&nn)
	nn.ResourceVersion = a.nextRV()
	a.truth.setNode(&nn, st == nsDraining)
	a.state[name] = st
	a.inf.emitNode(now, &nn, false)
	a.noted(now, "api-node-set", strconv.Itoa(int(st)), name)
}

func (a *apiServer) addNode(now time.Duration) {
	i := a.nodeIdx
	a.nodeIdx++
	n := a.cl.NewNode(a.r, i)
	n.Name = fmt.Sprintf("churn-node-%06d", i)
	n.UID = types.UID("uid-" + n.Name)
	n.Labels = maps.Clone(n.Labels)
	n.Labels[v1.LabelHostname] = n.Name
	n.Labels[v1.LabelTopologyZone] = a.zones[a.r.IntN(len(a.zones))]
	n.ResourceVersion = a.nextRV()
	a.truth.setNode(n, false)
	a.names = append(a.names, n.Name)
	a.state[n.Name] = nsReady
	a.inf.emitNode(now, n, false)
	a.counts.NodeAdds++
	a.noted(now, "api-node-add", "", n.Name)
}

// pickNode draws a node in state st (a few tries), or fails.
func (a *apiServer) pickNode(st nodeState) (string, bool) {
	for try := 0; try < 16 && len(a.names) > 0; try++ {
		name := a.names[a.r.IntN(len(a.names))]
		if a.state[name] == st {
			return name, true
		}
	}
	return "", false
}

// podsOn returns the pods the informer has delivered on node, sorted by
// UID, and whether the node has a pod bound in the API server that the
// informer has not delivered there yet, or a pod with events in flight.
func (a *apiServer) podsOn(node string) (pods []*v1.Pod, unseen bool) {
	m := a.inf.byNode[node]
	for uid, p := range m {
		if a.inf.busy("p/" + uid) {
			unseen = true
		}
		pods = append(pods, p)
	}
	if a.truth.bound(node) != int64(len(pods)) {
		unseen = true
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].UID < pods[j].UID })
	return pods, unseen
}

// onNodeInStore says whether the informer still holds a pod on node (its
// deletion not delivered yet) or events of the node are in flight.
func (a *apiServer) onNodeInStore(node string) bool {
	return a.inf.busy("n/"+node) || len(a.inf.byNode[node]) > 0
}

func (a *apiServer) deletePod(now time.Duration, p *v1.Pod) {
	a.truth.Delete(p)
	a.inf.emitPod(now, p, true)
	a.noted(now, "api-delete", p.Name, p.Spec.NodeName)
}

// pickLive returns the index of a random live pod not evicted.
func (a *apiServer) pickLive() (int, bool) {
	for len(a.live) > 0 {
		i := a.r.IntN(len(a.live))
		if !a.gone[string(a.live[i].UID)] {
			return i, true
		}
		a.dropLive(i)
	}
	return 0, false
}

func (a *apiServer) dropLive(i int) {
	delete(a.gone, string(a.live[i].UID))
	a.live[i] = a.live[len(a.live)-1]
	a.live = a.live[:len(a.live)-1]
}

// popLive removes and returns a random live pod, or nil.
func (a *apiServer) popLive() *v1.Pod {
	i, ok := a.pickLive()
	if !ok {
		return nil
	}
	v := a.live[i]
	a.dropLive(i)
	return v
}

// delivered is the informer's onAdd: the pod joins the live pods; unless
// KeepPods or the pod has a lifecycle (lifecycle.go: it starts to run),
// an old pod is deleted for it; every 100 pod events a node
// sends a heartbeat.
func (a *apiServer) delivered(now time.Duration, p *v1.Pod) error {
	a.live = append(a.live, p)
	a.events++
	if !a.startLife(now, p) && !a.cfg.KeepPods {
		if v := a.popLive(); v != nil {
			a.deletePod(now, v)
			a.counts.ConfirmDeletes++
			a.events++
		}
	}
	if a.events%100 < 2 && len(a.names) > 0 {
		name := a.names[a.r.IntN(len(a.names))]
		if st := a.state[name]; st != nsRemoved {
			a.setNode(now, name, st, func(n *v1.Node) {
				conds := append([]v1.NodeCondition(nil), n.Status.Conditions...)
				for k := range conds {
					conds[k].LastHeartbeatTime = metav1.NewTime(virtualEpoch.Add(now))
				}
				n.Status.Conditions = conds
			})
			a.counts.Heartbeats++
		}
	}
	return nil
}

// simDispatcher is the simulated API dispatcher of BindPod: each binding
// takes BindLatency, fails with probability FailRate, and otherwise goes
// to the API server, which refuses it when the node is gone or draining
// (ErrBindRefused) and else binds the pod and emits its watch event.
//
// Contract: DispatchBinding is safe for concurrent use and never blocks
// for long. In real time with a latency, run (started by the run, which
// closes calls to stop it) executes the calls in order; without one, and
// in deterministic mode through take, the caller executes them.
type simDispatcher struct {
	truth   *Truth               // shared, concurrent
	inf     *informer            // emit only
	latency time.Duration        // immutable
	fail    float64              // immutable
	det     bool                 // immutable: calls are queued for the event loop
	now     func() time.Duration // immutable once the run starts: run time for watch events

	mu      sync.Mutex
	r       *rand.Rand         // guarded by mu
	pending []*dispatchCall    // guarded by mu: deterministic mode's queued calls
	calls   chan *dispatchCall // real time with latency: to run
}

// dispatchCall is one queued binding, owned by the dispatcher until it
// executes it (then the caller reads onFinish).
type dispatchCall struct {
	b        *v1.Binding
	onFinish chan<- error
	due      time.Time
}

var errBindFailed = fmt.Errorf("sim: simulated binding failure")

func (d *simDispatcher) DispatchBinding(b *v1.Binding, onFinish chan<- error) error {
	c := &dispatchCall{b: b, onFinish: onFinish}
	switch {
	case d.det:
		d.mu.Lock()
		d.pending = append(d.pending, c)
		d.mu.Unlock()
	case d.latency > 0:
		c.due = time.Now().Add(d.latency)
		d.calls <- c
	default:
		d.execute(c)
	}
	return nil
}

// take returns the calls queued in deterministic mode.
func (d *simDispatcher) take() []*dispatchCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pending
	d.pending = nil
	return p
}

func (d *simDispatcher) execute(c *dispatchCall) {
	d.mu.Lock()
	failed := d.r.Float64() < d.fail
	d.mu.Unlock()
	var err error
	if failed {
		err = errBindFailed
	} else {
		var pod *v1.Pod
		pod, err = d.truth.tryBind(string(c.b.UID), c.b.Target.Name)
		if err == nil {
			d.inf.emitPod(d.now(), pod, false)
		}
	}
	c.onFinish <- err // BindPod's channel has one slot, written once
}

// run executes the queued calls after their latency until calls is
// closed.
func (d *simDispatcher) run() {
	for c := range d.calls {
		if w := time.Until(c.due); w > 0 {
			time.Sleep(w)
		}
		d.execute(c)
	}
}

func bindingOf(pod *v1.Pod, node string) *v1.Binding {
	return &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}
}
