package podgroup

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The model test, in the style of etcd raft's quorum/quick_test.go: random
// operation sequences applied to an Editor and to the port of upstream in
// upstream_model_test.go, comparing every lister's result and every
// group's sets after the steps, and checking that Tables taken earlier
// still hold what they held.

// The universe the random operations draw from: small, so that they meet.
var (
	mNamespaces = []string{"ns1", "ns2"}
	mGroupNames = []string{"g1", "g2", "g3"}
	mCompNames  = []string{"c1", "c2", "c3", "c4", "c5"}
	mUIDs       = []types.UID{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9", "u10", "u11"}
	mNodes      = []string{"n1", "n2"}
)

func ptr[T any](v T) *T { return &v }

// gen draws random objects.
type gen struct{ r *rand.Rand }

func pick[T any](g gen, xs []T) T { return xs[g.r.IntN(len(xs))] }

func (g gen) pod() *v1.Pod {
	switch g.r.IntN(100) {
	case 0:
		return nil
	case 1:
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pick(g, mNamespaces), Name: "nouid"}}
	}
	uid := pick(g, mUIDs)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pick(g, mNamespaces), Name: "pod-" + string(uid), UID: uid}}
	switch n := g.r.IntN(100); {
	case n < 82:
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr(pick(g, mGroupNames))}
	case n < 97:
	default:
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{}
	}
	if g.r.IntN(2) == 0 {
		p.Spec.NodeName = pick(g, mNodes)
	}
	return p
}

// podOf returns, half the time, a copy of a pod some group of m holds
// (with its node name redrawn half of those times), else pod().
func (g gen) podOf(m *model) *v1.Pod {
	if g.r.IntN(2) == 0 {
		return g.pod()
	}
	var members []*v1.Pod
	for _, k := range slices.SortedFunc(maps.Keys(m.podGroupStates), compareKeys) {
		d := m.podGroupStates[k]
		for _, uid := range slices.Sorted(maps.Keys(d.allPods)) {
			members = append(members, d.allPods[uid])
		}
	}
	if len(members) == 0 {
		return g.pod()
	}
	p := pick(g, members).DeepCopy()
	if g.r.IntN(2) == 0 {
		p.Spec.NodeName = ""
		if g.r.IntN(2) == 0 {
			p.Spec.NodeName = pick(g, mNodes)
		}
	}
	return p
}

func (g gen) podGroup() *schedulingv1beta1.PodGroup {
	if g.r.IntN(40) == 0 {
		return nil
	}
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: pick(g, mNamespaces), Name: pick(g, mGroupNames)}}
	if g.r.IntN(2) == 0 {
		pg.Spec.ParentCompositePodGroupName = ptr(pick(g, mCompNames))
	}
	return pg
}

// composite draws a composite whose parent is mostly the next name, so
// that chains deeper than WorkloadMaxTreeDepth form, sometimes another
// name (cycles, itself included), sometimes none.
func (g gen) composite() *schedulingv1alpha3.CompositePodGroup {
	if g.r.IntN(40) == 0 {
		return nil
	}
	i := g.r.IntN(len(mCompNames))
	cpg := &schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: pick(g, mNamespaces), Name: mCompNames[i]}}
	switch n := g.r.IntN(100); {
	case n < 55 && i+1 < len(mCompNames):
		cpg.Spec.ParentCompositePodGroupName = ptr(mCompNames[i+1])
	case n < 75:
		cpg.Spec.ParentCompositePodGroupName = ptr(pick(g, mCompNames))
	}
	return cpg
}

// The checks below run millions of times: they compare with plain code
// and call t.Fatalf only on a mismatch (testify's t.Helper calls would
// dominate the run time).

// expect fails the test with ctx and the message if !ok.
func expect(t *testing.T, ok bool, ctx, format string, args ...any) {
	if !ok {
		t.Fatalf("%s: %s", ctx, fmt.Sprintf(format, args...))
	}
}

// requireErr checks got against the expected error.
func requireErr(t *testing.T, want *mErr, got error, ctx string) {
	if want == nil {
		expect(t, got == nil, ctx, "unexpected error %v", got)
		return
	}
	expect(t, got != nil, ctx, "no error, want one wrapping %v (%q)", want.is, want.text)
	expect(t, errors.Is(got, want.is), ctx, "error %v does not wrap %v", got, want.is)
	var pe *Error
	expect(t, errors.As(got, &pe), ctx, "error %v is not an *Error", got)
	expect(t, want.text == "" || want.text == got.Error(), ctx, "error text %q, want upstream's %q", got.Error(), want.text)
}

