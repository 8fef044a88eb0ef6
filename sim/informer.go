package sim

import (
	"container/heap"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/sim/trace"
)

// cacheOps is how the informer hands events to the cache: asynchronously
// in real time (the informer adapter's path), synchronously and recorded
// in deterministic mode. Implementations are used by one goroutine at a
// time (the informer's owner).
type cacheOps interface {
	addPod(p *v1.Pod) error
	updatePod(o, n *v1.Pod) error
	removePod(p *v1.Pod) error
	addNode(n *v1.Node) error
	updateNode(o, n *v1.Node) error
	removeNode(n *v1.Node) error
}

// asyncOps submits every event through the cache's Async methods.
type asyncOps struct{ c *schedcache.Cache } // immutable

func (a asyncOps) addPod(p *v1.Pod) error         { return a.c.AddPodAsync(p) }
func (a asyncOps) updatePod(o, n *v1.Pod) error   { return a.c.UpdatePodAsync(o, n) }
func (a asyncOps) removePod(p *v1.Pod) error      { return a.c.RemovePodAsync(p) }
func (a asyncOps) addNode(n *v1.Node) error       { return a.c.AddNodeAsync(n) }
func (a asyncOps) updateNode(o, n *v1.Node) error { return a.c.UpdateNodeAsync(o, n) }
func (a asyncOps) removeNode(n *v1.Node) error    { return a.c.RemoveNodeAsync(n) }

// syncOps makes synchronous calls and records each with its result.
type syncOps struct {
	c   *schedcache.Cache                     // immutable
	rec func(r trace.Record, err error) error // immutable
}

func (s syncOps) addPod(p *v1.Pod) error {
	return s.rec(trace.Record{Op: trace.AddPod, Pod: p}, s.c.AddPod(klog.Background(), p))
}
func (s syncOps) updatePod(o, n *v1.Pod) error {
	return s.rec(trace.Record{Op: trace.UpdatePod, OldPod: o, Pod: n}, s.c.UpdatePod(klog.Background(), o, n))
}
func (s syncOps) removePod(p *v1.Pod) error {
	return s.rec(trace.Record{Op: trace.RemovePod, Pod: p}, s.c.RemovePod(klog.Background(), p))
}
func (s syncOps) addNode(n *v1.Node) error {
	_, err := s.c.AddNode(klog.Background(), n)
	return s.rec(trace.Record{Op: trace.AddNode, Node: n}, err)
}
func (s syncOps) updateNode(o, n *v1.Node) error {
	_, err := s.c.UpdateNode(klog.Background(), o, n)
	return s.rec(trace.Record{Op: trace.UpdateNode, OldNode: o, Node: n}, err)
}
func (s syncOps) removeNode(n *v1.Node) error {
	return s.rec(trace.Record{Op: trace.RemoveNode, Node: n}, s.c.RemoveNode(klog.Background(), n))
}

// watchEvent is one change of the simulated API server as its watch
// delivers it: the object's new state, or its deletion. A plain value,
// owned by whoever holds it (the emitter, then the informer's owner); the
// objects it points to are immutable.
type watchEvent struct {
	at      time.Duration // when the API server made the change (run time)
	due     time.Duration // when the informer delivers it
	seq     uint64
	key     string // "p/"+UID or "n/"+name
	pod     *v1.Pod
	node    *v1.Node
	deleted bool
}

// watchHeap is a min-heap by (due, seq), owned by the informer's owner.
type watchHeap []watchEvent

func (q watchHeap) Len() int { return len(q) }
func (q watchHeap) Less(i, j int) bool {
	if q[i].due != q[j].due {
		return q[i].due < q[j].due
	}
	return q[i].seq < q[j].seq
}
func (q watchHeap) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *watchHeap) Push(x any)   { *q = append(*q, x.(watchEvent)) }
func (q *watchHeap) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// pendKey is a plain value owned by the informer's owner: one object's
// buffered events.
type pendKey struct {
	n    int           // events of the key buffered
	last time.Duration // the latest due time among them
}

