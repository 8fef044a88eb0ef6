package podgroup

import (
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/schedcache/schedcache/internal/immutable"
)

// Editor builds a new Table from one (Table.Edit) by the operations of
// upstream's cache (AddMember ... RemoveComposite) and of its snapshot
// within a scheduling cycle (SnapshotAssume ... SnapshotRemove).
//
// Contract: an Editor is owned by one goroutine; its methods must not be
// called concurrently with each other. No method blocks. Editing never
// changes the Table the editor started from nor any other Table: every
// change builds a new State or Composite, so distinct editors, even of one
// Table, may run concurrently. Each operation is a no-op where upstream's
// is (a gate off, a pod in no group); bad input returns an *Error and
// changes nothing. Done returns the Table built and ends the edit; after
// it every operation returns ErrEditorDone.
type Editor struct {
	groups     immutable.MapEditor[*State]     // the table's groups being built; owned
	composites immutable.MapEditor[*Composite] // the table's composites being built; owned
	// pods, units and keys are scratch editors of a State's or a
	// Composite's maps, reused (EditInto) for every change: each is used
	// for one map at a time and finished (Done) before the next.
	pods      immutable.MapEditor[*v1.Pod]
	units     immutable.MapEditor[unit]
	keys      immutable.MapEditor[Key]
	generic   bool  // immutable, from the table
	composite bool  // immutable, from the table
	snapshot  bool  // immutable, from the table
	done      bool  // Done was called
	result    Table // what Done returned, once done
}

// Edit returns an Editor whose initial contents, gates and flavour are t's.
func (t Table) Edit() *Editor {
	e := &Editor{generic: t.generic, composite: t.composite, snapshot: t.snapshot}
	t.groups.EditInto(&e.groups)
	t.composites.EditInto(&e.composites)
	return e
}

// Done returns the Table built and ends the edit. Later calls return the
// same Table.
func (e *Editor) Done() Table {
	if !e.done {
		e.result = e.table(e.groups.Done(), e.composites.Done())
		e.done = true
	}
	return e.result
}

// Table returns the Table built so far and goes on editing: later changes
// do not affect the returned Table. It costs O(1), and the next change of
// each map path-copies what it touches once more.
func (e *Editor) Table() Table {
	if e.done {
		return e.result
	}
	g, c := e.groups.Done(), e.composites.Done()
	g.EditInto(&e.groups)
	c.EditInto(&e.composites)
	return e.table(g, c)
}

func (e *Editor) table(g immutable.Map[*State], c immutable.Map[*Composite]) Table {
	return Table{groups: g, composites: c, generic: e.generic, composite: e.composite, snapshot: e.snapshot}
}

// ---- cache-level operations (upstream cache.go) ----

// AddMember adds an unassigned pod to its pod group, creating the group's
// state if there is none, as upstream's AddPodGroupMember (an assigned pod
// goes to the assigned pods, as there). No-op unless GenericWorkload is on
// and the pod has a SchedulingGroup.
func (e *Editor) AddMember(pod *v1.Pod) error { return e.addMember("AddMember", pod) }

// ConfirmMember adds a pod to its pod group as upstream's cache.addPod does
// for a pod that is not assumed (AddPod of a bound pod, or the re-add of
// an assumed pod's update): addPodGroupMember, the same change as
// AddMember.
func (e *Editor) ConfirmMember(pod *v1.Pod) error { return e.addMember("ConfirmMember", pod) }

func (e *Editor) addMember(op string, pod *v1.Pod) error {
	k, mk, ok, err := e.member(op, pod)
	if err != nil || !ok {
		return err
	}
	d, exists := e.group(mk)
	if !exists {
		d = State{key: k}
	}
	e.addPod(&d, pod)
	e.putGroup(mk, d)
	return nil
}

