package schedcache_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/podgroup"
)

func member(name, uid, node, group string) *v1.Pod {
	p := upPod(name, "ns", uid, node)
	g := group
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &g}
	return p
}

func uids(s sets.Set[types.UID]) []string {
	var out []string
	for k := range s {
		out = append(out, string(k))
	}
	return sortedStrings(out)
}

func unscheduled(s *podgroup.State) []string {
	var out []string
	for _, p := range s.UnscheduledPods() {
		out = append(out, string(p.UID))
	}
	return sortedStrings(out)
}

func sortedStrings(s []string) []string {
	sortStrings(s)
	if s == nil {
		return []string{}
	}
	return s
}

// A member's life through the pod calls, as upstream v1.37.2's cache
// moves it: added unscheduled, assumed, forgotten back to unscheduled,
// assumed again and confirmed (assigned), removed; RemoveAssumedPod takes
// an assumed member out of its group where ForgetPod returns it.
func TestPodGroupMemberLifecycle(t *testing.T) {
	c := newCache(t, schedcache.WithPodGroups(true, false))
	lg := klog.Background()
	n1 := &v1.Node{}
	n1.Name = "n1"
	_, err := c.AddNode(lg, n1)
	require.NoError(t, err)

	state := func() *podgroup.State {
		s, err := c.Snapshot().PodGroups().Get("ns", "g")
		require.NoError(t, err)
		return s
	}
	pending := member("a", "uid-a", "", "g")
	require.NoError(t, c.AddPodGroupMember(pending))
	require.NoError(t, c.AddPodGroupMember(member("b", "uid-b", "", "g")))
	before := c.Snapshot()
	require.Equal(t, []string{"uid-a", "uid-b"}, unscheduled(state()))

	onN1 := member("a", "uid-a", "n1", "g")
	require.NoError(t, c.AssumePod(lg, onN1))
	require.Equal(t, []string{"uid-a"}, uids(state().AssumedPods()))
	require.Equal(t, 1, state().ScheduledPodsCount())

	require.NoError(t, c.ForgetPod(lg, onN1))
	require.Equal(t, []string{"uid-a", "uid-b"}, unscheduled(state()))
	require.Empty(t, state().AssumedPods())

	require.NoError(t, c.AssumePod(lg, onN1))
	require.NoError(t, c.AddPod(lg, onN1))
	require.Equal(t, []string{"uid-a"}, uids(state().AssignedPods()))
	require.Empty(t, state().AssumedPods())

	require.NoError(t, c.RemovePod(lg, onN1))
	require.Equal(t, 1, state().AllPodsCount())

	bOnN1 := member("b", "uid-b", "n1", "g")
	require.NoError(t, c.AssumePod(lg, bOnN1))
	require.NoError(t, c.RemoveAssumedPod(lg, bOnN1))
	_, err = c.Snapshot().PodGroups().Get("ns", "g")
	require.ErrorIs(t, err, podgroup.ErrStateNotFound, "the last member left and no PodGroup object: the state is gone")
	require.EqualError(t, err, "pod group state not found for pod group ns/g")

	// An earlier snapshot never changes.
	s, err := before.PodGroups().Get("ns", "g")
	require.NoError(t, err)
	require.Equal(t, 2, s.AllPodsCount())
}

// The PodGroup object: its lister, a placeholder state kept while the
// object exists, removal when neither object nor members remain.
func TestPodGroupObjects(t *testing.T) {
	c := newCache(t, schedcache.WithPodGroups(true, false))
	lg := klog.Background()
	pg := &schedulingv1beta1.PodGroup{}
	pg.Namespace, pg.Name = "ns", "g"
	_, err := c.PodGroups().PodGroup("ns", "g")
	require.EqualError(t, err, "pod group state not found for pod group podgroup/ns/g")
	require.NoError(t, c.AddPodGroup(pg))
	got, err := c.PodGroups().PodGroup("ns", "g")
	require.NoError(t, err)
	require.Same(t, pg, got)
	root, ok, err := c.GetRootKeyForGroup(podgroup.PodGroupKey("ns", "g"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, podgroup.PodGroupKey("ns", "g"), root)
	h, err := c.BuildHierarchySnapshotFromPod(member("a", "uid-a", "", "g"))
	require.NoError(t, err)
	require.Equal(t, 1, h.Len())

	pg2 := pg.DeepCopy()
	require.NoError(t, c.UpdatePodGroup(lg, pg, pg2))
	got, _ = c.PodGroups().PodGroup("ns", "g")
	require.Same(t, pg2, got)
	require.NoError(t, c.RemovePodGroup(lg, pg2))
	_, err = c.PodGroups().Get("ns", "g")
	require.ErrorIs(t, err, podgroup.ErrStateNotFound)
	require.ErrorIs(t, c.UpdatePodGroup(lg, pg, pg2), podgroup.ErrMissedEvent, "an update of a group never added is refused, as upstream logs it")
	require.ErrorIs(t, c.AddPodGroup(nil), podgroup.ErrNilPodGroup)
}

// With the gates off (the default, as upstream's) every pod-group call is
// a no-op and the listers say the gate is off, in upstream's words.
func TestPodGroupsGatesOff(t *testing.T) {
	c := newCache(t)
	lg := klog.Background()
	pg := &schedulingv1beta1.PodGroup{}
	pg.Namespace, pg.Name = "ns", "g"
	require.NoError(t, c.AddPodGroup(pg))
	require.NoError(t, c.AddPodGroupMember(member("a", "uid-a", "", "g")))
	_, err := c.PodGroups().Get("ns", "g")
	require.EqualError(t, err, "generic workload feature gate is disabled")
	_, err = c.Snapshot().PodGroups().CompositePodGroup("ns", "x")
	require.EqualError(t, err, "composite pod group feature gate is disabled")
	n1 := &v1.Node{}
	n1.Name = "n1"
	_, err = c.AddNode(lg, n1)
	require.NoError(t, err)
	// A member pod without a group name is an ordinary pod when the gate
	// is off.
	p := upPod("x", "ns", "uid-x", "n1")
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{}
	require.NoError(t, c.AssumePod(lg, p))
}

// With the gate on, a pod whose scheduling group names no pod group is
// refused by every pod call with nothing changed (upstream dereferences
// the nil name and panics).
func TestPodGroupNoNameRefused(t *testing.T) {
	c := newCache(t, schedcache.WithPodGroups(true, true))
	lg := klog.Background()
	p := upPod("x", "ns", "uid-x", "n1")
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{}
	for name, err := range map[string]error{
		"AssumePod": c.AssumePod(lg, p), "AddPod": c.AddPod(lg, p), "ForgetPod": c.ForgetPod(lg, p),
		"RemovePod": c.RemovePod(lg, p), "UpdatePod": c.UpdatePod(lg, p, p), "RemoveAssumedPod": c.RemoveAssumedPod(lg, p),
		"AddPodGroupMember": c.AddPodGroupMember(p),
	} {
		require.True(t, errors.Is(err, schedcache.ErrNoPodGroupName), "%s: %v", name, err)
	}
	n, err := c.PodCount()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Error(t, c.AddPodGroupMember(nil))
}
