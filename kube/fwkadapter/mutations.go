package fwkadapter

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/podgroup"
	"github.com/schedcache/schedcache/snapshot"
)

// Errors of Mutable. Match them with errors.Is; the texts of the first
// five are upstream v1.37.2's.
var (
	// ErrStackedMutations reports StartMutations inside a session.
	ErrStackedMutations = errors.New("cannot stack mutations")
	// ErrNoMutationSession reports EndMutations without StartMutations.
	ErrNoMutationSession = errors.New("no mutation session started")
	// ErrOutsideSession reports AddPod or RemovePod outside a session.
	ErrOutsideSession = errors.New("called outside of mutation session")
	// ErrNotAssumed reports a snapshot ForgetPod of a pod the snapshot did
	// not assume.
	ErrNotAssumed = errors.New("assumed pod not found in the snapshot")
	// ErrPlacement reports a placement naming a node the snapshot does not
	// hold, or another instance of it than the snapshot's.
	ErrPlacement = errors.New("node in placement is not the snapshot's")
	// ErrForgetOrder reports a snapshot ForgetPod of an assumed pod that
	// is not the last one assumed: upstream's contract is last in, first
	// out, and upstream would corrupt its lists; Mutable refuses.
	ErrForgetOrder = errors.New("fwkadapter: snapshot ForgetPod out of order (last assumed, first forgotten)")
	// ErrSessionOrder reports an assumed pod forgotten across a mutation
	// session boundary (assumed before StartMutations, forgotten inside
	// it, or the reverse): the session's end would undo or redo it.
	ErrSessionOrder = errors.New("fwkadapter: snapshot AssumePod/ForgetPod across a mutation session")
)

// MutationError is what Mutable's mutations return for a refused call: the
// operation, the pod ("namespace/name", empty for session calls) and the
// cause, which errors.Is matches (one of the errors above, or the
// snapshot's and cache's typed errors).
type MutationError struct {
	Op  string
	Pod string
	Err error
}

func (e *MutationError) Error() string {
	switch {
	case errors.Is(e.Err, ErrOutsideSession):
		return fmt.Sprintf("%s() %v", e.Op, e.Err)
	case errors.Is(e.Err, ErrNotAssumed):
		return fmt.Sprintf("assumed pod %q not found in the snapshot", e.Pod)
	case e.Pod == "":
		return e.Err.Error()
	}
	return fmt.Sprintf("%s %s: %v", e.Op, e.Pod, e.Err)
}

func (e *MutationError) Unwrap() error { return e.Err }

// Mutable is upstream v1.37.2's scheduler snapshot in its mutable role: a
// fwk.MutableSnapshotSharedLister (StartMutations, EndMutations, AddPod,
// RemovePod: what pod-group preemption uses), the snapshot-local
// AssumePod and ForgetPod of the pod-group scheduling cycle (last in,
// first out) and placements (AssumePlacement, ForgetPlacement,
// GetPlacement, GetNodeInPlacement, ListNodesInPlacement,
// NumNodesInPlacement), over a fork of a published snapshot.
//
// Contract: owned by one goroutine, as upstream's snapshot (its mutations
// are not safe for concurrent use, and readers must not read during
// one); any number of Mutables may share one published snapshot, which
// none of them ever changes. Every mutation is O(1) plus the pod's own
// aggregation; StartMutations, EndMutations and the undo of an assumed
// pod are O(1) whatever was mutated (a fork point and a revert), where
// upstream copies every NodeInfo. Reads see every mutation made so far.
// Bad input is refused with a *MutationError and nothing changes; no
// method panics.
//
// Differences from upstream, all refusals where upstream would go on with
// a state it cannot undo: AddPod and AssumePod of a pod the snapshot
// holds, or on a node it does not hold, are refused (upstream adds a
// duplicate, or an entry without a node); a ForgetPod out of order is
// refused (upstream logs and leaves its lists wrong). A mutated node's
// GetGeneration is a fork generation, not the cached one upstream keeps.
type Mutable struct {
	// Every field is owned by the Mutable's owner.
	fork      *snapshot.Fork
	view      Lister              // the fork's current state
	base      *snapshot.Snapshot  // the snapshot Reset forked; immutable
	session   *snapshot.ForkPoint // StartMutations' fork point; nil outside a session
	inSession int                 // len(assumed) at StartMutations
	groups    podgroup.Table      // the pod groups now (snapshot flavour); immutable values
	atStart   podgroup.Table      // groups at StartMutations
	assumed   []assumedPod        // snapshot-assumed pods, oldest first
	placement *placementNodes     // nil: no placement
	// outside is the identity of the NodeInfos handed out outside a
	// session; inSession the current session's (nil outside one). See
	// nodeIdentity.
	outside, sessionIDs *nodeIdentity
}