// UpdateMember updates a pod in its pod group, as upstream's
// UpdatePodGroupMember: the group is newPod's; the pod moves to the
// assigned pods if oldPod had no node and newPod has one. If the group
// has no state it returns an error wrapping ErrMissedEvent (upstream logs
// a missed add event) and changes nothing. No-op unless GenericWorkload
// is on and newPod has a SchedulingGroup.
func (e *Editor) UpdateMember(oldPod, newPod *v1.Pod) error {
	const op = "UpdateMember"
	if err := e.checkPod(op, oldPod); err != nil {
		return err
	}
	k, mk, ok, err := e.member(op, newPod)
	if err != nil || !ok {
		return err
	}
	d, exists := e.group(mk)
	if !exists {
		return inputError(op, k, ErrMissedEvent, "pod "+podName(newPod)+": pod group state not found for update, this indicates a missed add event ("+k.String()+")")
	}
	e.updatePod(&d, oldPod, newPod)
	e.putGroup(mk, d)
	return nil
}

// RemoveMember removes a pod from its pod group, dropping the group's
// state if it is left with neither pods nor a PodGroup object, as
// upstream's RemovePodGroupMember (and cache.removePod). Nothing changes
// if the group has no state. No-op unless GenericWorkload is on and the
// pod has a SchedulingGroup.
func (e *Editor) RemoveMember(pod *v1.Pod) error {
	_, mk, ok, err := e.member("RemoveMember", pod)
	if err != nil || !ok {
		return err
	}
	d, exists := e.group(mk)
	if !exists {
		return nil
	}
	e.deletePod(&d, string(pod.UID))
	if d.empty() {
		e.groups.Delete(mk)
		return nil
	}
	e.putGroup(mk, d)
	return nil
}

// AssumeMember records an assumed pod in its pod group, as upstream's
// cache.addPod(assumePod=true) (assumePodGroupMember): if the group has
// no state, one is created holding the pod, which (having a node) then
// counts as assigned; if the group does not have the pod, nothing changes;
// else the pod becomes assumed, or assigned if the group's copy has a
// node. No-op unless GenericWorkload is on and the pod has a
// SchedulingGroup.
func (e *Editor) AssumeMember(pod *v1.Pod) error {
	k, mk, ok, err := e.member("AssumeMember", pod)
	if err != nil || !ok {
		return err
	}
	d, exists := e.group(mk)
	if !exists {
		d = State{key: k}
		d.all = e.podSet(d.all, string(pod.UID), pod)
	}
	if e.assumePod(&d, pod) {
		e.putGroup(mk, d)
	}
	return nil
}

// ForgetMember moves an assumed pod back, as upstream's cache.removePod
// (forgetPod=true) (forgetPodGroupMember): to the unscheduled pods, or the
// assigned ones if the group's copy has a node. Nothing changes if the
// group does not have the pod. If the group has no state it returns an
// error wrapping ErrMissedEvent (upstream logs a missed add or assume
// event). No-op unless GenericWorkload is on and the pod has a
// SchedulingGroup.
func (e *Editor) ForgetMember(pod *v1.Pod) error {
	const op = "ForgetMember"
	k, mk, ok, err := e.member(op, pod)
	if err != nil || !ok {
		return err
	}
	d, exists := e.group(mk)
	if !exists {
		return inputError(op, k, ErrMissedEvent, "pod "+podName(pod)+": pod group state not found for forget, this indicates a missed add or assume event ("+k.String()+")")
	}
	if e.forgetPod(&d, string(pod.UID)) {
		e.putGroup(mk, d)
	}
	return nil
}

// AddPodGroup records a PodGroup object, creating its state if there is
// none, and, if CompositePodGroup is on and it names a parent, adds it to
// the parent's children, creating a placeholder for the parent if need
// be, as upstream's AddPodGroup. No-op unless GenericWorkload is on.
func (e *Editor) AddPodGroup(pg *schedulingv1beta1.PodGroup) error {
	const op = "AddPodGroup"
	if err := e.checkPodGroup(op, pg); err != nil || !e.generic {
		return err
	}
	k := PodGroupKey(pg.Namespace, pg.Name)
	mk := mapKey(k.Namespace, k.Name)
	d, exists := e.group(mk)
	if !exists {
		d = State{key: k}
	}
	d.gen = nextGeneration()
	d.pg = pg
	e.putGroup(mk, d)
	if !e.composite || pg.Spec.ParentCompositePodGroupName == nil {
		return nil
	}
	pk := CompositeKey(pg.Namespace, *pg.Spec.ParentCompositePodGroupName)
	pmk := mapKey(pk.Namespace, pk.Name)
	c, exists := e.comp(pmk)
	if !exists {
		c = Composite{key: pk}
	}
	e.addChild(&c, k)
	e.putComp(pmk, c)
	return nil
}

