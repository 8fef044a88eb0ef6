// Package stress runs every public operation of the cache concurrently on a
// 500-node cluster while readers check every snapshot they take.
//
// Each worker goroutine owns a disjoint set of pods and nodes and keeps a
// model of their state, so the result of every operation it issues is
// predicted exactly (including the errors), whatever the other workers do:
// pod operations depend only on the pod's own state, and node operations
// are issued only by the node's owner. Reads are checked against the model
// whenever read-your-writes applies (after any synchronous call, every
// earlier call of the same goroutine is published). Readers check the
// internal invariants of every snapshot (package invariant) and that held
// snapshots never change.
//
// Short form (CI): go test -race -short ./tests/stress/
// Long form:       go test -race ./tests/stress/ -stress.duration=10m -stress.goroutines=32 -timeout 0
package stress

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/tests/stress/invariant"
	"github.com/schedcache/schedcache/workload"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

var (
	flagGoroutines  = flag.Int("stress.goroutines", 16, "worker goroutines issuing random operations")
	flagReaders     = flag.Int("stress.readers", 2, "dedicated snapshot-checking reader goroutines")
	flagDuration    = flag.Duration("stress.duration", 0, "how long the workers run (default 2s with -short, 20s otherwise)")
	flagSeed        = flag.Uint64("stress.seed", 0, "random seed (0: from the clock; the seed used is logged)")
	flagNodes       = flag.Int("stress.nodes", 500, "cluster nodes")
	flagPodsPerNode = flag.Int("stress.podspernode", 4, "pods per node loaded before the workers start")
	flagShards      = flag.Int("stress.shards", 4, "cache shards")
)

var logger = klog.Background()

type podState uint8

const (
	absent podState = iota
	assumed
	added
)

func (s podState) String() string { return [...]string{"absent", "assumed", "added"}[s] }

// ownPod is a worker's model of one pod it owns.
type ownPod struct {
	key   string
	obj   *v1.Pod // the stored object while cached; the last object used otherwise
	state podState
}

// ownNode is a worker's model of one node it owns.
type ownNode struct {
	name    string
	obj     *v1.Node // the stored object while present; the last one otherwise
	present bool
}

// asyncLedger counts asynchronous failures: expected ones (declared by the
// workers that deliberately submit a failing event) and the ones the
// handler saw, keyed "Kind/Sentinel".
type asyncLedger struct {
	mu       sync.Mutex
	expected map[string]int
	seen     map[string]int
	bad      []string
}

func (l *asyncLedger) expect(key string) {
	l.mu.Lock()
	l.expected[key]++
	l.mu.Unlock()
}

func (l *asyncLedger) handle(e schedcache.AsyncError) {
	key := e.Kind.String() + "/" + invariant.SentinelName(e.Err)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[key]++
	if e.Pod == nil && e.Node == nil {
		l.bad = append(l.bad, fmt.Sprintf("async error %s without its object", key))
	}
}

type world struct {
	t          *testing.T
	c          *schedcache.Cache
	cl         *workload.Cluster
	nodeNames  []string
	ledger     *asyncLedger
	stop       atomic.Bool
	failures   atomic.Int64
	ops        [numOps]atomic.Int64
	snapshots  atomic.Int64 // snapshots fully checked
	recomputed atomic.Int64 // of which with requests recomputed from the pods
	dumps      atomic.Int64
	fpChecks   atomic.Int64
	// refreshes of a worker's own snapshot compared with a new snapshot
	refreshCompared atomic.Int64
}

func (w *world) fail(format string, args ...any) {
	if w.failures.Add(1) > 20 {
		w.stop.Store(true)
		return
	}
	w.t.Errorf(format, args...)
	w.stop.Store(true)
}

// phantoms are node names no node object ever has: pods naming them live
// on nodeless entries.
var phantoms = []string{"phantom-0", "phantom-1", "phantom-2"}

type opKind int

const (
	opAssume opKind = iota
	opFinishBinding
	opForget
	opForgetWrongNode
	opAdd
	opUpdate
	opRemove
	opRemoveWrongNode
	opAddAsync
	opUpdateAsync
	opRemoveAsync
	opAsyncFailing
	opNode
	opNodeAsync
	opGetNode
	opDump
	opSync
	opUpdateSnapshot
	opSnapshot
	opGetPod
	opCounts
	numOps
)

var opNames = [numOps]string{"AssumePod", "FinishBinding", "ForgetPod", "ForgetPod(wrong node)", "AddPod", "UpdatePod",
	"RemovePod", "RemovePod(wrong node)", "AddPodAsync", "UpdatePodAsync", "RemovePodAsync", "Async(failing)",
	"Add/Update/RemoveNode", "Add/Update/RemoveNodeAsync", "GetNode", "Dump", "Sync", "UpdateSnapshot",
	"Snapshot", "GetPod+IsAssumedPod", "PodCount+NodeCount+Err+Done"}

