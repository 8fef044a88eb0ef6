package bench

// Pod groups in TestDiffCache: upstream v1.37.2's GenericWorkload and
// CompositePodGroup state (upstream-semantics section 9). With the
// switches on, pods name pod groups (Spec.SchedulingGroup), and the random
// sequence adds, updates and removes unscheduled members, assumes,
// forgets and confirms them, and adds, updates and removes PodGroup and
// CompositePodGroup objects with parents. After every step every group's
// lister results (state, object, composite children, error texts) and its
// root key are compared on the caches, on the fresh, published and
// long-lived snapshots, and BuildHierarchySnapshotFromPod on the caches.
// Upstream is read through its fwk types, schedcache through
// podgroup.Table, and the two are compared as plain data.

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	upcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"

	"github.com/schedcache/schedcache/podgroup"
)

// setGroupGates turns on, for t's duration, the process-wide feature gates
// upstream's snapshots read when made (NewEmptySnapshot): GenericWorkload,
// CompositePodGroup and the gate the latter depends on.
func setGroupGates(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                 true,
		features.TopologyAwareWorkloadScheduling: true,
		features.CompositePodGroup:               true,
	})
}

// groupUniverse is the small set of group names a differ uses, so that
// pods, groups and parents meet often.
type groupUniverse struct {
	pct        int      // percent of steps that are pod-group operations (0: none)
	podGroups  []string // pod group names, in every namespace
	composites []string // composite pod group names, in every namespace
}

func newGroupUniverse() groupUniverse {
	return groupUniverse{
		podGroups:  []string{"g0", "g1", "g2", "g3"},
		composites: []string{"cg0", "cg1", "cg2", "cg3"},
	}
}

// enableGroupOps makes pct percent of the steps pod-group operations and
// gives a third of the generated pods a scheduling group.
func (d *differ) enableGroupOps(pct int) {
	d.grp.pct = pct
	d.g.groupNames = d.grp.podGroups
}

// composites returns the composite names parents are drawn from: cg3
// only with quirks, so that without them no hierarchy is deeper than
// WorkloadMaxTreeDepth (4: a pod group under three composites).
func (d *differ) composites() []string {
	if d.quirks {
		return d.grp.composites
	}
	return d.grp.composites[:3]
}

func strPtr(s string) *string { return &s }

// memberPod returns a random pod of uid on node naming a random pod group.
func (d *differ) memberPod(uid, node string) *v1.Pod {
	p := d.g.pod(uid, node)
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: strPtr(pick(d.g, d.grp.podGroups...))}
	return p
}

// groupKeyOf returns pod's group key ("ns/name") or "" for a non-member.
func groupKeyOf(p *v1.Pod) string {
	if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
		return "<none>"
	}
	return p.Namespace + "/" + *p.Spec.SchedulingGroup.PodGroupName
}

