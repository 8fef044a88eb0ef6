package podgroup

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// requireRefused checks that err wraps want, is an *Error of op with the
// text given, and that the editor's table is still before.
func requireRefused(t *testing.T, e *Editor, before Table, err, want error, op, text string) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var pe *Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, op, pe.Op)
	require.Same(t, want, pe.Unwrap())
	if text != "" {
		require.EqualError(t, err, text)
	}
	require.True(t, e.Table().Equal(before), "%s changed the table", op)
}

// errorsTable is a table with group ns/g (one pod, an object under
// composite ns/c) and composite ns/c (root).
func errorsTable(t *testing.T, generic, composite bool) Table {
	e := NewTable(generic, composite).Edit()
	require.NoError(t, e.AddMember(memberPod("ns", "g", "u1", "")))
	require.NoError(t, e.AddPodGroup(podGroupObj("ns", "g", ptr("c"))))
	require.NoError(t, e.AddComposite(compositeObj("ns", "c", nil)))
	return e.Done()
}

func TestBadInputEditor(t *testing.T) {
	noUID := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: v1.PodSpec{
		SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr("g")}}}
	noName := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u9"}, Spec: v1.PodSpec{
		SchedulingGroup: &v1.PodSchedulingGroup{}}}
	good := memberPod("ns", "g", "u1", "")
	podOps := map[string]func(e *Editor, p *v1.Pod) error{
		"AddMember":      (*Editor).AddMember,
		"ConfirmMember":  (*Editor).ConfirmMember,
		"RemoveMember":   (*Editor).RemoveMember,
		"AssumeMember":   (*Editor).AssumeMember,
		"ForgetMember":   (*Editor).ForgetMember,
		"SnapshotAssume": (*Editor).SnapshotAssume,
		"SnapshotForget": (*Editor).SnapshotForget,
		"SnapshotAdd":    (*Editor).SnapshotAdd,
		"SnapshotRemove": (*Editor).SnapshotRemove,
		"UpdateMember":   func(e *Editor, p *v1.Pod) error { return e.UpdateMember(good, p) },
		"UpdateMember(old)": func(e *Editor, p *v1.Pod) error {
			if p == noName {
				return e.UpdateMember(good, p)
			}
			return e.UpdateMember(p, good)
		},
	}
	for _, gates := range [][2]bool{{true, true}, {false, false}} {
		before := errorsTable(t, gates[0], gates[1])
		for name, op := range podOps {
			opName := name
			if name == "UpdateMember(old)" {
				opName = "UpdateMember"
			}
			e := before.Edit()
			requireRefused(t, e, before, op(e, nil), ErrNilPod, opName, "podgroup: "+opName+": nil pod")
			requireRefused(t, e, before, op(e, noUID), ErrEmptyUID, opName, "podgroup: "+opName+": pod ns/p has an empty UID")
			if gates[0] {
				requireRefused(t, e, before, op(e, noName), ErrNoPodGroupName, opName,
					"podgroup: "+opName+": pod ns/p: scheduling group has no pod group name")
			} else {
				require.NoError(t, op(e, noName), "%s: gate off, not a member", name)
			}
			e.Done()
			requireRefused(t, e, before, op(e, good), ErrEditorDone, opName, "podgroup: "+opName+": editor used after Done")
		}
		objOps := []struct {
			name string
			err  error
			text string
			op   func(*Editor) error
		}{
			{"AddPodGroup", ErrNilPodGroup, "nil pod group", func(e *Editor) error { return e.AddPodGroup(nil) }},
			{"UpdatePodGroup", ErrNilPodGroup, "nil pod group", func(e *Editor) error { return e.UpdatePodGroup(podGroupObj("ns", "g", nil), nil) }},
			{"RemovePodGroup", ErrNilPodGroup, "nil pod group", func(e *Editor) error { return e.RemovePodGroup(nil) }},
			{"AddComposite", ErrNilComposite, "nil composite pod group", func(e *Editor) error { return e.AddComposite(nil) }},
			{"UpdateComposite", ErrNilComposite, "nil composite pod group", func(e *Editor) error { return e.UpdateComposite(compositeObj("ns", "c", nil), nil) }},
			{"RemoveComposite", ErrNilComposite, "nil composite pod group", func(e *Editor) error { return e.RemoveComposite(nil) }},
		}
		for _, o := range objOps {
			e := before.Edit()
			requireRefused(t, e, before, o.op(e), o.err, o.name, "podgroup: "+o.name+": "+o.text)
			e.Done()
			requireRefused(t, e, before, o.op(e), ErrEditorDone, o.name, "podgroup: "+o.name+": editor used after Done")
		}
	}
}