var opWeights = [numOps]int{10, 4, 6, 1, 10, 8, 8, 1, 6, 4, 6, 1, 3, 2, 4, 1, 3, 6, 2, 8, 2}

type worker struct {
	w            *world
	id           int
	r            *rand.Rand
	pods         []*ownPod
	nodes        []*ownNode
	removedNodes int
	own          *schedcache.Snapshot
	ownFP        uint64
	ownSet       bool
	asyncPending bool // an async op was submitted after the last synchronous call
	lastEpoch    uint64
	rv           int
	cum          []int
	heldInfos    []heldInfo // NodeInfos returned by AddNode/UpdateNode/GetNode/Dump
}

// heldInfo is a returned NodeInfo with its fingerprint when returned.
type heldInfo struct {
	ni  *schedcache.NodeInfo
	fp  uint64
	src string
}

// hold keeps ni (sometimes) and re-checks that every held NodeInfo is
// unchanged.
func (k *worker) hold(ni *schedcache.NodeInfo, src string) {
	for _, h := range k.heldInfos {
		if invariant.FingerprintNodeInfo(h.ni) != h.fp {
			k.fail("a NodeInfo returned by %s (node %q) changed afterwards", h.src, h.ni.NodeName())
		}
	}
	if ni == nil {
		return
	}
	h := heldInfo{ni, invariant.FingerprintNodeInfo(ni), src}
	if len(k.heldInfos) < 8 {
		k.heldInfos = append(k.heldInfos, h)
	} else {
		k.heldInfos[k.r.IntN(len(k.heldInfos))] = h
	}
}

func (k *worker) fail(format string, args ...any) {
	k.w.fail("worker %d: "+format, append([]any{k.id}, args...)...)
}

func (k *worker) expect(op string, err, want error) bool {
	if e := invariant.Expect(op, err, want); e != nil {
		k.fail("%v", e)
		return false
	}
	return true
}

func (k *worker) randomNode() string {
	if k.r.IntN(100) < 3 {
		return phantoms[k.r.IntN(len(phantoms))]
	}
	return k.w.nodeNames[k.r.IntN(len(k.w.nodeNames))]
}

func (k *worker) otherNode(than string) string {
	for {
		if n := k.randomNode(); n != than {
			return n
		}
	}
}

func (k *worker) nextRV() string {
	k.rv++
	return fmt.Sprintf("w%d-%d", k.id, k.rv)
}

// withNode returns a copy of p bound to node (objects passed to the cache
// are never mutated afterwards).
func (k *worker) withNode(p *v1.Pod, node string) *v1.Pod {
	cp := *p
	cp.ResourceVersion = k.nextRV()
	cp.Spec.NodeName = node
	return &cp
}

// updated returns a new version of p on the same node whose containers,
// affinity and volumes come from a random pod of the cluster, so requests,
// sub-list membership and claims change; a third of the time its first
// container also requests ephemeral storage and scalar resources.
func (k *worker) updated(p *v1.Pod) *v1.Pod {
	donor := k.w.cl.Pods[k.r.IntN(len(k.w.cl.Pods))]
	cp := *p
	cp.ResourceVersion = k.nextRV()
	cp.Spec.Containers = donor.Spec.Containers
	if k.r.IntN(3) == 0 {
		cp.Spec.Containers = withExtraRequests(k.r, donor.Spec.Containers)
	}
	cp.Spec.InitContainers = donor.Spec.InitContainers
	cp.Spec.Affinity = donor.Spec.Affinity
	cp.Spec.Volumes = donor.Spec.Volumes
	cp.Spec.Overhead = donor.Spec.Overhead
	return &cp
}

// extraResources are the requests the cluster's pods lack: ephemeral
// storage and scalar resources (an extended resource, a GPU, huge pages).
var extraResources = []struct {
	name v1.ResourceName
	unit int64
}{
	{v1.ResourceEphemeralStorage, 1 << 20},
	{workload.ResourceGPU, 1},
	{"nvidia.com/gpu", 1},
	{v1.ResourceHugePagesPrefix + "2Mi", 2 << 20},
}

// withExtraRequests returns a copy of containers whose first container
// also requests some of extraResources (zero amounts included: a scalar
// key stays on the node even at zero).
func withExtraRequests(r *rand.Rand, containers []v1.Container) []v1.Container {
	out := append([]v1.Container(nil), containers...)
	req := v1.ResourceList{}
	for name, q := range out[0].Resources.Requests {
		req[name] = q
	}
	for _, x := range extraResources {
		if r.IntN(2) == 0 {
			req[x.name] = *resource.NewQuantity(int64(r.IntN(4))*x.unit, resource.BinarySI)
		}
	}
	out[0].Resources.Requests = req
	return out
}