// InformerCounts is a plain value, owned by whoever holds it: what the
// simulated informer did.
type InformerCounts struct {
	PodAdds     int64 `json:"pod_adds"`
	PodUpdates  int64 `json:"pod_updates"`
	PodDeletes  int64 `json:"pod_deletes"`
	NodeAdds    int64 `json:"node_adds"`
	NodeUpdates int64 `json:"node_updates"`
	NodeDeletes int64 `json:"node_deletes"`
	Dropped     int64 `json:"dropped"`    // events lost in a drop window
	Relists     int64 `json:"relists"`    // relists made
	Tombstones  int64 `json:"tombstones"` // deletes a relist delivered as DeletedFinalStateUnknown
	Skipped     int64 `json:"skipped"`    // deletes of objects the store never held
}

// informer is the simulated informer: it buffers the API server's watch
// events, delivers each Delay (+ a uniform [0, Jitter)) after the change,
// so that events of different objects are reordered within the jitter
// while one object's events keep their order (as a real watch), drops the
// events falling in a drop window and relists at the window's end. Like
// client-go it keeps a store of the objects it has delivered: an event of
// an object in the store is an update, of one not in it an add; a relist
// compares the store with the API server and delivers the differences,
// deletions as tombstones (DeletedFinalStateUnknown, whose object may be
// stale: the cache removes it anyway, as kube/informer's adapter does).
//
// Contract: emit is safe for concurrent use (producers call it while they
// hold the world's read lock); every other method is called by the
// informer's owner only (the API server goroutine in real time, the event
// loop in deterministic mode), or by an auditor holding the world's write
// lock.
type informer struct {
	delay, jitter      time.Duration                                  // immutable
	dropEvery, dropFor time.Duration                                  // immutable
	limit              time.Duration                                  // immutable: no drop windows from here on
	ops                cacheOps                                       // immutable
	onAdd              func(now time.Duration, p *v1.Pod) error       // immutable; called after a pod's add is delivered
	onEvent            func(now time.Duration)                        // immutable; nil: none. Called after a cluster event the scheduling queue moves pods on (queue.go) is delivered
	note               func(at time.Duration, what, obj, node string) // immutable; nil: none

	mu   sync.Mutex    // guards in
	in   []watchEvent  // emitted, not yet buffered; guarded by mu
	wake chan struct{} // cap 1: signalled by emit

	r      *rand.Rand          // owned by the owner
	buf    watchHeap           // owned by the owner
	seq    uint64              // owned by the owner
	pend   map[string]*pendKey // owned by the owner
	dirty  map[string]bool     // owned by the owner: keys with events dropped since the last relist
	pods   map[string]*v1.Pod  // owned by the owner: the store's pods by UID
	nodes  map[string]*v1.Node // owned by the owner: the store's nodes by name
	counts InformerCounts      // owned by the owner
	// byNode indexes the store's pods by node (only with drains or
	// removals, which evict a node's pods); owned by the owner.
	byNode map[string]map[string]*v1.Pod
	win    *windows // owned by the owner; nil: none. Counts the events delivered per window
}

func newInformer(cfg Config, ops cacheOps, seed int64) *informer {
	inf := &informer{
		delay: cfg.ConfirmDelay, jitter: cfg.InformerJitter, dropEvery: cfg.DropEvery, dropFor: cfg.DropFor, limit: cfg.limit(),
		ops: ops, wake: make(chan struct{}, 1),
		r:    rand.New(rand.NewPCG(uint64(seed), 0x1f0)),
		pend: map[string]*pendKey{}, dirty: map[string]bool{},
		pods: map[string]*v1.Pod{}, nodes: map[string]*v1.Node{},
	}
	if cfg.DrainRate > 0 || cfg.NodeRemoveRate > 0 {
		inf.byNode = map[string]map[string]*v1.Pod{}
	}
	return inf
}

// index keeps byNode (when on) for pod p stored or, with del, deleted.
func (inf *informer) index(p *v1.Pod, del bool) {
	if inf.byNode == nil {
		return
	}
	m := inf.byNode[p.Spec.NodeName]
	if del {
		delete(m, string(p.UID))
		if len(m) == 0 {
			delete(inf.byNode, p.Spec.NodeName)
		}
		return
	}
	if m == nil {
		m = map[string]*v1.Pod{}
		inf.byNode[p.Spec.NodeName] = m
	}
	m[string(p.UID)] = p
}

// load puts the initial cluster into the store (it was listed at start).
func (inf *informer) load(nodes []*v1.Node, pods []*v1.Pod) {
	for _, n := range nodes {
		inf.nodes[n.Name] = n
	}
	for _, p := range pods {
		inf.pods[string(p.UID)] = p
		inf.index(p, false)
	}
}

