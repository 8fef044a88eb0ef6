package podgroup

// The model: a plain port of upstream's mutable pod-group state, from
// k8s.io/kubernetes@v1.37.2/pkg/scheduler/backend/cache:
//
//   - podgroupstate.go: podGroupStateData and compositePodGroupStateData,
//     kept as they are (maps and sets, changed in place);
//   - cache.go: isPodGroupMember, Add/Update/RemovePodGroupMember and their
//     lower-case forms, assumePodGroupMember, forgetPodGroupMember,
//     Add/Update/RemovePodGroup, Add/Update/RemoveCompositePodGroup, the
//     four listers, BuildHierarchySnapshotFromPod,
//     buildPodGroupStateSnapshotTree, GetRootKeyForGroup;
//   - snapshot.go: the pod-group parts of AssumePod, ForgetPod, AddPod and
//     RemovePod, the four snapshot listers, GetRootKeyForGroup,
//     BuildHierarchySnapshotFromPod, and updatePodGroupStateSnapshot's
//     copy (cache.go) for what a snapshot holds.
//
// Locks and logging are dropped; fwk.EntityKey is our Key. The places
// where schedcache deliberately differs are marked "schedcache:": typed
// errors for bad input (where upstream panics), errors for the missed
// events upstream logs, the Hierarchy walk that finds no root, and fixed
// orders where upstream iterates a set.

