package schedcache

import (
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache/actor"
	"github.com/schedcache/schedcache/internal/errs"
	"github.com/schedcache/schedcache/podgroup"
)

// Pod groups: upstream v1.37.2's GenericWorkload (Beta) and
// CompositePodGroup (Alpha) state, both off by default as upstream's
// gates. With WithPodGroups the cache tracks each pod group's members
// (unscheduled, assumed, assigned) and PodGroup and CompositePodGroup
// objects; every snapshot carries them as an immutable podgroup.Table
// shared with the snapshots before it wherever unchanged
// (Snapshot.PodGroups). The pod operations move members as upstream's
// cache does: AssumePod assumes a member, ForgetPod returns it to its
// unscheduled pods, RemoveAssumedPod, RemovePod and UpdatePod's old pod
// take it out, AddPod and UpdatePod's new pod add it as assigned.

// WithPodGroups turns on upstream's GenericWorkload and CompositePodGroup
// gates (upstream's cache.New arguments): pod groups are tracked only with
// genericWorkload, composite pod groups only with both.
func WithPodGroups(genericWorkload, compositePodGroup bool) Option {
	return func(o *options) { o.a.GenericWorkload, o.a.CompositePodGroup = genericWorkload, compositePodGroup }
}

// ErrNoPodGroupName is a pod whose Spec.SchedulingGroup names no pod group,
// refused by every pod call while pod groups are on (upstream
// dereferences the name and panics).
var ErrNoPodGroupName = podgroup.ErrNoPodGroupName

// member reports whether pod is a pod-group member: the gate on and a
// scheduling group named (upstream's isPodGroupMember).
func (c *Cache) member(pod *v1.Pod) bool {
	return c.groups && pod != nil && pod.Spec.SchedulingGroup != nil
}

// checkMember refuses a member pod whose scheduling group has no name.
func (c *Cache) checkMember(kind actor.OpKind, pod *v1.Pod) error {
	if c.member(pod) && pod.Spec.SchedulingGroup.PodGroupName == nil {
		return errs.Named(&PodError{Op: kind.String(), Key: string(pod.UID), Err: ErrNoPodGroupName}, pod)
	}
	return nil
}

// RemoveAssumedPod removes an assumed pod deleted from the cluster
// (upstream v1.37): ForgetPod's checks and change, but a pod-group member
// leaves its group instead of returning to its unscheduled pods. A pod
// not cached is a no-op.
func (c *Cache) RemoveAssumedPod(logger klog.Logger, pod *v1.Pod) error {
	return errs.Named(c.call(c.podOp(actor.OpRemoveAssumedPod, pod)).Err, pod)
}

// groupOp runs a pod-group operation.
func (c *Cache) groupOp(kind actor.OpKind, pod *v1.Pod, g *actor.GroupArgs) error {
	if err := c.started(); err != nil {
		return err
	}
	op := c.a.NewOp()
	op.Kind, op.Pod, op.Group = kind, pod, g
	return c.do(op).Err
}

// memberOp runs a member operation of pod: a no-op unless pod is a member.
func (c *Cache) memberOp(action actor.GroupAction, oldPod, pod *v1.Pod) error {
	if err := c.started(); err != nil {
		return err
	}
	if pod == nil {
		return errs.PodArg("PodGroupMember", pod, podgroup.ErrNilPod)
	}
	if !c.member(pod) {
		return nil
	}
	return c.groupOp(actor.OpPodGroupMember, pod, &actor.GroupArgs{Action: action, OldPod: oldPod})
}

// AddPodGroupMember adds an unscheduled pod (not assigned, not assumed) to
// its pod group, creating the group's state if needed. A no-op unless pod
// groups are on and the pod names a scheduling group.
func (c *Cache) AddPodGroupMember(pod *v1.Pod) error {
	return c.memberOp(actor.GroupAdd, nil, pod)
}

// UpdatePodGroupMember updates an unscheduled pod in its pod group; a pod
// gaining a node moves to the group's assigned pods. A group without
// state is refused (upstream logs a missed add event) with nothing
// changed.
func (c *Cache) UpdatePodGroupMember(logger klog.Logger, oldPod, newPod *v1.Pod) error {
	if oldPod == nil && c.member(newPod) {
		return errs.PodArg("PodGroupMember", oldPod, podgroup.ErrNilPod)
	}
	return c.memberOp(actor.GroupUpdate, oldPod, newPod)
}

