package podgroup

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestKeyString(t *testing.T) {
	require.Equal(t, "podgroup/ns/a", PodGroupKey("ns", "a").String())
	require.Equal(t, "compositepodgroup/ns/a", CompositeKey("ns", "a").String())
	require.Equal(t, "Kind(0)//", Key{}.String())
	// The map keys are unambiguous where "ns/name" would not be.
	require.NotEqual(t, mapKey("a/b", "c"), mapKey("a", "b/c"))
	require.NotEqual(t, childKey(PodGroupKey("a", "b")), childKey(CompositeKey("a", "b")))
}

// TestSetsAreCopies: what the accessors return is the caller's to change.
func TestSetsAreCopies(t *testing.T) {
	e := NewTable(true, false).Edit()
	require.NoError(t, e.AddMember(memberPod("ns", "g", "u1", "")))
	require.NoError(t, e.AddMember(memberPod("ns", "g", "u2", "n1")))
	require.NoError(t, e.AssumeMember(memberPod("ns", "g", "u1", "n2")))
	tab := e.Done()
	s, err := tab.Get("ns", "g")
	require.NoError(t, err)

	all := s.AllPods()
	all.Insert("x")
	s.AssumedPods().Insert("x")
	s.AssignedPods().Insert("x")
	s.UnscheduledPods()["x"] = nil
	sp := s.ScheduledPods()
	sp[0] = nil

	require.Equal(t, sets.New[types.UID]("u1", "u2"), s.AllPods())
	require.Equal(t, sets.New[types.UID]("u1"), s.AssumedPods())
	require.Equal(t, sets.New[types.UID]("u2"), s.AssignedPods())
	require.Empty(t, s.UnscheduledPods())
	require.NotContains(t, s.ScheduledPods(), (*v1.Pod)(nil))
}

// TestScheduledPodsOrder: assigned pods by UID, then assumed pods by UID;
// a pod both assumed and assigned twice, as upstream.
func TestScheduledPodsOrder(t *testing.T) {
	e := NewTable(true, false).Edit()
	for _, uid := range []string{"c", "a", "b", "e", "d"} {
		require.NoError(t, e.AddMember(memberPod("ns", "g", uid, "")))
	}
	for _, uid := range []string{"e", "d"} { // assumed
		require.NoError(t, e.AssumeMember(memberPod("ns", "g", uid, "n1")))
	}
	for _, uid := range []string{"c", "a"} { // bound
		require.NoError(t, e.UpdateMember(memberPod("ns", "g", uid, ""), memberPod("ns", "g", uid, "n1")))
	}
	// d is assumed; an update that keeps it nodeless and an assume with
	// its stored copy on a node make it assigned too, still assumed.
	require.NoError(t, e.UpdateMember(memberPod("ns", "g", "d", "n1"), memberPod("ns", "g", "d", "n2")))
	require.NoError(t, e.AssumeMember(memberPod("ns", "g", "d", "n2")))
	s, _ := e.Done().Lookup("ns", "g")
	var got []types.UID
	for _, p := range s.ScheduledPods() {
		got = append(got, p.UID)
	}
	require.Equal(t, []types.UID{"a", "c", "d", "d", "e"}, got)
	require.Equal(t, 5, s.ScheduledPodsCount())
	require.Equal(t, map[string]*v1.Pod{"pod-b": mustPod(t, s, "b")}, s.UnscheduledPods())
	n := 0
	s.RangePods(func(*v1.Pod) bool { n++; return n < 2 })
	require.Equal(t, 2, n, "RangePods stops when fn returns false")
}

func mustPod(t *testing.T, s *State, uid types.UID) *v1.Pod {
	t.Helper()
	p, ok := s.Pod(uid)
	require.True(t, ok)
	return p
}

// TestUnscheduledPodsSameName: two unscheduled pods of one name (a pod
// deleted and created again under a new UID, the delete missed): the
// greater UID wins, every time.
func TestUnscheduledPodsSameName(t *testing.T) {
	for range 20 {
		e := NewTable(true, false).Edit()
		a := memberPod("ns", "g", "uid-a", "")
		b := memberPod("ns", "g", "uid-b", "")
		a.Name, b.Name = "same", "same"
		require.NoError(t, e.AddMember(b))
		require.NoError(t, e.AddMember(a))
		s, _ := e.Done().Lookup("ns", "g")
		require.Equal(t, map[string]*v1.Pod{"same": b}, s.UnscheduledPods())
	}
}

