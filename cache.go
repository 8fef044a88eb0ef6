// Package schedcache is a scheduler-state cache with the observable
// behaviour of the upstream kube-scheduler cache (k8s.io/kubernetes v1.35.4,
// pkg/scheduler/backend/cache), built as a lock-free actor system: a
// coordinator sequences every operation (its goroutine batches what is
// queued; an idle cache lets a synchronous caller take the coordinator's
// token and run its operation on its own goroutine), node state is
// sharded across goroutines that own it, and immutable snapshots are
// published copy-on-write through an atomic pointer.
//
// Readers never block writers and writers never wait for readers: Snapshot
// is one atomic load, and a snapshot once taken never changes.
//
// The klog.Logger parameters of the upstream-shaped methods (AssumePod,
// AddNode, UpdateSnapshot, ...) are there so that upstream callers keep
// their calls; they are ignored. The cache logs nothing on its write path:
// refusals come back as typed errors, and the failures of Async calls go
// to WithAsyncErrorHandler's handler (by default logged with klog).
package schedcache

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache/actor"
	"github.com/schedcache/schedcache/internal/errs"
	"github.com/schedcache/schedcache/internal/hooks"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/nodetree"
	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// Types shared with the sub-packages, under the names users see.
type (
	// NodeInfo is one node's immutable aggregate as a snapshot shows it
	// (upstream's NodeInfo after a clone).
	NodeInfo = nodeinfo.NodeInfo
	// PodInfo is a pod with what the cache precomputes for it (requests,
	// host ports, PVC keys, affinity flags); immutable.
	PodInfo = nodeinfo.PodInfo
	// Resource is a set of resource amounts (cpu in millicores, memory and
	// storage in bytes, scalars).
	Resource = nodeinfo.Resource
	// ImageStateSummary is an image's size and the number of nodes listing
	// it, as one clone shows them.
	ImageStateSummary = nodeinfo.ImageStateSummary
	// HostPortInfo is the set of host ports a node's pods use, by IP.
	HostPortInfo = nodeinfo.HostPortInfo
	// Snapshot is an immutable view published by the cache, or a snapshot
	// the caller owns and refreshes with UpdateSnapshot.
	Snapshot = snapshot.Snapshot
	// Dump is a copy of every node entry (ghosts and nodeless ones
	// included) and the set of assumed pod keys.
	Dump = actor.Dump
	// AsyncError is a failure of an operation submitted with an *Async
	// method, handed to WithAsyncErrorHandler's handler.
	AsyncError = actor.AsyncError
	// Clock is the time source the cache uses for TTL expiry (WithClock).
	Clock = actor.Clock
	// Timer is what a Clock's NewTimer returns.
	Timer = actor.Timer
	// PodError is a pod operation's typed error: the operation, the pod
	// key, the node, and the sentinel it wraps.
	PodError = actor.PodError
	// NodeError is a node operation's typed error.
	NodeError = actor.NodeError
	// CorruptionError is returned where upstream exits the process; the
	// cache is unchanged.
	CorruptionError = actor.CorruptionError
	// FailedError is returned by every write after an internal failure.
	FailedError = actor.FailedError
	// PanicError is a recovered panic of a shard, carried by FailedError.
	PanicError = shard.PanicError
	// InconsistentListError is what UpdateSnapshot (and Snapshot.Err)
	// report for a node list whose length differs from the zone tree's.
	InconsistentListError = snapshot.InconsistentListError
	// NodeInfoNotFoundError is what a snapshot's Get returns for a name it
	// lacks.
	NodeInfoNotFoundError = snapshot.NotFoundError
	// QuantityError refuses a pod amount that could make a node's totals
	// overflow (see MaxPodQuantity).
	QuantityError = nodeinfo.QuantityError
)

