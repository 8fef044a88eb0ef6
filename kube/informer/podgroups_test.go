package informer_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/informer"
	"github.com/schedcache/schedcache/podgroup"
)

// mkMember is an unassigned pod of scheduler sched in pod group group.
func mkMember(name, sched, group string) *v1.Pod {
	p := mkPod(name, "", 100)
	p.Spec.SchedulerName = sched
	if group != "" {
		g := group
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &g}
	}
	return p
}

func mkPodGroup(name, parent string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pg-uid-" + name)}}
	if parent != "" {
		p := parent
		pg.Spec.ParentCompositePodGroupName = &p
	}
	return pg
}

func mkComposite(name string) *schedulingv1alpha3.CompositePodGroup {
	return &schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("cpg-uid-" + name)}}
}

// groupState is the cache's state of pod group ns/name, or nil.
func groupState(c *schedcache.Cache, name string) *podgroup.State {
	s, _ := c.PodGroups().Lookup("ns", name)
	return s
}

func unscheduledNames(s *podgroup.State) []string {
	if s == nil {
		return nil
	}
	var out []string
	for name := range s.UnscheduledPods() {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// A pod-group member's life through informer events, as upstream v1.37.2's
// handlers drive the cache: the unassigned members of the adapter's
// scheduler join their group (AddPodGroupMember), an update reaches the
// group (UpdatePodGroupMember), a member the scheduler assumed and the
// binding confirms becomes assigned (AddPod), a deleted unassigned member
// leaves (RemovePodGroupMember); pods of another scheduler are not
// tracked, and the PodGroup object arrives through its informer.
func TestPodGroupMemberLifecycleThroughInformers(t *testing.T) {
	sink := &errSink{}
	c := newCache(t, sink, schedcache.WithPodGroups(true, false))
	a1, b1, other := mkMember("a", "mine", "g"), mkMember("b", "mine", "g"), mkMember("other", "theirs", "g")
	plain := mkMember("plain", "mine", "") // in no pod group
	cs := fake.NewClientset(mkNode("n1", ""), mkPodGroup("g", ""), a1, b1, other, plain)
	f := informers.NewSharedInformerFactory(cs, 0)
	a, err := informer.Attach(c, f, informer.WithErrorHandler(sink.add), informer.WithSchedulerNames("mine"))
	require.NoError(t, err)
	start(t, f, a)

	s := groupState(c, "g")
	require.NotNil(t, s)
	require.NotNil(t, s.PodGroup(), "the PodGroup object came through its informer")
	require.Equal(t, []string{"a", "b"}, unscheduledNames(s), "another scheduler's pod is not tracked")
	cnt := a.Counts()
	require.Equal(t, int64(2), cnt.MemberAdds)
	require.Equal(t, int64(1), cnt.PodGroupAdds)
	require.Equal(t, int64(2), cnt.Unassigned, "the other scheduler's pod and the pod in no group")

	// An update of an unassigned member reaches its group.
	a2 := a1.DeepCopy()
	a2.ResourceVersion = "2" // the fake clientset sets no ResourceVersion: as the API server would
	a2.Labels = map[string]string{"v": "2"}
	_, err = cs.CoreV1().Pods("ns").Update(ctxBg, a2, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool {
		p, ok := groupState(c, "g").Pod(a1.UID)
		return ok && p.Labels["v"] == "2"
	}, "the member update reached the group")
	require.Equal(t, int64(1), a.Counts().MemberUpdates)

	// The scheduler assumes b; the binding's update confirms it: assigned.
	bOnN1 := b1.DeepCopy()
	bOnN1.ResourceVersion = "2"
	bOnN1.Spec.NodeName = "n1"
	require.NoError(t, c.AssumePod(klog.Background(), bOnN1))
	require.True(t, groupState(c, "g").AssumedPods().Has(b1.UID))
	_, err = cs.CoreV1().Pods("ns").Update(ctxBg, bOnN1, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool { return groupState(c, "g").IsAssigned(b1.UID) }, "the binding made b assigned")
	require.Equal(t, []string{"a"}, unscheduledNames(groupState(c, "g")))

	// A deleted unassigned member leaves its group.
	require.NoError(t, cs.CoreV1().Pods("ns").Delete(ctxBg, "a", metav1.DeleteOptions{}))
	eventually(t, func() bool { _, ok := groupState(c, "g").Pod(a1.UID); return !ok }, "a left its group")
	require.NoError(t, c.Sync())
	cnt = a.Counts()
	require.Equal(t, int64(1), cnt.MemberDeletes)
	require.Equal(t, int64(1), cnt.PodAdds)
	require.Zero(t, cnt.AssumedPodDeletes+cnt.WrongType+cnt.SubmitErrors)
	require.Empty(t, sink.all())
}

// An assumed pod deleted from the cluster is removed from the cache at
// once (upstream's handleAssumedPodDeletion, RemoveAssumedPod of the
// cached pod), whether the deletion shows as its DeletionTimestamp being
// set or as a delete event, with the pod-group gates on or off; a member
// leaves its pod group. Another scheduler's assumed pod is left to that
// scheduler.
func TestAssumedPodDeletionThroughInformers(t *testing.T) {
	for _, gates := range []bool{false, true} {
		t.Run(fmt.Sprintf("podGroups=%v", gates), func(t *testing.T) {
			sink := &errSink{}
			c := newCache(t, sink, schedcache.WithPodGroups(gates, false))
			group := ""
			if gates {
				group = "g"
			}
			p, q, r := mkMember("p", "mine", group), mkMember("q", "mine", group), mkMember("r", "theirs", group)
			cs := fake.NewClientset(mkNode("n1", ""), p, q, r)
			f := informers.NewSharedInformerFactory(cs, 0)
			a, err := informer.Attach(c, f, informer.WithErrorHandler(sink.add), informer.WithSchedulerNames("mine"))
			require.NoError(t, err)
			start(t, f, a)
			for _, pod := range []*v1.Pod{p, q, r} {
				assumed := pod.DeepCopy()
				assumed.Spec.NodeName = "n1"
				require.NoError(t, c.AssumePod(klog.Background(), assumed))
			}
			if gates {
				require.Equal(t, 2, groupState(c, "g").AssumedPodsCount())
			}

			// p's deletion starts: its DeletionTimestamp is set.
			deleting := p.DeepCopy()
			deleting.ResourceVersion = "2" // the fake clientset sets none: as the API server would
			now := metav1.Now()
			deleting.DeletionTimestamp = &now
			_, err = cs.CoreV1().Pods("ns").Update(ctxBg, deleting, metav1.UpdateOptions{})
			require.NoError(t, err)
			eventually(t, func() bool { _, _, ok := cachedPod(c, p); return !ok }, "the assumed pod was removed on its deletion timestamp")
			require.Equal(t, int64(1), a.Counts().AssumedPodDeletes)

			// q is deleted at once: a delete event of an unassigned pod.
			require.NoError(t, cs.CoreV1().Pods("ns").Delete(ctxBg, "q", metav1.DeleteOptions{}))
			eventually(t, func() bool { _, _, ok := cachedPod(c, q); return !ok }, "the assumed pod was removed on its delete event")
			require.Equal(t, int64(2), a.Counts().AssumedPodDeletes)
			if gates {
				// r, another scheduler's pod, never joined through this
				// adapter, so assuming it left the group as it was.
				require.Nil(t, groupState(c, "g"), "p and q left their group, which was dropped")
			}

			// r belongs to another scheduler: its deletion is not this
			// adapter's to handle.
			before := a.Counts().Unassigned
			require.NoError(t, cs.CoreV1().Pods("ns").Delete(ctxBg, "r", metav1.DeleteOptions{}))
			eventually(t, func() bool { return a.Counts().Unassigned == before+1 }, "r's delete event ignored")
			_, assumed, ok := cachedPod(c, r)
			require.True(t, ok && assumed)
			require.Equal(t, int64(2), a.Counts().AssumedPodDeletes)
			require.Empty(t, sink.all())
		})
	}
}

// The handlers' assumed-pod deletion, called directly: a pod assumed in
// the cache is removed with RemoveAssumedPod of the cached pod (which
// names its node, where the informer's pod does not); an update that does
// not start the deletion, or one where the deletion had started already,
// leaves it; a pod the cache no longer holds is nothing to do; a tombstone
// of an assumed pod removes it (RemovePod, then the cleanup finds it gone
// or removes it).
func TestAssumedPodDeletionHandlers(t *testing.T) {
	sink := &errSink{}
	c := newCache(t, sink, schedcache.WithPodGroups(true, false))
	a, err := informer.New(c, informer.WithErrorHandler(sink.add))
	require.NoError(t, err)
	a.AddNode(mkNode("n1", ""))
	p := mkMember("p", "", "g")
	p.ResourceVersion = "1"
	a.AddPod(p)
	assumed := p.DeepCopy()
	assumed.Spec.NodeName = "n1"
	require.NoError(t, c.AssumePod(klog.Background(), assumed))

	relabelled := p.DeepCopy()
	relabelled.ResourceVersion = "2"
	relabelled.Labels = map[string]string{"x": "y"}
	a.UpdatePod(p, relabelled)
	now := metav1.Now()
	deleting := relabelled.DeepCopy()
	deleting.ResourceVersion = "3"
	deleting.DeletionTimestamp = &now
	again := deleting.DeepCopy()
	again.ResourceVersion = "4"
	a.UpdatePod(deleting, again) // the deletion had started before: not this event's
	_, isAssumed, ok := cachedPod(c, p)
	require.True(t, ok && isAssumed, "no deletion started by these updates")
	require.Zero(t, a.Counts().AssumedPodDeletes)

	a.UpdatePod(relabelled, deleting)
	_, _, ok = cachedPod(c, p)
	require.False(t, ok)
	require.Equal(t, int64(1), a.Counts().AssumedPodDeletes)
	require.Nil(t, groupState(c, "g"), "its last member gone, the group without object is dropped")

	// Nothing cached any more: the delete event leaves the (gone) group.
	a.DeletePod(deleting)
	require.Equal(t, int64(1), a.Counts().AssumedPodDeletes)
	require.Equal(t, int64(1), a.Counts().MemberDeletes)

	// A tombstone of an assumed pod whose object is stale (unassigned).
	q := mkMember("q", "", "g")
	a.AddPod(q)
	qAssumed := q.DeepCopy()
	qAssumed.Spec.NodeName = "n1"
	require.NoError(t, c.AssumePod(klog.Background(), qAssumed))
	a.DeletePod(cache.DeletedFinalStateUnknown{Key: "ns/q", Obj: q})
	require.NoError(t, c.Sync())
	_, _, ok = cachedPod(c, q)
	require.False(t, ok)
	require.Nil(t, groupState(c, "g"))
	n, _ := c.PodCount()
	require.Zero(t, n)
	require.Equal(t, int64(1), a.Counts().Tombstones)
	require.Empty(t, sink.all())

	// A tombstone of an unassigned member the cache does not hold: its
	// RemovePod fails (reported, as upstream logs it) and the cleanup
	// takes it out of its group.
	r := mkMember("r", "", "g")
	a.AddPod(r)
	require.Equal(t, []string{"r"}, unscheduledNames(groupState(c, "g")))
	a.DeletePod(cache.DeletedFinalStateUnknown{Key: "ns/r", Obj: r})
	require.NoError(t, c.Sync())
	require.Nil(t, groupState(c, "g"))
	eventually(t, func() bool { return len(sink.all()) == 1 }, "RemovePod's failure reported")
	require.ErrorIs(t, sink.all()[0], schedcache.ErrPodNotFound)
	require.Equal(t, int64(2), a.Counts().Tombstones)
	require.Equal(t, int64(2), a.Counts().MemberDeletes)
}

// PodGroup and CompositePodGroup objects through their informers: adds,
// updates (an update with an unchanged ResourceVersion is skipped, as
// upstream), deletes, and the tombstones a relist makes of deletes the
// watch missed.
func TestPodGroupObjectsThroughInformers(t *testing.T) {
	sink := &errSink{}
	c := newCache(t, sink, schedcache.WithPodGroups(true, true))
	cs := fake.NewClientset(mkComposite("cg"), mkPodGroup("g", "cg"), mkPodGroup("h", "cg"))
	dw := &droppingWatches{}
	dw.install(cs, "pods", "nodes", "podgroups", "compositepodgroups")
	f := informers.NewSharedInformerFactory(cs, 0)
	a, err := informer.Attach(c, f, informer.WithErrorHandler(sink.add))
	require.NoError(t, err)
	start(t, f, a)

	pgs := c.PodGroups()
	require.Equal(t, 2, pgs.Len())
	cg, ok := pgs.LookupComposite("ns", "cg")
	require.True(t, ok)
	require.NotNil(t, cg.CompositePodGroup())
	require.Equal(t, []podgroup.Key{podgroup.PodGroupKey("ns", "g"), podgroup.PodGroupKey("ns", "h")}, cg.Children())

	g2 := mkPodGroup("g", "cg")
	g2.ResourceVersion = "2" // the fake clientset sets none: as the API server would
	g2.Labels = map[string]string{"v": "2"}
	_, err = cs.SchedulingV1beta1().PodGroups("ns").Update(ctxBg, g2, metav1.UpdateOptions{})
	require.NoError(t, err)
	cg2 := mkComposite("cg")
	cg2.ResourceVersion = "2"
	cg2.Labels = map[string]string{"v": "2"}
	_, err = cs.SchedulingV1alpha3().CompositePodGroups("ns").Update(ctxBg, cg2, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool {
		pg, err := c.PodGroups().PodGroup("ns", "g")
		cpg, cerr := c.PodGroups().CompositePodGroup("ns", "cg")
		return err == nil && cerr == nil && pg.Labels["v"] == "2" && cpg.Labels["v"] == "2"
	}, "the updates reached the cache")

	require.NoError(t, cs.SchedulingV1beta1().PodGroups("ns").Delete(ctxBg, "h", metav1.DeleteOptions{}))
	eventually(t, func() bool { return groupState(c, "h") == nil }, "h removed")
	cg, _ = c.PodGroups().LookupComposite("ns", "cg")
	require.Equal(t, []podgroup.Key{podgroup.PodGroupKey("ns", "g")}, cg.Children())

	// The watches miss the deletes of g and cg; the relist after their
	// expiry delivers them as tombstones.
	dw.setDrop(func(ev watch.Event) bool { return ev.Type == watch.Deleted })
	require.NoError(t, cs.SchedulingV1beta1().PodGroups("ns").Delete(ctxBg, "g", metav1.DeleteOptions{}))
	require.NoError(t, cs.SchedulingV1alpha3().CompositePodGroups("ns").Delete(ctxBg, "cg", metav1.DeleteOptions{}))
	eventually(t, func() bool { return dw.droppedCount() == 2 }, "both deletes lost")
	require.NotNil(t, groupState(c, "g"))
	dw.setDrop(nil)
	dw.expireAll()
	eventually(t, func() bool { pgs := c.PodGroups(); return pgs.Len() == 0 && pgs.CompositeLen() == 0 }, "the tombstones removed both")

	cnt := a.Counts()
	require.Equal(t, int64(2), cnt.PodGroupAdds)
	require.Equal(t, int64(1), cnt.CompositePodGroupAdds)
	require.Equal(t, int64(1), cnt.PodGroupUpdates)
	require.Equal(t, int64(1), cnt.CompositePodGroupUpdates)
	require.Equal(t, int64(2), cnt.PodGroupDeletes)
	require.Equal(t, int64(1), cnt.CompositePodGroupDeletes)
	require.Equal(t, int64(2), cnt.Tombstones)
	require.Empty(t, sink.all())
}

// With the cache's gates off (the default) Attach watches no pod group or
// composite pod group and nothing is tracked; with GenericWorkload alone
// the PodGroups are watched and the CompositePodGroups are not.
func TestPodGroupGatesOff(t *testing.T) {
	objects := func() []runtime.Object {
		return []runtime.Object{mkNode("n1", ""), mkComposite("cg"), mkPodGroup("g", "cg"), mkMember("a", "", "g")}
	}
	watched := func(cs *fake.Clientset) map[string]bool {
		out := map[string]bool{}
		for _, act := range cs.Actions() {
			if act.GetVerb() == "list" || act.GetVerb() == "watch" {
				out[act.GetResource().Resource] = true
			}
		}
		return out
	}

	sink := &errSink{}
	c := newCache(t, sink)
	cs := fake.NewClientset(objects()...)
	f := informers.NewSharedInformerFactory(cs, 0)
	a, err := informer.Attach(c, f, informer.WithErrorHandler(sink.add))
	require.NoError(t, err)
	start(t, f, a)
	pgs := c.PodGroups()
	require.Zero(t, pgs.Len()+pgs.CompositeLen())
	cnt := a.Counts()
	require.Zero(t, cnt.MemberAdds+cnt.PodGroupAdds+cnt.CompositePodGroupAdds)
	require.Equal(t, int64(1), cnt.Unassigned, "a member pod with the gate off is an ordinary unassigned pod")
	w := watched(cs)
	require.True(t, w["pods"] && w["nodes"])
	require.False(t, w["podgroups"] || w["compositepodgroups"], "nothing watched with the gates off: %v", w)

	c2 := newCache(t, sink, schedcache.WithPodGroups(true, false))
	cs2 := fake.NewClientset(objects()...)
	f2 := informers.NewSharedInformerFactory(cs2, 0)
	a2, err := informer.Attach(c2, f2, informer.WithErrorHandler(sink.add))
	require.NoError(t, err)
	start(t, f2, a2)
	require.Equal(t, 1, c2.PodGroups().Len())
	require.Zero(t, c2.PodGroups().CompositeLen())
	w = watched(cs2)
	require.True(t, w["podgroups"])
	require.False(t, w["compositepodgroups"])
	require.Empty(t, sink.all())
}

// WithSchedulerNames and WithResponsibleForPod select the unassigned pods
// the adapter handles (the later option wins; a nil predicate is every
// pod); assigned pods are handled whatever their scheduler.
func TestResponsibleForPod(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []informer.Option
		want []string // unscheduled members tracked
	}{
		{"default: every scheduler", nil, []string{"a", "b", "c"}},
		{"names", []informer.Option{informer.WithSchedulerNames("s1", "s2")}, []string{"a", "b"}},
		{"no names", []informer.Option{informer.WithSchedulerNames()}, nil},
		{"predicate", []informer.Option{informer.WithResponsibleForPod(func(p *v1.Pod) bool { return p.Name == "c" })}, []string{"c"}},
		{"later wins", []informer.Option{informer.WithSchedulerNames("s1"), informer.WithResponsibleForPod(nil)}, []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &errSink{}
			c := newCache(t, sink, schedcache.WithPodGroups(true, false))
			a, err := informer.New(c, append(tc.opts, informer.WithErrorHandler(sink.add))...)
			require.NoError(t, err)
			a.AddNode(mkNode("n1", ""))
			a.AddPod(mkMember("a", "s1", "g"))
			a.AddPod(mkMember("b", "s2", "g"))
			a.AddPod(mkMember("c", "s3", "g"))
			assigned := mkMember("d", "s4", "g")
			assigned.Spec.NodeName = "n1"
			a.AddPod(assigned)
			require.NoError(t, c.Sync())
			s := groupState(c, "g")
			require.NotNil(t, s)
			require.Equal(t, tc.want, unscheduledNames(s))
			require.True(t, s.IsAssigned(assigned.UID), "assigned pods whatever their scheduler")
			require.Equal(t, int64(3-len(tc.want)), a.Counts().Unassigned)
			require.Empty(t, sink.all())
		})
	}
}