// UpdatePodGroup replaces the PodGroup object of newPG's group, as
// upstream's UpdatePodGroup (the parent's children are left as they are).
// If the group has no state it returns an error wrapping ErrMissedEvent
// and changes nothing. oldPG is not used (nil is accepted). No-op unless
// GenericWorkload is on.
func (e *Editor) UpdatePodGroup(oldPG, newPG *schedulingv1beta1.PodGroup) error {
	const op = "UpdatePodGroup"
	_ = oldPG
	if err := e.checkPodGroup(op, newPG); err != nil || !e.generic {
		return err
	}
	k := PodGroupKey(newPG.Namespace, newPG.Name)
	mk := mapKey(k.Namespace, k.Name)
	d, exists := e.group(mk)
	if !exists {
		return inputError(op, k, ErrMissedEvent, "pod group state not found for update, this indicates a missed add event ("+k.String()+")")
	}
	d.gen = nextGeneration()
	d.pg = newPG
	e.putGroup(mk, d)
	return nil
}

// RemovePodGroup drops the PodGroup object of pg's group, as upstream's
// RemovePodGroup: if CompositePodGroup is on and pg names a parent that
// has a state, the group leaves its children (and the parent's state is
// dropped if left empty); the group's state is dropped if it has no pods,
// else kept for them. If the group has no state it returns an error
// wrapping ErrMissedEvent and changes nothing. No-op unless
// GenericWorkload is on.
func (e *Editor) RemovePodGroup(pg *schedulingv1beta1.PodGroup) error {
	const op = "RemovePodGroup"
	if err := e.checkPodGroup(op, pg); err != nil || !e.generic {
		return err
	}
	k := PodGroupKey(pg.Namespace, pg.Name)
	mk := mapKey(k.Namespace, k.Name)
	d, exists := e.group(mk)
	if !exists {
		return inputError(op, k, ErrMissedEvent, "pod group state not found for removal ("+k.String()+")")
	}
	if e.composite && pg.Spec.ParentCompositePodGroupName != nil {
		pk := CompositeKey(pg.Namespace, *pg.Spec.ParentCompositePodGroupName)
		pmk := mapKey(pk.Namespace, pk.Name)
		if c, ok := e.comp(pmk); ok {
			e.removeChild(&c, k)
			if c.empty() {
				e.composites.Delete(pmk)
			} else {
				e.putComp(pmk, c)
			}
		}
	}
	d.gen = nextGeneration()
	d.pg = nil
	if d.empty() {
		e.groups.Delete(mk)
		return nil
	}
	e.putGroup(mk, d)
	return nil
}

// AddComposite records a CompositePodGroup object, creating its state if
// there is none, and, if it names a parent, adds it to the parent's
// children, creating a placeholder for the parent if need be, as
// upstream's AddCompositePodGroup. No-op unless CompositePodGroup is on.
func (e *Editor) AddComposite(cpg *schedulingv1alpha3.CompositePodGroup) error {
	const op = "AddComposite"
	if err := e.checkComposite(op, cpg); err != nil || !e.composite {
		return err
	}
	k := CompositeKey(cpg.Namespace, cpg.Name)
	mk := mapKey(k.Namespace, k.Name)
	c, exists := e.comp(mk)
	if !exists {
		c = Composite{key: k}
	}
	c.gen = nextGeneration()
	c.cpg = cpg
	e.putComp(mk, c)
	if cpg.Spec.ParentCompositePodGroupName == nil {
		return nil
	}
	pk := CompositeKey(cpg.Namespace, *cpg.Spec.ParentCompositePodGroupName)
	pmk := mapKey(pk.Namespace, pk.Name)
	p, exists := e.comp(pmk) // read after the put: the parent may be cpg itself
	if !exists {
		p = Composite{key: pk}
	}
	e.addChild(&p, k)
	e.putComp(pmk, p)
	return nil
}