func TestMissedEvents(t *testing.T) {
	before := errorsTable(t, true, true)
	other := memberPod("ns", "other", "u2", "")
	cases := []struct {
		name string
		op   func(*Editor) error
		text string
	}{
		{"UpdateMember", func(e *Editor) error { return e.UpdateMember(other, other) },
			"podgroup: UpdateMember: pod ns/pod-u2: pod group state not found for update, this indicates a missed add event (podgroup/ns/other)"},
		{"ForgetMember", func(e *Editor) error { return e.ForgetMember(other) },
			"podgroup: ForgetMember: pod ns/pod-u2: pod group state not found for forget, this indicates a missed add or assume event (podgroup/ns/other)"},
		{"UpdatePodGroup", func(e *Editor) error { return e.UpdatePodGroup(nil, podGroupObj("ns", "other", nil)) },
			"podgroup: UpdatePodGroup: pod group state not found for update, this indicates a missed add event (podgroup/ns/other)"},
		{"RemovePodGroup", func(e *Editor) error { return e.RemovePodGroup(podGroupObj("ns", "other", nil)) },
			"podgroup: RemovePodGroup: pod group state not found for removal (podgroup/ns/other)"},
		{"UpdateComposite", func(e *Editor) error { return e.UpdateComposite(nil, compositeObj("ns", "other", nil)) },
			"podgroup: UpdateComposite: composite pod group state not found for update, this indicates a missed add event (compositepodgroup/ns/other)"},
		{"RemoveComposite", func(e *Editor) error { return e.RemoveComposite(compositeObj("ns", "other", nil)) },
			"podgroup: RemoveComposite: composite pod group state not found for removal (compositepodgroup/ns/other)"},
	}
	for _, c := range cases {
		e := before.Edit()
		requireRefused(t, e, before, c.op(e), ErrMissedEvent, c.name, c.text)
	}

	// A composite whose stored object names a parent that has no state:
	// upstream returns early, keeping the object; so do we, with an error.
	e := before.Edit()
	require.NoError(t, e.UpdateComposite(nil, compositeObj("ns", "c", ptr("nowhere"))))
	mid := e.Table()
	requireRefused(t, e, mid, e.RemoveComposite(compositeObj("ns", "c", nil)), ErrMissedEvent, "RemoveComposite",
		"podgroup: RemoveComposite: parent composite pod group state not found for removal (compositepodgroup/ns/nowhere), the composite pod group is kept, as upstream")
	cpg, err := e.Table().CompositePodGroup("ns", "c")
	require.NoError(t, err)
	require.Equal(t, ptr("nowhere"), cpg.Spec.ParentCompositePodGroupName)

	// Missing states that upstream ignores silently are no errors.
	e = before.Edit()
	require.NoError(t, e.RemoveMember(other))
	require.NoError(t, e.SnapshotAssume(other))
	require.NoError(t, e.SnapshotForget(other))
	require.NoError(t, e.SnapshotAdd(other))
	require.NoError(t, e.SnapshotRemove(other))
	require.True(t, e.Done().Equal(before))
}