// Bounds that keep node totals from overflowing (the arithmetic is at
// nodeinfo.MaxPodQuantity): every per-pod amount a node sums (cpu in
// millicores, memory, ephemeral storage, each scalar, the non-zero cpu and
// memory, pod overhead included) is at most MaxPodQuantity in absolute
// value, or the call fails with a *QuantityError; a node entry holds at
// most MaxPodsPerNode pods, or the call fails with ErrTooManyPods. Both
// wrap ErrQuantityOverflow, and neither changes anything.
const (
	MaxPodQuantity = nodeinfo.MaxPodQuantity
	MaxPodsPerNode = nodeinfo.MaxPodsPerNode
)

// Errors. Every error the cache returns matches one of these with errors.Is.
var (
	// ErrNilPod: a nil *v1.Pod argument.
	ErrNilPod = nodeinfo.ErrNilPod
	// ErrNilNode: a nil *v1.Node argument (or UpdateNode's nil old node
	// where the new one has a zone).
	ErrNilNode = nodeinfo.ErrNilNode
	// ErrEmptyUID: a pod whose UID, its cache key, is empty.
	ErrEmptyUID = nodeinfo.ErrEmptyUID
	// ErrEmptyNodeName: an operation that needs a target node got a pod
	// without one (AssumePod and AddPod accept it, as upstream).
	ErrEmptyNodeName = actor.ErrEmptyNodeName
	// ErrClosed: the cache was closed (Close or New's context).
	ErrClosed = actor.ErrClosed
	// ErrFailed: the cache failed after an internal error and refuses
	// writes; a *FailedError carries the cause.
	ErrFailed = actor.ErrFailed
	// ErrPodAlreadyCached: AssumePod of a pod the cache holds.
	ErrPodAlreadyCached = actor.ErrPodAlreadyCached
	// ErrPodAlreadyAdded: AddPod of a pod already added (not assumed).
	ErrPodAlreadyAdded = actor.ErrPodAlreadyAdded
	// ErrPodNotFound: the pod is not in the cache.
	ErrPodNotFound = actor.ErrPodNotFound
	// ErrPodAssumed: UpdatePod of an assumed pod.
	ErrPodAssumed = actor.ErrPodAssumed
	// ErrPodNotAssumed: ForgetPod of a pod that is not assumed.
	ErrPodNotAssumed = actor.ErrPodNotAssumed
	// ErrPodNodeMismatch: the call's pod names another node than the
	// cached pod, where upstream refuses it.
	ErrPodNodeMismatch = actor.ErrPodNodeMismatch
	// ErrCorrupted: the call would corrupt the cache, where upstream exits
	// the process; a *CorruptionError carries the details.
	ErrCorrupted = actor.ErrCorrupted
	// ErrUIDMismatch: UpdatePod's new pod has another UID that is already
	// cached as another pod.
	ErrUIDMismatch = actor.ErrUIDMismatch
	// ErrNodeNotFound: the node is not in the cache.
	ErrNodeNotFound = actor.ErrNodeNotFound
	// ErrNodeNameMismatch: UpdateNode's old node names another live node
	// that the zone change would drop from the zone order.
	ErrNodeNameMismatch = actor.ErrNodeNameMismatch
	// ErrQuantityOverflow: an amount node totals could not hold (see
	// MaxPodQuantity and MaxPodsPerNode).
	ErrQuantityOverflow = nodeinfo.ErrQuantityOverflow
	// ErrTooManyPods: the pod's node already holds MaxPodsPerNode pods.
	// It wraps ErrQuantityOverflow.
	ErrTooManyPods = actor.ErrTooManyPods
	// ErrNodeNotInZone: RemoveNode of a node missing from the zone its
	// labels name (returned, wrapped, with ErrNodeNotFound).
	ErrNodeNotInZone = nodetree.ErrNodeNotInZone
	// ErrNodeInfoNotFound: a snapshot's Get of a name without a node
	// object in it.
	ErrNodeInfoNotFound = snapshot.ErrNodeInfoNotFound
	// ErrInconsistentList: the node list does not have as many entries as
	// the zone tree has nodes (UpdateSnapshot, Snapshot.Err).
	ErrInconsistentList = snapshot.ErrInconsistentList
	// ErrSnapshotPublished: an operation that would change a snapshot got
	// one from Cache.Snapshot; published snapshots are read-only.
	ErrSnapshotPublished = snapshot.ErrPublished
	// ErrNilSnapshot: UpdateSnapshot got a nil destination snapshot.
	ErrNilSnapshot = errors.New("schedcache: nil snapshot")
	// ErrInvalidArgument: New got a nil context, or an option an invalid
	// value (an *OptionError).
	ErrInvalidArgument = errors.New("schedcache: invalid argument")
	// ErrNotStarted is returned by every method of a nil or zero-value
	// *Cache: only New makes a usable one.
	ErrNotStarted = errors.New("schedcache: cache not made by New")
)

