package fwkadapter

import (
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"
	v1 "k8s.io/api/core/v1"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
)

// nodeIdentity is one generation of the NodeInfo objects a Mutable hands
// out, modelled on upstream v1.37.2's snapshot, which hands out pointers
// to NodeInfos it then mutates in place:
//   - outside a session the snapshot's own NodeInfos: they follow every
//     snapshot AssumePod and ForgetPod, and across Reset (upstream's
//     UpdateSnapshot overwrites them in place);
//   - StartMutations copies every NodeInfo and works on the copies: the
//     originals keep the state at StartMutations until EndMutations
//     restores them; the copies follow the session's mutations, keep the
//     state at EndMutations afterwards, and their image summaries read
//     NumNodes 0 (upstream copies them with NodeInfo.Snapshot(), which
//     counts a Nodes set the snapshot's NodeInfos do not have).
//
// A Mutable's identity resolves a node by name in the state it reads:
// frozen when set, else the Mutable's current state. So StartMutations and
// EndMutations stay O(1): nothing is copied, an identity is frozen.
//
// Contract: frozen and the memos are written by the Mutable's owner while
// no one reads (as upstream's snapshot mutations); handles and the memos
// are safe for the concurrent readers of a scheduling cycle.
type nodeIdentity struct {
	m       *Mutable
	frozen  atomic.Pointer[snapshot.Snapshot]   // nil: follows m's state
	session bool                                // a session's copies (image counts 0); immutable
	handles *xsync.MapOf[string, *LiveNodeInfo] // one handle per node name, made on first use
	all     atomic.Pointer[liveListMemo]        // List's last result
	lists   [3]atomic.Pointer[liveListMemo]     // the affinity lists' last results
}

// liveListMemo is a list of handles and what it was built from;
// immutable.
type liveListMemo struct {
	order snapshot.OrderKey  // List: the order it lists
	snap  *snapshot.Snapshot // the affinity lists: the state they list
	list  []fwk.NodeInfo
}

func newIdentity(m *Mutable, session bool) *nodeIdentity {
	return &nodeIdentity{m: m, session: session, handles: xsync.NewMapOf[string, *LiveNodeInfo]()}
}

// state returns the snapshot id's NodeInfos read.
func (id *nodeIdentity) state() *snapshot.Snapshot {
	if s := id.frozen.Load(); s != nil {
		return s
	}
	return id.m.view.snap
}

// freeze makes id keep the state it reads now.
func (id *nodeIdentity) freeze() { id.frozen.Store(id.m.view.snap) }

// handle returns the handle of node name in id, made on first use.
func (id *nodeIdentity) handle(name string) *LiveNodeInfo {
	if h, ok := id.handles.Load(name); ok {
		return h
	}
	h, _ := id.handles.LoadOrCompute(name, func() *LiveNodeInfo { return &LiveNodeInfo{id: id, name: name} })
	return h
}

// get returns the handle of node name if the state holds it.
func (id *nodeIdentity) get(name string) (fwk.NodeInfo, error) {
	ni, err := id.state().Get(name)
	if err != nil {
		return nil, err
	}
	h := id.handle(name)
	h.resolveTo(id.state(), ni)
	return h, nil
}

// list returns the handles of every listed node, in list order: the
// previous result while the order is unchanged (pod mutations keep it).
func (id *nodeIdentity) list() []fwk.NodeInfo {
	s := id.state()
	key := s.OrderKey()
	if last := id.all.Load(); last != nil && last.order == key {
		return last.list
	}
	out := make([]fwk.NodeInfo, s.NumNodes())
	s.Range(func(i int, ni *nodeinfo.NodeInfo) bool {
		h := id.handle(ni.Node().Name)
		h.resolveTo(s, ni)
		out[i] = h
		return true
	})
	id.all.Store(&liveListMemo{order: key, list: out})
	return out
}

// subList returns the handles of one affinity list (slot i of lists) of
// the state, rebuilt when the state changed.
func (id *nodeIdentity) subList(i int, read func(*snapshot.Snapshot) ([]*nodeinfo.NodeInfo, error)) []fwk.NodeInfo {
	s := id.state()
	if last := id.lists[i].Load(); last != nil && last.snap == s {
		return last.list
	}
	nis, _ := read(s) // never fails
	out := make([]fwk.NodeInfo, len(nis))
	for j, ni := range nis {
		h := id.handle(ni.Node().Name)
		h.resolveTo(s, ni)
		out[j] = h
	}
	id.lists[i].Store(&liveListMemo{snap: s, list: out})
	return out
}

// LiveNodeInfo is the fwk.NodeInfo a Mutable hands out: a handle on one
// node that reads the node as upstream's NodeInfo object of the same
// origin would read now (see Mutable: the snapshot's NodeInfos follow
// snapshot AssumePod and ForgetPod; those listed in a mutation session
// follow the session's AddPod and RemovePod). A plugin that lists the
// nodes once and reads them after mutating, as DefaultPreemption's
// pod-group path does, sees what it sees on upstream's snapshot.
//
// Contract: safe for concurrent reads; reads must not overlap a mutation
// of its Mutable, as with upstream's snapshot. It is read-only as the
// published NodeInfo (AddPodInfo, RemovePod and SetNode change nothing).
type LiveNodeInfo struct {
	id   *nodeIdentity // immutable
	name string        // immutable
	// at is the node as last resolved: the state it was read in and the
	// NodeInfo; replaced (never modified) when the state changes.
	at atomic.Pointer[resolved]
	// images holds a session copy's image summaries (NumNodes 0), built
	// on first use; node objects do not change within a Mutable's base.
	images atomic.Pointer[map[string]*fwk.ImageStateSummary]
}