// The pod-group handlers report objects of the wrong type (tombstones
// included) as *TypeError and refusals as *EventError; updates carrying
// the same ResourceVersion are skipped, as upstream.
func TestPodGroupHandlersBadInput(t *testing.T) {
	sink := &errSink{}
	c := newCache(t, sink, schedcache.WithPodGroups(true, true))
	a, err := informer.New(c, informer.WithErrorHandler(sink.add))
	require.NoError(t, err)
	pg, cpg := mkPodGroup("g", ""), mkComposite("cg")
	pg.ResourceVersion, cpg.ResourceVersion = "1", "1"
	var nilPG *schedulingv1beta1.PodGroup
	var nilCPG *schedulingv1alpha3.CompositePodGroup
	bad := []func(){
		func() { a.AddPodGroup(cpg) },
		func() { a.AddPodGroup(nilPG) },
		func() { a.UpdatePodGroup(pg, cpg) },
		func() { a.UpdatePodGroup("x", pg) },
		func() { a.DeletePodGroup(nil) },
		func() { a.DeletePodGroup(nilPG) },
		func() { a.DeletePodGroup(cache.DeletedFinalStateUnknown{Key: "ns/g", Obj: cpg}) },
		func() { a.AddCompositePodGroup(pg) },
		func() { a.AddCompositePodGroup(nilCPG) },
		func() { a.UpdateCompositePodGroup(cpg, 1) },
		func() { a.UpdateCompositePodGroup(nil, cpg) },
		func() { a.DeleteCompositePodGroup(pg) },
		func() { a.DeleteCompositePodGroup(nilCPG) },
		func() { a.DeleteCompositePodGroup(cache.DeletedFinalStateUnknown{Key: "ns/cg", Obj: pg}) },
	}
	for _, fn := range bad {
		require.NotPanics(t, fn)
	}
	errs := sink.all()
	require.Len(t, errs, len(bad))
	for _, err := range errs {
		var te *informer.TypeError
		require.ErrorAs(t, err, &te)
		require.ErrorIs(t, err, informer.ErrWrongType)
	}
	require.Equal(t, int64(len(bad)), a.Counts().WrongType)

	// Same ResourceVersion: skipped, even for a group never added.
	a.UpdatePodGroup(pg, pg.DeepCopy())
	a.UpdateCompositePodGroup(cpg, cpg.DeepCopy())
	require.Equal(t, int64(2), a.Counts().Unchanged)
	require.Len(t, sink.all(), len(bad))

	// Refused: an update of a group never added (upstream logs a missed
	// add event), a member whose scheduling group names no pod group
	// (upstream panics).
	newer := pg.DeepCopy()
	newer.ResourceVersion = "2"
	a.UpdatePodGroup(pg, newer)
	noName := mkMember("x", "", "")
	noName.Spec.SchedulingGroup = &v1.PodSchedulingGroup{}
	a.AddPod(noName)
	errs = sink.all()[len(bad):]
	require.Len(t, errs, 2)
	var ee *informer.EventError
	require.ErrorAs(t, errs[0], &ee)
	require.Equal(t, "UpdatePodGroup", ee.Op)
	require.Equal(t, "ns/g", ee.Key)
	require.ErrorIs(t, errs[0], podgroup.ErrMissedEvent)
	require.ErrorAs(t, errs[1], &ee)
	require.Equal(t, "AddPodGroupMember", ee.Op)
	require.ErrorIs(t, errs[1], schedcache.ErrNoPodGroupName)
	require.Equal(t, int64(2), a.Counts().SubmitErrors)
	require.Zero(t, c.PodGroups().Len())
}