// NewEmptySnapshot returns an empty snapshot owned by the caller, to be
// refreshed with UpdateSnapshot (upstream's usage).
func NewEmptySnapshot() *Snapshot { return snapshot.NewEmptySnapshot() }

// NewSnapshot builds a standalone snapshot from pods and nodes, as
// upstream's cache.NewSnapshot.
func NewSnapshot(pods []*v1.Pod, nodes []*v1.Node) *Snapshot {
	return snapshot.NewSnapshot(pods, nodes)
}

// Option configures New. Options are applied in order; a later one wins.
type Option func(*options)

// options is New's configuration, filled by the Options on New's
// goroutine and handed to the coordinator as its actor.Options.
type options struct {
	a actor.Options
}

// WithTTL sets how long an assumed pod lives after FinishBinding before it
// expires (0, the default and upstream's production value: never).
func WithTTL(ttl time.Duration) Option { return func(o *options) { o.a.TTL = ttl } }

// WithPeriod sets the pause between expiry passes (default 1s, as upstream).
func WithPeriod(d time.Duration) Option { return func(o *options) { o.a.Period = d } }

// WithClock injects the time source (default: the time package).
func WithClock(c Clock) Option { return func(o *options) { o.a.Clock = c } }

// WithShards sets the number of shard goroutines that own node state
// (default max(1, GOMAXPROCS/2)).
func WithShards(n int) Option { return func(o *options) { o.a.Shards = n } }

// WithMailboxSize bounds the coordinator's mailbox (default 1024):
// submitters block while it is full.
func WithMailboxSize(n int) Option { return func(o *options) { o.a.MailboxSize = n } }

// WithMaxBatch bounds how many operations one publication covers (default 256).
func WithMaxBatch(n int) Option { return func(o *options) { o.a.MaxBatch = n } }

// WithSerialTiming times the serial section, what every operation waits
// for whatever the number of cores (see Cache.SerialStats). The token
// holder reads the cache's clock at a batch's start and end and after
// each operation; a publication's reading is the one Stats.PublishedAt
// takes anyway.
func WithSerialTiming() Option { return func(o *options) { o.a.SerialTiming = true } }

// WithExpiryChunk bounds how many pods one expiry step removes before
// other operations get their turn (default 64).
func WithExpiryChunk(n int) Option { return func(o *options) { o.a.ExpiryChunk = n } }

// WithAsyncErrorHandler receives the failures of operations submitted with
// the Async methods (ErrClosed included, for events accepted just before
// Close). It runs on a goroutine of its own, one error at a time, in
// submission order; it may call the cache. The default logs each failure
// with klog.
func WithAsyncErrorHandler(fn func(AsyncError)) Option {
	return func(o *options) { o.a.OnAsyncError = fn }
}

// The module's fault-injection tests reach their hooks through
// internal/cachetest; they are not part of the public API.
func init() {
	hooks.FaultHooks = func(coordinator func(kind string), shardHook func(shardIdx int)) any {
		return Option(func(o *options) { hooks.ActorFaults(&o.a, coordinator, shardHook) })
	}
}