// resolved is a node as read in one state; immutable.
type resolved struct {
	state *snapshot.Snapshot
	ni    *NodeInfo
}

var _ fwk.NodeInfo = (*LiveNodeInfo)(nil)

// resolveTo records ni as the node in state s, unless already recorded.
func (h *LiveNodeInfo) resolveTo(s *snapshot.Snapshot, ni *nodeinfo.NodeInfo) {
	if r := h.at.Load(); r != nil && r.state == s {
		return
	}
	h.at.Store(&resolved{state: s, ni: (*NodeInfo)(ni)})
}

// cur returns the node as its identity reads it now. A node the state no
// longer holds (a node-less entry removed with its last pod) reads as it
// was last seen, as upstream's object is left.
func (h *LiveNodeInfo) cur() *NodeInfo {
	s := h.id.state()
	r := h.at.Load()
	if r != nil && r.state == s {
		return r.ni
	}
	ni, err := s.Get(h.name)
	if err != nil {
		if r != nil {
			return r.ni
		}
		return (*NodeInfo)(nil)
	}
	h.at.Store(&resolved{state: s, ni: (*NodeInfo)(ni)})
	return (*NodeInfo)(ni)
}

// NodeInfo returns the node as it reads now (an immutable published
// NodeInfo).
func (h *LiveNodeInfo) NodeInfo() *NodeInfo { return h.cur() }

// Unwrap returns the schedcache NodeInfo the handle reads now.
func (h *LiveNodeInfo) Unwrap() *nodeinfo.NodeInfo { return h.cur().Unwrap() }

// Node returns the node object.
func (h *LiveNodeInfo) Node() *v1.Node {
	if n := h.cur(); n != nil {
		return n.Node()
	}
	return nil
}

func (h *LiveNodeInfo) GetPods() []fwk.PodInfo             { return h.cur().GetPods() }
func (h *LiveNodeInfo) GetPodsWithAffinity() []fwk.PodInfo { return h.cur().GetPodsWithAffinity() }
func (h *LiveNodeInfo) GetPodsWithRequiredAntiAffinity() []fwk.PodInfo {
	return h.cur().GetPodsWithRequiredAntiAffinity()
}
func (h *LiveNodeInfo) GetPodsWithRequiredNonHostScopedAntiAffinity() []fwk.PodInfo {
	return h.cur().GetPodsWithRequiredNonHostScopedAntiAffinity()
}
func (h *LiveNodeInfo) GetUsedPorts() fwk.HostPortInfo    { return h.cur().GetUsedPorts() }
func (h *LiveNodeInfo) GetRequested() fwk.Resource        { return h.cur().GetRequested() }
func (h *LiveNodeInfo) GetNonZeroRequested() fwk.Resource { return h.cur().GetNonZeroRequested() }
func (h *LiveNodeInfo) GetAllocatable() fwk.Resource      { return h.cur().GetAllocatable() }
func (h *LiveNodeInfo) GetPVCRefCounts() map[string]int   { return h.cur().GetPVCRefCounts() }
func (h *LiveNodeInfo) GetGeneration() int64              { return h.cur().GetGeneration() }
func (h *LiveNodeInfo) GetNodeDeclaredFeatures() ndf.FeatureSet {
	return h.cur().GetNodeDeclaredFeatures()
}
func (h *LiveNodeInfo) String() string { return h.cur().String() }

// GetImageStates returns the image summaries (shared; do not modify):
// with NumNodes 0 for a node listed in a mutation session, as upstream's.
func (h *LiveNodeInfo) GetImageStates() map[string]*fwk.ImageStateSummary {
	if !h.id.session {
		return h.cur().GetImageStates()
	}
	if m := h.images.Load(); m != nil {
		return *m
	}
	m := zeroCounts(h.cur().GetImageStates())
	h.images.CompareAndSwap(nil, &m)
	return *h.images.Load()
}

// zeroCounts returns a copy of src with every NumNodes 0.
func zeroCounts(src map[string]*fwk.ImageStateSummary) map[string]*fwk.ImageStateSummary {
	m := make(map[string]*fwk.ImageStateSummary, len(src))
	buf := make([]fwk.ImageStateSummary, len(src))
	i := 0
	for name, s := range src {
		buf[i] = fwk.ImageStateSummary{Size: s.Size}
		m[name] = &buf[i]
		i++
	}
	return m
}

// Snapshot returns a private, mutable copy of the node as it reads now.
func (h *LiveNodeInfo) Snapshot() fwk.NodeInfo {
	m := h.cur().SnapshotMutable()
	if h.id.session {
		for _, s := range m.imageStates {
			s.NumNodes = 0
		}
	}
	return m
}

// AddPodInfo is the published NodeInfo's: it changes nothing and logs an
// error (mutate through the Mutable).
func (h *LiveNodeInfo) AddPodInfo(podInfo fwk.PodInfo) { h.cur().AddPodInfo(podInfo) }

// RemovePod is the published NodeInfo's: it returns ErrReadOnly.
func (h *LiveNodeInfo) RemovePod(logger klog.Logger, pod *v1.Pod) error {
	return h.cur().RemovePod(logger, pod)
}

// SetNode is the published NodeInfo's: it changes nothing and logs an
// error.
func (h *LiveNodeInfo) SetNode(node *v1.Node) { h.cur().SetNode(node) }
