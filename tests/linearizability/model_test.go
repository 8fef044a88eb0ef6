package linearizability

import (
	"errors"
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
)

// The universe of a history: nUID pod UIDs, two real nodes (added before the
// history starts and never touched), one node name that never gets a node
// object ("nx": pods placed there live on a nodeless entry) and the empty
// node name (AssumePod stores a pod there, on the nodeless entry "", as
// upstream; RemovePod tolerates it).
const (
	nUID     = 3
	nVer     = 2
	nRealN   = 2 // n0, n1: in every snapshot
	nodeNX   = 2 // index of "nx"
	nodeNone = 3 // index of ""
	nNodeIdx = 4
)

var (
	uidNames  = [nUID]string{"u0", "u1", "u2"}
	nodeNames = [nNodeIdx]string{"n0", "n1", "nx", ""}
)

// podCPU and podMem are the requests of pod (uid, ver): the model derives
// every node aggregate from them, independently of the nodeinfo package.
func podCPU(u, v uint8) int64 { return 100*int64(u+1) + 1000*int64(v) }
func podMem(u, v uint8) int64 { return int64(u+1) << (20 + v) }

// podID numbers the pod objects of the universe: (uid, node, ver).
func podID(u, n, v uint8) int8 { return int8((int(u)*nNodeIdx+int(n))*nVer + int(v)) }

// universe holds one immutable pod object per (uid, node, ver) so that a
// pointer returned by the cache identifies exactly which object it stored.
type universe struct {
	pods [nUID * nNodeIdx * nVer]*v1.Pod
	ids  map[*v1.Pod]int8
}

func newUniverse() *universe {
	un := &universe{ids: map[*v1.Pod]int8{}}
	for u := uint8(0); u < nUID; u++ {
		for n := uint8(0); n < nNodeIdx; n++ {
			for v := uint8(0); v < nVer; v++ {
				p := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{
						Name: fmt.Sprintf("p-%s-%s-%d", uidNames[u], nodeNames[n], v), Namespace: "ns",
						UID: types.UID(uidNames[u]),
					},
					Spec: v1.PodSpec{NodeName: nodeNames[n], Containers: []v1.Container{{
						Name: "c",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
							v1.ResourceCPU:    *resource.NewMilliQuantity(podCPU(u, v), resource.DecimalSI),
							v1.ResourceMemory: *resource.NewQuantity(podMem(u, v), resource.BinarySI),
						}},
					}}},
				}
				id := podID(u, n, v)
				un.pods[id] = p
				un.ids[p] = id
			}
		}
	}
	return un
}

func (un *universe) pod(u, n, v uint8) *v1.Pod { return un.pods[podID(u, n, v)] }

// id returns the universe id of p, -1 for nil and -2 for a pointer the
// universe never handed out.
func (un *universe) id(p *v1.Pod) int8 {
	if p == nil {
		return -1
	}
	if id, ok := un.ids[p]; ok {
		return id
	}
	return -2
}

func describeID(id int8) string {
	switch {
	case id == -1:
		return "none"
	case id < 0:
		return "foreign"
	}
	v := int(id) % nVer
	n := int(id) / nVer % nNodeIdx
	u := int(id) / nVer / nNodeIdx
	return fmt.Sprintf("%s@%s/v%d", uidNames[u], nodeNames[n], v)
}

// ---- errors ----

// errCode classifies an error by the exported sentinel it matches.
type errCode uint8

const (
	errNone errCode = iota
	errAlreadyCached
	errAlreadyAdded
	errNotFound
	errAssumed
	errNotAssumed
	errNodeMismatch
	errCorrupted
	errUIDMismatch
	errOther // anything else: the model never produces it
)

var sentinels = []struct {
	code errCode
	err  error
}{
	{errAlreadyCached, schedcache.ErrPodAlreadyCached},
	{errAlreadyAdded, schedcache.ErrPodAlreadyAdded},
	{errNotFound, schedcache.ErrPodNotFound},
	{errAssumed, schedcache.ErrPodAssumed},
	{errNotAssumed, schedcache.ErrPodNotAssumed},
	{errNodeMismatch, schedcache.ErrPodNodeMismatch},
	{errCorrupted, schedcache.ErrCorrupted},
	{errUIDMismatch, schedcache.ErrUIDMismatch},
}

func classify(err error) errCode {
	if err == nil {
		return errNone
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.code
		}
	}
	return errOther
}

