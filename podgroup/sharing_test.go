package podgroup

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// memberPod returns a pod of pod group ns/group.
func memberPod(ns, group, uid, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-" + uid, UID: types.UID(uid)},
		Spec: v1.PodSpec{
			NodeName:        node,
			SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr(group)},
		},
	}
}

func podGroupObj(ns, name string, parent *string) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       schedulingv1beta1.PodGroupSpec{ParentCompositePodGroupName: parent},
	}
}

func compositeObj(ns, name string, parent *string) *schedulingv1alpha3.CompositePodGroup {
	return &schedulingv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       schedulingv1alpha3.CompositePodGroupSpec{ParentCompositePodGroupName: parent},
	}
}

// bigTable returns a table with a group "big" of n unscheduled pods under
// composite "root", 100 small groups of 3 pods, and the big group's pods.
func bigTable(t testing.TB, n int) (Table, []*v1.Pod) {
	e := NewTable(true, true).Edit()
	big := make([]*v1.Pod, n)
	for i := range big {
		big[i] = memberPod("ns", "big", fmt.Sprintf("u%06d", i), "")
		require.NoError(t, e.AddMember(big[i]))
	}
	require.NoError(t, e.AddPodGroup(podGroupObj("ns", "big", ptr("root"))))
	require.NoError(t, e.AddComposite(compositeObj("ns", "root", nil)))
	for g := range 100 {
		name := fmt.Sprintf("g%03d", g)
		for j := range 3 {
			require.NoError(t, e.AddMember(memberPod("ns", name, fmt.Sprintf("%s-%d", name, j), "")))
		}
		require.NoError(t, e.AddPodGroup(podGroupObj("ns", name, ptr("root"))))
	}
	return e.Done(), big
}

// TestStructuralSharing: a change to one member of a 10,000-pod group
// builds one new State and one new Table; every other State and Composite
// is shared by pointer, the old Table keeps the old State, and the change
// costs a bounded number of allocations (a path copy of each map touched).
func TestStructuralSharing(t *testing.T) {
	const n = 10000
	base, big := bigTable(t, n)
	bigKey := PodGroupKey("ns", "big")
	old := big[1234]
	bound := old.DeepCopy()
	bound.Spec.NodeName = "node-1"

	e := base.Edit()
	require.NoError(t, e.UpdateMember(old, bound))
	next := e.Done()

	var changed []Key
	Diff(base, next, func(o, n *State) {
		require.NotNil(t, o)
		require.NotNil(t, n)
		changed = append(changed, n.Key())
	}, func(o, n *Composite) { t.Errorf("composite %v changed", n.Key()) })
	require.Equal(t, []Key{bigKey}, changed)
	require.False(t, base.Equal(next))
	base.Range(func(s *State) bool {
		ns, ok := next.Lookup(s.Key().Namespace, s.Key().Name)
		require.True(t, ok)
		if s.Key() == bigKey {
			require.NotSame(t, s, ns)
		} else {
			require.Same(t, s, ns, s.Key().String())
		}
		return true
	})
	rootBefore, _ := base.LookupComposite("ns", "root")
	rootAfter, _ := next.LookupComposite("ns", "root")
	require.Same(t, rootBefore, rootAfter)

	was, _ := base.Lookup("ns", "big")
	now, _ := next.Lookup("ns", "big")
	require.True(t, was.IsUnscheduled(old.UID))
	require.False(t, was.IsAssigned(old.UID))
	require.Equal(t, n, was.UnscheduledPodsCount())
	require.Equal(t, 0, was.ScheduledPodsCount())
	p, _ := was.Pod(old.UID)
	require.Same(t, old, p)
	require.False(t, now.IsUnscheduled(old.UID))
	require.True(t, now.IsAssigned(old.UID))
	require.Equal(t, n-1, now.UnscheduledPodsCount())
	p, _ = now.Pod(old.UID)
	require.Same(t, bound, p)
	require.Greater(t, now.Generation(), was.Generation())
}

// TestSingleMemberAllocs bounds the allocations of one operation on one
// member of a 10,000-pod group, from Edit to Done: a path copy per map
// touched (O(log n)), never a copy of the group.
func TestSingleMemberAllocs(t *testing.T) {
	const n = 10000
	base, big := bigTable(t, n)
	old := big[4321]
	bound := old.DeepCopy()
	bound.Spec.NodeName = "node-1"
	assumed := old.DeepCopy()
	assumed.Spec.NodeName = "node-2"
	extra := memberPod("ns", "big", "extra", "")
	assumedBase := base.Edit()
	require.NoError(t, assumedBase.AssumeMember(assumed))
	withAssumed := assumedBase.Done()

	ops := []struct {
		name string
		from Table
		op   func(*Editor) error
	}{
		{"UpdateMember", base, func(e *Editor) error { return e.UpdateMember(old, bound) }},
		{"AddMember", base, func(e *Editor) error { return e.AddMember(extra) }},
		{"ConfirmMember", base, func(e *Editor) error { return e.ConfirmMember(bound) }},
		{"RemoveMember", base, func(e *Editor) error { return e.RemoveMember(old) }},
		{"AssumeMember", base, func(e *Editor) error { return e.AssumeMember(assumed) }},
		{"ForgetMember", withAssumed, func(e *Editor) error { return e.ForgetMember(assumed) }},
		{"SnapshotAssume", base, func(e *Editor) error { return e.SnapshotAssume(assumed) }},
		{"SnapshotRemove", base, func(e *Editor) error { return e.SnapshotRemove(old) }},
	}
	for _, o := range ops {
		var err error
		allocs := testing.AllocsPerRun(50, func() {
			e := o.from.Edit()
			err = o.op(e)
			e.Done()
		})
		require.NoError(t, err, o.name)
		t.Logf("%s: %.0f allocations", o.name, allocs)
		require.Less(t, allocs, 50.0, o.name)
	}
}
