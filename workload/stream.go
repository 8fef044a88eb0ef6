package workload

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// PodEventKind is the kind of an Event, a plain value; the zero value is
// AddPod.
type PodEventKind int

// Event kinds.
const (
	AddPod PodEventKind = iota
	UpdatePod
	RemovePod
	AddNode
	UpdateNode
	RemoveNode
	NumEventKinds // the number of kinds; not a kind
)

var kindNames = [NumEventKinds]string{"AddPod", "UpdatePod", "RemovePod", "AddNode", "UpdateNode", "RemoveNode"}

// String returns the constant's name.
func (k PodEventKind) String() string {
	if k >= 0 && k < NumEventKinds {
		return kindNames[k]
	}
	return "PodEventKind(" + strconv.Itoa(int(k)) + ")"
}

// IsPod reports whether k is AddPod, UpdatePod or RemovePod.
func (k PodEventKind) IsPod() bool { return k >= AddPod && k <= RemovePod }

// Event is one informer notification for a cache. Its objects are read-only:
// the stream keeps them as its live state and later events refer to them.
// The fields set, by kind:
//
//	AddPod:     Pod
//	UpdatePod:  OldPod (the live version), Pod (the new one: same UID and node)
//	RemovePod:  Pod (the live version)
//	AddNode:    Node
//	UpdateNode: OldNode (the live version), Node
//	RemoveNode: Node (the live version)
type Event struct {
	Kind    PodEventKind
	Pod     *v1.Pod
	OldPod  *v1.Pod
	Node    *v1.Node
	OldNode *v1.Node
}

// Stream is an operation stream; its implementations are not safe for
// concurrent use. Next returns the next event; Generate(n) returns the next n
// events, as n calls of Next would.
type Stream interface {
	Next() Event
	Generate(n int) []Event
}

var (
	_ Stream = (*InformerChurn)(nil)
	_ Stream = (*NodeChurn)(nil)
)

// ChurnMix is a plain value: the proportions of an informer churn stream.
type ChurnMix struct {
	Add, Update, Remove int // relative weights of the pod event kinds
	// NodeUpdateEvery is the number of pod events after which one node status
	// update follows; 0 means none.
	NodeUpdateEvery int
}

// W2Mix returns the mix of workload W2: Add/Update/Remove 40/20/40 and one
// node status update per 100 pod events.
func W2Mix() ChurnMix { return ChurnMix{Add: 40, Update: 20, Remove: 40, NodeUpdateEvery: 100} }

// W1Mix returns the writer mix of workload W1: Add/Remove 50/50, no updates.
func W1Mix() ChurnMix { return ChurnMix{Add: 50, Remove: 50} }

// Streams draw from these streams of their seed, apart from Build's.
const (
	informerChurnStream = 1<<62 + iota
	nodeChurnStream
)

// churn is the state of a pod churn stream: the live pods and nodes as a
// cache that applied every event so far holds them.
type churn struct {
	r      *rand.Rand
	mix    ChurnMix
	total  int
	images []ImageSpec
	pods   []*v1.Pod  // live pods, in no order
	nodes  []*v1.Node // live nodes, in no order
	// nextPod is the index of the next fresh pod name.
	nextPod int
	// rv is the last resource version handed out; generated objects have "1".
	rv uint64
	// heartbeats counts node status updates.
	heartbeats      int64
	sinceNodeUpdate int
}

func newChurn(c *Cluster, seed int64, stream uint64, mix ChurnMix) churn {
	if mix.Add < 0 || mix.Update < 0 || mix.Remove < 0 || mix.Add+mix.Update+mix.Remove == 0 || mix.NodeUpdateEvery < 0 {
		panic(fmt.Sprintf("workload: invalid ChurnMix %+v", mix))
	}
	if len(c.Nodes) == 0 {
		panic("workload: churn needs a cluster with nodes")
	}
	return churn{
		r:       rand.New(newPCG(seed, stream)),
		mix:     mix,
		total:   mix.Add + mix.Update + mix.Remove,
		images:  c.Images,
		pods:    slices.Clone(c.Pods),
		nodes:   slices.Clone(c.Nodes),
		nextPod: len(c.Pods),
		rv:      1,
	}
}

// nextRV returns the next resource version.
func (s *churn) nextRV() uint64 {
	s.rv++
	return s.rv
}