// requireState checks s against d.
func requireState(t *testing.T, s *State, d *mPG, ctx string) {
	expect(t, sets.KeySet(d.allPods).Equal(s.AllPods()), ctx, "AllPods %v, want %v", s.AllPods(), sets.KeySet(d.allPods))
	expect(t, len(d.allPods) == s.AllPodsCount(), ctx, "AllPodsCount %d, want %d", s.AllPodsCount(), len(d.allPods))
	expect(t, maps.Equal(d.unscheduledPodsMap(), s.UnscheduledPods()), ctx, "UnscheduledPods %v, want %v", byName(s.UnscheduledPods()), byName(d.unscheduledPodsMap()))
	expect(t, d.unscheduledPods.Len() == s.UnscheduledPodsCount(), ctx, "UnscheduledPodsCount")
	expect(t, sets.KeySet(d.assumedPods).Equal(s.AssumedPods()), ctx, "AssumedPods %v, want %v", s.AssumedPods(), sets.KeySet(d.assumedPods))
	expect(t, len(d.assumedPods) == s.AssumedPodsCount(), ctx, "AssumedPodsCount")
	expect(t, d.assignedPods.Equal(s.AssignedPods()), ctx, "AssignedPods %v, want %v", s.AssignedPods(), d.assignedPods)
	expect(t, d.assignedPods.Len() == s.AssignedPodsCount(), ctx, "AssignedPodsCount")
	expect(t, maps.Equal(podCounts(d.scheduledPods()), podCounts(s.ScheduledPods())), ctx, "ScheduledPods %v, want %v", counted(podCounts(s.ScheduledPods())), counted(podCounts(d.scheduledPods())))
	expect(t, len(d.assumedPods)+len(d.assignedPods) == s.ScheduledPodsCount(), ctx, "ScheduledPodsCount")
	expect(t, d.podGroup == s.PodGroup(), ctx, "PodGroup %p, want %p", s.PodGroup(), d.podGroup)
	for _, uid := range mUIDs {
		p, ok := s.Pod(uid)
		want, in := d.allPods[uid]
		expect(t, in == ok && want == p, ctx, "Pod(%s) %p %v, want %p %v", uid, p, ok, want, in)
		p, ok = s.AssumedPod(uid)
		want, in = d.assumedPods[uid]
		expect(t, in == ok && want == p, ctx, "AssumedPod(%s) %p %v, want %p %v", uid, p, ok, want, in)
		expect(t, d.unscheduledPods.Has(uid) == s.IsUnscheduled(uid), ctx, "IsUnscheduled(%s)", uid)
		expect(t, d.assignedPods.Has(uid) == s.IsAssigned(uid), ctx, "IsAssigned(%s)", uid)
	}
}

// podRef describes p for a failure message: UID, node and address (the
// checks compare identities).
func podRef(p *v1.Pod) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("%s@%q(%p)", p.UID, p.Spec.NodeName, p)
}

// byName describes UnscheduledPods' result.
func byName(m map[string]*v1.Pod) []string {
	var out []string
	for name, p := range m {
		out = append(out, name+"="+podRef(p))
	}
	slices.Sort(out)
	return out
}

// counted describes a multiset of pods.
func counted(m map[*v1.Pod]int) []string {
	var out []string
	for p, n := range m {
		out = append(out, fmt.Sprintf("%s×%d", podRef(p), n))
	}
	slices.Sort(out)
	return out
}

// podCounts is a multiset of pods by identity.
func podCounts(ps []*v1.Pod) map[*v1.Pod]int {
	out := make(map[*v1.Pod]int)
	for _, p := range ps {
		out[p]++
	}
	return out
}

func requireComposite(t *testing.T, c *Composite, d *mCPG, ctx string) {
	expect(t, d.compositePodGroup == c.CompositePodGroup(), ctx, "CompositePodGroup %p, want %p", c.CompositePodGroup(), d.compositePodGroup)
	expect(t, slices.Equal(d.getChildren(), c.Children()), ctx, "Children %v, want %v", c.Children(), d.getChildren())
	expect(t, d.children.Len() == c.ChildrenCount(), ctx, "ChildrenCount")
	for k := range d.children {
		expect(t, c.HasChild(k), ctx, "HasChild(%v)", k)
	}
}

// allKeys is every key of the universe, plus absent ones.
var allKeys = func() []Key {
	var ks []Key
	for _, ns := range append(slices.Clone(mNamespaces), "absent") {
		for _, n := range append(slices.Clone(mGroupNames), "absent") {
			ks = append(ks, PodGroupKey(ns, n))
		}
		for _, n := range append(slices.Clone(mCompNames), "absent") {
			ks = append(ks, CompositeKey(ns, n))
		}
	}
	return ks
}()