// pending returns the unscheduled members of upstream's groups, by UID.
func (d *differ) pending() []*v1.Pod {
	var out []*v1.Pod
	for _, ns := range namespaces {
		for _, name := range d.grp.podGroups {
			s, err := d.up.c.PodGroupStates().Get(ns, name)
			if err != nil {
				continue
			}
			for _, p := range s.UnscheduledPods() {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b *v1.Pod) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return out
}

// upHasGroup reports whether upstream's main cache has a state for pod
// group ns/name.
func (d *differ) upHasGroup(ns, name string) bool {
	_, err := d.up.c.PodGroupStates().Get(ns, name)
	return err == nil
}

// upHasComposite reports whether upstream has a state for composite
// ns/name.
func (d *differ) upHasComposite(ns, name string) bool {
	_, err := d.up.c.CompositePodGroupStates().Get(ns, name)
	return err == nil
}

// groupOp records a pod-group call: upstream returns nothing and logs a
// missed event where schedcache returns an error wrapping
// podgroup.ErrMissedEvent. missed says whether upstream had no state to
// act on; schedcache must fail exactly then (or, where allowed, succeed
// doing nothing), with nothing else different (the comparison after the
// step checks the states).
func (d *differ) groupOp(op string, es error, missed, silentOK bool) {
	d.t.Helper()
	if !d.groups {
		missed = false // switches off: a no-op on both
	}
	suffix := ""
	switch {
	case es == nil && (!missed || silentOK):
	case es != nil && missed && errors.Is(es, podgroup.ErrMissedEvent):
		suffix = "/missed"
	default:
		d.record(op, nil, es, "")
		d.fatalf("%s: schedcache error %v; upstream had no state to act on: %v", op, es, missed)
	}
	d.record(op, nil, es, suffix)
}

// trackPod makes the differ follow p's key (GetPod, state); a key from
// newUID is followed already.
func (d *differ) trackPod(p *v1.Pod) {
	k := string(p.UID)
	if _, ok := d.keyPod[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.keyPod[k] = p
}

// stepGroup applies one random pod-group operation to both caches.
func (d *differ) stepGroup(st state) {
	g := d.g
	pend := d.pending()
	ns := pick(g, namespaces...)
	pgName, cpgName := pick(g, d.grp.podGroups...), pick(g, d.composites()...)
	switch x := g.r.IntN(100); {
	case x < 20: // AddPodGroupMember: an unscheduled member appears (or changes)
		var p *v1.Pod
		cached := keysWhere(st, func(k string) bool { return st.stored[k].Spec.SchedulingGroup != nil })
		switch {
		case len(pend) > 0 && g.pct(25):
			p = pend[g.r.IntN(len(pend))]
			if g.pct(50) {
				p = withNode(p, "") // another object
			}
		case len(cached) > 0 && g.pct(15):
			// A stale event for a member already assumed or bound: it
			// becomes unscheduled too (a pod in two sets, as upstream).
			p = withNode(st.stored[d.randomKey(cached)], "")
		default:
			p = d.memberPod(d.newUID(), "")
			d.keyPod[string(p.UID)] = p
		}
		d.groupOp("AddPodGroupMember "+string(p.UID)+" of "+groupKeyOf(p), d.sc.c.AddPodGroupMember(p), false, false)
		d.up.void(func(c upcache.Cache) { c.AddPodGroupMember(p) })

	case x < 32: // UpdatePodGroupMember
		var old *v1.Pod
		if len(pend) > 0 && g.pct(90) {
			old = pend[g.r.IntN(len(pend))]
		} else {
			old = d.memberPod(d.newUID(), "") // never added: its group may have no state
			d.keyPod[string(old.UID)] = old
		}
		nu := withNode(old, "")
		if g.pct(40) {
			nu = d.memberPod(string(old.UID), "")
			if g.pct(70) {
				nu.Spec.SchedulingGroup = old.Spec.SchedulingGroup // the group is immutable
			}
		}
		if g.pct(25) {
			nu.Spec.NodeName = d.nodeName() // bound: assigned
		}
		sg := nu.Spec.SchedulingGroup
		missed := !d.upHasGroup(nu.Namespace, *sg.PodGroupName)
		d.groupOp(fmt.Sprintf("UpdatePodGroupMember %s of %s -> %s on %q", old.UID, groupKeyOf(old), groupKeyOf(nu), nu.Spec.NodeName),
			d.sc.c.UpdatePodGroupMember(discard, old, nu), missed, false)
		d.up.void(func(c upcache.Cache) { c.UpdatePodGroupMember(discard, old, nu) })
		if nu.Spec.NodeName != "" && g.pct(60) {
			// The informer then sees the bound pod.
			d.trackPod(nu)
			d.both("AddPod(member) "+string(nu.UID)+" on "+nu.Spec.NodeName+" (bound by its update)", d.up.AddPod(nu), d.sc.AddPod(nu))
		}

	case x < 42: // RemovePodGroupMember: an unscheduled member deleted
		var p *v1.Pod
		switch {
		case len(pend) > 0 && g.pct(80):
			p = pend[g.r.IntN(len(pend))]
		case len(st.stored) > 0 && g.pct(50):
			p = st.stored[d.randomKey(keysWhere(st, func(string) bool { return true }))] // a cached pod: its group loses it
		default:
			p = d.memberPod(d.newUID(), "")
			d.keyPod[string(p.UID)] = p
		}
		missed := p.Spec.SchedulingGroup != nil && !d.upHasGroup(p.Namespace, *p.Spec.SchedulingGroup.PodGroupName)
		d.groupOp("RemovePodGroupMember "+string(p.UID)+" of "+groupKeyOf(p), d.sc.c.RemovePodGroupMember(p), missed, true)
		d.up.void(func(c upcache.Cache) { c.RemovePodGroupMember(p) })

	case x < 60: // AssumePod of an unscheduled member
		var p *v1.Pod
		if len(pend) > 0 && g.pct(90) {
			p = withNode(pend[g.r.IntN(len(pend))], d.nodeName())
		} else {
			p = d.memberPod(d.newUID(), d.nodeName()) // no state yet: created, assigned
			d.keyPod[string(p.UID)] = p
		}
		d.trackPod(p)
		d.both("AssumePod(member) "+string(p.UID)+" of "+groupKeyOf(p)+" on "+p.Spec.NodeName, d.up.AssumePod(p), d.sc.AssumePod(p))

	case x < 64: // AddPod of an unscheduled member bound elsewhere
		if len(pend) == 0 {
			return
		}
		p := withNode(pend[g.r.IntN(len(pend))], d.nodeName())
		d.trackPod(p)
		d.both("AddPod(member) "+string(p.UID)+" of "+groupKeyOf(p)+" on "+p.Spec.NodeName, d.up.AddPod(p), d.sc.AddPod(p))

	case x < 72: // AddPodGroup
		pg := d.podGroupObj(ns, pgName, g.pct(60))
		d.lastPG[ns+"/"+pgName] = pg
		d.groupOp("AddPodGroup "+ns+"/"+pgName+" parent "+parentOf(pg.Spec.ParentCompositePodGroupName), d.sc.c.AddPodGroup(pg), false, false)
		d.up.void(func(c upcache.Cache) { c.AddPodGroup(pg) })

	case x < 77: // UpdatePodGroup
		old := d.lastPG[ns+"/"+pgName]
		if old == nil || g.pct(10) {
			old = d.podGroupObj(ns, pgName, g.pct(60))
		}
		nu := d.podGroupObj(ns, pgName, false)
		nu.Spec.ParentCompositePodGroupName = old.Spec.ParentCompositePodGroupName // immutable
		if d.quirks && g.pct(25) {
			nu = d.podGroupObj(ns, pgName, g.pct(60))
		}
		missed := !d.upHasGroup(ns, pgName)
		if !missed {
			d.lastPG[ns+"/"+pgName] = nu
		}
		d.groupOp(fmt.Sprintf("UpdatePodGroup %s/%s parent %s -> %s", ns, pgName, parentOf(old.Spec.ParentCompositePodGroupName), parentOf(nu.Spec.ParentCompositePodGroupName)),
			d.sc.c.UpdatePodGroup(discard, old, nu), missed, false)
		d.up.void(func(c upcache.Cache) { c.UpdatePodGroup(discard, old, nu) })

	case x < 83: // RemovePodGroup
		pg := d.lastPG[ns+"/"+pgName]
		if pg == nil || (d.quirks && g.pct(20)) {
			pg = d.podGroupObj(ns, pgName, g.pct(60)) // maybe naming another parent
		}
		missed := !d.upHasGroup(ns, pgName)
		d.groupOp("RemovePodGroup "+ns+"/"+pgName+" parent "+parentOf(pg.Spec.ParentCompositePodGroupName), d.sc.c.RemovePodGroup(discard, pg), missed, false)
		d.up.void(func(c upcache.Cache) { c.RemovePodGroup(discard, pg) })

	case x < 90: // AddCompositePodGroup
		cpg := d.compositeObj(ns, cpgName, g.pct(50))
		d.lastCPG[ns+"/"+cpgName] = cpg
		d.groupOp("AddCompositePodGroup "+ns+"/"+cpgName+" parent "+parentOf(cpg.Spec.ParentCompositePodGroupName), d.sc.c.AddCompositePodGroup(discard, cpg), false, false)
		d.up.void(func(c upcache.Cache) { c.AddCompositePodGroup(discard, cpg) })

	case x < 95: // UpdateCompositePodGroup
		old := d.lastCPG[ns+"/"+cpgName]
		if old == nil || g.pct(10) {
			old = d.compositeObj(ns, cpgName, g.pct(50))
		}
		nu := d.compositeObj(ns, cpgName, false)
		nu.Spec.ParentCompositePodGroupName = old.Spec.ParentCompositePodGroupName
		if d.quirks && g.pct(25) {
			nu = d.compositeObj(ns, cpgName, g.pct(50))
		}
		missed := !d.upHasComposite(ns, cpgName)
		if !missed {
			d.lastCPG[ns+"/"+cpgName] = nu
		}
		d.groupOp(fmt.Sprintf("UpdateCompositePodGroup %s/%s parent %s -> %s", ns, cpgName, parentOf(old.Spec.ParentCompositePodGroupName), parentOf(nu.Spec.ParentCompositePodGroupName)),
			d.sc.c.UpdateCompositePodGroup(discard, old, nu), missed, false)
		d.up.void(func(c upcache.Cache) { c.UpdateCompositePodGroup(discard, old, nu) })

	default: // RemoveCompositePodGroup
		cpg := d.lastCPG[ns+"/"+cpgName]
		if cpg == nil || (d.quirks && g.pct(20)) {
			cpg = d.compositeObj(ns, cpgName, g.pct(50))
		}
		// Upstream returns early, logging nothing, when the stored object
		// names a parent without state; schedcache reports it as a missed
		// event.
		missed := !d.upHasComposite(ns, cpgName)
		parentMissing := false
		if !missed {
			if stored, err := d.up.c.CompositePodGroups().Get(ns, cpgName); err == nil && stored.Spec.ParentCompositePodGroupName != nil {
				parentMissing = !d.upHasComposite(ns, *stored.Spec.ParentCompositePodGroupName)
			}
		}
		d.groupOp("RemoveCompositePodGroup "+ns+"/"+cpgName+" parent "+parentOf(cpg.Spec.ParentCompositePodGroupName),
			d.sc.c.RemoveCompositePodGroup(discard, cpg), missed || parentMissing, false)
		d.up.void(func(c upcache.Cache) { c.RemoveCompositePodGroup(discard, cpg) })
	}
}

func parentOf(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}

// podGroupObj returns a new PodGroup object ns/name, naming a random parent
// if withParent.
func (d *differ) podGroupObj(ns, name string, withParent bool) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{}
	pg.Namespace, pg.Name = ns, name
	pg.UID = types.UID(fmt.Sprintf("pg-%s-%s-%d", ns, name, d.step))
	if withParent {
		pg.Spec.ParentCompositePodGroupName = strPtr(pick(d.g, d.composites()...))
	}
	return pg
}

// compositeObj returns a new CompositePodGroup ns/name, naming a parent
// if withParent: without quirks one after it in d.composites() (so the
// hierarchy has no cycles), with quirks any (itself included).
func (d *differ) compositeObj(ns, name string, withParent bool) *schedulingv1alpha3.CompositePodGroup {
	cpg := &schedulingv1alpha3.CompositePodGroup{}
	cpg.Namespace, cpg.Name = ns, name
	cpg.UID = types.UID(fmt.Sprintf("cpg-%s-%s-%d", ns, name, d.step))
	names := d.composites()
	if !d.quirks {
		names = names[slices.Index(names, name)+1:]
	}
	if withParent && len(names) > 0 {
		cpg.Spec.ParentCompositePodGroupName = strPtr(pick(d.g, names...))
	}
	return cpg
}

// ---- comparison ----

// pgSum is what a pod-group state lister answers for one group.
type pgSum struct {
	Err        string
	All        []string // UIDs
	AllCount   int
	Unsched    map[string]string // pod name -> pod (uid@pointer)
	Assumed    []string          // UIDs
	Assigned   []string          // UIDs
	Scheduled  []string          // pods (uid@pointer), sorted
	SchedCount int
}

// objSum is what an object lister answers for one group.
type objSum struct {
	Err string
	Obj string // the object's address: the caches must hand back the object they were given
}

// cpgSum is what a composite state lister answers.
type cpgSum struct {
	Err      string
	Children []string // keys, sorted
}

// rootSum is a GetRootKeyForGroup answer.
type rootSum struct {
	Key string
	OK  bool
	Err string
}

func uidList(s sets.Set[types.UID]) []string {
	var out []string
	for u := range s {
		out = append(out, string(u))
	}
	sort.Strings(out)
	return out
}

func podIDs(ps []*v1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, podID(p))
	}
	sort.Strings(out)
	return out
}