func (k *worker) pickPod(want func(*ownPod) bool) *ownPod {
	for range 8 {
		if p := k.pods[k.r.IntN(len(k.pods))]; want == nil || want(p) {
			return p
		}
	}
	return nil
}

func (k *worker) synced() { k.asyncPending = false }

// checkOwn verifies that s shows every owned pod and node as modelled.
// Valid only when no async op of this worker may be unpublished.
func (k *worker) checkOwn(s *schedcache.Snapshot, where string) {
	for _, p := range k.pods {
		e, ok := s.Pod(p.key)
		switch {
		case p.state == absent && ok:
			k.fail("%s (epoch %d): pod %s is absent in the model but in the snapshot", where, s.Epoch(), p.key)
			return
		case p.state != absent && !ok:
			k.fail("%s (epoch %d): pod %s is %v in the model but missing from the snapshot", where, s.Epoch(), p.key, p.state)
			return
		case ok && (e.Pod != p.obj || e.Assumed != (p.state == assumed)):
			k.fail("%s (epoch %d): pod %s: snapshot holds assumed=%v and another object (rv %s, want %s), model %v",
				where, s.Epoch(), p.key, e.Assumed, e.Pod.ResourceVersion, p.obj.ResourceVersion, p.state)
			return
		}
	}
	for _, n := range k.nodes {
		ni, err := s.Get(n.name)
		if n.present && (err != nil || ni.Node() != n.obj) {
			k.fail("%s (epoch %d): node %s present in the model, snapshot Get = %v, %v", where, s.Epoch(), n.name, ni, err)
			return
		}
		if !n.present && err == nil {
			k.fail("%s (epoch %d): node %s removed in the model but Get finds it", where, s.Epoch(), n.name)
			return
		}
	}
}

func (k *worker) checkEpoch(s *schedcache.Snapshot, where string) {
	if s.Epoch() < k.lastEpoch {
		k.fail("%s: epoch went back from %d to %d", where, k.lastEpoch, s.Epoch())
	}
	k.lastEpoch = s.Epoch()
}

