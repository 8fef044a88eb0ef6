package fwkadapter

import (
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
)

// NodeInfo is a published *nodeinfo.NodeInfo seen as fwk.NodeInfo: the
// same pointer under another type (WrapNode), so wrapping allocates
// nothing.
//
// Contract: safe for concurrent use by any number of goroutines; no method
// blocks. Getters return views built once per NodeInfo on first use (on
// the caller's goroutine) and shared by every reader: callers must not
// modify the slices or maps they return, as with upstream's snapshot. The
// NodeInfo is read-only: AddPodInfo and SetNode leave it unchanged (and log
// an error), RemovePod returns ErrReadOnly; Snapshot() returns a private
// MutableNodeInfo to mutate.
type NodeInfo nodeinfo.NodeInfo

var _ fwk.NodeInfo = (*NodeInfo)(nil)

// WrapNode returns ni as a fwk.NodeInfo; nil for nil.
func WrapNode(ni *nodeinfo.NodeInfo) fwk.NodeInfo {
	if ni == nil {
		return nil
	}
	return (*NodeInfo)(ni)
}

// Unwrap returns the schedcache NodeInfo.
func (n *NodeInfo) Unwrap() *nodeinfo.NodeInfo { return (*nodeinfo.NodeInfo)(n) }

// nodeView holds the fwk-shaped views of one NodeInfo. Enable registers
// buildView as the framework's node extension, so the view is built when
// the NodeInfo is made, before it is published, and kept in it for good;
// it is immutable afterwards except lists, ports and images, built from
// the immutable NodeInfo on first use and set once (atomic): a reader
// that loses the race uses the winner's.
type nodeView struct {
	// lists holds the pod lists, built on first use (set once, atomic):
	// a fork freezes a node per mutation, and many plugins never read a
	// node's pods.
	lists                     atomic.Pointer[podLists]
	requested, nonZero, alloc frozenResource
	features                  ndf.FeatureSet
	images                    atomic.Pointer[map[string]*fwk.ImageStateSummary] // built on first GetImageStates
	// ports holds GetUsedPorts' map, built on first use (set once,
	// atomic): most nodes' ports are never read (NodePorts reads them
	// only for a pod with host ports), and a fork freezes a node per
	// mutation. nil: not built; it points at nil when the node uses none.
	ports atomic.Pointer[fwk.HostPortInfo]
}

var emptyView = &nodeView{}

var enableOnce sync.Once

// Enable registers this package's node extension: from then on every
// NodeInfo the cache makes carries its fwk views, built once on the
// shard's goroutine before the NodeInfo is published. NewLister calls it;
// a program that loads its cache before making a Lister should call it
// first, since a NodeInfo made earlier has its views built on every read
// (correct, slower). Safe for concurrent use; idempotent.
func Enable() {
	enableOnce.Do(func() {
		nodeinfo.SetNodeExtension(func(ni *nodeinfo.NodeInfo) any { return buildView(ni) })
	})
}

// view returns n's views: those built when n was made, or, for a NodeInfo
// made before Enable, new ones.
func (n *NodeInfo) view() *nodeView {
	ni := n.Unwrap()
	if ni == nil {
		return emptyView
	}
	if v, ok := ni.Extension().(*nodeView); ok {
		return v
	}
	return buildView(ni)
}

// podLists are a NodeInfo's pods as fwk.PodInfos; immutable.
type podLists struct {
	pods, withAffinity, withAnti []fwk.PodInfo // nil when empty
	withNonHost                  []fwk.PodInfo // nil when empty; shown only with the hostname fast path (hostnameFastPath)
}

var noPods = &podLists{}

// podLists returns n's pod lists, built on first use.
func (n *NodeInfo) podLists() *podLists {
	v := n.view()
	if l := v.lists.Load(); l != nil {
		return l
	}
	l := buildLists(n.Unwrap())
	if v == emptyView {
		return l
	}
	if v.lists.CompareAndSwap(nil, l) {
		return l
	}
	return v.lists.Load()
}