// assumedPod is one snapshot AssumePod: the pod and the fork point taken
// just before it, which ForgetPod reverts to.
type assumedPod struct {
	key    string
	pod    *v1.Pod
	info   *nodeinfo.PodInfo // the pod as assumed (its node and host ports)
	point  snapshot.ForkPoint
	groups podgroup.Table // the pod groups before the assume
	// drops are the host ports that later ForgetPods removed from their
	// nodes' sets (see ForgetPod); reverting to point undoes them, so
	// this pod's ForgetPod removes them again.
	drops []nodePorts
}

// nodePorts is host ports of one node.
type nodePorts struct {
	node  string
	ports []nodeinfo.HostPort
}

// placementNodes is an assumed placement: the placement and the names of
// its nodes.
type placementNodes struct {
	placement *fwk.Placement
	names     map[string]struct{}
}

var (
	_ fwk.SharedLister                = (*Mutable)(nil)
	_ fwk.MutableSnapshotSharedLister = (*Mutable)(nil)
)

// NewMutable returns a Mutable over s, or ErrNilSnapshot. It calls Enable.
func NewMutable(s *snapshot.Snapshot) (*Mutable, error) {
	if s == nil {
		return nil, ErrNilSnapshot
	}
	Enable()
	m := &Mutable{}
	m.reset(s)
	return m, nil
}

func (m *Mutable) reset(s *snapshot.Snapshot) {
	if m.sessionIDs != nil {
		m.sessionIDs.freeze()
		m.sessionIDs = nil
	}
	if m.outside == nil {
		m.outside = newIdentity(m, false)
	}
	m.outside.frozen.Store(nil)
	m.base = s
	m.fork = s.Fork()
	m.groups = s.PodGroups()
	m.session, m.inSession, m.assumed, m.placement = nil, 0, m.assumed[:0], nil
	m.sync()
}

// sync points the view at the fork's current state.
func (m *Mutable) sync() { m.view.snap = m.fork.Snapshot() }

// Reset makes m a mutable view of s, as upstream's UpdateSnapshot does at
// the start of a scheduling cycle: pods still assumed in the snapshot are
// forgotten and an assumed placement is cleared (upstream logs each as an
// error; Reset logs them with logger and returns how many pods it
// forgot), and a mutation session still open ends. O(1).
func (m *Mutable) Reset(logger klog.Logger, s *snapshot.Snapshot) (forgotten int, err error) {
	if m == nil || s == nil {
		return 0, ErrNilSnapshot
	}
	if m.placement != nil {
		logger.Error(nil, "UpdateSnapshot called with assumed placement. This is unexpected. Placement will be cleared.")
	}
	if n := len(m.assumed); n > 0 {
		logger.Error(nil, "Found assumed pods in the snapshot that were not forgotten", "assumedPodsCount", n)
		forgotten = n
	}
	if m.session != nil {
		logger.Error(nil, "Mutation session still open at UpdateSnapshot; ended")
	}
	m.reset(s)
	return forgotten, nil
}

// Snapshot returns the current state as an immutable snapshot (the
// mutations so far included).
func (m *Mutable) Snapshot() *snapshot.Snapshot { return m.view.snap }