// TestListerTexts checks each lister's error texts, in both flavours,
// against upstream's (cache.go and snapshot.go of v1.37.2).
func TestListerTexts(t *testing.T) {
	full := errorsTable(t, true, true)
	e := full.Edit()
	require.NoError(t, e.RemovePodGroup(podGroupObj("ns", "g", ptr("c")))) // keeps ns/g for its pod, without object
	require.NoError(t, e.AddPodGroup(podGroupObj("ns", "h", ptr("placeholder"))))
	objectless := e.Done()

	check := func(err error, is error, text string) {
		t.Helper()
		require.ErrorIs(t, err, is)
		require.EqualError(t, err, text)
	}
	// Cache flavour.
	off := NewTable(false, false)
	_, err := off.Get("ns", "g")
	check(err, ErrGateDisabled, "generic workload feature gate is disabled")
	_, err = off.PodGroup("ns", "g")
	check(err, ErrGateDisabled, "generic workload feature gate is disabled")
	_, err = off.GetComposite("ns", "c")
	check(err, ErrGateDisabled, "composite pod group feature gate is disabled")
	_, err = off.CompositePodGroup("ns", "c")
	check(err, ErrGateDisabled, "composite pod group feature gate is disabled")

	_, err = full.Get("ns", "x")
	check(err, ErrStateNotFound, "pod group state not found for pod group ns/x")
	_, err = full.PodGroup("ns", "x")
	check(err, ErrStateNotFound, "pod group state not found for pod group podgroup/ns/x")
	_, err = objectless.PodGroup("ns", "g")
	check(err, ErrObjectNotFound, "pod group object not found for pod group podgroup/ns/g")
	_, err = full.GetComposite("ns", "x")
	check(err, ErrStateNotFound, "composite pod group state not found for composite pod group compositepodgroup/ns/x")
	_, err = full.CompositePodGroup("ns", "x")
	check(err, ErrStateNotFound, "composite pod group state not found for composite pod group compositepodgroup/ns/x")
	_, err = objectless.CompositePodGroup("ns", "placeholder")
	check(err, ErrObjectNotFound, "composite pod group object not found for composite pod group compositepodgroup/ns/placeholder")

	// Snapshot flavour: the state listers check no gate.
	soff := off.AsSnapshot()
	_, err = soff.Get("ns", "g")
	check(err, ErrStateNotFound, "pod group state not found for pod group ns/g")
	_, err = soff.PodGroup("ns", "g")
	check(err, ErrGateDisabled, "generic workload feature gate is disabled")
	_, err = soff.GetComposite("ns", "c")
	check(err, ErrStateNotFound, "composite pod group state not found for pod group ns/c")
	_, err = soff.CompositePodGroup("ns", "c")
	check(err, ErrGateDisabled, "composite pod group feature gate is disabled")

	sfull, sobj := full.AsSnapshot(), objectless.AsSnapshot()
	_, err = sfull.Get("ns", "x")
	check(err, ErrStateNotFound, "pod group state not found for pod group ns/x")
	_, err = sfull.PodGroup("ns", "x")
	check(err, ErrStateNotFound, "pod group state not found for pod group podgroup/ns/x")
	_, err = sobj.PodGroup("ns", "g")
	check(err, ErrObjectNotFound, "pod group object not found for pod group podgroup/ns/g")
	_, err = sfull.GetComposite("ns", "x")
	check(err, ErrStateNotFound, "composite pod group state not found for pod group ns/x")
	_, err = sfull.CompositePodGroup("ns", "x")
	check(err, ErrStateNotFound, "composite pod group not found in snapshot: compositepodgroup/ns/x")
	_, err = sobj.CompositePodGroup("ns", "placeholder")
	check(err, ErrObjectNotFound, `composite pod group object not found for pod group "compositepodgroup/ns/placeholder"`)

	// Upstream's snapshot holds no composites while GenericWorkload is
	// off, whatever the cache holds.
	compOnly := NewTable(false, true).Edit()
	require.NoError(t, compOnly.AddComposite(compositeObj("ns", "c", nil)))
	co := compOnly.Done()
	_, err = co.GetComposite("ns", "c")
	require.NoError(t, err)
	_, err = co.AsSnapshot().GetComposite("ns", "c")
	check(err, ErrStateNotFound, "composite pod group state not found for pod group ns/c")
}