// requireTable checks every lister of tab against m.
func requireTable(t *testing.T, tab Table, m *model, ctx string) {
	expect(t, m.genericWorkloadEnabled == tab.GenericWorkloadEnabled() &&
		m.compositePodGroupEnabled == tab.CompositePodGroupEnabled() &&
		m.snapshot == tab.IsSnapshot(), ctx, "gates or flavour differ")
	expect(t, len(m.podGroupStates) == tab.Len(), ctx, "Len %d, want %d", tab.Len(), len(m.podGroupStates))
	expect(t, len(m.compositePodGroupStates) == tab.CompositeLen(), ctx, "CompositeLen %d, want %d", tab.CompositeLen(), len(m.compositePodGroupStates))
	seen := sets.New[Key]()
	tab.Range(func(s *State) bool {
		expect(t, !seen.Has(s.Key()), ctx, "Range visits %v twice", s.Key())
		seen.Insert(s.Key())
		d, ok := m.podGroupStates[s.Key()]
		expect(t, ok, ctx, "extra group %v", s.Key())
		requireState(t, s, d, ctx+" "+s.Key().String())
		return true
	})
	tab.RangeComposites(func(c *Composite) bool {
		expect(t, !seen.Has(c.Key()), ctx, "RangeComposites visits %v twice", c.Key())
		seen.Insert(c.Key())
		d, ok := m.compositePodGroupStates[c.Key()]
		expect(t, ok, ctx, "extra composite %v", c.Key())
		requireComposite(t, c, d, ctx+" "+c.Key().String())
		return true
	})
	expect(t, len(m.podGroupStates)+len(m.compositePodGroupStates) == seen.Len(), ctx, "Range missed groups")

	for _, k := range allKeys {
		kctx := ctx + " " + k.String()
		if k.Kind == PodGroupKind {
			s, err := tab.Get(k.Namespace, k.Name)
			ws, werr := m.PodGroupStatesGet(k.Namespace, k.Name)
			requireErr(t, werr, err, kctx+" Get")
			if werr == nil {
				requireState(t, s, ws, kctx+" Get")
			}
			pg, err := tab.PodGroup(k.Namespace, k.Name)
			wpg, werr := m.PodGroupsGet(k.Namespace, k.Name)
			requireErr(t, werr, err, kctx+" PodGroup")
			expect(t, wpg == pg, kctx, "PodGroup %p, want %p", pg, wpg)
		} else {
			c, err := tab.GetComposite(k.Namespace, k.Name)
			wc, werr := m.CompositePodGroupStatesGet(k.Namespace, k.Name)
			requireErr(t, werr, err, kctx+" GetComposite")
			if werr == nil {
				requireComposite(t, c, wc, kctx+" GetComposite")
			}
			cpg, err := tab.CompositePodGroup(k.Namespace, k.Name)
			wcpg, werr := m.CompositePodGroupsGet(k.Namespace, k.Name)
			requireErr(t, werr, err, kctx+" CompositePodGroup")
			expect(t, wcpg == cpg, kctx, "CompositePodGroup %p, want %p", cpg, wcpg)
		}
		root, ok, err := tab.RootKey(k)
		wroot, wok, werr := m.GetRootKeyForGroup(k)
		requireErr(t, werr, err, kctx+" RootKey")
		expect(t, wroot == root && wok == ok, kctx, "RootKey %v %v, want %v %v", root, ok, wroot, wok)
	}
	_, _, err := tab.RootKey(Key{Namespace: "ns1", Name: "g1"})
	expect(t, errors.Is(err, ErrBadKey), ctx, "RootKey of a zero kind: %v", err)
}

// gens returns the generation of every group and composite of tab.
func gens(tab Table) map[Key]int64 {
	out := make(map[Key]int64)
	tab.Range(func(s *State) bool { out[s.Key()] = s.Generation(); return true })
	tab.RangeComposites(func(c *Composite) bool { out[c.Key()] = c.Generation(); return true })
	return out
}

// modelGens returns the generation of every group and composite of m.
func modelGens(m *model) map[Key]int64 {
	out := make(map[Key]int64)
	for k, d := range m.podGroupStates {
		out[k] = d.generation
	}
	for k, d := range m.compositePodGroupStates {
		out[k] = d.generation
	}
	return out
}