func (k *worker) step() {
	x := k.r.IntN(k.cum[len(k.cum)-1])
	op := opKind(sort.SearchInts(k.cum, x+1))
	k.w.ops[op].Add(1)
	c := k.w.c
	switch op {
	case opAssume:
		p := k.pods[k.r.IntN(len(k.pods))]
		obj := k.withNode(p.obj, k.randomNode())
		err := c.AssumePod(logger, obj)
		k.synced()
		if p.state != absent {
			k.expect("AssumePod("+p.state.String()+")", err, schedcache.ErrPodAlreadyCached)
			return
		}
		if k.expect("AssumePod(absent)", err, nil) {
			p.obj, p.state = obj, assumed
			if e, ok := c.Snapshot().Pod(p.key); !ok || !e.Assumed || e.Pod != obj {
				k.fail("AssumePod %s returned but the next snapshot shows %+v, %v", p.key, e, ok)
			}
		}
	case opFinishBinding:
		p := k.pods[k.r.IntN(len(k.pods))]
		k.expect("FinishBinding", c.FinishBinding(logger, p.obj), nil)
		k.synced()
	case opForget:
		p := k.pods[k.r.IntN(len(k.pods))]
		err := c.ForgetPod(logger, p.obj)
		k.synced()
		switch p.state {
		case absent:
			k.expect("ForgetPod(absent)", err, nil)
		case assumed:
			if k.expect("ForgetPod(assumed)", err, nil) {
				p.state = absent
			}
		case added:
			k.expect("ForgetPod(added)", err, schedcache.ErrPodNotAssumed)
		}
	case opForgetWrongNode:
		p := k.pods[k.r.IntN(len(k.pods))]
		err := c.ForgetPod(logger, k.withNode(p.obj, k.otherNode(p.obj.Spec.NodeName)))
		k.synced()
		if p.state == absent {
			k.expect("ForgetPod(absent, other node)", err, nil)
		} else {
			k.expect("ForgetPod("+p.state.String()+", other node)", err, schedcache.ErrPodNodeMismatch)
		}
	case opAdd:
		p := k.pods[k.r.IntN(len(k.pods))]
		node := p.obj.Spec.NodeName
		if p.state == absent || k.r.IntN(2) == 0 {
			node = k.randomNode() // an assumed pod may be confirmed on another node
		}
		obj := k.withNode(p.obj, node)
		err := c.AddPod(logger, obj)
		k.synced()
		if p.state == added {
			k.expect("AddPod(added)", err, schedcache.ErrPodAlreadyAdded)
			return
		}
		if k.expect("AddPod("+p.state.String()+")", err, nil) {
			p.obj, p.state = obj, added
		}
	case opUpdate:
		p := k.pods[k.r.IntN(len(k.pods))]
		nw := k.updated(p.obj)
		err := c.UpdatePod(logger, p.obj, nw)
		k.synced()
		switch p.state {
		case absent:
			k.expect("UpdatePod(absent)", err, schedcache.ErrPodNotFound)
		case assumed:
			k.expect("UpdatePod(assumed)", err, schedcache.ErrPodAssumed)
		case added:
			if k.expect("UpdatePod(added)", err, nil) {
				p.obj = nw
				if got, err := c.GetPod(nw); err != nil || got != nw {
					k.fail("UpdatePod %s returned but GetPod = %v, %v", p.key, got, err)
				}
			}
		}
	case opRemove:
		p := k.pods[k.r.IntN(len(k.pods))]
		obj := p.obj
		if k.r.IntN(5) == 0 {
			obj = k.withNode(p.obj, "") // a stale delete without the node name is tolerated
		}
		err := c.RemovePod(logger, obj)
		k.synced()
		if p.state == absent {
			k.expect("RemovePod(absent)", err, schedcache.ErrPodNotFound)
			return
		}
		if k.expect("RemovePod("+p.state.String()+")", err, nil) {
			p.state = absent
		}
	case opRemoveWrongNode:
		p := k.pods[k.r.IntN(len(k.pods))]
		other := k.otherNode(p.obj.Spec.NodeName)
		err := c.RemovePod(logger, k.withNode(p.obj, other))
		k.synced()
		if p.state == absent {
			k.expect("RemovePod(absent, other node)", err, schedcache.ErrPodNotFound)
			return
		}
		if k.expect("RemovePod(cached, other node)", err, schedcache.ErrCorrupted) {
			var ce *schedcache.CorruptionError
			if !errors.As(err, &ce) || ce.CachedNode != p.obj.Spec.NodeName || ce.GivenNode != other {
				k.fail("RemovePod(other node): %v is not a *CorruptionError naming %q and %q", err, p.obj.Spec.NodeName, other)
			}
		}
	case opAddAsync:
		if p := k.pickPod(func(p *ownPod) bool { return p.state == absent }); p != nil {
			obj := k.withNode(p.obj, k.randomNode())
			if k.expect("AddPodAsync", c.AddPodAsync(obj), nil) {
				p.obj, p.state, k.asyncPending = obj, added, true
			}
		}
	case opUpdateAsync:
		if p := k.pickPod(func(p *ownPod) bool { return p.state == added }); p != nil {
			nw := k.updated(p.obj)
			if k.expect("UpdatePodAsync", c.UpdatePodAsync(p.obj, nw), nil) {
				p.obj, k.asyncPending = nw, true
			}
		}
	case opRemoveAsync:
		if p := k.pickPod(func(p *ownPod) bool { return p.state != absent }); p != nil {
			if k.expect("RemovePodAsync", c.RemovePodAsync(p.obj), nil) {
				p.state, k.asyncPending = absent, true
			}
		}
	case opAsyncFailing:
		p := k.pods[k.r.IntN(len(k.pods))]
		switch p.state {
		case absent:
			k.w.ledger.expect("RemovePod/ErrPodNotFound")
			k.expect("RemovePodAsync(absent)", c.RemovePodAsync(p.obj), nil)
		case assumed:
			k.w.ledger.expect("UpdatePod/ErrPodAssumed")
			k.expect("UpdatePodAsync(assumed)", c.UpdatePodAsync(p.obj, k.updated(p.obj)), nil)
		case added:
			k.w.ledger.expect("AddPod/ErrPodAlreadyAdded")
			k.expect("AddPodAsync(added)", c.AddPodAsync(k.withNode(p.obj, p.obj.Spec.NodeName)), nil)
		}
		k.asyncPending = true
	case opNode, opNodeAsync:
		k.nodeOp(op == opNodeAsync)
	case opGetNode:
		name := k.randomNode()
		var mine *ownNode
		if k.r.IntN(2) == 0 {
			mine = k.nodes[k.r.IntN(len(k.nodes))]
			name = mine.name
		}
		ni, err := c.GetNode(name)
		k.synced() // GetNode is a barrier
		if err != nil {
			if !k.expect("GetNode", err, schedcache.ErrNodeNotFound) {
				return
			}
			if mine != nil && mine.present {
				k.fail("GetNode(%s): %v for a node the model has present", name, err)
			}
			return
		}
		if e := invariant.CheckNodeInfo(ni, false); e != nil {
			k.fail("GetNode(%s): %v", name, e)
		}
		if mine != nil && mine.present && ni.Node() != mine.obj {
			k.fail("GetNode(%s) holds another node object than the last one stored", name)
		}
		if mine != nil && !mine.present && ni.Node() != nil {
			k.fail("GetNode(%s) has a node object for a removed node", name)
		}
		k.hold(ni, "GetNode")
	case opDump:
		k.dump()
	case opSync:
		k.expect("Sync", c.Sync(), nil)
		k.synced()
	case opUpdateSnapshot:
		if k.ownSet {
			if fp := invariant.Fingerprint(k.own); fp != k.ownFP {
				k.fail("the worker's own snapshot (epoch %d) changed between two UpdateSnapshot calls", k.own.Epoch())
			}
			k.w.fpChecks.Add(1)
		}
		if k.ownSet && k.r.IntN(2) == 0 {
			// Refresh from a publication a new snapshot then reads too,
			// and compare them (what c.UpdateSnapshot does, from a known
			// publication).
			before := make(map[string]*schedcache.NodeInfo, k.own.NumNodes())
			k.own.Range(func(_ int, ni *schedcache.NodeInfo) bool { before[ni.NodeName()] = ni; return true })
			p := c.Snapshot()
			if !k.expect("UpdateSnapshot", k.own.UpdateFrom(p), nil) {
				return
			}
			k.compareRefreshed(before, p)
		} else if !k.expect("UpdateSnapshot", c.UpdateSnapshot(logger, k.own), nil) {
			return
		}
		k.ownSet = true
		k.checkSnapshot(k.own, "UpdateSnapshot")
		k.ownFP = invariant.Fingerprint(k.own)
	case opSnapshot:
		k.checkSnapshot(c.Snapshot(), "Snapshot")
	case opGetPod:
		p := k.pods[k.r.IntN(len(k.pods))]
		got, err := c.GetPod(p.obj)
		isAssumed, err2 := c.IsAssumedPod(p.obj)
		k.expect("IsAssumedPod", err2, nil)
		if k.asyncPending {
			if err != nil {
				k.expect("GetPod", err, schedcache.ErrPodNotFound)
			}
			return
		}
		if p.state == absent {
			k.expect("GetPod(absent)", err, schedcache.ErrPodNotFound)
		} else if k.expect("GetPod("+p.state.String()+")", err, nil) && got != p.obj {
			k.fail("GetPod(%s) returned another object than the stored one", p.key)
		}
		if isAssumed != (p.state == assumed) {
			k.fail("IsAssumedPod(%s)=%v, model %v", p.key, isAssumed, p.state)
		}
	case opCounts:
		n, err := c.PodCount()
		k.expect("PodCount", err, nil)
		if n < 0 || c.NodeCount() < 0 {
			k.fail("negative counts")
		}
		if err := c.Err(); err != nil {
			k.fail("Err() = %v on a healthy cache", err)
		}
		select {
		case <-c.Done():
			k.fail("Done closed on a running cache")
		default:
		}
	}
}