// Base returns the snapshot m was last reset to.
func (m *Mutable) Base() *snapshot.Snapshot { return m.base }

// NodeInfos returns the node lister of the current state. The lister
// follows later mutations; the NodeInfos it returns are *LiveNodeInfo
// handles, which read as upstream's NodeInfo objects of the same origin
// (see nodeIdentity): those listed in a session follow its mutations,
// those listed outside one follow snapshot AssumePod and ForgetPod.
func (m *Mutable) NodeInfos() fwk.NodeInfoLister { return (*mutNodeLister)(m) }

// ids returns the identity of the NodeInfos handed out now.
func (m *Mutable) ids() *nodeIdentity {
	if m.sessionIDs != nil {
		return m.sessionIDs
	}
	return m.outside
}

// StorageInfos returns the storage lister of the current state.
func (m *Mutable) StorageInfos() fwk.StorageInfoLister { return (*storageLister)(&m.view) }

// StartMutations opens a mutation session: EndMutations returns the
// snapshot to this state. Sessions do not nest (ErrStackedMutations).
func (m *Mutable) StartMutations() error {
	if m.session != nil {
		return &MutationError{Op: "StartMutations", Err: ErrStackedMutations}
	}
	p := m.fork.Point()
	m.session, m.inSession, m.atStart = &p, len(m.assumed), m.groups
	m.outside.freeze()
	m.sessionIDs = newIdentity(m, true)
	return nil
}

// EndMutations ends the session and undoes every change made in it, in
// O(1). Without a session it returns ErrNoMutationSession.
func (m *Mutable) EndMutations() error {
	if m.session == nil {
		return &MutationError{Op: "EndMutations", Err: ErrNoMutationSession}
	}
	m.sessionIDs.freeze()
	if err := m.fork.RevertTo(*m.session); err != nil {
		m.sessionIDs.frozen.Store(nil)
		return &MutationError{Op: "EndMutations", Err: err}
	}
	m.sessionIDs = nil
	m.outside.frozen.Store(nil)
	m.assumed = m.assumed[:m.inSession]
	m.session, m.groups = nil, m.atStart
	m.sync()
	return nil
}

// AddPod adds podInfo's pod to node nodeName within a session (its
// Spec.NodeName, when another, is taken as nodeName on a copy).
func (m *Mutable) AddPod(podInfo fwk.PodInfo, nodeName string) error {
	const op = "AddPod"
	if m.session == nil {
		return &MutationError{Op: op, Err: ErrOutsideSession}
	}
	info, err := infoOn(podInfo, nodeName)
	if err != nil {
		return &MutationError{Op: op, Pod: podName(podInfo), Err: err}
	}
	groups, err := m.editGroups((*podgroup.Editor).SnapshotAdd, podInfo.GetPod())
	if err != nil {
		return &MutationError{Op: op, Pod: podName(podInfo), Err: err}
	}
	if err := m.fork.AddPodInfo(info); err != nil {
		return &MutationError{Op: op, Pod: podName(podInfo), Err: err}
	}
	m.groups = groups
	m.sync()
	return nil
}

// RemovePod removes pod from node nodeName within a session.
func (m *Mutable) RemovePod(_ klog.Logger, pod *v1.Pod, nodeName string) error {
	const op = "RemovePod"
	if m.session == nil {
		return &MutationError{Op: op, Err: ErrOutsideSession}
	}
	if pod == nil {
		return &MutationError{Op: op, Pod: "<nil>", Err: ErrNilPod}
	}
	groups, err := m.editGroups((*podgroup.Editor).SnapshotRemove, pod)
	if err != nil {
		return &MutationError{Op: op, Pod: objName(pod), Err: err}
	}
	if pod.Spec.NodeName != nodeName {
		cp := *pod
		cp.Spec.NodeName = nodeName
		pod = &cp
	}
	if err := m.fork.RemovePod(pod); err != nil {
		return &MutationError{Op: op, Pod: objName(pod), Err: err}
	}
	m.groups = groups
	m.sync()
	return nil
}