// next returns the next pod event or W2 node status update.
func (s *churn) next() Event {
	if s.mix.NodeUpdateEvery > 0 && s.sinceNodeUpdate >= s.mix.NodeUpdateEvery {
		s.sinceNodeUpdate = 0
		return s.nodeStatusUpdate()
	}
	s.sinceNodeUpdate++
	x := s.r.IntN(s.total)
	switch {
	case x < s.mix.Add || len(s.pods) == 0:
		node := s.nodes[s.r.IntN(len(s.nodes))]
		p := NewPod(s.r, PodName(s.nextPod), node.Name)
		s.nextPod++
		p.ResourceVersion = strconv.FormatUint(s.nextRV(), 10)
		s.pods = append(s.pods, p)
		return Event{Kind: AddPod, Pod: p}
	case x < s.mix.Add+s.mix.Update:
		i := s.r.IntN(len(s.pods))
		old := s.pods[i]
		p := updatedPod(old, s.nextRV())
		s.pods[i] = p
		return Event{Kind: UpdatePod, Pod: p, OldPod: old}
	default:
		i := s.r.IntN(len(s.pods))
		old := s.pods[i]
		last := len(s.pods) - 1
		s.pods[i] = s.pods[last]
		s.pods[last] = nil
		s.pods = s.pods[:last]
		return Event{Kind: RemovePod, Pod: old}
	}
}

// nodeStatusUpdate returns an UpdateNode of a random live node whose Ready
// heartbeat moved on by ten seconds.
func (s *churn) nodeStatusUpdate() Event {
	i := s.r.IntN(len(s.nodes))
	old := s.nodes[i]
	n := new(v1.Node)
	*n = *old
	n.ResourceVersion = strconv.FormatUint(s.nextRV(), 10)
	s.heartbeats++
	n.Status.Conditions = readyConditions(10 * s.heartbeats)
	s.nodes[i] = n
	return Event{Kind: UpdateNode, Node: n, OldNode: old}
}

func generate(n int, next func() Event) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = next()
	}
	return out
}

// InformerChurn is not safe for concurrent use. It generates workload W2
// against a cluster: pod Add/Update/Remove events and node status updates.
//
// It tracks the live pods and nodes itself, starting from the cluster, which
// it does not modify; so applied in order to a cache that holds the cluster,
// its events are always valid: it never adds a present pod and never updates
// or removes an absent one. Adds bind a new pod to a random node under a fresh
// name (PodName(n) for n counting up from len(c.Pods)); updates replace a
// random live pod with a new object of the same UID and node, flipped
// "track" label, new revision annotation and ResourceVersion; removes pick a
// random live pod. ResourceVersions count up from "2" within the stream.
type InformerChurn struct {
	s churn
}

// NewInformerChurn returns the W2 stream (W2Mix) for c, drawn from seed.
func NewInformerChurn(c *Cluster, seed int64) *InformerChurn {
	return NewInformerChurnMix(c, seed, W2Mix())
}

// NewInformerChurnMix returns an informer churn stream for c with the given
// mix, drawn from seed. It panics if a weight is negative, all are zero, or c
// has no nodes.
func NewInformerChurnMix(c *Cluster, seed int64, mix ChurnMix) *InformerChurn {
	return &InformerChurn{s: newChurn(c, seed, informerChurnStream, mix)}
}

// Next returns the next event.
func (s *InformerChurn) Next() Event { return s.s.next() }

// Generate returns the next n events.
func (s *InformerChurn) Generate(n int) []Event { return generate(n, s.Next) }

// NumPods returns the number of live pods after the events so far.
func (s *InformerChurn) NumPods() int { return len(s.s.pods) }

// NodeChurnMix is a plain value: the proportions of a node churn stream.
type NodeChurnMix struct {
	Pods ChurnMix // the informer churn it interleaves with
	// NodeOpEvery is the number of pod events after which one node add or
	// remove follows, alternately (a remove first); 0 means none.
	NodeOpEvery int
	// ZoneMoveEvery is the number of pod events after which one zone move
	// follows, offset by half a period from the node adds and removes; 0
	// means none.
	ZoneMoveEvery int
}

// W4Mix returns the mix of workload W4: W2, one node add or remove per 1,000
// pod events and one zone move per 1,000 pod events.
func W4Mix() NodeChurnMix { return NodeChurnMix{Pods: W2Mix(), NodeOpEvery: 1000, ZoneMoveEvery: 1000} }