// requireGenChanges checks that the same groups changed generation
// between two check points in tab as in the model, and that the new
// generations are greater.
func requireGenChanges(t *testing.T, prev, cur, mprev, mcur map[Key]int64, ctx string) {
	for k, g := range cur {
		old, had := prev[k]
		mold, mhad := mprev[k]
		expect(t, mhad == had, ctx, "%v: present before in one and not the other", k)
		if had {
			expect(t, (mold != mcur[k]) == (old != g), ctx, "%v: generation changed in one and not the other", k)
			expect(t, old == g || g > old, ctx, "%v: generation %d went down from %d", k, g, old)
		}
	}
}

// saved is an old Table and what it held when taken.
type saved struct {
	tab  Table
	m    *model
	gens map[Key]int64
	step int
}

func TestModel(t *testing.T) {
	steps := 4000
	if testing.Short() {
		steps = 1000
	}
	for _, gates := range [][2]bool{{true, true}, {true, false}, {false, true}, {false, false}} {
		for seed := range uint64(3) {
			n := steps
			if !gates[0] && !gates[1] {
				n = steps / 4
			}
			t.Run(fmt.Sprintf("generic=%v,composite=%v,seed=%d", gates[0], gates[1], seed), func(t *testing.T) {
				runModel(t, seed, n, gates[0], gates[1])
			})
		}
	}
}

func runModel(t *testing.T, seed uint64, steps int, generic, composite bool) {
	g := gen{r: rand.New(rand.NewPCG(seed, uint64(steps)))}
	m := newModel(generic, composite, false)
	tab := NewTable(generic, composite)
	e := tab.Edit()
	prev, mprev := gens(tab), modelGens(m)
	var olds []saved
	verifyOlds := func(ctx string) {
		for _, o := range olds {
			octx := fmt.Sprintf("%s: table of step %d", ctx, o.step)
			requireTable(t, o.tab, o.m, octx)
			require.Equal(t, o.gens, gens(o.tab), octx)
		}
	}
	check := func(cur Table, step int, ctx string) {
		requireTable(t, cur, m, ctx)
		if g.r.IntN(3) == 0 {
			requireTable(t, cur.AsSnapshot(), m.asSnapshot(), ctx+" AsSnapshot")
		}
		cg, mg := gens(cur), modelGens(m)
		requireGenChanges(t, prev, cg, mprev, mg, ctx)
		prev, mprev = cg, mg
		if g.r.IntN(20) == 0 {
			o := saved{tab: cur, m: m.clone(), gens: cg, step: step}
			if len(olds) < 4 {
				olds = append(olds, o)
			} else {
				olds[g.r.IntN(len(olds))] = o
			}
		}
		if g.r.IntN(4) == 0 {
			checkHierarchy(t, g, cur, m, ctx)
		}
	}
	for step := range steps {
		ctx := fmt.Sprintf("seed %d step %d", seed, step)
		op, werr, err := applyRandom(g, e, m, (step/300)%2 == 1)
		ctx += " " + op
		requireErr(t, werr, err, ctx)
		switch n := g.r.IntN(100); {
		case n < 5:
			tab = e.Done()
			require.Equal(t, tab, e.Done(), ctx)
			require.ErrorIs(t, e.AddMember(&v1.Pod{}), ErrEditorDone, ctx)
			check(tab, step, ctx)
			e = tab.Edit()
		case n < 40:
			check(e.Table(), step, ctx)
		}
		if step%250 == 0 {
			verifyOlds(ctx)
		}
	}
	tab = e.Done()
	check(tab, steps, "end")
	verifyOlds("end")
}