// AssumePod assumes podInfo's pod on its Spec.NodeName in the snapshot
// (upstream's Snapshot.AssumePod of the pod-group cycle): lists and PVC
// counts follow. Undo with ForgetPod, last assumed first.
func (m *Mutable) AssumePod(podInfo fwk.PodInfo) error {
	const op = "AssumePod"
	if podInfo == nil || podInfo.GetPod() == nil {
		return &MutationError{Op: op, Pod: "<nil>", Err: ErrNilPod}
	}
	pod := podInfo.GetPod()
	info, err := infoOn(podInfo, pod.Spec.NodeName)
	if err != nil {
		return &MutationError{Op: op, Pod: podName(podInfo), Err: err}
	}
	groups, err := m.editGroups((*podgroup.Editor).SnapshotAssume, pod)
	if err != nil {
		return &MutationError{Op: op, Pod: podName(podInfo), Err: err}
	}
	p := m.fork.Point()
	if err := m.fork.AssumePodInfo(info); err != nil {
		_ = m.fork.RevertTo(p) // the point just taken: cannot fail
		return &MutationError{Op: op, Pod: podName(podInfo), Err: err}
	}
	m.assumed = append(m.assumed, assumedPod{key: info.Key(), pod: pod, info: info, point: p, groups: m.groups})
	m.groups = groups
	m.sync()
	return nil
}

// ForgetPod undoes the snapshot AssumePod of pod, in O(1). It must be the
// last pod assumed and not yet forgotten (ErrForgetOrder), assumed in the
// same session state (ErrSessionOrder); an unknown pod is ErrNotAssumed.
func (m *Mutable) ForgetPod(_ klog.Logger, pod *v1.Pod) error {
	const op = "ForgetPod"
	key, err := nodeinfo.PodKey(pod)
	if err != nil {
		return &MutationError{Op: op, Pod: objName(pod), Err: err}
	}
	i := len(m.assumed) - 1
	for ; i >= 0 && m.assumed[i].key != key; i-- {
	}
	switch {
	case i < 0:
		return &MutationError{Op: op, Pod: key, Err: ErrNotAssumed}
	case i != len(m.assumed)-1:
		return &MutationError{Op: op, Pod: objName(pod), Err: ErrForgetOrder}
	case m.session != nil && i < m.inSession:
		return &MutationError{Op: op, Pod: objName(pod), Err: ErrSessionOrder}
	}
	a := m.assumed[i]
	if err := m.fork.RevertTo(a.point); err != nil {
		return &MutationError{Op: op, Pod: objName(pod), Err: err}
	}
	// Upstream removes the pod's host ports from its node's set, though
	// another pod there may use them (its UsedPorts is a set): the state
	// before the assume less those ports, and less those the ForgetPods
	// of later-assumed pods removed (undone by the revert).
	drops := a.drops
	if hp := a.info.HostPorts(); len(hp) > 0 {
		drops = append(drops, nodePorts{node: a.info.NodeName(), ports: hp})
	}
	for _, d := range drops {
		if err := m.fork.RemoveHostPorts(d.node, d.ports); err != nil {
			return &MutationError{Op: op, Pod: objName(pod), Err: err}
		}
	}
	if i > 0 && len(drops) > 0 && (m.session == nil || i-1 >= m.inSession) {
		// The previous assume's revert undoes these removals too. A
		// session's first assume passes nothing on: EndMutations undoes
		// the session, as upstream's restore does.
		m.assumed[i-1].drops = append(m.assumed[i-1].drops, drops...)
	}
	m.groups = a.groups // upstream's forgetPod undoes its assumePod's group change exactly
	m.assumed[i] = assumedPod{}
	m.assumed = m.assumed[:i]
	m.sync()
	return nil
}