// TestGenerationOnNoOpChanges: upstream bumps the generation on every
// call that reaches a group's state, even one that leaves its contents as
// they were; a call that does not reach it changes nothing.
func TestGenerationOnNoOpChanges(t *testing.T) {
	p := memberPod("ns", "g", "u1", "")
	e := NewTable(true, false).Edit()
	require.NoError(t, e.AddMember(p))
	t1 := e.Table()
	require.NoError(t, e.AddMember(p)) // the same pod again
	t2 := e.Table()
	require.NoError(t, e.RemoveMember(memberPod("ns", "g", "absent", "")))
	t3 := e.Table()
	require.NoError(t, e.AssumeMember(memberPod("ns", "g", "absent", "n1"))) // not a member: no change
	require.NoError(t, e.ForgetMember(memberPod("ns", "g", "absent", "")))   // likewise
	t4 := e.Done()
	g := func(tab Table) int64 { s, _ := tab.Lookup("ns", "g"); return s.Generation() }
	require.Less(t, g(t1), g(t2))
	require.Less(t, g(t2), g(t3))
	require.True(t, t3.Equal(t4))
}

// TestEditorTable: Table publishes what was built so far and the edit
// goes on without changing it; after Done it returns Done's table.
func TestEditorTable(t *testing.T) {
	e := NewTable(true, true).Edit()
	require.NoError(t, e.AddMember(memberPod("ns", "g", "u1", "")))
	mid := e.Table()
	require.NoError(t, e.AddMember(memberPod("ns", "g", "u2", "")))
	require.NoError(t, e.AddComposite(compositeObj("ns", "c", nil)))
	s, _ := mid.Lookup("ns", "g")
	require.Equal(t, 1, s.AllPodsCount())
	require.Equal(t, 0, mid.CompositeLen())
	done := e.Done()
	require.True(t, e.Table().Equal(done))
	require.False(t, mid.Equal(done))
}

func TestEqualAndDiff(t *testing.T) {
	a := NewTable(true, true)
	require.True(t, a.Equal(NewTable(true, true)))
	require.False(t, a.Equal(NewTable(true, false)))
	require.False(t, a.Equal(a.AsSnapshot()))
	e := a.Edit()
	require.NoError(t, e.AddMember(memberPod("ns", "g", "u1", "")))
	require.NoError(t, e.AddComposite(compositeObj("ns", "c", nil)))
	b := e.Done()
	e = b.Edit()
	require.NoError(t, e.RemoveMember(memberPod("ns", "g", "u1", "")))
	require.NoError(t, e.AddMember(memberPod("ns", "h", "u1", "")))
	c := e.Done()
	require.False(t, b.Equal(c), "same sizes, other groups")

	var added, removed []Key
	Diff(b, c, func(o, n *State) {
		switch {
		case o == nil:
			added = append(added, n.Key())
		case n == nil:
			removed = append(removed, o.Key())
		}
	}, nil)
	require.Equal(t, []Key{PodGroupKey("ns", "h")}, added)
	require.Equal(t, []Key{PodGroupKey("ns", "g")}, removed)
	Diff(b, c, nil, func(o, n *Composite) { t.Error("no composite changed") })
}

// TestChildrenSorted: Children in kind, namespace, name order.
func TestChildrenSorted(t *testing.T) {
	e := NewTable(true, true).Edit()
	for _, n := range []string{"z", "b", "m"} {
		require.NoError(t, e.AddComposite(compositeObj("ns", "c"+n, ptr("root"))))
		require.NoError(t, e.AddPodGroup(podGroupObj("ns", "g"+n, ptr("root"))))
	}
	c, err := e.Done().GetComposite("ns", "root")
	require.NoError(t, err)
	require.Nil(t, c.CompositePodGroup())
	require.Equal(t, []Key{
		PodGroupKey("ns", "gb"), PodGroupKey("ns", "gm"), PodGroupKey("ns", "gz"),
		CompositeKey("ns", "cb"), CompositeKey("ns", "cm"), CompositeKey("ns", "cz"),
	}, c.Children())
	require.Less(t, compareKeys(PodGroupKey("a", "z"), PodGroupKey("b", "a")), 0)
}

// TestConcurrentReaders: a published Table is read by many goroutines
// while its owner goes on editing (run under -race).
func TestConcurrentReaders(t *testing.T) {
	e := NewTable(true, true).Edit()
	for _, uid := range []string{"a", "b", "c"} {
		require.NoError(t, e.AddMember(memberPod("ns", "g", uid, "")))
	}
	require.NoError(t, e.AddPodGroup(podGroupObj("ns", "g", ptr("c"))))
	require.NoError(t, e.AddComposite(compositeObj("ns", "c", nil)))
	pub := e.Table()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				s, err := pub.Get("ns", "g")
				if err != nil || s.AllPodsCount() != 3 || len(s.UnscheduledPods()) != 3 {
					t.Error("published table changed")
					return
				}
				if _, err := pub.Hierarchy(hierarchyPod("g")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 200 {
		p := memberPod("ns", "g", "a", "n1")
		if i%2 == 0 {
			require.NoError(t, e.AddMember(p))
		} else {
			require.NoError(t, e.RemoveMember(p))
		}
		e.Table()
	}
	wg.Wait()
}
