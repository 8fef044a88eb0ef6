package actor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
)

// ErrCommitConflict is wrapped by *CommitConflictError: an optimistic
// check of Cache.Commit or Cache.AssumePodIfGeneration found the live
// state changed since the caller's snapshot, and nothing was applied.
var ErrCommitConflict = errors.New("schedcache: commit conflict: the cache changed since the snapshot")

// CommitConflictError lists what failed the optimistic check: nodes whose
// check failed and pods whose live state differs from the snapshot's
// (sorted). Nothing was applied. It wraps ErrCommitConflict.
type CommitConflictError struct {
	Nodes []string
	Pods  []string
}

func (e *CommitConflictError) Error() string {
	var b strings.Builder
	b.WriteString(ErrCommitConflict.Error())
	if len(e.Nodes) > 0 {
		fmt.Fprintf(&b, "; nodes %s", strings.Join(e.Nodes, ", "))
	}
	if len(e.Pods) > 0 {
		fmt.Fprintf(&b, "; pods %s", strings.Join(e.Pods, ", "))
	}
	return b.String()
}
func (e *CommitConflictError) Unwrap() error { return ErrCommitConflict }

// CommitPod is one pod's change in a commit: its state in the caller's
// snapshot (Base, nil when absent) and the state to apply (New, nil to
// remove it). Immutable once handed over.
type CommitPod struct {
	Key         string
	Base        *v1.Pod // the object the snapshot held; nil: absent
	BaseAssumed bool
	New         *nodeinfo.PodInfo // nil: remove the pod
	NewAssumed  bool
}

// CommitNode is a touched node and the generation of its NodeInfo in the
// caller's snapshot (0: no node object there), with that NodeInfo (nil
// when absent) for a caller's check.
type CommitNode struct {
	Name string
	Gen  int64
	Base *nodeinfo.NodeInfo
}

// CommitBatch is a commit: pod changes applied together, nodes checked.
// Check, if set, replaces the generation check of each node: it gets the
// node's NodeInfo in the snapshot and live (nil when absent) and returns
// whether the change may still be applied. It runs on the goroutine
// holding the coordinator's token and must not call the cache; a panic in
// it is a conflict. Ctx, if set, is checked when the commit is applied: a commit
// whose Ctx is done by then is not applied and fails with Ctx's error.
// Immutable once handed over.
type CommitBatch struct {
	Pods  []CommitPod
	Nodes []CommitNode
	Check func(name string, base, live *nodeinfo.NodeInfo) bool
	Ctx   context.Context
}

// commitNeedsFlush reports whether a touched node's entry changed in the
// pending epoch: its live NodeInfo is then not the last published one.
func (c *core) commitNeedsFlush(b *CommitBatch) bool {
	for _, n := range b.Nodes {
		if c.nodeStale(n.Name) {
			return true
		}
	}
	return false
}

// nodeStale reports whether the last committed snapshot may show another
// NodeInfo for name than the live one: its entry changed in the pending
// epoch, or was deleted in it.
func (c *core) nodeStale(name string) bool {
	if e := c.nodes[name]; e != nil {
		return e.dirty
	}
	_, err := c.builder.Last().Get(name)
	return err == nil
}

// liveInfo returns the live NodeInfo of name (its node object's entry in
// the last committed snapshot), nil if it has no node object. The caller
// made sure the entry did not change since that snapshot.
func (c *core) liveInfo(name string) *nodeinfo.NodeInfo {
	ni, err := c.builder.Last().Get(name)
	if err != nil {
		return nil
	}
	return ni
}

// checkFn runs a caller's check, a panic counting as a failed check.
func checkFn(fn func(name string, base, live *nodeinfo.NodeInfo) bool, n CommitNode, live *nodeinfo.NodeInfo) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return fn(n.Name, n.Base, live)
}