func (k *worker) checkSnapshot(s *schedcache.Snapshot, where string) {
	k.checkEpoch(s, where)
	if !k.asyncPending {
		k.checkOwn(s, where)
	}
	if k.r.IntN(4) != 0 {
		return // the readers check every snapshot in full; workers sample
	}
	recompute := k.r.IntN(4) == 0
	// s may be refreshed (UpdateSnapshot): its PVC counts may carry the
	// pending delta; the readers check the published ones exactly.
	if _, err := invariant.CheckSnapshot(s, invariant.Options{RecomputeRequests: recompute, RecomputeSample: 10, PVCDelta: true}); err != nil {
		k.fail("%s: %v", where, err)
		return
	}
	k.w.snapshots.Add(1)
	if recompute {
		k.w.recomputed.Add(1)
	}
}

// compareRefreshed checks the worker's own snapshot, just refreshed from
// the publication p, against a new snapshot of p (semantics 5.2; the
// stream is consistent): the same epoch, counts and listed nodes (the
// order may differ: a refresh keeps its order after zone moves until
// membership changes), every node at its current version; a node the
// refresh cloned (a new version since before) shows exactly what the new
// snapshot shows, image counts included; any other keeps the very entry
// it had, with its older counts; a removed node is gone. The new
// snapshot's image counts are those of its own nodes.
func (k *worker) compareRefreshed(before map[string]*schedcache.NodeInfo, p *schedcache.Snapshot) {
	own := k.own
	fresh := schedcache.NewEmptySnapshot()
	if !k.expect("UpdateSnapshot(new)", fresh.UpdateFrom(p), nil) {
		return
	}
	if err := invariant.CheckImagesNow(fresh); err != nil {
		k.fail("new snapshot: %v", err)
		return
	}
	if own.Epoch() != fresh.Epoch() || own.NumNodes() != fresh.NumNodes() || own.NodeCount() != fresh.NodeCount() || own.PodCount() != fresh.PodCount() {
		k.fail("refreshed snapshot: epoch %d, %d nodes listed, %d entries, %d pods; a new one: %d, %d, %d, %d",
			own.Epoch(), own.NumNodes(), own.NodeCount(), own.PodCount(), fresh.Epoch(), fresh.NumNodes(), fresh.NodeCount(), fresh.PodCount())
		return
	}
	listed := make(map[string]bool, own.NumNodes())
	own.Range(func(_ int, ni *schedcache.NodeInfo) bool { listed[ni.NodeName()] = true; return true })
	fresh.Range(func(_ int, want *schedcache.NodeInfo) bool {
		name := want.NodeName()
		got, err := own.Get(name)
		switch {
		case err != nil || !listed[name]:
			k.fail("refreshed snapshot: node %q listed by a new snapshot: Get %v, listed %v", name, err, listed[name])
		case got.Generation() != want.Generation():
			k.fail("refreshed snapshot: node %q at generation %d, the new snapshot's %d", name, got.Generation(), want.Generation())
		case before[name] != nil && before[name].Generation() == got.Generation():
			if got != before[name] {
				k.fail("refreshed snapshot: node %q unchanged since the last refresh but not the entry it had", name)
			}
		default: // cloned by this refresh
			if d := invariant.Diff(invariant.RenderNodeInfo(want), invariant.RenderNodeInfo(got)); d != "" {
				k.fail("refreshed snapshot: node %q cloned now differs from a new snapshot's: %s", name, d)
			}
		}
		return !k.w.stop.Load()
	})
	for name := range before {
		if _, err := fresh.Get(name); err != nil {
			if _, err := own.Get(name); err == nil {
				k.fail("refreshed snapshot: node %q left the cache but Get finds it", name)
				return
			}
		}
	}
	k.w.refreshCompared.Add(1)
}