// editGroups returns the pod groups after fn's change for pod, without
// changing m (upstream changes a group only if it has a state).
func (m *Mutable) editGroups(fn func(*podgroup.Editor, *v1.Pod) error, pod *v1.Pod) (podgroup.Table, error) {
	if pod == nil || pod.Spec.SchedulingGroup == nil || !m.groups.GenericWorkloadEnabled() {
		return m.groups, nil
	}
	e := m.groups.Edit()
	if err := fn(e, pod); err != nil {
		return m.groups, err
	}
	return e.Done(), nil
}

// PodGroups returns the pod groups now (snapshot flavour).
func (m *Mutable) groupsNow() Groups { return NewGroups(m.groups) }

// PodGroups reads the pod groups at each call, mutations included.
func (m *Mutable) PodGroups() fwk.PodGroupLister { return liveGroups(m.groupsNow).PodGroups() }

// PodGroupStates returns the pod-group states now.
func (m *Mutable) PodGroupStates() fwk.PodGroupStateLister {
	return liveGroups(m.groupsNow).PodGroupStates()
}

// CompositePodGroupStates returns the composite pod-group states now.
func (m *Mutable) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return liveGroups(m.groupsNow).CompositePodGroupStates()
}

// CompositePodGroups returns the CompositePodGroups now.
func (m *Mutable) CompositePodGroups() fwk.CompositePodGroupLister {
	return liveGroups(m.groupsNow).CompositePodGroups()
}

// BuildHierarchySnapshotFromPod returns m, as upstream's snapshot does.
func (m *Mutable) BuildHierarchySnapshotFromPod(pod *v1.Pod) (fwk.PodGroupManager, error) {
	return m, nil
}

// GetRootKeyForGroup returns the root of key's pod-group hierarchy.
func (m *Mutable) GetRootKeyForGroup(key fwk.EntityKey) (fwk.EntityKey, bool, error) {
	return NewGroups(m.groups).GetRootKeyForGroup(key)
}

// NumAssumed returns the number of pods assumed in the snapshot and not
// forgotten.
func (m *Mutable) NumAssumed() int { return len(m.assumed) }

// AssumePlacement limits the node candidates to placement's nodes, each
// of which must be a node of the snapshot, as its NodeInfos().Get or
// List returns it now (upstream: the same instance; a NodeInfo listed
// outside a session is not the instance inside one). A nil placement, or one with every node, is no placement.
// A later call replaces the placement.
func (m *Mutable) AssumePlacement(placement *fwk.Placement) error {
	if placement == nil || len(placement.Nodes) == m.view.snap.NumNodes() {
		m.placement = nil
		return nil
	}
	pn := &placementNodes{placement: placement, names: make(map[string]struct{}, len(placement.Nodes))}
	for _, n := range placement.Nodes {
		if n == nil || n.Node() == nil {
			m.placement = nil
			return &MutationError{Op: "AssumePlacement", Err: fmt.Errorf("%w: a node without a node object", ErrPlacement)}
		}
		name := n.Node().Name
		if _, err := m.view.snap.Get(name); err != nil {
			m.placement = nil
			return &MutationError{Op: "AssumePlacement", Err: fmt.Errorf("node %s in placement is not present in snapshot: %w", name, ErrPlacement)}
		}
		if !m.sameNode(n, name) {
			m.placement = nil
			return &MutationError{Op: "AssumePlacement", Err: fmt.Errorf("node %s in placement is not the same instance as in the snapshot: %w", name, ErrPlacement)}
		}
		pn.names[name] = struct{}{}
	}
	m.placement = pn
	return nil
}

// sameNode reports whether n is the NodeInfo of node name that m hands
// out now (upstream: the same instance as in the snapshot; its instances
// change at StartMutations and EndMutations).
func (m *Mutable) sameNode(n fwk.NodeInfo, name string) bool {
	h, ok := n.(*LiveNodeInfo)
	return ok && h.id == m.ids() && h.name == name
}