// Cache is the scheduler cache.
//
// Contract: every method is safe for concurrent use. Mutating methods block
// until their effect is published: once one returns, every snapshot taken
// afterwards, by any goroutine, includes it. Snapshot, GetPod,
// IsAssumedPod, PodCount and NodeCount read the latest published snapshot
// and never block. The Async methods block only while the mailbox is full.
// After Close (or cancellation of New's context) every method returns
// ErrClosed; reads keep answering from the last snapshot.
type Cache struct {
	a         *actor.Coordinator // owns every goroutine of the cache
	groups    bool               // the GenericWorkload gate (WithPodGroups); immutable
	composite bool               // the CompositePodGroup gate; immutable
}

// OptionError is New's error for an option given an invalid value; it
// wraps ErrInvalidArgument.
type OptionError struct {
	Option string // the option's function name, e.g. "WithShards"
	Value  any    // the value it was given
	Rule   string // the rule the value breaks, e.g. "must not be negative"
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("schedcache: %s(%v): %s", e.Option, e.Value, e.Rule)
}
func (e *OptionError) Unwrap() error { return ErrInvalidArgument }

// New starts a cache. It stops when ctx is done or Close is called.
func New(ctx context.Context, opts ...Option) (*Cache, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	cfg := options{a: actor.Options{Shards: max(1, runtime.GOMAXPROCS(0)/2), Period: time.Second}}
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	o := cfg.a
	for _, c := range []struct {
		name string
		neg  bool
		val  any
	}{
		{"WithTTL", o.TTL < 0, o.TTL}, {"WithPeriod", o.Period < 0, o.Period}, {"WithShards", o.Shards < 0, o.Shards},
		{"WithMailboxSize", o.MailboxSize < 0, o.MailboxSize}, {"WithMaxBatch", o.MaxBatch < 0, o.MaxBatch},
		{"WithExpiryChunk", o.ExpiryChunk < 0, o.ExpiryChunk},
	} {
		if c.neg {
			return nil, &OptionError{Option: c.name, Value: c.val, Rule: "must not be negative"}
		}
	}
	if err := ctx.Err(); err != nil {
		// A cache started on a done context would refuse every call.
		return nil, fmt.Errorf("%w: New with a done context: %w", ErrClosed, err)
	}
	if o.Clock == nil {
		o.Clock = RealClock{}
	}
	if o.OnAsyncError == nil {
		o.OnAsyncError = logAsyncError
	}
	return &Cache{a: actor.Start(ctx, o), groups: o.GenericWorkload, composite: o.CompositePodGroup}, nil
}

// Close stops every goroutine of the cache and waits for them. Operations
// already applied are published first. Close is idempotent.
func (c *Cache) Close() error {
	if err := c.started(); err != nil {
		return err
	}
	c.a.Stop()
	return nil
}

// Done is closed once the cache has stopped.
func (c *Cache) Done() <-chan struct{} {
	if c.started() != nil {
		return closedChan
	}
	return c.a.Done()
}

// Err returns the failure that stopped the cache from accepting writes
// (see FailedError), or nil.
func (c *Cache) Err() error {
	if err := c.started(); err != nil {
		return err
	}
	return c.a.Failed()
}

func (c *Cache) do(op *actor.Op) actor.Result {
	r := c.a.Do(op)
	c.a.PutOp(op) // Do has returned: the coordinator no longer holds op
	return r
}

// call runs the op a builder made, or returns the builder's refusal: the
// synchronous form of every write.
func (c *Cache) call(op *actor.Op, err error) actor.Result {
	if err != nil {
		return actor.Result{Err: err}
	}
	return c.do(op)
}

// submit hands the op a builder made to the coordinator without waiting,
// or returns the builder's refusal: the asynchronous form of every write.
func (c *Cache) submit(op *actor.Op, err error) error {
	if err != nil {
		return err
	}
	if err := c.a.Submit(op); err != nil {
		c.a.PutOp(op)
		return err
	}
	return nil
}

// closedChan is what Done returns for a nil or zero-value Cache.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// started reports ErrNotStarted for a nil or zero-value Cache.
func (c *Cache) started() error {
	if c == nil || c.a == nil {
		return ErrNotStarted
	}
	return nil
}

// The op builders: each call's sync and async forms build their op here,
// with the same checks and the same refusals (argument rules in
// internal/errs: a *PodError or *NodeError naming the operation).