func (c errCode) String() string {
	if c == errNone {
		return "nil"
	}
	for _, s := range sentinels {
		if s.code == c {
			return strings.TrimPrefix(s.err.Error(), "schedcache: ")
		}
	}
	return "other error"
}

// ---- operations ----

type opKind uint8

const (
	opAssume opKind = iota
	opFinish
	opForget
	opAdd
	opUpdate
	opRemove
	opGet
	opIsAssumed
	opPodCount
	opNodeCount
	opSnapshot
	numOpKinds
)

var opNames = [numOpKinds]string{"AssumePod", "FinishBinding", "ForgetPod", "AddPod", "UpdatePod", "RemovePod",
	"GetPod", "IsAssumedPod", "PodCount", "NodeCount", "Snapshot"}

// input is an operation's call. Pod operations name the universe pod
// (uid, node, ver); UpdatePod's old pod is (uid, node, 0) and its new pod
// (uid2, node2, ver).
type input struct {
	op          opKind
	uid, node   uint8
	ver         uint8
	uid2, node2 uint8
}

func (in input) String() string {
	p := func(u, n, v uint8) string { return fmt.Sprintf("%s@%s/v%d", uidNames[u], nodeNames[n], v) }
	switch in.op {
	case opAssume, opFinish, opForget, opAdd, opRemove:
		return fmt.Sprintf("%s(%s)", opNames[in.op], p(in.uid, in.node, in.ver))
	case opUpdate:
		return fmt.Sprintf("UpdatePod(%s -> %s)", p(in.uid, in.node, 0), p(in.uid2, in.node2, in.ver))
	case opGet, opIsAssumed:
		return fmt.Sprintf("%s(%s)", opNames[in.op], uidNames[in.uid])
	}
	return opNames[in.op] + "()"
}

// Outputs: errCode for mutations, getOut for GetPod, bool for IsAssumedPod,
// int for the counts, view for snapshot reads. All are comparable.
type getOut struct {
	err errCode
	id  int8
}

type podView struct {
	present, assumed bool
	id               int8
}

type nodeView struct {
	found    bool
	numPods  int
	cpu, mem int64
}

// view is everything a snapshot read records: every pod entry, the
// aggregates of both real nodes, the counts and the list length.
type view struct {
	pods      [nUID]podView
	nodes     [nRealN]nodeView
	podCount  int
	nodeCount int
	numNodes  int
	nxListed  bool // snap.Get("nx") succeeded (must never happen)
}

func (v view) String() string {
	var b strings.Builder
	b.WriteString("{")
	for u, p := range v.pods {
		switch {
		case !p.present:
			fmt.Fprintf(&b, "%s:- ", uidNames[u])
		case p.assumed:
			fmt.Fprintf(&b, "%s:A(%s) ", uidNames[u], describeID(p.id))
		default:
			fmt.Fprintf(&b, "%s:+(%s) ", uidNames[u], describeID(p.id))
		}
	}
	for n, nv := range v.nodes {
		fmt.Fprintf(&b, "%s:%d/%dm/%d ", nodeNames[n], nv.numPods, nv.cpu, nv.mem)
	}
	fmt.Fprintf(&b, "pods=%d nodes=%d list=%d}", v.podCount, v.nodeCount, v.numNodes)
	return b.String()
}

// ---- the sequential model ----

const (
	stAbsent uint8 = iota
	stAssumed
	stAdded
)

type podState struct{ st, node, ver uint8 }

// state is the model state: one entry per UID. It is a comparable value, so
// porcupine's default equality applies and Step is trivially pure.
type state [nUID]podState