func TestRootKeyErrors(t *testing.T) {
	e := NewTable(true, true).Edit()
	require.NoError(t, e.AddPodGroup(podGroupObj("ns", "g", ptr("a"))))
	require.NoError(t, e.AddComposite(compositeObj("ns", "a", ptr("b"))))
	require.NoError(t, e.AddComposite(compositeObj("ns", "b", ptr("a"))))
	tab := e.Done()
	_, ok, err := tab.RootKey(PodGroupKey("ns", "g"))
	require.False(t, ok)
	require.ErrorIs(t, err, ErrCycle)
	require.EqualError(t, err, "cycle detected in the hierarchy: [podgroup/ns/g compositepodgroup/ns/a compositepodgroup/ns/b]")

	_, _, err = tab.RootKey(Key{Kind: 7, Namespace: "ns", Name: "g"})
	require.ErrorIs(t, err, ErrBadKey)
	require.EqualError(t, err, "podgroup: RootKey: key Kind(7)/ns/g is of an unknown kind")

	root, ok, err := tab.RootKey(PodGroupKey("ns", "absent"))
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, Key{}, root)
}

// hierarchyPod is a pod of group ns/name, not in any table.
func hierarchyPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "hp"},
		Spec: v1.PodSpec{SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr(name)}}}
}

func TestHierarchyErrors(t *testing.T) {
	build := func(ops ...func(*Editor) error) Table {
		e := NewTable(true, true).Edit()
		for _, op := range ops {
			require.NoError(t, op(e))
		}
		return e.Done()
	}
	addPG := func(name string, parent *string) func(*Editor) error {
		return func(e *Editor) error { return e.AddPodGroup(podGroupObj("ns", name, parent)) }
	}
	addC := func(name string, parent *string) func(*Editor) error {
		return func(e *Editor) error { return e.AddComposite(compositeObj("ns", name, parent)) }
	}
	addPod := func(group string) func(*Editor) error {
		return func(e *Editor) error { return e.AddMember(memberPod("ns", group, "m-"+group, "")) }
	}

	cases := []struct {
		name string
		tab  Table
		pod  *v1.Pod
		is   error
		text string
	}{
		{"nil pod", build(), nil, ErrNilPod, "podgroup: Hierarchy: nil pod"},
		{"no scheduling group", build(), &v1.Pod{}, ErrNoSchedulingGroup, "pod has no scheduling group"},
		{"no pod group name", build(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
			Spec: v1.PodSpec{SchedulingGroup: &v1.PodSchedulingGroup{}}}, ErrNoPodGroupName,
			"podgroup: Hierarchy: pod ns/p: scheduling group has no pod group name"},
		{"no state", build(), hierarchyPod("g"), ErrStateNotFound, "pod group state not found for podgroup/ns/g"},
		{"no object", build(addPod("g")), hierarchyPod("g"), ErrObjectNotFound, "pod group object not found in state for podgroup/ns/g"},
		{"parent without state", build(addPG("g", ptr("c")), func(e *Editor) error {
			return e.UpdatePodGroup(nil, podGroupObj("ns", "g", ptr("elsewhere")))
		}), hierarchyPod("g"), ErrStateNotFound, "parent composite pod group state not found for compositepodgroup/ns/elsewhere"},
		{"parent placeholder", build(addPG("g", ptr("c"))), hierarchyPod("g"), ErrObjectNotFound,
			"composite pod group object not found in state for compositepodgroup/ns/c"},
		{"cycle going up", build(addPG("g", ptr("c")), addC("c", ptr("c"))), hierarchyPod("g"), ErrCycle,
			"cycle detected in composite pod group hierarchy: compositepodgroup/ns/c"},
		{"cycle at the last parent", build(addPG("g", ptr("c1")), addC("c1", ptr("c2")), addC("c2", ptr("c3")), addC("c3", ptr("c1"))),
			hierarchyPod("g"), ErrCycle, "cycle detected in composite pod group hierarchy: compositepodgroup/ns/c1"},
		{"too deep", build(addPG("g", ptr("c1")), addC("c1", ptr("c2")), addC("c2", ptr("c3")), addC("c3", ptr("c4")), addC("c4", nil)),
			hierarchyPod("g"), ErrTooDeep,
			"podgroup: Hierarchy: no root within 3 composite parents of podgroup/ns/g: the hierarchy is deeper than WorkloadMaxTreeDepth (4)"},
		{"cycle going down", build(addPG("g", ptr("root")), addC("root", nil), addC("mid", ptr("root")), addPG("x", ptr("root")), addPG("x", ptr("mid"))),
			hierarchyPod("g"), ErrCycle, "cycle detected in composite pod group hierarchy: podgroup/ns/x"},
		{"stale pod group child", build(addPG("g", ptr("root")), addC("root", nil), addPG("a", ptr("root")), func(e *Editor) error {
			return e.RemovePodGroup(podGroupObj("ns", "a", nil))
		}), hierarchyPod("g"), ErrStateNotFound, "pod group state not found for podgroup/ns/a"},
		{"stale composite child", build(addPG("g", ptr("root")), addC("root", nil), addC("c", ptr("root")), func(e *Editor) error {
			return e.UpdateComposite(nil, compositeObj("ns", "c", nil))
		}, func(e *Editor) error { return e.RemoveComposite(compositeObj("ns", "c", nil)) }),
			hierarchyPod("g"), ErrStateNotFound, "composite pod group state not found for compositepodgroup/ns/c"},
	}
	for _, c := range cases {
		h, err := c.tab.Hierarchy(c.pod)
		require.ErrorIs(t, err, c.is, c.name)
		require.EqualError(t, err, c.text, c.name)
		var pe *Error
		require.True(t, errors.As(err, &pe), c.name)
		require.Equal(t, "Hierarchy", pe.Op, c.name)
		require.True(t, h.Equal(Table{}), c.name)
	}
}