import (
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// mGeneration is the model's generation counter (upstream's
// nextPodGroupGeneration); the model tests run on one goroutine each, one
// at a time.
var mGeneration int64

func mNextGen() int64 { mGeneration++; return mGeneration }

// mErr is an expected error: the sentinel ours must wrap and, if text is
// not empty, upstream's exact text.
type mErr struct {
	is   error
	text string
}

func upErr(is error, format string, args ...any) *mErr {
	return &mErr{is: is, text: fmt.Sprintf(format, args...)}
}

// ---- podgroupstate.go ----

type mPG struct {
	generation      int64
	allPods         map[types.UID]*v1.Pod
	unscheduledPods sets.Set[types.UID]
	assumedPods     map[types.UID]*v1.Pod
	assignedPods    sets.Set[types.UID]
	podGroup        *schedulingv1beta1.PodGroup
}

func newMPG() *mPG {
	return &mPG{
		allPods:         make(map[types.UID]*v1.Pod),
		unscheduledPods: sets.New[types.UID](),
		assumedPods:     make(map[types.UID]*v1.Pod),
		assignedPods:    sets.New[types.UID](),
	}
}

func (d *mPG) addPod(pod *v1.Pod) {
	d.generation = mNextGen()
	d.allPods[pod.UID] = pod
	if pod.Spec.NodeName != "" {
		d.assignedPods.Insert(pod.UID)
		d.unscheduledPods.Delete(pod.UID)
		delete(d.assumedPods, pod.UID)
	} else {
		d.unscheduledPods.Insert(pod.UID)
	}
}

func (d *mPG) updatePod(oldPod, newPod *v1.Pod) {
	d.generation = mNextGen()
	d.allPods[newPod.UID] = newPod
	if oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != "" {
		d.assignedPods.Insert(newPod.UID)
		d.unscheduledPods.Delete(newPod.UID)
		delete(d.assumedPods, newPod.UID)
	}
}

func (d *mPG) deletePod(podUID types.UID) {
	d.generation = mNextGen()
	delete(d.allPods, podUID)
	d.unscheduledPods.Delete(podUID)
	delete(d.assumedPods, podUID)
	d.assignedPods.Delete(podUID)
}

func (d *mPG) assumePod(pod *v1.Pod) {
	storedPod, ok := d.allPods[pod.UID]
	if !ok {
		return
	}
	d.generation = mNextGen()
	if storedPod.Spec.NodeName != "" {
		d.assignedPods.Insert(pod.UID)
	} else {
		d.assumedPods[pod.UID] = pod
	}
	d.unscheduledPods.Delete(pod.UID)
}

func (d *mPG) forgetPod(podUID types.UID) {
	pod := d.allPods[podUID]
	if pod == nil {
		return
	}
	d.generation = mNextGen()
	delete(d.assumedPods, podUID)
	if pod.Spec.NodeName != "" {
		d.assignedPods.Insert(podUID)
	} else {
		d.unscheduledPods.Insert(podUID)
	}
}

func (d *mPG) scheduledPods() []*v1.Pod {
	scheduledPods := make([]*v1.Pod, 0, len(d.assignedPods)+len(d.assumedPods))
	for uid := range d.assignedPods {
		scheduledPods = append(scheduledPods, d.allPods[uid])
	}
	for _, pod := range d.assumedPods {
		scheduledPods = append(scheduledPods, pod)
	}
	return scheduledPods
}

func (d *mPG) empty() bool { return len(d.allPods) == 0 && d.podGroup == nil }

func (d *mPG) clone() *mPG {
	return &mPG{
		generation:      d.generation,
		allPods:         maps.Clone(d.allPods),
		unscheduledPods: d.unscheduledPods.Clone(),
		assumedPods:     maps.Clone(d.assumedPods),
		assignedPods:    d.assignedPods.Clone(),
		podGroup:        d.podGroup,
	}
}

func (d *mPG) setPodGroup(podGroup *schedulingv1beta1.PodGroup) {
	d.generation = mNextGen()
	d.podGroup = podGroup
}

func (d *mPG) removePodGroup() {
	d.generation = mNextGen()
	d.podGroup = nil
}

// unscheduledPodsMap: schedcache: where two pods share a name the greater
// UID wins (upstream: its map's iteration order decides).
func (d *mPG) unscheduledPodsMap() map[string]*v1.Pod {
	result := make(map[string]*v1.Pod, len(d.unscheduledPods))
	for podUID := range d.unscheduledPods {
		pod := d.allPods[podUID]
		if q, ok := result[pod.Name]; ok && q.UID > pod.UID {
			continue
		}
		result[pod.Name] = pod
	}
	return result
}

type mCPG struct {
	generation        int64
	compositePodGroup *schedulingv1alpha3.CompositePodGroup
	children          sets.Set[Key]
}

func newMCPG() *mCPG { return &mCPG{children: sets.New[Key]()} }

func (d *mCPG) clone() *mCPG {
	return &mCPG{generation: d.generation, compositePodGroup: d.compositePodGroup, children: d.children.Clone()}
}

func (d *mCPG) empty() bool { return d.compositePodGroup == nil && len(d.children) == 0 }

func (d *mCPG) setCompositePodGroup(cpg *schedulingv1alpha3.CompositePodGroup) {
	d.generation = mNextGen()
	d.compositePodGroup = cpg
}

func (d *mCPG) removeCompositePodGroup() {
	d.generation = mNextGen()
	d.compositePodGroup = nil
}

func (d *mCPG) addChild(child Key) {
	d.generation = mNextGen()
	d.children.Insert(child)
}

func (d *mCPG) removeChild(child Key) {
	d.generation = mNextGen()
	d.children.Delete(child)
}

// getChildren: schedcache: sorted (upstream: its set's order).
func (d *mCPG) getChildren() []Key {
	children := d.children.UnsortedList()
	slices.SortFunc(children, compareKeys)
	return children
}

// ---- cache.go / snapshot.go ----

// model is upstream's cacheImpl (snapshot false) or Snapshot (snapshot
// true), their pod-group parts.
type model struct {
	podGroupStates           map[Key]*mPG
	compositePodGroupStates  map[Key]*mCPG
	genericWorkloadEnabled   bool
	compositePodGroupEnabled bool
	snapshot                 bool
}

func newModel(generic, composite, snapshot bool) *model {
	return &model{
		podGroupStates:           make(map[Key]*mPG),
		compositePodGroupStates:  make(map[Key]*mCPG),
		genericWorkloadEnabled:   generic,
		compositePodGroupEnabled: composite,
		snapshot:                 snapshot,
	}
}

// clone deep-copies m (not the API objects), for the immutability checks.
func (m *model) clone() *model {
	c := newModel(m.genericWorkloadEnabled, m.compositePodGroupEnabled, m.snapshot)
	for k, v := range m.podGroupStates {
		c.podGroupStates[k] = v.clone()
	}
	for k, v := range m.compositePodGroupStates {
		c.compositePodGroupStates[k] = v.clone()
	}
	return c
}

// asSnapshot is what Cache.UpdateSnapshot copies into a Snapshot
// (updatePodGroupStateSnapshot, updateCompositePodGroupStateSnapshot).
func (m *model) asSnapshot() *model {
	s := newModel(m.genericWorkloadEnabled, m.compositePodGroupEnabled, true)
	if m.genericWorkloadEnabled {
		for k, v := range m.podGroupStates {
			s.podGroupStates[k] = v.clone()
		}
		if m.compositePodGroupEnabled {
			for k, v := range m.compositePodGroupStates {
				s.compositePodGroupStates[k] = v.clone()
			}
		}
	}
	return s
}

func (m *model) isPodGroupMember(pod *v1.Pod) bool {
	return m.genericWorkloadEnabled && pod.Spec.SchedulingGroup != nil
}

// member is schedcache's input check in front of isPodGroupMember.
func (m *model) member(pod *v1.Pod) (bool, *mErr) {
	switch {
	case pod == nil:
		return false, &mErr{is: ErrNilPod}
	case pod.UID == "":
		return false, &mErr{is: ErrEmptyUID}
	case !m.isPodGroupMember(pod):
		return false, nil
	case pod.Spec.SchedulingGroup.PodGroupName == nil:
		return false, &mErr{is: ErrNoPodGroupName}
	}
	return true, nil
}

func (m *model) AddPodGroupMember(pod *v1.Pod) *mErr {
	if ok, err := m.member(pod); !ok {
		return err
	}
	m.addPodGroupMember(pod)
	return nil
}

func (m *model) UpdatePodGroupMember(oldPod, newPod *v1.Pod) *mErr {
	switch {
	case oldPod == nil:
		return &mErr{is: ErrNilPod}
	case oldPod.UID == "":
		return &mErr{is: ErrEmptyUID}
	}
	if ok, err := m.member(newPod); !ok {
		return err
	}
	return m.updatePodGroupMember(oldPod, newPod)
}

func (m *model) RemovePodGroupMember(pod *v1.Pod) *mErr {
	if ok, err := m.member(pod); !ok {
		return err
	}
	m.removePodGroupMember(pod)
	return nil
}

// AssumePodGroupMember is cache.addPod(assumePod=true)'s pod-group part.
func (m *model) AssumePodGroupMember(pod *v1.Pod) *mErr {
	if ok, err := m.member(pod); !ok {
		return err
	}
	m.assumePodGroupMember(pod)
	return nil
}

// ForgetPodGroupMember is cache.removePod(forgetPod=true)'s pod-group part.
func (m *model) ForgetPodGroupMember(pod *v1.Pod) *mErr {
	if ok, err := m.member(pod); !ok {
		return err
	}
	return m.forgetPodGroupMember(pod)
}

func (m *model) addPodGroupMember(pod *v1.Pod) {
	key := PodGroupKey(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
	podGroupState, exists := m.podGroupStates[key]
	if !exists {
		podGroupState = newMPG()
		m.podGroupStates[key] = podGroupState
	}
	podGroupState.addPod(pod)
}

func (m *model) updatePodGroupMember(oldPod, newPod *v1.Pod) *mErr {
	key := PodGroupKey(newPod.Namespace, *newPod.Spec.SchedulingGroup.PodGroupName)
	podGroupState, exists := m.podGroupStates[key]
	if !exists {
		return &mErr{is: ErrMissedEvent} // schedcache: upstream logs it
	}
	podGroupState.updatePod(oldPod, newPod)
	return nil
}

func (m *model) removePodGroupMember(pod *v1.Pod) {
	key := PodGroupKey(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
	podGroupState, exists := m.podGroupStates[key]
	if !exists {
		return
	}
	podGroupState.deletePod(pod.UID)
	if podGroupState.empty() {
		delete(m.podGroupStates, key)
	}
}

func (m *model) assumePodGroupMember(pod *v1.Pod) {
	key := PodGroupKey(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
	podGroupState, exists := m.podGroupStates[key]
	if !exists {
		podGroupState = newMPG()
		podGroupState.allPods[pod.UID] = pod
		m.podGroupStates[key] = podGroupState
	}
	podGroupState.assumePod(pod)
}

func (m *model) forgetPodGroupMember(pod *v1.Pod) *mErr {
	key := PodGroupKey(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
	pgs, exists := m.podGroupStates[key]
	if !exists {
		return &mErr{is: ErrMissedEvent} // schedcache: upstream logs it
	}
	pgs.forgetPod(pod.UID)
	return nil
}

func (m *model) AddPodGroup(podGroup *schedulingv1beta1.PodGroup) *mErr {
	if podGroup == nil {
		return &mErr{is: ErrNilPodGroup}
	}
	if !m.genericWorkloadEnabled {
		return nil
	}
	key := PodGroupKey(podGroup.Namespace, podGroup.Name)
	pgs, exists := m.podGroupStates[key]
	if !exists {
		pgs = newMPG()
		m.podGroupStates[key] = pgs
	}
	pgs.setPodGroup(podGroup)
	if !m.compositePodGroupEnabled || podGroup.Spec.ParentCompositePodGroupName == nil {
		return nil
	}
	parentKey := CompositeKey(podGroup.Namespace, *podGroup.Spec.ParentCompositePodGroupName)
	parent, parentExists := m.compositePodGroupStates[parentKey]
	if !parentExists {
		parent = newMCPG()
		m.compositePodGroupStates[parentKey] = parent
	}
	parent.addChild(key)
	return nil
}

func (m *model) UpdatePodGroup(_, newPodGroup *schedulingv1beta1.PodGroup) *mErr {
	if newPodGroup == nil {
		return &mErr{is: ErrNilPodGroup}
	}
	if !m.genericWorkloadEnabled {
		return nil
	}
	key := PodGroupKey(newPodGroup.Namespace, newPodGroup.Name)
	pgs, exists := m.podGroupStates[key]
	if !exists {
		return &mErr{is: ErrMissedEvent}
	}
	pgs.setPodGroup(newPodGroup)
	return nil
}

func (m *model) RemovePodGroup(podGroup *schedulingv1beta1.PodGroup) *mErr {
	if podGroup == nil {
		return &mErr{is: ErrNilPodGroup}
	}
	if !m.genericWorkloadEnabled {
		return nil
	}
	key := PodGroupKey(podGroup.Namespace, podGroup.Name)
	pgs, exists := m.podGroupStates[key]
	if !exists {
		return &mErr{is: ErrMissedEvent}
	}
	if m.compositePodGroupEnabled && podGroup.Spec.ParentCompositePodGroupName != nil {
		parentKey := CompositeKey(podGroup.Namespace, *podGroup.Spec.ParentCompositePodGroupName)
		if parent, exists := m.compositePodGroupStates[parentKey]; exists {
			parent.removeChild(key)
			if parent.empty() {
				delete(m.compositePodGroupStates, parentKey)
			}
		}
	}
	pgs.removePodGroup()
	if pgs.empty() {
		delete(m.podGroupStates, key)
	}
	return nil
}

func (m *model) AddCompositePodGroup(cpg *schedulingv1alpha3.CompositePodGroup) *mErr {
	if cpg == nil {
		return &mErr{is: ErrNilComposite}
	}
	if !m.compositePodGroupEnabled {
		return nil
	}
	key := CompositeKey(cpg.Namespace, cpg.Name)
	cpgState, exists := m.compositePodGroupStates[key]
	if !exists {
		cpgState = newMCPG()
		m.compositePodGroupStates[key] = cpgState
	}
	cpgState.setCompositePodGroup(cpg)
	if cpg.Spec.ParentCompositePodGroupName == nil {
		return nil
	}
	parentKey := CompositeKey(cpg.Namespace, *cpg.Spec.ParentCompositePodGroupName)
	parent, parentExists := m.compositePodGroupStates[parentKey]
	if !parentExists {
		parent = newMCPG()
		m.compositePodGroupStates[parentKey] = parent
	}
	parent.addChild(key)
	return nil
}

func (m *model) UpdateCompositePodGroup(_, newCPG *schedulingv1alpha3.CompositePodGroup) *mErr {
	if newCPG == nil {
		return &mErr{is: ErrNilComposite}
	}
	if !m.compositePodGroupEnabled {
		return nil
	}
	key := CompositeKey(newCPG.Namespace, newCPG.Name)
	pgs, exists := m.compositePodGroupStates[key]
	if !exists {
		return &mErr{is: ErrMissedEvent}
	}
	pgs.setCompositePodGroup(newCPG)
	return nil
}

func (m *model) RemoveCompositePodGroup(cpg *schedulingv1alpha3.CompositePodGroup) *mErr {
	if cpg == nil {
		return &mErr{is: ErrNilComposite}
	}
	if !m.compositePodGroupEnabled {
		return nil
	}
	key := CompositeKey(cpg.Namespace, cpg.Name)
	cpgs, exists := m.compositePodGroupStates[key]
	if !exists {
		return &mErr{is: ErrMissedEvent}
	}
	if cpgs.compositePodGroup != nil && cpgs.compositePodGroup.Spec.ParentCompositePodGroupName != nil {
		parentKey := CompositeKey(cpg.Namespace, *cpgs.compositePodGroup.Spec.ParentCompositePodGroupName)
		parent, exists := m.compositePodGroupStates[parentKey]
		if !exists {
			return &mErr{is: ErrMissedEvent} // schedcache: upstream returns silently
		}
		parent.removeChild(key)
		if parent.empty() {
			delete(m.compositePodGroupStates, parentKey)
		}
	}
	cpgs.removeCompositePodGroup()
	if cpgs.empty() {
		delete(m.compositePodGroupStates, key)
	}
	return nil
}

// snapshotGroup is the pod-group lookup of the Snapshot's AssumePod,
// ForgetPod, AddPod and RemovePod.
func (m *model) snapshotGroup(pod *v1.Pod) (*mPG, *mErr) {
	ok, err := m.member(pod)
	if !ok {
		return nil, err
	}
	return m.podGroupStates[PodGroupKey(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)], nil
}

func (m *model) SnapshotAssumePod(pod *v1.Pod) *mErr {
	pgs, err := m.snapshotGroup(pod)
	if pgs != nil {
		pgs.assumePod(pod)
	}
	return err
}

func (m *model) SnapshotForgetPod(pod *v1.Pod) *mErr {
	pgs, err := m.snapshotGroup(pod)
	if pgs != nil {
		pgs.forgetPod(pod.UID)
	}
	return err
}

func (m *model) SnapshotAddPod(pod *v1.Pod) *mErr {
	pgs, err := m.snapshotGroup(pod)
	if pgs != nil {
		pgs.addPod(pod)
	}
	return err
}

func (m *model) SnapshotRemovePod(pod *v1.Pod) *mErr {
	pgs, err := m.snapshotGroup(pod)
	if pgs != nil {
		pgs.deletePod(pod.UID)
	}
	return err
}

// ---- listers: cache.go's (snapshot false) and snapshot.go's ----

func (m *model) PodGroupStatesGet(namespace, podGroupName string) (*mPG, *mErr) {
	if !m.snapshot && !m.genericWorkloadEnabled {
		return nil, upErr(ErrGateDisabled, "generic workload feature gate is disabled")
	}
	key := PodGroupKey(namespace, podGroupName)
	podGroupState, exists := m.podGroupStates[key]
	if !exists {
		return nil, upErr(ErrStateNotFound, "pod group state not found for pod group %s/%s", namespace, podGroupName)
	}
	return podGroupState, nil
}

func (m *model) PodGroupsGet(namespace, name string) (*schedulingv1beta1.PodGroup, *mErr) {
	if !m.genericWorkloadEnabled {
		return nil, upErr(ErrGateDisabled, "generic workload feature gate is disabled")
	}
	key := PodGroupKey(namespace, name)
	pgs, exists := m.podGroupStates[key]
	if !exists {
		return nil, upErr(ErrStateNotFound, "pod group state not found for pod group %s", key)
	}
	pg := pgs.podGroup
	if pg == nil {
		return nil, upErr(ErrObjectNotFound, "pod group object not found for pod group %s", key)
	}
	return pg, nil
}

func (m *model) CompositePodGroupStatesGet(namespace, name string) (*mCPG, *mErr) {
	key := CompositeKey(namespace, name)
	if m.snapshot {
		state, ok := m.compositePodGroupStates[key]
		if !ok {
			return nil, upErr(ErrStateNotFound, "composite pod group state not found for pod group %s/%s", namespace, name)
		}
		return state, nil
	}
	if !m.compositePodGroupEnabled {
		return nil, upErr(ErrGateDisabled, "composite pod group feature gate is disabled")
	}
	cpgs, exists := m.compositePodGroupStates[key]
	if !exists {
		return nil, upErr(ErrStateNotFound, "composite pod group state not found for composite pod group %s", key)
	}
	return cpgs, nil
}

func (m *model) CompositePodGroupsGet(namespace, name string) (*schedulingv1alpha3.CompositePodGroup, *mErr) {
	if !m.compositePodGroupEnabled {
		return nil, upErr(ErrGateDisabled, "composite pod group feature gate is disabled")
	}
	key := CompositeKey(namespace, name)
	cpgs, exists := m.compositePodGroupStates[key]
	if m.snapshot {
		if !exists {
			return nil, upErr(ErrStateNotFound, "composite pod group not found in snapshot: %v", key)
		}
		if cpgs.compositePodGroup == nil {
			return nil, upErr(ErrObjectNotFound, "composite pod group object not found for pod group %q", key)
		}
		return cpgs.compositePodGroup, nil
	}
	if !exists {
		return nil, upErr(ErrStateNotFound, "composite pod group state not found for composite pod group %s", key)
	}
	cpg := cpgs.compositePodGroup
	if cpg == nil {
		return nil, upErr(ErrObjectNotFound, "composite pod group object not found for composite pod group %s", key)
	}
	return cpg, nil
}

// GetRootKeyForGroup: cache's and snapshot's are the same but for the
// pod-key text, which Key cannot reach. schedcache: the visited keys are
// listed in visiting order (upstream: its set's order); a key of no known
// kind is ErrBadKey (upstream: a cycle error on the second round).
func (m *model) GetRootKeyForGroup(key Key) (Key, bool, *mErr) {
	if key.Kind != PodGroupKind && key.Kind != CompositeKind {
		return Key{}, false, &mErr{is: ErrBadKey}
	}
	currentKey := key
	var visited []Key
	for {
		if slices.Contains(visited, currentKey) {
			return Key{}, false, upErr(ErrCycle, "cycle detected in the hierarchy: %v", visited)
		}
		visited = append(visited, currentKey)
		switch currentKey.Kind {
		case PodGroupKind:
			pgs, exists := m.podGroupStates[currentKey]
			if !exists {
				return Key{}, false, nil
			}
			pg := pgs.podGroup
			if pg == nil {
				return Key{}, false, nil
			}
			if !m.compositePodGroupEnabled || pg.Spec.ParentCompositePodGroupName == nil {
				return currentKey, true, nil
			}
			currentKey = CompositeKey(pg.Namespace, *pg.Spec.ParentCompositePodGroupName)
		case CompositeKind:
			cpgs, exists := m.compositePodGroupStates[currentKey]
			if !exists {
				return Key{}, false, nil
			}
			cpg := cpgs.compositePodGroup
			if cpg == nil {
				return Key{}, false, nil
			}
			if cpg.Spec.ParentCompositePodGroupName == nil {
				return currentKey, true, nil
			}
			currentKey = CompositeKey(cpg.Namespace, *cpg.Spec.ParentCompositePodGroupName)
		}
	}
}

// BuildHierarchySnapshotFromPod: the cache's, or the snapshot's (which
// returns itself).
func (m *model) BuildHierarchySnapshotFromPod(pod *v1.Pod) (*model, *mErr) {
	if pod == nil {
		return nil, &mErr{is: ErrNilPod} // schedcache: upstream panics
	}
	if m.snapshot {
		return m, nil
	}
	if pod.Spec.SchedulingGroup == nil {
		return nil, upErr(ErrNoSchedulingGroup, "pod has no scheduling group")
	}
	if pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil, &mErr{is: ErrNoPodGroupName} // schedcache: upstream panics
	}
	currentKey := PodGroupKey(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
	pgs, exists := m.podGroupStates[currentKey]
	if !exists {
		return nil, upErr(ErrStateNotFound, "pod group state not found for %s", currentKey.String())
	}
	pg := pgs.podGroup
	if pg == nil {
		return nil, upErr(ErrObjectNotFound, "pod group object not found in state for %s", currentKey.String())
	}
	if m.compositePodGroupEnabled && pg.Spec.ParentCompositePodGroupName != nil {
		currentKey = CompositeKey(pod.Namespace, *pg.Spec.ParentCompositePodGroupName)
		var walked []Key
		broke := false
		for range schedulingv1alpha3.WorkloadMaxTreeDepth - 1 {
			walked = append(walked, currentKey)
			cpgs, exists := m.compositePodGroupStates[currentKey]
			if !exists {
				return nil, upErr(ErrStateNotFound, "parent composite pod group state not found for %s", currentKey.String())
			}
			cpg := cpgs.compositePodGroup
			if cpg == nil {
				return nil, upErr(ErrObjectNotFound, "composite pod group object not found in state for %s", currentKey.String())
			}
			if cpg.Spec.ParentCompositePodGroupName == nil {
				broke = true
				break
			}
			currentKey = CompositeKey(pod.Namespace, *cpg.Spec.ParentCompositePodGroupName)
		}
		if !broke {
			// schedcache: upstream goes on with the tree under currentKey,
			// which is not the root; ours reports the first key the walk
			// saw twice as a cycle, or else that the hierarchy is too deep.
			walked = append(walked, currentKey)
			for j, k := range walked {
				if slices.Contains(walked[:j], k) {
					return nil, upErr(ErrCycle, "cycle detected in composite pod group hierarchy: %s", k)
				}
			}
			return nil, &mErr{is: ErrTooDeep}
		}
	}
	snapshot := newModel(m.genericWorkloadEnabled, m.compositePodGroupEnabled, true)
	visited := sets.New[Key]()
	if err := m.buildPodGroupStateSnapshotTree(currentKey, snapshot, visited); err != nil {
		return nil, err
	}
	return snapshot, nil
}

func (m *model) buildPodGroupStateSnapshotTree(key Key, snapshot *model, visited sets.Set[Key]) *mErr {
	if visited.Has(key) {
		return upErr(ErrCycle, "cycle detected in composite pod group hierarchy: %s", key.String())
	}
	visited.Insert(key)
	switch key.Kind {
	case PodGroupKind:
		pgs, exists := m.podGroupStates[key]
		if !exists {
			return upErr(ErrStateNotFound, "pod group state not found for %s", key.String())
		}
		snapshot.podGroupStates[key] = pgs.clone()
	case CompositeKind:
		cpgs, exists := m.compositePodGroupStates[key]
		if !exists {
			return upErr(ErrStateNotFound, "composite pod group state not found for %s", key.String())
		}
		snapshot.compositePodGroupStates[key] = cpgs.clone()
		for _, childKey := range cpgs.getChildren() { // schedcache: sorted
			if err := m.buildPodGroupStateSnapshotTree(childKey, snapshot, visited); err != nil {
				return err
			}
		}
	}
	return nil
}