func (k *worker) nodeOp(async bool) {
	c := k.w.c
	n := k.nodes[k.r.IntN(len(k.nodes))]
	if !n.present {
		obj := n.obj
		if k.r.IntN(2) == 0 {
			cp := *n.obj
			cp.ResourceVersion = k.nextRV()
			obj = &cp
		}
		if async {
			if k.expect("AddNodeAsync", c.AddNodeAsync(obj), nil) {
				n.obj, n.present, k.asyncPending = obj, true, true
				k.removedNodes--
			}
			return
		}
		ni, err := c.AddNode(logger, obj)
		k.synced()
		if k.expect("AddNode", err, nil) {
			n.obj, n.present = obj, true
			k.removedNodes--
			if ni == nil || ni.Node() != obj {
				k.fail("AddNode(%s) returned %v, want a NodeInfo of the node just added", n.name, ni)
			}
			k.hold(ni, "AddNode")
		}
		return
	}
	if k.r.IntN(2) == 0 && k.removedNodes < max(1, len(k.nodes)/10) {
		if async {
			if k.expect("RemoveNodeAsync", c.RemoveNodeAsync(n.obj), nil) {
				n.present, k.asyncPending = false, true
				k.removedNodes++
			}
			return
		}
		err := c.RemoveNode(logger, n.obj)
		k.synced()
		if k.expect("RemoveNode", err, nil) {
			n.present = false
			k.removedNodes++
		}
		return
	}
	// UpdateNode, moving the node to another zone half of the time.
	cp := *n.obj
	cp.ResourceVersion = k.nextRV()
	if k.r.IntN(2) == 0 {
		labels := make(map[string]string, len(n.obj.Labels))
		for key, v := range n.obj.Labels {
			labels[key] = v
		}
		labels[v1.LabelTopologyZone] = []string{workload.ZoneA, workload.ZoneB, workload.ZoneC, "zone-d"}[k.r.IntN(4)]
		cp.Labels = labels
	}
	if async {
		if k.expect("UpdateNodeAsync", c.UpdateNodeAsync(n.obj, &cp), nil) {
			n.obj, k.asyncPending = &cp, true
		}
		return
	}
	ni, err := c.UpdateNode(logger, n.obj, &cp)
	k.synced()
	if k.expect("UpdateNode", err, nil) {
		n.obj = &cp
		if ni == nil || ni.Node() != &cp {
			k.fail("UpdateNode(%s) returned %v, want a NodeInfo of the new node object", n.name, ni)
		}
		k.hold(ni, "UpdateNode")
	}
}

func (k *worker) dump() {
	d, err := k.w.c.Dump()
	k.synced() // Dump is a barrier
	if !k.expect("Dump", err, nil) {
		return
	}
	if _, err := invariant.CheckDump(d, false); err != nil {
		k.fail("Dump: %v", err)
		return
	}
	k.w.dumps.Add(1)
	for _, ni := range d.Nodes {
		k.hold(ni, "Dump")
		break
	}
	for _, p := range k.pods {
		_, isAssumed := d.AssumedPods[p.key]
		if isAssumed != (p.state == assumed) {
			k.fail("Dump: pod %s assumed=%v, model %v", p.key, isAssumed, p.state)
			return
		}
		if p.state == absent {
			continue
		}
		ni := d.Nodes[p.obj.Spec.NodeName]
		found := false
		for i := 0; i < ni.NumPods(); i++ {
			if pi := ni.PodAt(i); pi.Key() == p.key {
				found = pi.Pod() == p.obj
			}
		}
		if !found {
			k.fail("Dump: pod %s (%v) not on entry %q with its stored object", p.key, p.state, p.obj.Spec.NodeName)
			return
		}
	}
	for _, n := range k.nodes {
		ni := d.Nodes[n.name]
		if n.present && (ni == nil || ni.Node() != n.obj) {
			k.fail("Dump: node %s present in the model, entry %v", n.name, ni)
			return
		}
		if !n.present && ni != nil && ni.Node() != nil {
			k.fail("Dump: node %s removed in the model, entry has a node object", n.name)
			return
		}
	}
}