func podKey(p *v1.Pod) string   { return "p/" + string(p.UID) }
func nodeKey(n *v1.Node) string { return "n/" + n.Name }

// emit hands the API server's change to the watch.
func (inf *informer) emit(at time.Duration, ev watchEvent) {
	ev.at = at
	inf.mu.Lock()
	inf.in = append(inf.in, ev)
	inf.mu.Unlock()
	select {
	case inf.wake <- struct{}{}:
	default:
	}
}

func (inf *informer) emitPod(at time.Duration, p *v1.Pod, deleted bool) {
	inf.emit(at, watchEvent{key: podKey(p), pod: p, deleted: deleted})
}

func (inf *informer) emitNode(at time.Duration, n *v1.Node, deleted bool) {
	inf.emit(at, watchEvent{key: nodeKey(n), node: n, deleted: deleted})
}

// intake moves the emitted events into the delivery buffer, giving each
// its due time.
func (inf *informer) intake() {
	inf.mu.Lock()
	in := inf.in
	inf.in = nil
	inf.mu.Unlock()
	for _, ev := range in {
		ev.due = ev.at + inf.delay
		if inf.jitter > 0 {
			ev.due += time.Duration(inf.r.Int64N(int64(inf.jitter)))
		}
		pk := inf.pend[ev.key]
		if pk == nil {
			pk = &pendKey{}
			inf.pend[ev.key] = pk
		}
		if pk.n > 0 && ev.due < pk.last {
			ev.due = pk.last // one object's events keep their order
		}
		pk.n++
		pk.last = ev.due
		ev.seq = inf.seq
		inf.seq++
		heap.Push(&inf.buf, ev)
	}
}

// next returns the due time of the earliest buffered event, or -1.
func (inf *informer) next() time.Duration {
	if len(inf.buf) == 0 {
		return -1
	}
	return inf.buf[0].due
}

// busy says whether key has events buffered, or dropped since the last
// relist: the cache may lag the API server for it.
func (inf *informer) busy(key string) bool {
	if pk := inf.pend[key]; pk != nil && pk.n > 0 {
		return true
	}
	return inf.dirty[key]
}

// settled says whether nothing is buffered or dropped.
func (inf *informer) settled() bool {
	inf.intake()
	return len(inf.buf) == 0 && len(inf.dirty) == 0
}

func (inf *informer) dropping(t time.Duration) bool {
	return inf.dropEvery > 0 && t < inf.limit && t >= inf.dropEvery && t%inf.dropEvery < inf.dropFor
}

// relistTimes lists the relists of the run: the end of each drop window.
func (inf *informer) relistTimes() []time.Duration {
	var ts []time.Duration
	if inf.dropEvery <= 0 {
		return nil
	}
	for at := inf.dropEvery + inf.dropFor; at-inf.dropFor < inf.limit; at += inf.dropEvery {
		ts = append(ts, at)
	}
	return ts
}

// deliverDue delivers every buffered event due by now (all of them if
// all is set).
func (inf *informer) deliverDue(now time.Duration, all bool) error {
	for {
		inf.intake()
		if len(inf.buf) == 0 || (!all && inf.buf[0].due > now) {
			return nil
		}
		ev := heap.Pop(&inf.buf).(watchEvent)
		if pk := inf.pend[ev.key]; pk != nil {
			if pk.n--; pk.n <= 0 {
				delete(inf.pend, ev.key)
			}
		}
		if inf.dropping(ev.due) {
			inf.dirty[ev.key] = true
			inf.counts.Dropped++
			continue
		}
		if err := inf.apply(ev.due, ev, false); err != nil {
			return err
		}
	}
}