// RemovePodGroupMember removes a pod from its pod group; a group left
// without members or object is dropped.
func (c *Cache) RemovePodGroupMember(pod *v1.Pod) error {
	return c.memberOp(actor.GroupRemove, nil, pod)
}

// AddPodGroup adds or replaces a PodGroup object (a no-op with pod groups
// off). A parent CompositePodGroup not yet seen gets a placeholder state.
func (c *Cache) AddPodGroup(podGroup *schedulingv1beta1.PodGroup) error {
	if !c.groups {
		return c.started()
	}
	return c.groupOp(actor.OpPodGroup, nil, &actor.GroupArgs{Action: actor.GroupAdd, PG: podGroup})
}

// UpdatePodGroup replaces a PodGroup object; one never added is refused
// (upstream logs a missed add event).
func (c *Cache) UpdatePodGroup(logger klog.Logger, oldPodGroup, newPodGroup *schedulingv1beta1.PodGroup) error {
	if !c.groups {
		return c.started()
	}
	return c.groupOp(actor.OpPodGroup, nil, &actor.GroupArgs{Action: actor.GroupUpdate, OldPG: oldPodGroup, PG: newPodGroup})
}

// RemovePodGroup removes a PodGroup object; its state stays while it has
// members.
func (c *Cache) RemovePodGroup(logger klog.Logger, podGroup *schedulingv1beta1.PodGroup) error {
	if !c.groups {
		return c.started()
	}
	return c.groupOp(actor.OpPodGroup, nil, &actor.GroupArgs{Action: actor.GroupRemove, PG: podGroup})
}

// AddCompositePodGroup adds or replaces a CompositePodGroup (a no-op
// unless both gates are on).
func (c *Cache) AddCompositePodGroup(logger klog.Logger, cpg *schedulingv1alpha3.CompositePodGroup) error {
	if !c.composite {
		return c.started()
	}
	return c.groupOp(actor.OpCompositePodGroup, nil, &actor.GroupArgs{Action: actor.GroupAdd, CPG: cpg})
}

// UpdateCompositePodGroup replaces a CompositePodGroup.
func (c *Cache) UpdateCompositePodGroup(logger klog.Logger, oldCPG, newCPG *schedulingv1alpha3.CompositePodGroup) error {
	if !c.composite {
		return c.started()
	}
	return c.groupOp(actor.OpCompositePodGroup, nil, &actor.GroupArgs{Action: actor.GroupUpdate, OldCPG: oldCPG, CPG: newCPG})
}

// RemoveCompositePodGroup removes a CompositePodGroup.
func (c *Cache) RemoveCompositePodGroup(logger klog.Logger, cpg *schedulingv1alpha3.CompositePodGroup) error {
	if !c.composite {
		return c.started()
	}
	return c.groupOp(actor.OpCompositePodGroup, nil, &actor.GroupArgs{Action: actor.GroupRemove, CPG: cpg})
}

// PodGroups returns the cache's pod groups now (upstream's cache-level
// PodGroupStates, PodGroups, CompositePodGroupStates and
// CompositePodGroups listers read it): an immutable table, never
// changed by later calls. Lock-free, like Snapshot.
func (c *Cache) PodGroups() podgroup.Table {
	if c.started() != nil {
		return podgroup.NewTable(false, false)
	}
	return c.a.Snapshot().CacheGroups()
}

// BuildHierarchySnapshotFromPod returns the pod-group hierarchy of pod's
// group, from its root down, as a table of its own (upstream's
// BuildHierarchySnapshotFromPod).
func (c *Cache) BuildHierarchySnapshotFromPod(pod *v1.Pod) (podgroup.Table, error) {
	return c.PodGroups().Hierarchy(pod)
}

// GetRootKeyForGroup returns the root of the hierarchy of a pod group or
// composite pod group: the key, whether one was found, and an error for a
// cycle or a key of another kind.
func (c *Cache) GetRootKeyForGroup(key podgroup.Key) (podgroup.Key, bool, error) {
	return c.PodGroups().RootKey(key)
}