// applyRandom applies one random operation to e and m and returns its
// name, the model's error and ours. In a shrinking phase removals dominate, so
// that groups and composites empty and go away.
func applyRandom(g gen, e *Editor, m *model, shrink bool) (string, *mErr, error) {
	weights := []int{12, 6, 8, 8, 8, 6, 8, 3, 5, 7, 2, 5, 10}
	if shrink {
		weights = []int{1, 0, 4, 20, 1, 6, 1, 3, 10, 1, 2, 10, 6}
	}
	total := 0
	for _, w := range weights {
		total += w
	}
	n := g.r.IntN(total)
	op := 0
	for ; n >= weights[op]; op++ {
		n -= weights[op]
	}
	switch op {
	case 0:
		p := g.podOf(m)
		return "AddMember", m.AddPodGroupMember(p), e.AddMember(p)
	case 1:
		p := g.podOf(m)
		return "ConfirmMember", m.AddPodGroupMember(p), e.ConfirmMember(p)
	case 2:
		o, p := g.podOf(m), g.podOf(m)
		if p != nil && o != nil && g.r.IntN(3) > 0 {
			o.UID, o.Namespace, o.Spec.SchedulingGroup = p.UID, p.Namespace, p.Spec.SchedulingGroup
		}
		return "UpdateMember", m.UpdatePodGroupMember(o, p), e.UpdateMember(o, p)
	case 3:
		p := g.podOf(m)
		return "RemoveMember", m.RemovePodGroupMember(p), e.RemoveMember(p)
	case 4:
		p := g.podOf(m)
		return "AssumeMember", m.AssumePodGroupMember(p), e.AssumeMember(p)
	case 5:
		p := g.podOf(m)
		return "ForgetMember", m.ForgetPodGroupMember(p), e.ForgetMember(p)
	case 6:
		pg := g.podGroup()
		return "AddPodGroup", m.AddPodGroup(pg), e.AddPodGroup(pg)
	case 7:
		o, pg := g.podGroup(), g.podGroup()
		return "UpdatePodGroup", m.UpdatePodGroup(o, pg), e.UpdatePodGroup(o, pg)
	case 8:
		pg := g.podGroup()
		return "RemovePodGroup", m.RemovePodGroup(pg), e.RemovePodGroup(pg)
	case 9:
		c := g.composite()
		return "AddComposite", m.AddCompositePodGroup(c), e.AddComposite(c)
	case 10:
		o, c := g.composite(), g.composite()
		return "UpdateComposite", m.UpdateCompositePodGroup(o, c), e.UpdateComposite(o, c)
	case 11:
		c := g.composite()
		return "RemoveComposite", m.RemoveCompositePodGroup(c), e.RemoveComposite(c)
	}
	return applySnapshotOp(g, e, m)
}

func applySnapshotOp(g gen, e *Editor, m *model) (string, *mErr, error) {
	p := g.podOf(m)
	switch g.r.IntN(4) {
	case 0:
		return "SnapshotAssume", m.SnapshotAssumePod(p), e.SnapshotAssume(p)
	case 1:
		return "SnapshotForget", m.SnapshotForgetPod(p), e.SnapshotForget(p)
	case 2:
		return "SnapshotAdd", m.SnapshotAddPod(p), e.SnapshotAdd(p)
	}
	return "SnapshotRemove", m.SnapshotRemovePod(p), e.SnapshotRemove(p)
}

// checkHierarchy compares Hierarchy of a pod of each group of the
// universe and of a random pod, on cur and on its snapshot form. On a
// random one of the trees returned it runs a few snapshot operations, as
// a scheduling cycle would on its private copy, and checks that neither
// the tree nor cur changed.
func checkHierarchy(t *testing.T, g gen, cur Table, m *model, ctx string) {
	pods := []*v1.Pod{g.pod()}
	for _, ns := range mNamespaces {
		for _, name := range mGroupNames {
			pods = append(pods, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h", UID: "h"},
				Spec:       v1.PodSpec{SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr(name)}},
			})
		}
	}
	var trees []Table
	var wtrees []*model
	for _, p := range pods {
		h, err := cur.Hierarchy(p)
		wh, werr := m.BuildHierarchySnapshotFromPod(p)
		hctx := fmt.Sprintf("%s Hierarchy(%v)", ctx, p)
		requireErr(t, werr, err, hctx)
		if werr == nil {
			requireTable(t, h, wh, hctx)
			trees, wtrees = append(trees, h), append(wtrees, wh)
		}
	}
	snap, wsnap := cur.AsSnapshot(), m.asSnapshot()
	h, err := snap.Hierarchy(pods[0])
	wh, werr := wsnap.BuildHierarchySnapshotFromPod(pods[0])
	requireErr(t, werr, err, ctx+" snapshot Hierarchy")
	if werr == nil {
		require.True(t, h.Equal(snap), ctx)
		require.Same(t, wsnap, wh, ctx)
	}
	if len(trees) == 0 {
		return
	}
	i := g.r.IntN(len(trees))
	h, wh = trees[i], wtrees[i]
	orig := wh.clone()
	before := cur
	he := h.Edit()
	for range 1 + g.r.IntN(6) {
		op, werr, err := applySnapshotOp(g, he, wh)
		requireErr(t, werr, err, ctx+" "+op)
	}
	requireTable(t, he.Done(), wh, ctx+" after snapshot ops")
	requireTable(t, h, orig, ctx+" hierarchy table unchanged")
	require.True(t, before.Equal(cur), ctx)
	requireTable(t, cur, m, ctx+" source unchanged")
}
