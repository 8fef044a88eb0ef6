package errs

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/nodetree"
)

// The pod state machine's rules: which operation a cached pod's state
// refuses, and with which error. The cache's coordinator (actor's core) and
// what-if forks (snapshot.Fork) both decide with these functions and then
// apply the change to their own state; they are pure and safe for
// concurrent use.

// Cached is what the rules read of a pod's cached state. A value.
type Cached struct {
	OK      bool   // the pod is cached
	Assumed bool   // it is assumed (valid when OK)
	Node    string // the stored pod's node name (valid when OK)
}

// CheckAssume returns AssumePod's refusal of pod key on node, or nil: a
// cached pod (ErrPodAlreadyCached), a full node (ErrTooManyPods; full is
// asked only then).
func CheckAssume(key, node string, cur Cached, full func(node string) bool) error {
	if cur.OK {
		return &PodError{Op: "AssumePod", Key: key, Node: node, Err: ErrPodAlreadyCached}
	}
	if full(node) {
		return &PodError{Op: "AssumePod", Key: key, Node: node, Err: ErrTooManyPods}
	}
	return nil
}

// CheckForget returns ForgetPod's refusal of pod (the caller's object,
// key its UID), or nil; apply is false when there is nothing to do (the
// pod is not cached: a no-op, as upstream).
func CheckForget(op, key string, pod *v1.Pod, cur Cached) (apply bool, err error) {
	if !cur.OK {
		return false, nil
	}
	if pod.Spec.NodeName != cur.Node {
		return false, &PodError{Op: op, Key: key, Node: pod.Spec.NodeName, Err: ErrPodNodeMismatch, Stored: cur.Node}
	}
	if !cur.Assumed {
		return false, &PodError{Op: op, Key: key, Node: pod.Spec.NodeName, Err: ErrPodNotAssumed}
	}
	return true, nil
}

// CheckAdd returns AddPod's refusal of pod key on node, or nil: an added
// pod (ErrPodAlreadyAdded), a pod that would be one more on a full node
// (ErrTooManyPods: a confirmation on the assumed pod's own node swaps one
// pod for another).
func CheckAdd(key, node string, cur Cached, full func(node string) bool) error {
	if cur.OK && !cur.Assumed {
		return &PodError{Op: "AddPod", Key: key, Node: node, Err: ErrPodAlreadyAdded}
	}
	if (!cur.OK || cur.Node != node) && full(node) {
		return &PodError{Op: "AddPod", Key: key, Node: node, Err: ErrTooManyPods}
	}
	return nil
}

// CheckUpdate returns UpdatePod's refusal of oldPod (found by its UID,
// key) becoming a pod with newKey on newNode, or nil: a pod not cached
// (ErrPodNotFound), an assumed one (ErrPodAssumed), a new pod on another
// node (*CorruptionError), an old pod naming another node
// (ErrPodNodeMismatch), a new UID another cached pod holds
// (ErrUIDMismatch; taken is asked only for a new UID).
func CheckUpdate(key string, oldPod *v1.Pod, newKey, newNode string, cur Cached, taken func(key string) bool) error {
	if !cur.OK {
		return &PodError{Op: "UpdatePod", Key: key, Err: ErrPodNotFound}
	}
	if cur.Assumed {
		return &PodError{Op: "UpdatePod", Key: key, Err: ErrPodAssumed}
	}
	if newNode != cur.Node {
		return &CorruptionError{Op: "UpdatePod", Key: key, CachedNode: cur.Node, GivenNode: newNode}
	}
	if oldPod.Spec.NodeName != cur.Node {
		return &PodError{Op: "UpdatePod", Key: key, Node: oldPod.Spec.NodeName, Err: ErrPodNodeMismatch}
	}
	if newKey != key && taken(newKey) {
		return &PodError{Op: "UpdatePod", Key: key, Node: cur.Node, Err: ErrUIDMismatch}
	}
	return nil
}