// podOp builds an op keyed by pod's UID.
func (c *Cache) podOp(kind actor.OpKind, pod *v1.Pod) (*actor.Op, error) {
	if err := c.started(); err != nil {
		return nil, err
	}
	key, err := nodeinfo.PodKey(pod)
	if err != nil {
		return nil, errs.PodArg(kind.String(), pod, err)
	}
	if err := c.checkMember(kind, pod); err != nil {
		return nil, err
	}
	op := c.a.NewOp()
	op.Kind, op.Pod, op.Key = kind, pod, key
	return op, nil
}

// infoOp builds an op carrying pod's PodInfo, precomputed on the caller's
// goroutine.
func (c *Cache) infoOp(kind actor.OpKind, pod *v1.Pod) (*actor.Op, error) {
	if err := c.started(); err != nil {
		return nil, err
	}
	info, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		return nil, errs.PodArg(kind.String(), pod, err)
	}
	if err := c.checkMember(kind, pod); err != nil {
		return nil, err
	}
	op := c.a.NewOp()
	op.Kind, op.Info, op.Key = kind, info, info.Key()
	return op, nil
}

// updatePodOp builds UpdatePod's op: newPod's PodInfo, oldPod found by
// its UID.
func (c *Cache) updatePodOp(oldPod, newPod *v1.Pod) (*actor.Op, error) {
	if err := c.started(); err != nil {
		return nil, err
	}
	if _, err := nodeinfo.PodKey(oldPod); err != nil {
		return nil, errs.PodArg(actor.OpUpdatePod.String(), oldPod, err)
	}
	if err := c.checkMember(actor.OpUpdatePod, oldPod); err != nil {
		return nil, err
	}
	op, err := c.infoOp(actor.OpUpdatePod, newPod)
	if err != nil {
		return nil, err
	}
	op.Pod = oldPod
	return op, nil
}

// nodeOp builds a node op: AddNode and RemoveNode (oldNode nil), and
// UpdateNode, refused here as far as its arguments alone decide.
func (c *Cache) nodeOp(kind actor.OpKind, oldNode, node *v1.Node) (*actor.Op, error) {
	if err := c.started(); err != nil {
		return nil, err
	}
	if kind == actor.OpUpdateNode {
		if err := errs.CheckUpdateNodeArgs(oldNode, node); err != nil {
			return nil, err
		}
	} else if node == nil {
		return nil, errs.NilNode(kind.String())
	}
	op := c.a.NewOp()
	op.Kind, op.Node, op.OldNode = kind, node, oldNode
	return op, nil
}

// barrierOp builds GetNode, Dump and Sync.
func (c *Cache) barrierOp(kind actor.OpKind, name string) (*actor.Op, error) {
	if err := c.started(); err != nil {
		return nil, err
	}
	op := c.a.NewOp()
	op.Kind, op.Name = kind, name
	return op, nil
}

// AssumePod marks pod as scheduled to pod.Spec.NodeName before binding
// and aggregates it into that node. The pod must not be cached. A pod
// without a node name is assumed on a nodeless entry named "" (counted by
// NodeCount and Dump, never in snapshots, removed with its last pod), as
// upstream.
func (c *Cache) AssumePod(logger klog.Logger, pod *v1.Pod) error {
	return errs.Named(c.call(c.infoOp(actor.OpAssumePod, pod)).Err, pod)
}

// FinishBinding starts the TTL of an assumed pod; for other pods it does
// nothing.
func (c *Cache) FinishBinding(logger klog.Logger, pod *v1.Pod) error {
	return c.call(c.podOp(actor.OpFinishBinding, pod)).Err
}

// ForgetPod removes an assumed pod (binding failed).
func (c *Cache) ForgetPod(logger klog.Logger, pod *v1.Pod) error {
	return errs.Named(c.call(c.podOp(actor.OpForgetPod, pod)).Err, pod)
}