func unschedMap(m map[string]*v1.Pod) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, p := range m {
		out[k] = podID(p)
	}
	return out
}

func addr(p any) string { return fmt.Sprintf("%p", p) }

func upPGSum(s fwk.PodGroupState, err error) pgSum {
	if err != nil {
		return pgSum{Err: err.Error()}
	}
	return pgSum{
		All: uidList(s.AllPods()), AllCount: s.AllPodsCount(), Unsched: unschedMap(s.UnscheduledPods()),
		Assumed: uidList(s.AssumedPods()), Assigned: uidList(s.AssignedPods()),
		Scheduled: podIDs(s.ScheduledPods()), SchedCount: s.ScheduledPodsCount(),
	}
}

func scPGSum(s *podgroup.State, err error) pgSum {
	if err != nil {
		return pgSum{Err: err.Error()}
	}
	return pgSum{
		All: uidList(s.AllPods()), AllCount: s.AllPodsCount(), Unsched: unschedMap(s.UnscheduledPods()),
		Assumed: uidList(s.AssumedPods()), Assigned: uidList(s.AssignedPods()),
		Scheduled: podIDs(s.ScheduledPods()), SchedCount: s.ScheduledPodsCount(),
	}
}

func objOf[T any](o *T, err error) objSum {
	if err != nil {
		return objSum{Err: err.Error()}
	}
	return objSum{Obj: addr(o)}
}

