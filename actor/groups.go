package actor

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache/podgroup"
)

// Pod groups (upstream v1.37's GenericWorkload and CompositePodGroup): the
// core keeps them in an open podgroup.Editor, changed by the pod
// operations (a member assumed, forgotten, confirmed, updated, removed)
// and by the pod-group operations, and publishes its table with the next
// snapshot when it changed. Owned by the token holder, like the rest of
// the core.

// withGroups sets the gates and starts the table; it returns c.
func (c *core) withGroups(genericWorkload, compositePodGroup bool) *core {
	t := podgroup.NewTable(genericWorkload, compositePodGroup)
	c.groups = t.Edit()
	c.groupsOn = genericWorkload
	if genericWorkload || compositePodGroup {
		// The first snapshot already carries the gates (its listers'
		// refusals depend on them).
		c.builder.SetGroups(t)
		c.builder.Commit(0, 0, 0)
	}
	return c
}

// Which member change a pod operation makes.
const (
	memberAssume = iota
	memberForget
	memberRemove
	memberConfirm
)

// group applies a pod operation's change to pod's group: nothing unless
// the gate is on and the pod names a scheduling group. The pod operation
// has already succeeded; a group's refusal (a state missing: a missed add
// event) is what upstream logs, and is logged the same way.
func (c *core) group(change int, pod *v1.Pod) {
	if !c.groupsOn || pod == nil || pod.Spec.SchedulingGroup == nil {
		return
	}
	var err error
	switch change {
	case memberAssume:
		err = c.groups.AssumeMember(pod)
	case memberForget:
		err = c.groups.ForgetMember(pod)
	case memberRemove:
		err = c.groups.RemoveMember(pod)
	case memberConfirm:
		err = c.groups.ConfirmMember(pod)
	}
	c.groupsDirty = true
	if err != nil {
		klog.Background().Error(err, "Pod group state not updated", "pod", klog.KObj(pod))
	}
}

// ApplyGroupOp runs a pod-group operation: a member's add, update or
// removal, or a PodGroup's or CompositePodGroup's. A refusal (bad input, a
// missed add event) is returned with nothing changed.
func (c *core) ApplyGroupOp(kind OpKind, pod *v1.Pod, g *GroupArgs) error {
	c.seq++
	if g == nil {
		return fmt.Errorf("schedcache: %v without arguments", kind)
	}
	var err error
	switch {
	case kind == OpPodGroupMember && g.Action == GroupAdd:
		err = c.groups.AddMember(pod)
	case kind == OpPodGroupMember && g.Action == GroupUpdate:
		err = c.groups.UpdateMember(g.OldPod, pod)
	case kind == OpPodGroupMember && g.Action == GroupRemove:
		err = c.groups.RemoveMember(pod)
	case kind == OpPodGroup && g.Action == GroupAdd:
		err = c.groups.AddPodGroup(g.PG)
	case kind == OpPodGroup && g.Action == GroupUpdate:
		err = c.groups.UpdatePodGroup(g.OldPG, g.PG)
	case kind == OpPodGroup && g.Action == GroupRemove:
		err = c.groups.RemovePodGroup(g.PG)
	case kind == OpCompositePodGroup && g.Action == GroupAdd:
		err = c.groups.AddComposite(g.CPG)
	case kind == OpCompositePodGroup && g.Action == GroupUpdate:
		err = c.groups.UpdateComposite(g.OldCPG, g.CPG)
	case kind == OpCompositePodGroup && g.Action == GroupRemove:
		err = c.groups.RemoveComposite(g.CPG)
	default:
		return fmt.Errorf("schedcache: %v with unknown action %d", kind, g.Action)
	}
	if err == nil {
		c.groupsDirty = true
	}
	return err
}