// AddPod confirms an assumed pod (on its node or another), or adds a pod
// that is not cached (new, or expired).
func (c *Cache) AddPod(logger klog.Logger, pod *v1.Pod) error {
	return errs.Named(c.call(c.infoOp(actor.OpAddPod, pod)).Err, pod)
}

// UpdatePod replaces an added pod with newPod, found by oldPod's UID. A
// newPod with another UID renames the pod, as upstream. Refused, with
// nothing changed: newPod on another node than the cached pod
// (*CorruptionError: upstream exits), oldPod naming another node than the
// cached pod (ErrPodNodeMismatch), newPod's UID already cached as another
// pod (ErrUIDMismatch), nil pods and empty UIDs (upstream panics on a nil
// pod; with an empty new UID it removes the pod and then fails).
func (c *Cache) UpdatePod(logger klog.Logger, oldPod, newPod *v1.Pod) error {
	return errs.Named(c.call(c.updatePodOp(oldPod, newPod)).Err, oldPod)
}

// RemovePod removes a cached pod, assumed or added.
func (c *Cache) RemovePod(logger klog.Logger, pod *v1.Pod) error {
	return errs.Named(c.call(c.podOp(actor.OpRemovePod, pod)).Err, pod)
}

// GetPod returns the cached object of pod (matched by UID). The returned
// pod is shared: do not modify it.
func (c *Cache) GetPod(pod *v1.Pod) (*v1.Pod, error) {
	if err := c.started(); err != nil {
		return nil, err
	}
	key, err := nodeinfo.PodKey(pod)
	if err != nil {
		return nil, errs.PodArg("GetPod", pod, err)
	}
	e, ok := c.a.Snapshot().Pod(key)
	if !ok {
		return nil, &PodError{Op: "GetPod", Key: key, Err: ErrPodNotFound, Obj: errs.KObj(pod.Namespace, pod.Name)}
	}
	return e.Pod, nil
}

// IsAssumedPod reports whether pod is assumed.
func (c *Cache) IsAssumedPod(pod *v1.Pod) (bool, error) {
	if err := c.started(); err != nil {
		return false, err
	}
	key, err := nodeinfo.PodKey(pod)
	if err != nil {
		return false, errs.PodArg("IsAssumedPod", pod, err)
	}
	e, _ := c.a.Snapshot().Pod(key)
	return e.Assumed, nil
}

// PodCount returns the number of cached pods, assumed ones and pods on
// removed nodes included. The error is always nil.
func (c *Cache) PodCount() (int, error) {
	if err := c.started(); err != nil {
		return 0, err
	}
	return c.a.Snapshot().PodCount(), nil
}

// NodeCount returns the number of node entries, including removed nodes
// that still hold pods and entries created by pods naming unknown nodes.
func (c *Cache) NodeCount() int {
	if c.started() != nil {
		return 0
	}
	return c.a.Snapshot().NodeCount()
}

// AddNode adds node, or replaces the object of an existing entry, and
// returns the resulting NodeInfo (immutable).
func (c *Cache) AddNode(logger klog.Logger, node *v1.Node) (*NodeInfo, error) {
	r := c.call(c.nodeOp(actor.OpAddNode, nil, node))
	return r.Node, r.Err
}

// UpdateNode replaces the object of node newNode.Name (adding the node if
// it has no entry) and returns the resulting NodeInfo. As upstream, oldNode
// serves only the zone order: if its zone key differs from newNode's,
// oldNode.Name leaves oldNode's zone (ignored if it is not there) and
// newNode joins its own. oldNode should be the object previously added;
// nil stands for a node without zone labels. Refused, with nothing
// changed: a nil newNode (ErrNilNode), a nil oldNode with a zoned newNode
// (ErrNilNode: upstream panics), and an oldNode with another name whose
// zone change would unlist that other node while it keeps its object
// (ErrNodeNameMismatch).
func (c *Cache) UpdateNode(logger klog.Logger, oldNode, newNode *v1.Node) (*NodeInfo, error) {
	r := c.call(c.nodeOp(actor.OpUpdateNode, oldNode, newNode))
	return r.Node, r.Err
}