// NodeChurn is not safe for concurrent use. It generates workload W4: the
// events of an InformerChurn interleaved with node adds, node removes and
// zone moves.
//
// Like InformerChurn its events are always valid in order: a removed node
// is a live one (its pods stay, as upstream allows, and later events may
// still update or remove them, but no pod is added to it); an added node is
// new, named NodeName(n) for n counting up from len(c.Nodes); a zone move is
// an UpdateNode of a live node whose zone label changes to another zone. It
// never removes the last node.
type NodeChurn struct {
	s             churn
	mix           NodeChurnMix
	sinceNodeOp   int
	sinceZoneMove int
	nodeOps       int
	nextNode      int
}

// NewNodeChurn returns the W4 stream (W4Mix) for c, drawn from seed.
func NewNodeChurn(c *Cluster, seed int64) *NodeChurn {
	return NewNodeChurnMix(c, seed, W4Mix())
}

// NewNodeChurnMix returns a node churn stream for c with the given mix, drawn
// from seed. It panics as NewInformerChurnMix does, or if a period is
// negative.
func NewNodeChurnMix(c *Cluster, seed int64, mix NodeChurnMix) *NodeChurn {
	if mix.NodeOpEvery < 0 || mix.ZoneMoveEvery < 0 {
		panic(fmt.Sprintf("workload: invalid NodeChurnMix %+v", mix))
	}
	return &NodeChurn{
		s:             newChurn(c, seed, nodeChurnStream, mix.Pods),
		mix:           mix,
		sinceZoneMove: mix.ZoneMoveEvery / 2,
		nextNode:      len(c.Nodes),
	}
}

// Next returns the next event.
func (s *NodeChurn) Next() Event {
	if s.mix.NodeOpEvery > 0 && s.sinceNodeOp >= s.mix.NodeOpEvery {
		s.sinceNodeOp = 0
		return s.addOrRemoveNode()
	}
	if s.mix.ZoneMoveEvery > 0 && s.sinceZoneMove >= s.mix.ZoneMoveEvery {
		s.sinceZoneMove = 0
		return s.zoneMove()
	}
	ev := s.s.next()
	if ev.Kind.IsPod() {
		s.sinceNodeOp++
		s.sinceZoneMove++
	}
	return ev
}

// Generate returns the next n events.
func (s *NodeChurn) Generate(n int) []Event { return generate(n, s.Next) }

// NumPods returns the number of live pods after the events so far.
func (s *NodeChurn) NumPods() int { return len(s.s.pods) }

// NumNodes returns the number of live nodes after the events so far.
func (s *NodeChurn) NumNodes() int { return len(s.s.nodes) }

func (s *NodeChurn) addOrRemoveNode() Event {
	c := &s.s
	remove := s.nodeOps%2 == 0 && len(c.nodes) > 1
	s.nodeOps++
	if remove {
		i := c.r.IntN(len(c.nodes))
		old := c.nodes[i]
		last := len(c.nodes) - 1
		c.nodes[i] = c.nodes[last]
		c.nodes[last] = nil
		c.nodes = c.nodes[:last]
		return Event{Kind: RemoveNode, Node: old}
	}
	n := NewNode(c.r, s.nextNode, c.images)
	s.nextNode++
	n.ResourceVersion = strconv.FormatUint(c.nextRV(), 10)
	c.nodes = append(c.nodes, n)
	return Event{Kind: AddNode, Node: n}
}

var zones = [3]string{ZoneA, ZoneB, ZoneC}

func (s *NodeChurn) zoneMove() Event {
	c := &s.s
	i := c.r.IntN(len(c.nodes))
	old := c.nodes[i]
	cur := old.Labels[v1.LabelTopologyZone]
	var others [2]string
	k := 0
	for _, z := range zones {
		if z != cur && k < len(others) {
			others[k] = z
			k++
		}
	}
	n := new(v1.Node)
	*n = *old
	n.ResourceVersion = strconv.FormatUint(c.nextRV(), 10)
	n.Labels = maps.Clone(old.Labels)
	n.Labels[v1.LabelTopologyZone] = others[c.r.IntN(k)]
	c.nodes[i] = n
	return Event{Kind: UpdateNode, Node: n, OldNode: old}
}