// TestHierarchyTrees: the tree under the root, at the deepest depth
// allowed; the pod group alone when CompositePodGroup is off.
func TestHierarchyTrees(t *testing.T) {
	for _, composite := range []bool{true, false} {
		e := NewTable(true, composite).Edit()
		require.NoError(t, e.AddPodGroup(podGroupObj("ns", "g", ptr("c1"))))
		require.NoError(t, e.AddPodGroup(podGroupObj("ns", "sib", ptr("c2"))))
		require.NoError(t, e.AddPodGroup(podGroupObj("ns", "apart", nil)))
		require.NoError(t, e.AddComposite(compositeObj("ns", "c1", ptr("c2"))))
		require.NoError(t, e.AddComposite(compositeObj("ns", "c2", ptr("c3"))))
		require.NoError(t, e.AddComposite(compositeObj("ns", "c3", nil)))
		require.NoError(t, e.AddComposite(compositeObj("ns", "other", nil)))
		tab := e.Done()
		h, err := tab.Hierarchy(hierarchyPod("g"))
		require.NoError(t, err)
		require.True(t, h.IsSnapshot())
		var groups, comps []string
		h.Range(func(s *State) bool { groups = append(groups, s.Key().Name); return true })
		h.RangeComposites(func(c *Composite) bool { comps = append(comps, c.Key().Name); return true })
		if composite {
			require.ElementsMatch(t, []string{"g", "sib"}, groups)
			require.ElementsMatch(t, []string{"c1", "c2", "c3"}, comps)
			c3, _ := h.LookupComposite("ns", "c3")
			orig, _ := tab.LookupComposite("ns", "c3")
			require.Same(t, orig, c3, "the tree shares the table's states")
			root, ok, err := tab.RootKey(PodGroupKey("ns", "g"))
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, CompositeKey("ns", "c3"), root)
		} else {
			require.Equal(t, []string{"g"}, groups)
			require.Empty(t, comps)
		}
		again, err := h.Hierarchy(hierarchyPod("anything"))
		require.NoError(t, err)
		require.True(t, again.Equal(h), "a snapshot's Hierarchy is itself")
	}
}
