package schedcache

import (
	"context"
	"errors"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/actor"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
)

type (
	// Fork is a private, mutable what-if copy of a snapshot
	// (Snapshot.Fork); see snapshot.Fork for its contract and costs.
	Fork = snapshot.Fork
	// ForkPoint names a fork point of a Fork (Fork.Point).
	ForkPoint = snapshot.ForkPoint
	// CommitConflictError is returned by Commit and AssumePodIfGeneration
	// when the optimistic check fails; nothing was applied. It lists the
	// nodes and pods that conflicted and wraps ErrCommitConflict.
	CommitConflictError = actor.CommitConflictError
)

var (
	// ErrCommitConflict is wrapped by *CommitConflictError.
	ErrCommitConflict = actor.ErrCommitConflict
	// ErrNoForkPoint: Fork.Revert or Fork.Commit without a fork point.
	ErrNoForkPoint = snapshot.ErrNoForkPoint
	// ErrStaleForkPoint: Fork.RevertTo with a point not on the fork's stack.
	ErrStaleForkPoint = snapshot.ErrStaleForkPoint
	// ErrForkListInconsistent: a node operation on a fork whose node list
	// does not match its zone tree.
	ErrForkListInconsistent = snapshot.ErrForkListInconsistent
	// ErrNilFork: Commit of a nil fork.
	ErrNilFork = errors.New("schedcache: nil fork")
	// ErrForkNodeChanges: Commit of a fork whose node objects changed
	// (AddNode, UpdateNode, RemoveNode on the fork); node objects come
	// from the API server, so a commit carries pod changes only.
	ErrForkNodeChanges = errors.New("schedcache: fork changed node objects; only pod changes can be committed")
)

// Operation kinds of Commit and AssumePodIfGeneration, as counted in Stats.
const (
	OpCommit      = actor.OpCommit
	OpAssumeIfGen = actor.OpAssumeIfGen
)

// CommitOption configures Commit; Commit applies it on the caller's
// goroutine.
type CommitOption func(*commitConfig)

// commitConfig is Commit's configuration; owned by Commit's caller.
type commitConfig struct {
	check func(name string, base, live *NodeInfo) bool // nil: the generation check
}

// CommitIf replaces Commit's default node check (every touched node's live
// NodeInfo generation equals the fork base's) with check, called for each
// touched node with its NodeInfo in the fork's base and live (nil when the
// node has no object): a weaker condition such as "the pods I add still
// fit". check runs on the goroutine that holds the coordinator's token
// while it applies the commit (the coordinator's, or a caller's running
// inline): it must be fast and must not call the cache. A panic in it
// counts as a failed check. Pod checks (every changed pod is live as in
// the base) and the capacity checks always apply.
func CommitIf(check func(name string, base, live *NodeInfo) bool) CommitOption {
	return func(c *commitConfig) { c.check = check }
}

// Commit applies the pod changes fork made since its base (Fork.Base) to
// the cache, atomically: one coordinator operation, published in one
// snapshot, so every reader sees all of them or none. The cache first
// publishes what is pending if it touched the fork's nodes, then checks:
//   - every changed pod is live exactly as in the base (the same object,
//     assumed or not, or absent);
//   - every touched node (the node of a changed pod, before and after) is
//     unchanged: its live NodeInfo generation equals the base's (0 when it
//     has no object), unless CommitIf chose another check;
//   - every node receiving pods has its object and room for them
//     (nodeinfo.MaxPodsPerNode).
//
// If a check fails nothing is applied and Commit returns a
// *CommitConflictError (errors.Is ErrCommitConflict) listing the nodes and
// pods, or a *PodError wrapping ErrTooManyPods. Otherwise the changes are
// applied as the cache's operations (forget/remove, then confirm or
// update, then assume/add). A fork with node changes is refused with
// ErrForkNodeChanges, a nil fork with ErrNilFork. ctx is checked before
// the commit is submitted and again when its turn comes: a commit whose
// ctx is done by then is not applied and returns ctx's error. The wait
// in between lasts as long as the operations queued before the commit
// (the coordinator waits on nothing else), so Commit returns either the
// commit's outcome or ctx's error, never an unknown outcome.
//
// Contract: safe for concurrent use; fork must be owned by the caller for
// the duration of the call, and is not changed. Cost: O(changed pods) on
// the caller (their PodInfos) and on the coordinator, plus at most one
// publication of the pending epoch.
func (c *Cache) Commit(ctx context.Context, fork *Fork, opts ...CommitOption) error {
	if err := c.started(); err != nil {
		return err
	}
	if fork == nil {
		return ErrNilFork
	}
	var cfg commitConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if fork.NodeChanges() > 0 {
		return ErrForkNodeChanges
	}
	base := fork.Base()
	b := &actor.CommitBatch{Check: cfg.check, Ctx: ctx}
	touched := map[string]struct{}{}
	var err error
	fork.PodChanges(func(pc snapshot.PodChange) bool {
		p := actor.CommitPod{Key: pc.Key}
		if pc.InBase {
			p.Base, p.BaseAssumed = pc.Base.Pod, pc.Base.Assumed
			touched[pc.Base.Pod.Spec.NodeName] = struct{}{}
		}
		if pc.InNow {
			if p.New, err = nodeinfo.NewPodInfo(pc.Now.Pod); err != nil {
				err = &PodError{Op: "Commit", Key: pc.Key, Err: err}
				return false
			}
			p.NewAssumed = pc.Now.Assumed
			touched[pc.Now.Pod.Spec.NodeName] = struct{}{}
		}
		b.Pods = append(b.Pods, p)
		return true
	})
	if err != nil {
		return err
	}
	if len(b.Pods) == 0 {
		return nil
	}
	sort.Slice(b.Pods, func(i, j int) bool { return b.Pods[i].Key < b.Pods[j].Key })
	for name := range touched {
		ni, _ := base.Get(name)
		b.Nodes = append(b.Nodes, actor.CommitNode{Name: name, Gen: ni.Generation(), Base: ni})
	}
	sort.Slice(b.Nodes, func(i, j int) bool { return b.Nodes[i].Name < b.Nodes[j].Name })
	if err := ctx.Err(); err != nil {
		return err
	}
	op := c.a.NewOp()
	op.Kind, op.Batch = actor.OpCommit, b
	return c.do(op).Err
}

// AssumePodIfGeneration is AssumePod on the condition that the live
// NodeInfo of pod.Spec.NodeName still has generation (the one the caller's
// snapshot showed; 0 for a node without object): otherwise it returns a
// *CommitConflictError naming the node (errors.Is ErrCommitConflict) and
// assumes nothing. It is the optimistic concurrency check of a parallel,
// Omega-style scheduler: decide on a snapshot, assume only if the node did
// not change meanwhile, else decide again. Stats counts the conflicts.
// It publishes the pending epoch first only if that changed the node.
func (c *Cache) AssumePodIfGeneration(pod *v1.Pod, generation int64) error {
	if err := c.started(); err != nil {
		return err
	}
	op, err := c.infoOp(actor.OpAssumeIfGen, pod)
	if err != nil {
		return err
	}
	op.Gen = generation
	return c.do(op).Err
}