func buildLists(ni *nodeinfo.NodeInfo) *podLists {
	if ni == nil {
		return noPods
	}
	v := &podLists{}
	np, na, nr, nh := ni.NumPods(), ni.NumPodsWithAffinity(), ni.NumPodsWithRequiredAntiAffinity(), ni.NumPodsWithRequiredNonHostScopedAntiAffinity()
	if total := np + na + nr + nh; total > 0 {
		buf := make([]fwk.PodInfo, total) // one allocation for the four lists
		if np > 0 {
			v.pods = buf[:np:np]
			for i := range np {
				v.pods[i] = (*PodInfo)(ni.PodAt(i))
			}
		}
		if na > 0 {
			v.withAffinity = buf[np : np+na : np+na]
			for i := range na {
				v.withAffinity[i] = (*PodInfo)(ni.PodWithAffinityAt(i))
			}
		}
		if nr > 0 {
			v.withAnti = buf[np+na : np+na+nr : np+na+nr]
			for i := range nr {
				v.withAnti[i] = (*PodInfo)(ni.PodWithRequiredAntiAffinityAt(i))
			}
		}
		if nh > 0 {
			o := np + na + nr
			v.withNonHost = buf[o : o+nh : o+nh]
			for i := range nh {
				v.withNonHost[i] = (*PodInfo)(ni.PodWithRequiredNonHostScopedAntiAffinityAt(i))
			}
		}
	}
	return v
}

func buildView(ni *nodeinfo.NodeInfo) *nodeView {
	v := &nodeView{}
	v.requested.r.setFrom(ni.Requested())
	v.nonZero.r.setFrom(ni.NonZeroRequested())
	v.alloc.r.setFrom(ni.Allocatable())
	if node := ni.Node(); node != nil {
		// As upstream's SetNode since NodeDeclaredFeatures went GA (v1.37):
		// unknown features are dropped.
		v.features = ndf.DefaultFramework.TryMap(node.Status.DeclaredFeatures)
	}
	return v
}

// Node returns the node object. Callers must not mutate it.
func (n *NodeInfo) Node() *v1.Node { return n.Unwrap().Node() }

// GetPods returns the pods in upstream order (shared; do not modify).
func (n *NodeInfo) GetPods() []fwk.PodInfo { return n.podLists().pods }

// GetPodsWithAffinity returns the pods with pod (anti-)affinity.
func (n *NodeInfo) GetPodsWithAffinity() []fwk.PodInfo { return n.podLists().withAffinity }

// GetPodsWithRequiredAntiAffinity returns the pods with required
// anti-affinity.
func (n *NodeInfo) GetPodsWithRequiredAntiAffinity() []fwk.PodInfo {
	return n.podLists().withAnti
}

// GetPodsWithRequiredNonHostScopedAntiAffinity returns the pods with a
// required anti-affinity term whose topology key is not the hostname;
// empty unless the hostname fast path is on (SetHostnameFastPath), as
// upstream's list is empty unless its InterPodAffinityHostnameFastPath
// gate is on.
func (n *NodeInfo) GetPodsWithRequiredNonHostScopedAntiAffinity() []fwk.PodInfo {
	if !hostnameFastPath.Load() {
		return nil
	}
	return n.podLists().withNonHost
}

// GetUsedPorts returns the used host ports (shared; do not modify; nil
// when none, which reads as empty), built on first use.
func (n *NodeInfo) GetUsedPorts() fwk.HostPortInfo {
	v := n.view()
	if p := v.ports.Load(); p != nil {
		return *p
	}
	ports := buildPorts(n.Unwrap())
	if v == emptyView {
		return ports
	}
	if v.ports.CompareAndSwap(nil, &ports) {
		return ports
	}
	return *v.ports.Load()
}

// buildPorts returns ni's used host ports as fwk's map; nil when none.
func buildPorts(ni *nodeinfo.NodeInfo) fwk.HostPortInfo {
	if ni == nil || ni.NumUsedPorts() == 0 {
		return nil
	}
	ports := make(fwk.HostPortInfo)
	for ip, pps := range ni.UsedPorts() {
		m := make(map[fwk.ProtocolPort]struct{}, len(pps))
		for pp := range pps {
			m[fwk.ProtocolPort{Protocol: pp.Protocol, Port: pp.Port}] = struct{}{}
		}
		ports[ip] = m
	}
	return ports
}

// GetRequested returns the requested resources (read-only);
// GetNonZeroRequested and GetAllocatable likewise.
func (n *NodeInfo) GetRequested() fwk.Resource        { return &n.view().requested }
func (n *NodeInfo) GetNonZeroRequested() fwk.Resource { return &n.view().nonZero }
func (n *NodeInfo) GetAllocatable() fwk.Resource      { return &n.view().alloc }