// heldSnapshot is a snapshot a reader keeps with the fingerprint it had
// when taken.
type heldSnapshot struct {
	s  *schedcache.Snapshot
	fp uint64
}

func (w *world) reader(id int, r *rand.Rand, held *[]heldSnapshot) {
	var last *schedcache.Snapshot
	var lastEpoch uint64
	kept := 0
	for !w.stop.Load() {
		s := w.c.Snapshot()
		if s.Epoch() < lastEpoch {
			w.fail("reader %d: epoch went back from %d to %d", id, lastEpoch, s.Epoch())
			return
		}
		lastEpoch = s.Epoch()
		if len(*held) > 0 { // re-check one snapshot held from before
			h := (*held)[r.IntN(len(*held))]
			if invariant.Fingerprint(h.s) != h.fp {
				w.fail("reader %d: held snapshot of epoch %d changed after it was taken", id, h.s.Epoch())
				return
			}
			w.fpChecks.Add(1)
		}
		if s == last {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		last = s
		fp := invariant.Fingerprint(s)
		recompute := r.IntN(4) == 0
		if _, err := invariant.CheckSnapshot(s, invariant.Options{RecomputeRequests: recompute, RecomputeSample: 10}); err != nil {
			w.fail("reader %d: %v", id, err)
			return
		}
		w.snapshots.Add(1)
		if recompute {
			w.recomputed.Add(1)
		}
		kept++
		if len(*held) < 32 {
			*held = append(*held, heldSnapshot{s, fp})
		} else if kept%4 == 0 {
			(*held)[r.IntN(len(*held))] = heldSnapshot{s, fp}
		}
	}
}

func TestStress(t *testing.T) {
	dur := *flagDuration
	if dur == 0 {
		dur = 20 * time.Second
		if testing.Short() {
			dur = 2 * time.Second
		}
	}
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -stress.seed=%d)", seed, seed)
	G := *flagGoroutines

	cl := workload.Build(workload.ClusterSpec{Nodes: *flagNodes, PodsPerNode: *flagPodsPerNode, Seed: int64(seed % 1000)})
	xr := rand.New(rand.NewPCG(seed, 1<<20))
	for i, p := range cl.Pods { // a quarter also request ephemeral storage and scalars
		if i%4 == 0 {
			cp := *p
			cp.Spec.Containers = withExtraRequests(xr, p.Spec.Containers)
			cl.Pods[i] = &cp
		}
	}
	ledger := &asyncLedger{expected: map[string]int{}, seen: map[string]int{}}
	c, err := schedcache.New(context.Background(), schedcache.WithShards(*flagShards), schedcache.WithAsyncErrorHandler(ledger.handle))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := &world{t: t, c: c, cl: cl, ledger: ledger}
	for _, n := range cl.Nodes {
		w.nodeNames = append(w.nodeNames, n.Name)
		if err := c.AddNodeAsync(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range cl.Pods {
		if err := c.AddPodAsync(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := invariant.CheckSnapshot(c.Snapshot(), invariant.Options{RecomputeRequests: true}); err != nil {
		t.Fatal(err)
	}

	workers := make([]*worker, G)
	for g := range workers {
		k := &worker{w: w, id: g, r: rand.New(rand.NewPCG(seed, uint64(g))), own: schedcache.NewEmptySnapshot()}
		for i := range opWeights {
			k.cum = append(k.cum, opWeights[i])
			if i > 0 {
				k.cum[i] += k.cum[i-1]
			}
		}
		for i := g; i < len(cl.Nodes); i += G {
			k.nodes = append(k.nodes, &ownNode{name: cl.Nodes[i].Name, obj: cl.Nodes[i], present: true})
		}
		for i := g; i < len(cl.Pods); i += G {
			k.pods = append(k.pods, &ownPod{key: string(cl.Pods[i].UID), obj: cl.Pods[i], state: added})
		}
		for i := 0; i < 16; i++ { // fresh pods, absent at first
			p := k.withNode(cl.Pods[(g*16+i)%len(cl.Pods)], "")
			p.Spec.Containers = withExtraRequests(k.r, p.Spec.Containers)
			p.UID = types.UID(fmt.Sprintf("stress-%d-%d", g, i))
			p.Name = string(p.UID)
			k.pods = append(k.pods, &ownPod{key: string(p.UID), obj: p, state: absent})
		}
		workers[g] = k
	}

	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	helds := make([][]heldSnapshot, *flagReaders)
	for i := range helds {
		r := rand.New(rand.NewPCG(seed, uint64(1000+i)))
		wg.Go(func() { w.reader(i, r, &helds[i]) })
	}
	var wwg sync.WaitGroup
	for _, k := range workers {
		wwg.Go(func() {
			for !w.stop.Load() && time.Now().Before(deadline) {
				k.step()
			}
		})
	}
	wwg.Wait()
	w.stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)

	// Final state against the union of the models.
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	final := c.Snapshot()
	st, err := invariant.CheckSnapshot(final, invariant.Options{RecomputeRequests: true})
	if err != nil {
		t.Fatalf("final snapshot: %v", err)
	}
	fresh := schedcache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := invariant.CheckSnapshot(fresh, invariant.Options{RecomputeRequests: true, ImagesNow: true}); err != nil {
		t.Fatalf("new snapshot of the final state: %v", err)
	}
	cached, presentNodes := 0, 0
	present := map[string]bool{}
	for _, k := range workers {
		k.asyncPending = false
		k.checkOwn(final, "final snapshot")
		for _, n := range k.nodes {
			if n.present {
				presentNodes++
				present[n.name] = true
			}
		}
	}
	nodeless := map[string]bool{}
	for _, k := range workers {
		for _, p := range k.pods {
			if p.state != absent {
				cached++
				if !present[p.obj.Spec.NodeName] {
					nodeless[p.obj.Spec.NodeName] = true
				}
			}
		}
	}
	if n, _ := c.PodCount(); n != cached || st.Pods != cached {
		t.Errorf("PodCount()=%d, snapshot pods %d, the models hold %d cached pods", n, st.Pods, cached)
	}
	if final.NumNodes() != presentNodes {
		t.Errorf("NumNodes()=%d, the models hold %d present nodes", final.NumNodes(), presentNodes)
	}
	if got, want := c.NodeCount(), presentNodes+len(nodeless); got != want {
		t.Errorf("NodeCount()=%d, want %d present nodes + %d nodeless entries", got, presentNodes, len(nodeless))
	}
	d, err := c.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := invariant.CheckDump(d, true); err != nil || n != cached {
		t.Errorf("final Dump: %d pods, %v; want %d", n, err, cached)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waits for the notifier, so every async failure has been
	// handled. (Tolerate a notifier that outlives Close - tested and
	// reported separately in tests/leaks - so as not to report it twice.)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ledger.mu.Lock()
		seen, expected := 0, 0
		for _, n := range ledger.seen {
			seen += n
		}
		for _, n := range ledger.expected {
			expected += n
		}
		ledger.mu.Unlock()
		if seen >= expected {
			break
		}
	}
	ledger.mu.Lock()
	for key, n := range ledger.seen {
		if ledger.expected[key] != n {
			t.Errorf("async handler saw %d x %s, the workers expected %d", n, key, ledger.expected[key])
		}
	}
	for key, n := range ledger.expected {
		if ledger.seen[key] == 0 && n > 0 {
			t.Errorf("async handler never saw %s, the workers expected %d", key, n)
		}
	}
	for _, b := range ledger.bad {
		t.Error(b)
	}
	asyncFailures := 0
	for _, n := range ledger.seen {
		asyncFailures += n
	}
	ledger.mu.Unlock()
	for i, held := range helds {
		for _, h := range held {
			if invariant.Fingerprint(h.s) != h.fp {
				t.Errorf("reader %d: held snapshot of epoch %d changed after the run", i, h.s.Epoch())
			}
		}
	}

	var total int64
	for i := range w.ops {
		total += w.ops[i].Load()
	}
	t.Logf("%d goroutines x %v on %d nodes (%d shards): %d operations (%.0f/s), %d snapshots checked (%d with a tenth of the pods' requests recomputed), %d dumps checked, %d refreshes compared with a new snapshot, %d fingerprint re-checks, %d expected async failures handled, final epoch %d, %d pods, %d node entries",
		G, elapsed.Round(time.Millisecond), len(cl.Nodes), *flagShards, total, float64(total)/elapsed.Seconds(),
		w.snapshots.Load(), w.recomputed.Load(), w.dumps.Load(), w.refreshCompared.Load(), w.fpChecks.Load(), asyncFailures, final.Epoch(), cached, c.NodeCount())
	for i := range w.ops {
		t.Logf("  %-28s %d", opNames[i], w.ops[i].Load())
	}
	if total == 0 || w.snapshots.Load() == 0 {
		t.Error("the run did nothing")
	}
}
