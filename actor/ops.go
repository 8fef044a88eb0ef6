package actor

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/schedcache/schedcache/internal/hooks"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/shard"
)

// Clock is the time source of the coordinator (injectable for tests).
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the subset of *time.Timer the coordinator uses.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// OpKind names a coordinator operation.
type OpKind uint8

// The operations: one per write of the cache (the root's method of the
// same name builds it), then the barriers, Commit and the conditional
// assume. Stats counts them by kind.
const (
	OpAssumePod OpKind = iota + 1
	OpFinishBinding
	OpForgetPod
	OpAddPod
	OpUpdatePod
	OpRemovePod
	OpAddNode
	OpUpdateNode
	OpRemoveNode
	OpGetNode // barrier: served after the pending epoch is published
	OpDump    // barrier
	OpSync    // barrier: no effect; replies once everything before it is published
	// OpCommit applies a CommitBatch (commit.go) as one operation, after
	// publishing the pending epoch if it touched the batch's nodes.
	OpCommit
	// OpAssumeIfGen is AssumePod if the node's generation is Gen.
	OpAssumeIfGen
	// OpRemoveAssumedPod is ForgetPod of an assumed pod deleted from the
	// cluster: a pod-group member leaves its group instead of returning
	// to its unscheduled pods (upstream v1.37's RemoveAssumedPod).
	OpRemoveAssumedPod
	// OpPodGroupMember adds, updates or removes an unscheduled pod in its
	// pod group (Group.Action; Pod, and Group.OldPod for updates).
	OpPodGroupMember
	// OpPodGroup adds, updates or removes a PodGroup object.
	OpPodGroup
	// OpCompositePodGroup adds, updates or removes a CompositePodGroup.
	OpCompositePodGroup
)

// GroupAction is what a pod-group operation does.
type GroupAction uint8

// The pod-group actions.
const (
	GroupAdd GroupAction = iota + 1
	GroupUpdate
	GroupRemove
)

// GroupArgs are the arguments of the pod-group operations.
type GroupArgs struct {
	Action      GroupAction
	OldPod      *v1.Pod // OpPodGroupMember, GroupUpdate
	OldPG, PG   *schedulingv1beta1.PodGroup
	OldCPG, CPG *schedulingv1alpha3.CompositePodGroup
}

var opNames = [...]string{"", "AssumePod", "FinishBinding", "ForgetPod", "AddPod", "UpdatePod", "RemovePod",
	"AddNode", "UpdateNode", "RemoveNode", "GetNode", "Dump", "Sync", "Commit", "AssumePodIfGeneration",
	"RemoveAssumedPod", "PodGroupMember", "PodGroup", "CompositePodGroup"}

// barrier reports whether k is served after the pending epoch is
// published, from the run goroutine only (GetNode, Dump, Sync).
func (k OpKind) barrier() bool { return k == OpGetNode || k == OpDump || k == OpSync }

func (k OpKind) String() string {
	if int(k) < len(opNames) && k > 0 {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one request to the coordinator. The caller fills it, hands it over
// with Do or Submit, and must not touch it until the reply (Do) or ever
// again (Submit).
type Op struct {
	Kind    OpKind
	Info    *nodeinfo.PodInfo // AssumePod, AddPod, UpdatePod (new pod)
	Pod     *v1.Pod           // the caller's pod: FinishBinding, ForgetPod, RemovePod, UpdatePod (old pod)
	Key     string            // pod key
	Node    *v1.Node          // AddNode, UpdateNode (new), RemoveNode
	OldNode *v1.Node          // UpdateNode
	Name    string            // GetNode
	Batch   *CommitBatch      // Commit
	Gen     int64             // AssumeIfGen: the node generation the caller saw
	Group   *GroupArgs        // the pod-group operations

	async bool
	res   Result
	reply chan Result // cap 1; owned by the Op
}

// Result is the coordinator's answer to one Op.
type Result struct {
	Err  error
	Node *nodeinfo.NodeInfo // AddNode, UpdateNode, GetNode
	Dump *Dump              // Dump
}

// Dump is a copy of the whole cache state (upstream's Dump).
type Dump struct {
	Nodes       map[string]*nodeinfo.NodeInfo // every entry, ghosts and nodeless ones included
	AssumedPods map[string]struct{}
}

// AsyncError reports an operation submitted without waiting that failed.
type AsyncError struct {
	Kind    OpKind
	Pod     *v1.Pod  // the pod of the event (new pod for updates)
	OldPod  *v1.Pod  // UpdatePod
	Node    *v1.Node // node events (new node for updates)
	OldNode *v1.Node
	Err     error
}

// NewOp returns a cleared Op from the coordinator's pool. Release it with
// PutOp once its reply arrived (Do returned). The pool is per coordinator so
// that reply channels never cross a testing/synctest bubble.
func (a *Coordinator) NewOp() *Op { return a.ops.Get().(*Op) }

// PutOp returns op to the pool.
func (a *Coordinator) PutOp(op *Op) {
	reply := op.reply
	*op = Op{reply: reply}
	a.ops.Put(op)
}

// Options configure a Coordinator.
type Options struct {
	Shards       int           // shard goroutines (>= 1)
	TTL          time.Duration // assumed-pod TTL after FinishBinding; 0: never expire
	Period       time.Duration // pause between expiry passes
	Clock        Clock
	MailboxSize  int // bounded mailbox: submitters block when it is full
	MaxBatch     int // operations applied per publication at most
	ExpiryChunk  int // pods expired per step at most, so others interleave
	OnAsyncError func(AsyncError)
	// Dispatcher queues the API calls of BindPod (nil: BindPod refuses).
	Dispatcher Dispatcher
	// GenericWorkload and CompositePodGroup are upstream's feature gates
	// of the same names: pod groups and composite pod groups are kept
	// only while they are on (upstream's cache.New arguments).
	GenericWorkload, CompositePodGroup bool
	// SerialTiming times the serial section (SerialStats) with Clock (none
	// without one), on the token holder, with chained readings: n+3 for a
	// batch of n ops (its start, one after each op, the publication's,
	// which Stats.PublishedAt shares, and its end).
	SerialTiming bool

	faults faultHooks // fault injection for the module's tests; set through internal/hooks only
}

// faultHooks are the fault-injection hooks of the module's tests. op, when
// non-nil, runs on the token holder's goroutine (the coordinator's, or a
// caller's running inline) before each operation is applied; shard runs
// before each shard request, on the shard's goroutine or the inline
// caller's. Not part of the API: the root's tests reach them through
// internal/cachetest, actor's own tests set them directly.
type faultHooks struct {
	op    func(*Op)
	shard func(shardIdx int, req shard.Request)
}

// The root's fault-injection option (internal/cachetest.WithFaultHooks)
// sets the hooks of an Options through internal/hooks.
func init() {
	hooks.ActorFaults = func(o any, op func(kind string), shardHook func(shardIdx int)) {
		opts := o.(*Options)
		if op != nil {
			opts.faults.op = func(o *Op) { op(o.Kind.String()) }
		}
		if shardHook != nil {
			opts.faults.shard = func(i int, _ shard.Request) { shardHook(i) }
		}
	}
}