func (s state) String() string {
	var parts []string
	for u, p := range s {
		switch p.st {
		case stAssumed:
			parts = append(parts, fmt.Sprintf("%s:assumed@%s/v%d", uidNames[u], nodeNames[p.node], p.ver))
		case stAdded:
			parts = append(parts, fmt.Sprintf("%s:added@%s/v%d", uidNames[u], nodeNames[p.node], p.ver))
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// apply runs one mutation of the upstream state machine (semantics 1.3,
// with schedcache's typed errors in place of process exits) and returns the
// new state and the error class the call must return.
func apply(s state, in input) (state, errCode) {
	p := s[in.uid]
	switch in.op {
	case opAssume:
		if p.st != stAbsent { // an empty node name is the nodeless entry ""
			return s, errAlreadyCached
		}
		s[in.uid] = podState{stAssumed, in.node, in.ver}
	case opFinish:
		// ttl = 0: bindingFinished has no observable effect.
	case opForget:
		switch {
		case p.st == stAbsent:
		case in.node != p.node:
			return s, errNodeMismatch
		case p.st != stAssumed:
			return s, errNotAssumed
		default:
			s[in.uid] = podState{}
		}
	case opAdd:
		switch p.st {
		case stAdded:
			return s, errAlreadyAdded
		default: // absent, or assumed (confirmed, possibly on another node)
			s[in.uid] = podState{stAdded, in.node, in.ver}
		}
	case opUpdate:
		switch {
		case p.st == stAbsent:
			return s, errNotFound
		case p.st == stAssumed:
			return s, errAssumed
		case in.node2 != p.node:
			return s, errCorrupted
		case in.node != p.node:
			return s, errNodeMismatch
		case in.uid2 != in.uid && s[in.uid2].st != stAbsent:
			return s, errUIDMismatch
		}
		// A new UID renames the pod (upstream: removePod(old), addPod(new)).
		s[in.uid] = podState{}
		s[in.uid2] = podState{stAdded, in.node2, in.ver}
	case opRemove:
		switch {
		case p.st == stAbsent:
			return s, errNotFound
		case in.node != nodeNone && in.node != p.node:
			return s, errCorrupted
		}
		s[in.uid] = podState{}
	default:
		panic(fmt.Sprintf("apply: %v is not a mutation", in.op))
	}
	return s, errNone
}

// observe derives what a snapshot of state s shows.
func observe(s state) view {
	var v view
	v.numNodes = nRealN
	v.nodeCount = nRealN
	var nodeless [nNodeIdx]bool
	for u, p := range s {
		if p.st == stAbsent {
			continue
		}
		v.podCount++
		v.pods[u] = podView{present: true, assumed: p.st == stAssumed, id: podID(uint8(u), p.node, p.ver)}
		if int(p.node) < nRealN {
			nv := &v.nodes[p.node]
			nv.numPods++
			nv.cpu += podCPU(uint8(u), p.ver)
			nv.mem += podMem(uint8(u), p.ver)
		} else {
			nodeless[p.node] = true
		}
	}
	for n := range v.nodes {
		v.nodes[n].found = true
	}
	for u := range v.pods {
		if !v.pods[u].present {
			v.pods[u].id = -1
		}
	}
	for _, ok := range nodeless {
		if ok {
			v.nodeCount++ // a nodeless entry ("nx")
		}
	}
	return v
}

// step is porcupine's Step. An output of an unexpected type never matches.
func step(st, in, out any) (bool, any) {
	s, i := st.(state), in.(input)
	switch i.op {
	case opGet:
		want := getOut{err: errNotFound, id: -1}
		if p := s[i.uid]; p.st != stAbsent {
			want = getOut{id: podID(i.uid, p.node, p.ver)}
		}
		return out == any(want), s
	case opIsAssumed:
		return out == any(b2i(s[i.uid].st == stAssumed)), s
	case opPodCount:
		return out == any(observe(s).podCount), s
	case opNodeCount:
		return out == any(observe(s).nodeCount), s
	case opSnapshot:
		return out == any(observe(s)), s
	}
	next, code := apply(s, i)
	return out == any(code), next
}

func hashState(st any) uint64 {
	var h uint64
	for _, p := range st.(state) {
		h = h<<8 | uint64(p.st)<<6 | uint64(p.node)<<3 | uint64(p.ver)
	}
	return h
}

func describeOp(in, out any) string {
	i := in.(input)
	switch o := out.(type) {
	case getOut:
		if o.err != errNone {
			return fmt.Sprintf("%v -> %v", i, o.err)
		}
		return fmt.Sprintf("%v -> %s", i, describeID(o.id))
	case errCode:
		return fmt.Sprintf("%v -> %v", i, o)
	}
	return fmt.Sprintf("%v -> %v", i, out)
}

// cacheModel is the porcupine model. It is deliberately not partitioned:
// snapshot reads and the counts observe every key at once.
var cacheModel = porcupine.Model{
	Init:              func() any { return state{} },
	Step:              step,
	Hash:              hashState,
	DescribeOperation: describeOp,
	DescribeState:     func(st any) string { return st.(state).String() },
}