// ForgetPlacement clears the placement.
func (m *Mutable) ForgetPlacement() { m.placement = nil }

// GetPlacement returns the assumed placement, nil without one.
func (m *Mutable) GetPlacement() *fwk.Placement {
	if m.placement == nil {
		return nil
	}
	return m.placement.placement
}

// GetNodeInPlacement returns node nodeName if it is in the placement (any
// node without one), as NodeInfos().Get.
func (m *Mutable) GetNodeInPlacement(nodeName string) (fwk.NodeInfo, error) {
	if m.placement != nil {
		if _, ok := m.placement.names[nodeName]; !ok {
			return nil, fmt.Errorf("node %q not found in placement", nodeName)
		}
	}
	return m.NodeInfos().Get(nodeName)
}

// ListNodesInPlacement returns the placement's nodes (every node without
// one): the placement's own NodeInfos, as upstream's.
func (m *Mutable) ListNodesInPlacement() ([]fwk.NodeInfo, error) {
	if m.placement == nil {
		return m.NodeInfos().List()
	}
	return m.placement.placement.Nodes, nil
}

// NumNodesInPlacement returns the number of nodes in the placement (in
// the snapshot without one).
func (m *Mutable) NumNodesInPlacement() int {
	if m.placement != nil {
		return len(m.placement.placement.Nodes)
	}
	return m.view.snap.NumNodes()
}

// infoOn returns the schedcache PodInfo of pi's pod placed on node: pi's
// own when it is one and names node, else one built for a copy of the pod
// naming node.
func infoOn(pi fwk.PodInfo, node string) (*nodeinfo.PodInfo, error) {
	if pi == nil {
		return nil, ErrNilPod
	}
	pod := pi.GetPod()
	if pod == nil {
		return nil, ErrNilPod
	}
	if w, ok := pi.(*PodInfo); ok && pod.Spec.NodeName == node {
		return w.Unwrap(), nil
	}
	if pod.Spec.NodeName != node {
		cp := *pod
		cp.Spec.NodeName = node
		pod = &cp
	}
	return nodeinfo.NewPodInfo(pod)
}

func podName(pi fwk.PodInfo) string {
	if pi == nil {
		return "<nil>"
	}
	return objName(pi.GetPod())
}

func objName(pod *v1.Pod) string {
	if pod == nil {
		return "<nil>"
	}
	return pod.Namespace + "/" + pod.Name
}

// mutNodeLister is a Mutable's node lister: it hands out the current
// identity's handles.
type mutNodeLister Mutable

// List returns the nodes in list order: the previous result while the
// order is unchanged.
func (l *mutNodeLister) List() ([]fwk.NodeInfo, error) {
	return (*Mutable)(l).ids().list(), nil
}

// HavePodsWithAffinityList returns the nodes with pods with pod
// (anti-)affinity.
func (l *mutNodeLister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return (*Mutable)(l).ids().subList(0, (*snapshot.Snapshot).HavePodsWithAffinityList), nil
}

// HavePodsWithRequiredAntiAffinityList returns the nodes with pods with
// required anti-affinity.
func (l *mutNodeLister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return (*Mutable)(l).ids().subList(1, (*snapshot.Snapshot).HavePodsWithRequiredAntiAffinityList), nil
}

// HavePodsWithRequiredNonHostScopedAntiAffinityList returns the nodes
// with pods with a required non-host-scoped anti-affinity term; empty
// unless the hostname fast path is on (SetHostnameFastPath).
func (l *mutNodeLister) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	if !hostnameFastPath.Load() {
		return []fwk.NodeInfo{}, nil
	}
	return (*Mutable)(l).ids().subList(2, (*snapshot.Snapshot).HavePodsWithRequiredNonHostScopedAntiAffinityList), nil
}

// Get returns node name, or the snapshot's *NotFoundError.
func (l *mutNodeLister) Get(name string) (fwk.NodeInfo, error) {
	return (*Mutable)(l).ids().get(name)
}