// ApplyCommit applies b atomically: it checks every pod and node first and
// returns a *CommitConflictError (or a *PodError wrapping ErrTooManyPods)
// with nothing changed if a check fails; otherwise it applies every change,
// removals first, as the cache's own operations. The caller (the
// coordinator) publishes the pending epoch first if commitNeedsFlush, so
// that live NodeInfos are the last committed ones. An operation failing
// after the checks is an invariant violation: Commit panics, which fails
// the cache before the epoch is published.
func (c *core) ApplyCommit(b *CommitBatch) error {
	if b.Ctx != nil {
		if err := b.Ctx.Err(); err != nil {
			return err // the caller gave up before the commit's turn came
		}
	}
	var badNodes, badPods []string
	for _, p := range b.Pods {
		r := c.pods[p.Key]
		switch {
		case p.Base == nil && r == nil:
		case p.Base != nil && r != nil && r.info.Pod() == p.Base && r.assumed == p.BaseAssumed:
		default:
			badPods = append(badPods, p.Key)
		}
	}
	for _, n := range b.Nodes {
		live := c.liveInfo(n.Name)
		var ok bool
		if b.Check != nil {
			ok = checkFn(b.Check, n, live)
		} else {
			ok = live.Generation() == n.Gen // 0 for nil
		}
		if !ok {
			badNodes = append(badNodes, n.Name)
		}
	}
	// Every node receiving pods has its object and room for them.
	count := map[string]int{}
	for _, p := range b.Pods {
		if p.Base != nil && (p.New == nil || p.Base != p.New.Pod() || p.BaseAssumed != p.NewAssumed) {
			count[p.Base.Spec.NodeName]--
		}
		if p.New != nil && (p.Base != p.New.Pod() || p.BaseAssumed != p.NewAssumed) {
			count[p.New.NodeName()]++
		}
	}
	for _, p := range b.Pods {
		if p.New == nil {
			continue
		}
		name := p.New.NodeName()
		e := c.nodes[name]
		if e == nil || e.node == nil {
			if !slices.Contains(badNodes, name) {
				badNodes = append(badNodes, name)
			}
			continue
		}
		if e.pods+count[name] > nodeinfo.MaxPodsPerNode {
			c.seq++
			return &PodError{Op: "Commit", Key: p.Key, Node: name, Err: ErrTooManyPods}
		}
	}
	if len(badNodes) > 0 || len(badPods) > 0 {
		c.seq++
		slices.Sort(badNodes)
		slices.Sort(badPods)
		return &CommitConflictError{Nodes: badNodes, Pods: badPods}
	}
	must := func(err error) {
		if err != nil {
			panic(fmt.Errorf("schedcache: commit operation failed after its checks passed: %w", err))
		}
	}
	// Removals first: forget or remove what leaves (or is replaced).
	for _, p := range b.Pods {
		if p.Base == nil || !commitRemoves(p) {
			continue
		}
		if p.BaseAssumed {
			must(c.ForgetPod(p.Key, p.Base))
		} else {
			must(c.RemovePod(p.Key, p.Base))
		}
	}
	// Then confirmations, updates and additions.
	for _, p := range b.Pods {
		switch {
		case p.New == nil, p.Base != nil && p.Base == p.New.Pod() && p.BaseAssumed == p.NewAssumed:
		case p.Base != nil && !commitRemoves(p) && p.BaseAssumed:
			must(c.AddPod(p.New)) // confirm an assumed pod
		case p.Base != nil && !commitRemoves(p):
			must(c.UpdatePod(p.Base, p.New))
		case p.NewAssumed:
			must(c.AssumePod(p.New))
		default:
			must(c.AddPod(p.New))
		}
	}
	return nil
}

// commitRemoves reports whether p's base pod is taken out before the new
// state is applied: it leaves, or its new state is not one operation away
// (a confirmation of an assumed pod, an update of an added pod on its
// node).
func commitRemoves(p CommitPod) bool {
	switch {
	case p.Base == nil:
		return false
	case p.New == nil:
		return true
	case p.Base == p.New.Pod() && p.BaseAssumed == p.NewAssumed:
		return false
	case p.BaseAssumed && !p.NewAssumed:
		return false // AddPod confirms, on any node
	case !p.BaseAssumed && !p.NewAssumed && p.Base.Spec.NodeName == p.New.NodeName():
		return false // UpdatePod
	default:
		return true
	}
}

// assumeNeedsFlush reports whether node name changed in the pending epoch.
func (c *core) assumeNeedsFlush(name string) bool { return c.nodeStale(name) }

// AssumePodIfGeneration is AssumePod if the live NodeInfo of the pod's node
// has generation gen (0: the node has no object), else a
// *CommitConflictError naming the node, with nothing changed. The caller
// publishes the pending epoch first if assumeNeedsFlush.
func (c *core) AssumePodIfGeneration(info *nodeinfo.PodInfo, gen int64) error {
	if c.liveInfo(info.NodeName()).Generation() != gen {
		c.seq++
		return &CommitConflictError{Nodes: []string{info.NodeName()}}
	}
	return c.AssumePod(info)
}