// UpdateComposite replaces the CompositePodGroup object of newCPG's
// group, as upstream's UpdateCompositePodGroup. If it has no state it
// returns an error wrapping ErrMissedEvent and changes nothing. oldCPG is
// not used (nil is accepted). No-op unless CompositePodGroup is on.
func (e *Editor) UpdateComposite(oldCPG, newCPG *schedulingv1alpha3.CompositePodGroup) error {
	const op = "UpdateComposite"
	_ = oldCPG
	if err := e.checkComposite(op, newCPG); err != nil || !e.composite {
		return err
	}
	k := CompositeKey(newCPG.Namespace, newCPG.Name)
	mk := mapKey(k.Namespace, k.Name)
	c, exists := e.comp(mk)
	if !exists {
		return inputError(op, k, ErrMissedEvent, "composite pod group state not found for update, this indicates a missed add event ("+k.String()+")")
	}
	c.gen = nextGeneration()
	c.cpg = newCPG
	e.putComp(mk, c)
	return nil
}

// RemoveComposite drops the CompositePodGroup object of cpg's group, as
// upstream's RemoveCompositePodGroup: if the object the state holds names
// a parent, the group leaves the parent's children (the parent's state is
// dropped if left empty); the group's state is dropped if it has no
// children, else kept for them. If the group has no state, or the parent
// the stored object names has none, it returns an error wrapping
// ErrMissedEvent and changes nothing: upstream also changes nothing in the
// second case (it returns early, keeping the object), silently. No-op
// unless CompositePodGroup is on.
func (e *Editor) RemoveComposite(cpg *schedulingv1alpha3.CompositePodGroup) error {
	const op = "RemoveComposite"
	if err := e.checkComposite(op, cpg); err != nil || !e.composite {
		return err
	}
	k := CompositeKey(cpg.Namespace, cpg.Name)
	mk := mapKey(k.Namespace, k.Name)
	c, exists := e.comp(mk)
	if !exists {
		return inputError(op, k, ErrMissedEvent, "composite pod group state not found for removal ("+k.String()+")")
	}
	if stored := c.cpg; stored != nil && stored.Spec.ParentCompositePodGroupName != nil {
		pk := CompositeKey(cpg.Namespace, *stored.Spec.ParentCompositePodGroupName)
		pmk := mapKey(pk.Namespace, pk.Name)
		p, ok := e.comp(pmk)
		if !ok {
			return inputError(op, k, ErrMissedEvent, "parent composite pod group state not found for removal ("+pk.String()+"), the composite pod group is kept, as upstream")
		}
		e.removeChild(&p, k)
		if p.empty() {
			e.composites.Delete(pmk)
		} else {
			e.putComp(pmk, p)
		}
		// Read again: the parent may be cpg itself. It has its object, so
		// it was not dropped.
		c, _ = e.comp(mk)
	}
	c.gen = nextGeneration()
	c.cpg = nil
	if c.empty() {
		e.composites.Delete(mk)
		return nil
	}
	e.putComp(mk, c)
	return nil
}

// ---- snapshot-level operations (upstream snapshot.go) ----

// SnapshotAssume marks a pod assumed in its pod group, as upstream's
// Snapshot.AssumePod: only if the group has a state and the pod (else
// nothing changes); the pod becomes assigned instead if the group's copy
// has a node. No-op unless GenericWorkload is on and the pod has a
// SchedulingGroup.
func (e *Editor) SnapshotAssume(pod *v1.Pod) error {
	_, mk, ok, err := e.member("SnapshotAssume", pod)
	if err != nil || !ok {
		return err
	}
	if d, exists := e.group(mk); exists && e.assumePod(&d, pod) {
		e.putGroup(mk, d)
	}
	return nil
}

// SnapshotForget moves an assumed pod back in its pod group, as
// upstream's Snapshot.ForgetPod: only if the group has a state and the
// pod. pod is the pod as assumed (upstream takes the group and the UID
// from the assumed pod it recorded). No-op unless GenericWorkload is on
// and the pod has a SchedulingGroup.
func (e *Editor) SnapshotForget(pod *v1.Pod) error {
	_, mk, ok, err := e.member("SnapshotForget", pod)
	if err != nil || !ok {
		return err
	}
	if d, exists := e.group(mk); exists && e.forgetPod(&d, string(pod.UID)) {
		e.putGroup(mk, d)
	}
	return nil
}