func upCPGSum(s fwk.CompositePodGroupState, err error) cpgSum {
	if err != nil {
		return cpgSum{Err: err.Error()}
	}
	var out []string
	for _, k := range s.GetChildren() {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return cpgSum{Children: out}
}

func scCPGSum(c *podgroup.Composite, err error) cpgSum {
	if err != nil {
		return cpgSum{Err: err.Error()}
	}
	var out []string
	for _, k := range c.Children() {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return cpgSum{Children: out}
}

// cycleRe matches GetRootKeyForGroup's cycle error, whose key list is in
// upstream's set order (random): the keys are compared sorted.
var cycleRe = regexp.MustCompile(`^cycle detected in the hierarchy: \[(.*)\]$`)

func rootOf(key fmt.Stringer, ok bool, err error) rootSum {
	if err != nil {
		msg := err.Error()
		if m := cycleRe.FindStringSubmatch(msg); m != nil {
			keys := strings.Fields(m[1])
			sort.Strings(keys)
			msg = "cycle detected in the hierarchy: " + fmt.Sprint(keys)
		}
		return rootSum{Err: msg}
	}
	if !ok {
		return rootSum{}
	}
	return rootSum{Key: key.String(), OK: true}
}

// groupsView is what both upstream's cache and its snapshots serve.
type groupsView = fwk.PodGroupManager

// groupViewDiff compares every group of the universe in an upstream view
// and a schedcache table (the four listers and GetRootKeyForGroup) and
// returns the first difference, "" if none.
func (d *differ) groupViewDiff(u groupsView, t podgroup.Table) string {
	for _, ns := range namespaces {
		for _, name := range d.grp.podGroups {
			if a, b := upPGSum(u.PodGroupStates().Get(ns, name)), scPGSum(t.Get(ns, name)); !equalSums(a, b) {
				return fmt.Sprintf("PodGroupStates().Get(%s, %s) differs (-upstream +schedcache):\n%s", ns, name, diffSums(a, b))
			}
			if a, b := objOf(u.PodGroups().Get(ns, name)), objOf(t.PodGroup(ns, name)); a != b {
				return fmt.Sprintf("PodGroups().Get(%s, %s): upstream %+v, schedcache %+v", ns, name, a, b)
			}
			a, b := rootOf(u.GetRootKeyForGroup(fwk.PodGroupKey(ns, name))), rootOf(t.RootKey(podgroup.PodGroupKey(ns, name)))
			if a != b {
				return fmt.Sprintf("GetRootKeyForGroup(%s): upstream %+v, schedcache %+v", fwk.PodGroupKey(ns, name), a, b)
			}
		}
		for _, name := range d.grp.composites {
			if a, b := upCPGSum(u.CompositePodGroupStates().Get(ns, name)), scCPGSum(t.GetComposite(ns, name)); !equalSums(a, b) {
				return fmt.Sprintf("CompositePodGroupStates().Get(%s, %s) differs (-upstream +schedcache):\n%s", ns, name, diffSums(a, b))
			}
			if a, b := objOf(u.CompositePodGroups().Get(ns, name)), objOf(t.CompositePodGroup(ns, name)); a != b {
				return fmt.Sprintf("CompositePodGroups().Get(%s, %s): upstream %+v, schedcache %+v", ns, name, a, b)
			}
			a, b := rootOf(u.GetRootKeyForGroup(fwk.CompositePodGroupKey(ns, name))), rootOf(t.RootKey(podgroup.CompositeKey(ns, name)))
			if a != b {
				return fmt.Sprintf("GetRootKeyForGroup(%s): upstream %+v, schedcache %+v", fwk.CompositePodGroupKey(ns, name), a, b)
			}
		}
	}
	return ""
}

func equalSums[T any](a, b T) bool { return diffSums(a, b) == "" }

// compareSnapGroups compares a snapshot pair's groups. A difference is
// fatal unless deferred: it then fails the test at the end of the
// sequence (deferf), the snapshots being the only ones to differ.
func (d *differ) compareSnapGroups(what string, up groupsView, t podgroup.Table, deferred string) {
	d.t.Helper()
	if d.grp.pct == 0 && !d.groups || !d.groups && d.step%16 != 0 {
		// No group was ever made (TestDiffScenarios, the reject tests),
		// or the switches are off: every answer is a refusal, spot-checked.
		return
	}
	diff := d.groupViewDiff(up, t)
	switch {
	case diff == "":
	case deferred != "":
		d.deferf(deferred, "%s: %s", what, diff)
	default:
		d.fatalf("%s pod groups: %s", what, diff)
	}
}

// compareGroups compares the caches' groups and, for a random pod,
// BuildHierarchySnapshotFromPod.
func (d *differ) compareGroups() {
	d.t.Helper()
	if d.grp.pct == 0 && !d.groups || !d.groups && d.step%16 != 0 {
		return // with the switches off every answer is a refusal: spot-checked
	}
	if diff := d.groupViewDiff(d.up.c, d.sc.c.PodGroups()); diff != "" {
		d.fatalf("cache pod groups: %s", diff)
	}
	d.countGroupStates()
	{
		ns, name := pick(d.g, namespaces...), pick(d.g, d.grp.podGroups...)
		p := &v1.Pod{}
		p.Namespace, p.Name = ns, "probe"
		if !d.g.pct(5) {
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: strPtr(name)}
		}
		d.compareHierarchy(p)
	}
}

// countGroupStates counts, for the coverage line, the steps at which some
// group of upstream's cache held an unscheduled, assumed or assigned pod,
// a pod in two of those sets, a composite had children, and some group's
// root was found above it.
func (d *differ) countGroupStates() {
	seen := map[string]bool{}
	for _, ns := range namespaces {
		for _, name := range d.grp.podGroups {
			s, err := d.up.c.PodGroupStates().Get(ns, name)
			if err != nil {
				continue
			}
			un, as, ag := s.UnscheduledPods(), s.AssumedPods(), s.AssignedPods()
			seen["unscheduled"] = seen["unscheduled"] || len(un) > 0
			seen["assumed"] = seen["assumed"] || len(as) > 0
			seen["assigned"] = seen["assigned"] || len(ag) > 0
			for _, p := range un {
				seen["in two sets"] = seen["in two sets"] || as.Has(p.UID) || ag.Has(p.UID)
			}
			seen["in two sets"] = seen["in two sets"] || as.Intersection(ag).Len() > 0
			if pg, err := d.up.c.PodGroups().Get(ns, name); err == nil && pg.Spec.ParentCompositePodGroupName != nil {
				if root, ok, _ := d.up.c.GetRootKeyForGroup(fwk.PodGroupKey(ns, name)); ok && root.Type == fwk.CompositePodGroupKeyType {
					seen["root above a pod group"] = true
				}
			}
		}
		for _, name := range d.grp.composites {
			if c, err := d.up.c.CompositePodGroupStates().Get(ns, name); err == nil && len(c.GetChildren()) > 0 {
				seen["composite with children"] = true
			}
		}
	}
	for k, v := range seen {
		if v {
			d.counts["groups: "+k]++
		}
	}
}

// compareHierarchy compares BuildHierarchySnapshotFromPod(p) on the caches:
// the error texts, or the hierarchies' groups. Two differences are
// schedcache's documented ones (podgroup.Table.Hierarchy): where the walk
// up from p's group finds no root within WorkloadMaxTreeDepth-1 parents,
// schedcache fails (ErrCycle, ErrTooDeep) where upstream returns the tree
// under the composite its walk stopped at; and where a tree holds several
// errors, upstream returns whichever its sets' order meets first and
// schedcache the first in its own fixed order, so two texts that are both
// errors of that tree (treeError) are accepted.
func (d *differ) compareHierarchy(p *v1.Pod) {
	d.t.Helper()
	hu, eu := d.up.c.BuildHierarchySnapshotFromPod(p)
	hs, es := d.sc.c.BuildHierarchySnapshotFromPod(p)
	what := "BuildHierarchySnapshotFromPod(" + groupKeyOf(p) + ")"
	if d.upWalkExhausted(p) {
		if !errors.Is(es, podgroup.ErrCycle) && !errors.Is(es, podgroup.ErrTooDeep) {
			d.fatalf("%s: upstream's walk up found no root within %d parents (upstream: %v); schedcache %v, want ErrCycle or ErrTooDeep",
				what, schedulingv1alpha3.WorkloadMaxTreeDepth-1, eu, es)
		}
		d.counts["hierarchy/no root (documented)"]++
		return
	}
	if errStr(eu) != errStr(es) && eu != nil && es != nil && d.treeError(p, eu) && d.treeError(p, es) {
		// Both texts are errors upstream's walk down the tree can meet
		// first, depending on its sets' order.
		d.counts["hierarchy/order-dependent error"]++
		return
	}
	if errStr(eu) != errStr(es) {
		d.fatalf("%s: upstream error %v, schedcache error %v", what, eu, es)
	}
	if eu != nil {
		d.counts["hierarchy/err"]++
		return
	}
	d.counts["hierarchy"]++
	if diff := d.groupViewDiff(hu, hs); diff != "" {
		d.fatalf("%s: %s", what, diff)
	}
}

// treeErrRe reads an error of the walk down a hierarchy
// (buildPodGroupStateSnapshotTree): a key met twice or without state.
var treeErrRe = regexp.MustCompile(`^(cycle detected in composite pod group hierarchy:|pod group state not found for|composite pod group state not found for) (\w+)/([^/]+)/(.+)$`)

// treeError reports whether err is one that upstream's walk down the tree
// of p's hierarchy can return first for some order of its children sets:
// a key reached twice (on two paths, or on a cycle), or a key reached
// whose state is missing. The tree is read from upstream's cache; the
// root is where upstream's walk up stops.
func (d *differ) treeError(p *v1.Pod, err error) bool {
	m := treeErrRe.FindStringSubmatch(err.Error())
	if m == nil || p.Spec.SchedulingGroup == nil {
		return false
	}
	target := m[2] + "/" + m[3] + "/" + m[4]
	root := fwk.PodGroupKey(p.Namespace, *p.Spec.SchedulingGroup.PodGroupName)
	if pg, e := d.up.c.PodGroups().Get(p.Namespace, *p.Spec.SchedulingGroup.PodGroupName); e == nil && d.groups && pg.Spec.ParentCompositePodGroupName != nil {
		root = fwk.CompositePodGroupKey(p.Namespace, *pg.Spec.ParentCompositePodGroupName)
		for range schedulingv1alpha3.WorkloadMaxTreeDepth - 1 {
			cpg, e := d.up.c.CompositePodGroups().Get(root.Namespace, root.Name)
			if e != nil || cpg.Spec.ParentCompositePodGroupName == nil {
				break
			}
			root = fwk.CompositePodGroupKey(p.Namespace, *cpg.Spec.ParentCompositePodGroupName)
		}
	}
	// Count the paths reaching each key (at most 2), without descending
	// into a key twice.
	reached := map[string]int{}
	missing := map[string]bool{}
	var walk func(k fwk.EntityKey)
	walk = func(k fwk.EntityKey) {
		if reached[k.String()]++; reached[k.String()] > 1 {
			return
		}
		if k.Type == fwk.PodGroupKeyType {
			_, e := d.up.c.PodGroupStates().Get(k.Namespace, k.Name)
			missing[k.String()] = e != nil
			return
		}
		c, e := d.up.c.CompositePodGroupStates().Get(k.Namespace, k.Name)
		if missing[k.String()] = e != nil; e != nil {
			return
		}
		for _, child := range c.GetChildren() {
			walk(child)
		}
	}
	walk(root)
	if strings.HasPrefix(m[1], "cycle") {
		return reached[target] > 1
	}
	return reached[target] > 0 && missing[target]
}

// upWalkExhausted reports whether upstream's BuildHierarchySnapshotFromPod
// walks WorkloadMaxTreeDepth-1 composite parents up from p's group without
// reaching a root (it then takes the composite reached as the root).
func (d *differ) upWalkExhausted(p *v1.Pod) bool {
	if p.Spec.SchedulingGroup == nil || !d.groups {
		return false
	}
	pg, err := d.up.c.PodGroups().Get(p.Namespace, *p.Spec.SchedulingGroup.PodGroupName)
	if err != nil || pg.Spec.ParentCompositePodGroupName == nil {
		return false
	}
	cur := *pg.Spec.ParentCompositePodGroupName
	for range schedulingv1alpha3.WorkloadMaxTreeDepth - 1 {
		cpg, err := d.up.c.CompositePodGroups().Get(p.Namespace, cur)
		if err != nil || cpg.Spec.ParentCompositePodGroupName == nil {
			return false
		}
		cur = *cpg.Spec.ParentCompositePodGroupName
	}
	return true
}