// RemoveNode removes node; an entry holding pods stays (as a ghost, not in
// snapshots) until its last pod leaves.
func (c *Cache) RemoveNode(logger klog.Logger, node *v1.Node) error {
	return c.call(c.nodeOp(actor.OpRemoveNode, nil, node)).Err
}

// GetNode returns a copy of the entry named name, ghosts and nodeless
// entries included.
func (c *Cache) GetNode(name string) (*NodeInfo, error) {
	r := c.call(c.barrierOp(actor.OpGetNode, name))
	return r.Node, r.Err
}

// Dump returns a copy of every entry and the set of assumed pod keys.
// It costs O(nodes + pods).
func (c *Cache) Dump() (*Dump, error) {
	r := c.call(c.barrierOp(actor.OpDump, ""))
	return r.Dump, r.Err
}

// Sync waits until every operation submitted before it (Async ones
// included) is applied and published.
func (c *Cache) Sync() error {
	return c.call(c.barrierOp(actor.OpSync, "")).Err
}

// Snapshot returns the latest published snapshot. It is one atomic load;
// the snapshot is immutable and may be kept for ever. It shows what a new
// snapshot refreshed by upstream's UpdateSnapshot at its epoch shows,
// except that each node's image counts are as of the node's last change
// (as in upstream's snapshot refreshed after every operation); use
// UpdateSnapshot for upstream's snapshots exactly.
func (c *Cache) Snapshot() *Snapshot {
	if c.started() != nil {
		return NewEmptySnapshot()
	}
	return c.a.Snapshot()
}

// UpdateSnapshot refreshes dst from the latest published snapshot exactly
// as upstream's UpdateSnapshot refreshes the scheduler's long-lived
// snapshot (see Snapshot.UpdateFrom): the first refresh of a new snapshot
// is O(1); later ones re-clone the nodes changed since, keep the node order
// unless nodes joined or left, and show each node's image counts as of the
// refresh that last cloned it. It returns the error upstream's
// UpdateSnapshot would return (an inconsistent node list),
// ErrSnapshotPublished if dst came from Snapshot, or ErrNilSnapshot.
func (c *Cache) UpdateSnapshot(logger klog.Logger, dst *Snapshot) error {
	if err := c.started(); err != nil {
		return err
	}
	if dst == nil {
		return ErrNilSnapshot
	}
	return dst.UpdateFrom(c.a.Snapshot())
}

// ---- asynchronous (informer-style) submission ----

// AddPodAsync submits AddPod without waiting for its result. Events are
// applied in submission order; failures go to the async error handler.
func (c *Cache) AddPodAsync(pod *v1.Pod) error {
	return c.submit(c.infoOp(actor.OpAddPod, pod))
}

// UpdatePodAsync submits UpdatePod without waiting for its result.
func (c *Cache) UpdatePodAsync(oldPod, newPod *v1.Pod) error {
	return c.submit(c.updatePodOp(oldPod, newPod))
}

// RemovePodAsync submits RemovePod without waiting for its result.
func (c *Cache) RemovePodAsync(pod *v1.Pod) error {
	return c.submit(c.podOp(actor.OpRemovePod, pod))
}

// AddNodeAsync submits AddNode without waiting for its result.
func (c *Cache) AddNodeAsync(node *v1.Node) error {
	return c.submit(c.nodeOp(actor.OpAddNode, nil, node))
}

// UpdateNodeAsync submits UpdateNode without waiting for its result.
func (c *Cache) UpdateNodeAsync(oldNode, newNode *v1.Node) error {
	return c.submit(c.nodeOp(actor.OpUpdateNode, oldNode, newNode))
}

// RemoveNodeAsync submits RemoveNode without waiting for its result.
func (c *Cache) RemoveNodeAsync(node *v1.Node) error {
	return c.submit(c.nodeOp(actor.OpRemoveNode, nil, node))
}

func logAsyncError(e AsyncError) {
	klog.Background().Error(e.Err, "schedcache: asynchronous operation failed", "op", e.Kind.String())
}

// RealClock is the default Clock: the time package.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