// GetImageStates returns the image summaries, read through
// nodeinfo.NodeInfo.ImageStates once (shared; do not modify).
func (n *NodeInfo) GetImageStates() map[string]*fwk.ImageStateSummary {
	v := n.view()
	if m := v.images.Load(); m != nil {
		return *m
	}
	src := n.Unwrap().ImageStates()
	m := make(map[string]*fwk.ImageStateSummary, len(src))
	buf := make([]fwk.ImageStateSummary, len(src)) // one allocation for the summaries
	i := 0
	for name, s := range src {
		buf[i] = fwk.ImageStateSummary{Size: s.Size, NumNodes: s.NumNodes}
		m[name] = &buf[i]
		i++
	}
	if v == emptyView {
		return m
	}
	if v.images.CompareAndSwap(nil, &m) {
		return m
	}
	return *v.images.Load()
}

// GetPVCRefCounts returns a fresh map of the PVC reference counts.
func (n *NodeInfo) GetPVCRefCounts() map[string]int { return n.Unwrap().PVCRefCounts() }

// GetGeneration returns the NodeInfo's generation.
func (n *NodeInfo) GetGeneration() int64 { return n.Unwrap().Generation() }

// GetNodeDeclaredFeatures returns the node's declared features.
func (n *NodeInfo) GetNodeDeclaredFeatures() ndf.FeatureSet { return n.view().features }

// Snapshot returns a private, mutable copy (a *MutableNodeInfo) with
// upstream's SnapshotConcrete shape; n is not changed.
func (n *NodeInfo) Snapshot() fwk.NodeInfo { return n.SnapshotMutable() }

// SnapshotMutable is Snapshot with the concrete type.
func (n *NodeInfo) SnapshotMutable() *MutableNodeInfo {
	v := n.view()
	m := &MutableNodeInfo{
		node:             n.Node(),
		requested:        v.requested.r.Clone(),
		nonZeroRequested: v.nonZero.r.Clone(),
		allocatable:      v.alloc.r.Clone(),
		usedPorts:        copyPorts(n.GetUsedPorts()),
		imageStates:      make(map[string]*fwk.ImageStateSummary),
		pvcRefCounts:     n.GetPVCRefCounts(),
		generation:       n.GetGeneration(),
		declaredFeatures: v.features.Clone(),
	}
	l := n.podLists()
	if len(l.pods) > 0 {
		m.pods = append([]fwk.PodInfo(nil), l.pods...)
	}
	if len(l.withAffinity) > 0 {
		m.podsWithAffinity = append([]fwk.PodInfo(nil), l.withAffinity...)
	}
	if len(l.withAnti) > 0 {
		m.podsWithRequiredAntiAffinity = append([]fwk.PodInfo(nil), l.withAnti...)
	}
	if len(l.withNonHost) > 0 && hostnameFastPath.Load() {
		m.podsWithRequiredNonHostScopedAntiAffinity = append([]fwk.PodInfo(nil), l.withNonHost...)
	}
	for name, s := range n.GetImageStates() {
		m.imageStates[name] = &fwk.ImageStateSummary{Size: s.Size, NumNodes: s.NumNodes}
	}
	return m
}

// String formats the NodeInfo for logs.
func (n *NodeInfo) String() string { return n.Unwrap().String() }

// AddPodInfo leaves the published NodeInfo unchanged and logs an error:
// add pods to a Snapshot() instead.
func (n *NodeInfo) AddPodInfo(podInfo fwk.PodInfo) {
	klog.Background().Error(ErrReadOnly, "AddPodInfo on a published NodeInfo ignored", "node", nodeName(n.Node()))
}

// RemovePod returns ErrReadOnly: remove pods from a Snapshot() instead.
func (n *NodeInfo) RemovePod(logger klog.Logger, pod *v1.Pod) error {
	return fmt.Errorf("RemovePod on node %q: %w", nodeName(n.Node()), ErrReadOnly)
}

// SetNode leaves the published NodeInfo unchanged and logs an error.
func (n *NodeInfo) SetNode(node *v1.Node) {
	klog.Background().Error(ErrReadOnly, "SetNode on a published NodeInfo ignored", "node", nodeName(n.Node()))
}

func nodeName(node *v1.Node) string {
	if node == nil {
		return ""
	}
	return node.Name
}

func copyPorts(h fwk.HostPortInfo) fwk.HostPortInfo {
	out := make(fwk.HostPortInfo, len(h))
	for ip, pps := range h {
		m := make(map[fwk.ProtocolPort]struct{}, len(pps))
		for pp := range pps {
			m[pp] = struct{}{}
		}
		out[ip] = m
	}
	return out
}