// SnapshotAdd adds a pod to its pod group, as upstream's Snapshot.AddPod:
// only if the group has a state. No-op unless GenericWorkload is on and
// the pod has a SchedulingGroup.
func (e *Editor) SnapshotAdd(pod *v1.Pod) error {
	_, mk, ok, err := e.member("SnapshotAdd", pod)
	if err != nil || !ok {
		return err
	}
	if d, exists := e.group(mk); exists {
		e.addPod(&d, pod)
		e.putGroup(mk, d)
	}
	return nil
}

// SnapshotRemove removes a pod from its pod group, as upstream's
// Snapshot.RemovePod: only if the group has a state, which is kept even
// if left empty. No-op unless GenericWorkload is on and the pod has a
// SchedulingGroup.
func (e *Editor) SnapshotRemove(pod *v1.Pod) error {
	_, mk, ok, err := e.member("SnapshotRemove", pod)
	if err != nil || !ok {
		return err
	}
	if d, exists := e.group(mk); exists {
		e.deletePod(&d, string(pod.UID))
		e.putGroup(mk, d)
	}
	return nil
}

// ---- input checks ----

// checkPod returns the error of a pod that is nil or has an empty UID, or
// of a finished editor.
func (e *Editor) checkPod(op string, pod *v1.Pod) error {
	switch {
	case e.done:
		return inputError(op, Key{}, ErrEditorDone, "editor used after Done")
	case pod == nil:
		return inputError(op, Key{}, ErrNilPod, "nil pod")
	case pod.UID == "":
		return inputError(op, Key{}, ErrEmptyUID, "pod "+podName(pod)+" has an empty UID")
	}
	return nil
}

// member checks pod and returns its pod group's key and map key, and
// whether the pod is a pod group member: upstream's isPodGroupMember,
// GenericWorkload on and a SchedulingGroup set. A member whose
// SchedulingGroup has no PodGroupName is an error (upstream panics).
func (e *Editor) member(op string, pod *v1.Pod) (Key, string, bool, error) {
	if err := e.checkPod(op, pod); err != nil {
		return Key{}, "", false, err
	}
	sg := pod.Spec.SchedulingGroup
	if !e.generic || sg == nil {
		return Key{}, "", false, nil
	}
	if sg.PodGroupName == nil {
		return Key{}, "", false, inputError(op, Key{}, ErrNoPodGroupName, "pod "+podName(pod)+": scheduling group has no pod group name")
	}
	k := PodGroupKey(pod.Namespace, *sg.PodGroupName)
	return k, mapKey(k.Namespace, k.Name), true, nil
}

func (e *Editor) checkPodGroup(op string, pg *schedulingv1beta1.PodGroup) error {
	switch {
	case e.done:
		return inputError(op, Key{}, ErrEditorDone, "editor used after Done")
	case pg == nil:
		return inputError(op, Key{}, ErrNilPodGroup, "nil pod group")
	}
	return nil
}

func (e *Editor) checkComposite(op string, cpg *schedulingv1alpha3.CompositePodGroup) error {
	switch {
	case e.done:
		return inputError(op, Key{}, ErrEditorDone, "editor used after Done")
	case cpg == nil:
		return inputError(op, Key{}, ErrNilComposite, "nil composite pod group")
	}
	return nil
}

// ---- table access ----

// group returns a copy of the state under mk, to change and put back.
func (e *Editor) group(mk string) (State, bool) {
	s, ok := e.groups.Get(mk)
	if !ok {
		return State{}, false
	}
	return *s, true
}

// putGroup stores d, as a new State, under mk.
func (e *Editor) putGroup(mk string, d State) {
	s := new(State)
	*s = d
	e.groups.Set(mk, s)
}

func (e *Editor) comp(mk string) (Composite, bool) {
	c, ok := e.composites.Get(mk)
	if !ok {
		return Composite{}, false
	}
	return *c, true
}

func (e *Editor) putComp(mk string, d Composite) {
	c := new(Composite)
	*c = d
	e.composites.Set(mk, c)
}

// ---- the changes of upstream's podGroupStateData and
// compositePodGroupStateData (podgroupstate.go), on a copy ----

// addPod is podGroupStateData.addPod.
func (e *Editor) addPod(d *State, pod *v1.Pod) {
	d.gen = nextGeneration()
	uid := string(pod.UID)
	d.all = e.podSet(d.all, uid, pod)
	if pod.Spec.NodeName != "" {
		d.assigned = e.unitAdd(d.assigned, uid)
		d.unscheduled = e.unitDel(d.unscheduled, uid)
		d.assumed = e.podDel(d.assumed, uid)
	} else {
		d.unscheduled = e.unitAdd(d.unscheduled, uid)
	}
}