// apply delivers one event against the store, as client-go's handlers
// see it.
func (inf *informer) apply(now time.Duration, ev watchEvent, tombstone bool) error {
	if inf.win != nil {
		inf.win.events(now, 1)
	}
	if ev.pod != nil {
		uid := string(ev.pod.UID)
		old := inf.pods[uid]
		switch {
		case ev.deleted && old == nil:
			inf.counts.Skipped++
			return nil
		case ev.deleted:
			delete(inf.pods, uid)
			inf.index(old, true)
			inf.counts.PodDeletes++
			if tombstone {
				inf.counts.Tombstones++
			}
			inf.noted(now, "pod-delete", ev.pod.Name, old.Spec.NodeName)
			if err := inf.ops.removePod(old); err != nil { // a tombstone's object may be stale
				return err
			}
			inf.event(now)
			return nil
		case old != nil:
			inf.pods[uid] = ev.pod
			inf.index(ev.pod, false)
			inf.counts.PodUpdates++
			inf.noted(now, "pod-update", ev.pod.Name, ev.pod.ResourceVersion)
			return inf.ops.updatePod(old, ev.pod)
		default:
			inf.pods[uid] = ev.pod
			inf.index(ev.pod, false)
			inf.counts.PodAdds++
			inf.noted(now, "confirm", ev.pod.Name, ev.pod.Spec.NodeName)
			if err := inf.ops.addPod(ev.pod); err != nil {
				return err
			}
			if inf.onAdd != nil {
				return inf.onAdd(now, ev.pod)
			}
			return nil
		}
	}
	name := ev.node.Name
	old := inf.nodes[name]
	switch {
	case ev.deleted && old == nil:
		inf.counts.Skipped++
		return nil
	case ev.deleted:
		delete(inf.nodes, name)
		inf.counts.NodeDeletes++
		if tombstone {
			inf.counts.Tombstones++
		}
		inf.noted(now, "node-delete", "", name)
		return inf.ops.removeNode(old)
	case old != nil:
		inf.nodes[name] = ev.node
		inf.counts.NodeUpdates++
		inf.noted(now, "node-update", ev.node.ResourceVersion, name)
		if err := inf.ops.updateNode(old, ev.node); err != nil {
			return err
		}
		if nodeEventful(old, ev.node) {
			inf.event(now)
		}
		return nil
	default:
		inf.nodes[name] = ev.node
		inf.counts.NodeAdds++
		inf.noted(now, "node-add", "", name)
		if err := inf.ops.addNode(ev.node); err != nil {
			return err
		}
		inf.event(now)
		return nil
	}
}

// event calls onEvent, if set.
func (inf *informer) event(now time.Duration) {
	if inf.onEvent != nil {
		inf.onEvent(now)
	}
}

func (inf *informer) noted(at time.Duration, what, obj, node string) {
	if inf.note != nil {
		inf.note(at, what, obj, node)
	}
}

// relist is a new list and watch: the events buffered are lost (the list
// holds their outcome), the store is compared with the API server, and the
// differences are delivered in a fixed order: node adds and updates, pod
// adds and updates, pod deletions, node deletions (deletions as
// tombstones). Nothing may change the truth meanwhile.
func (inf *informer) relist(now time.Duration, truth *Truth) error {
	inf.intake()
	inf.buf = inf.buf[:0]
	clear(inf.pend)
	clear(inf.dirty)
	inf.counts.Relists++
	inf.noted(now, "relist", "", "")
	var nodeSet, nodeDel []*v1.Node
	truth.nodes.Range(func(name string, r nodeRecord) bool {
		if inf.nodes[name] != r.Node {
			nodeSet = append(nodeSet, r.Node)
		}
		return true
	})
	for name, n := range inf.nodes {
		if _, ok := truth.nodes.Load(name); !ok {
			nodeDel = append(nodeDel, n)
		}
	}
	var podSet, podDel []*v1.Pod
	truth.pods.Range(func(uid string, r podRecord) bool {
		if r.Bound && inf.pods[uid] != r.Pod {
			podSet = append(podSet, r.Pod)
		}
		return true
	})
	for uid, p := range inf.pods {
		if r, ok := truth.pods.Load(uid); !ok || !r.Bound {
			podDel = append(podDel, p)
		}
	}
	byName := func(ns []*v1.Node) {
		sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	}
	byUID := func(ps []*v1.Pod) {
		sort.Slice(ps, func(i, j int) bool { return ps[i].UID < ps[j].UID })
	}
	byName(nodeSet)
	byName(nodeDel)
	byUID(podSet)
	byUID(podDel)
	for _, n := range nodeSet {
		if err := inf.apply(now, watchEvent{node: n}, false); err != nil {
			return err
		}
	}
	for _, p := range podSet {
		if err := inf.apply(now, watchEvent{pod: p}, false); err != nil {
			return err
		}
	}
	for _, p := range podDel {
		if err := inf.apply(now, watchEvent{pod: p, deleted: true}, true); err != nil {
			return err
		}
	}
	for _, n := range nodeDel {
		if err := inf.apply(now, watchEvent{node: n, deleted: true}, true); err != nil {
			return err
		}
	}
	return nil
}