// CheckRemove returns RemovePod's refusal of pod (key its UID), or nil: a
// pod not cached (ErrPodNotFound), a non-empty node name other than the
// stored pod's (*CorruptionError: upstream exits).
func CheckRemove(key string, pod *v1.Pod, cur Cached) error {
	if !cur.OK {
		return &PodError{Op: "RemovePod", Key: key, Err: ErrPodNotFound}
	}
	if pod.Spec.NodeName != cur.Node && pod.Spec.NodeName != "" {
		return &CorruptionError{Op: "RemovePod", Key: key, CachedNode: cur.Node, GivenNode: pod.Spec.NodeName}
	}
	return nil
}

// The argument rules: every call of the cache or of a fork refuses a pod
// argument without a key and a nil node the same way, as a *PodError or
// a *NodeError naming the operation, so that errors.Is and errors.As
// answer alike whichever call was misused.

// NilName is the name a refusal gives a nil pod or node.
const NilName = "<nil>"

// PodArg returns op's refusal of pod, which has no key (err is
// nodeinfo.PodKey's or nodeinfo.NewPodInfo's): a *PodError wrapping err,
// keyed by the pod's namespace/name, or NilName. An err that is already a
// *PodError is returned as it is.
func PodArg(op string, pod *v1.Pod, err error) error {
	if pe, ok := err.(*PodError); ok {
		return pe
	}
	name := NilName
	if pod != nil {
		name = pod.Namespace + "/" + pod.Name
	}
	return &PodError{Op: op, Key: name, Err: err}
}

// NilNode returns op's refusal of a nil node argument.
func NilNode(op string) error {
	return &NodeError{Op: op, Name: NilName, Err: nodeinfo.ErrNilNode}
}

// CheckUpdateNodeArgs returns UpdateNode's refusal from its arguments
// alone, or nil: a nil newNode, and a nil oldNode with a zoned newNode
// (upstream reads the nil node's labels and panics, after it changed its
// state); both wrap nodeinfo.ErrNilNode. A nil oldNode stands for a node
// without zone labels.
func CheckUpdateNodeArgs(oldNode, newNode *v1.Node) error {
	if newNode == nil {
		return NilNode("UpdateNode")
	}
	if oldNode == nil && nodetree.ZoneKey(newNode) != "" {
		return &NodeError{Op: "UpdateNode", Name: newNode.Name, Err: nodeinfo.ErrNilNode}
	}
	return nil
}

// CheckUpdateNodeName returns UpdateNode's refusal of an oldNode with
// another name, or nil: when the zone keys differ and oldNode's zone
// lists that other name for a node held with its object, upstream would
// drop that node from the zone order while it keeps its object, so it is
// never listed again (ErrNodeNameMismatch). inZone asks the zone tree;
// live whether a name has its node object. Call it after
// CheckUpdateNodeArgs.
func CheckUpdateNodeName(oldNode, newNode *v1.Node, inZone func(name, zone string) bool, live func(name string) bool) error {
	if oldNode == nil || oldNode.Name == newNode.Name {
		return nil
	}
	if oldZone := nodetree.ZoneKey(oldNode); oldZone != nodetree.ZoneKey(newNode) && inZone(oldNode.Name, oldZone) && live(oldNode.Name) {
		return &NodeError{Op: "UpdateNode", Name: newNode.Name, Err: ErrNodeNameMismatch}
	}
	return nil
}

// NodeNotFound returns op's refusal of a node without an entry.
func NodeNotFound(op, name string) error {
	return &NodeError{Op: op, Name: name, Err: ErrNodeNotFound}
}

// RemoveNodeNotInZone returns RemoveNode's error for a node missing from
// the zone its labels name (treeErr, wrapping nodetree.ErrNodeNotInZone),
// which upstream returns after the entry changed: a *NodeError matching
// both ErrNodeNotFound and nodetree.ErrNodeNotInZone.
func RemoveNodeNotInZone(name string, treeErr error) error {
	return &NodeError{Op: "RemoveNode", Name: name, Err: fmt.Errorf("%w: %w", ErrNodeNotFound, treeErr)}
}