// updatePod is podGroupStateData.updatePod.
func (e *Editor) updatePod(d *State, oldPod, newPod *v1.Pod) {
	d.gen = nextGeneration()
	uid := string(newPod.UID)
	d.all = e.podSet(d.all, uid, newPod)
	if oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != "" {
		d.assigned = e.unitAdd(d.assigned, uid)
		d.unscheduled = e.unitDel(d.unscheduled, uid)
		d.assumed = e.podDel(d.assumed, uid)
	}
}

// deletePod is podGroupStateData.deletePod.
func (e *Editor) deletePod(d *State, uid string) {
	d.gen = nextGeneration()
	d.all = e.podDel(d.all, uid)
	d.unscheduled = e.unitDel(d.unscheduled, uid)
	d.assumed = e.podDel(d.assumed, uid)
	d.assigned = e.unitDel(d.assigned, uid)
}

// assumePod is podGroupStateData.assumePod; it reports whether it changed
// d (not if d lacks the pod).
func (e *Editor) assumePod(d *State, pod *v1.Pod) bool {
	uid := string(pod.UID)
	stored, ok := d.all.Get(uid)
	if !ok {
		return false
	}
	d.gen = nextGeneration()
	if stored.Spec.NodeName != "" {
		d.assigned = e.unitAdd(d.assigned, uid)
	} else {
		d.assumed = e.podSet(d.assumed, uid, pod)
	}
	d.unscheduled = e.unitDel(d.unscheduled, uid)
	return true
}

// forgetPod is podGroupStateData.forgetPod; it reports whether it changed
// d (not if d lacks the pod).
func (e *Editor) forgetPod(d *State, uid string) bool {
	stored, ok := d.all.Get(uid)
	if !ok {
		return false
	}
	d.gen = nextGeneration()
	d.assumed = e.podDel(d.assumed, uid)
	if stored.Spec.NodeName != "" {
		d.assigned = e.unitAdd(d.assigned, uid)
	} else {
		d.unscheduled = e.unitAdd(d.unscheduled, uid)
	}
	return true
}

// addChild is compositePodGroupStateData.addChild.
func (e *Editor) addChild(c *Composite, k Key) {
	c.gen = nextGeneration()
	ck := childKey(k)
	if _, ok := c.children.Get(ck); ok {
		return
	}
	c.children.EditInto(&e.keys)
	e.keys.Set(ck, k)
	c.children = e.keys.Done()
}

// removeChild is compositePodGroupStateData.removeChild.
func (e *Editor) removeChild(c *Composite, k Key) {
	c.gen = nextGeneration()
	ck := childKey(k)
	if _, ok := c.children.Get(ck); !ok {
		return
	}
	c.children.EditInto(&e.keys)
	e.keys.Delete(ck)
	c.children = e.keys.Done()
}

// ---- persistent map changes through the scratch editors: each returns m
// itself when the change would change nothing ----

func (e *Editor) podSet(m immutable.Map[*v1.Pod], k string, p *v1.Pod) immutable.Map[*v1.Pod] {
	if q, ok := m.Get(k); ok && q == p {
		return m
	}
	m.EditInto(&e.pods)
	e.pods.Set(k, p)
	return e.pods.Done()
}

func (e *Editor) podDel(m immutable.Map[*v1.Pod], k string) immutable.Map[*v1.Pod] {
	if _, ok := m.Get(k); !ok {
		return m
	}
	m.EditInto(&e.pods)
	e.pods.Delete(k)
	return e.pods.Done()
}

func (e *Editor) unitAdd(m immutable.Map[unit], k string) immutable.Map[unit] {
	if _, ok := m.Get(k); ok {
		return m
	}
	m.EditInto(&e.units)
	e.units.Set(k, unit{})
	return e.units.Done()
}

func (e *Editor) unitDel(m immutable.Map[unit], k string) immutable.Map[unit] {
	if _, ok := m.Get(k); !ok {
		return m
	}
	m.EditInto(&e.units)
	e.units.Delete(k)
	return e.units.Done()
}
