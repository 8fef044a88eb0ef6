package nodeinfo

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ImageStateSummary is a plain value, safe to copy and share: the clone form
// of an image's state on a node (3.5), its size and the number of nodes
// reporting it when the summary was made.
type ImageStateSummary struct {
	Size     int64
	NumNodes int
}

// pvcRef is one PVC reference count.
type pvcRef struct {
	key   string
	count int
}

// NodeInfo is immutable, so it is safe for concurrent use from any goroutine
// and no method blocks. It is a frozen copy of one node's aggregate
// (upstream framework.NodeInfo after SnapshotConcrete), made only by
// NodeState.Freeze. Accessors returning
// slices or maps return fresh copies; the *v1.Node, *PodInfo and *v1.Pod
// pointers are shared and must not be mutated. Methods are nil-safe.
type NodeInfo struct {
	// Every field is written once, by Freeze, and then only read. Slices
	// and maps may be shared with other NodeInfos of the same NodeState;
	// none is ever shared with a mutable NodeState field.
	//
	// The four pod lists are one array, podBuf (pods, then the affinity
	// sub-list, then the required anti-affinity one, then the required
	// non-host-scoped anti-affinity one), with the three sub-lists'
	// lengths: one slice header instead of four, and nonZeroCPU/nonZeroMem
	// instead of a Resource whose other fields are always zero, keep the
	// NodeInfo (copied by every Freeze, that is once per change of the node
	// per published snapshot) at 288 bytes. Read the lists through
	// podList, affList, antiList and nonHostList.
	node        *v1.Node
	podBuf      []*PodInfo // pods ++ podsWithAffinity ++ podsWithRequiredAntiAffinity ++ podsWithRequiredNonHostScopedAntiAffinity; nil when all are empty
	nAff, nAnti int32      // lengths of the first two sub-lists, after the pods in podBuf
	nNonHost    int32      // length of the third sub-list, at the end of podBuf
	requested   Resource
	nonZeroCPU  int64 // sum of the pods' non-zero cpu requests
	nonZeroMem  int64 // sum of the pods' non-zero memory requests
	allocatable Resource
	usedPorts   []HostPort                   // a set, normalised
	pvcRefs     []pvcRef                     // sorted by key, counts > 0
	imageStates map[string]ImageStateSummary // explicit summaries (NewSnapshot, ghosts in Dump); nil: read imageNames from imageTable
	imageNames  []string                     // the node object's image names, each once; shared, immutable
	imageTable  *ImageTable                  // the registry version this clone shows
	generation  int64

	ext any // the registered node extension's value (ext.go), set before the NodeInfo is shared; immutable
}

// Node returns the node object, nil for a nodeless entry. Callers must not
// mutate it.
func (n *NodeInfo) Node() *v1.Node {
	if n == nil {
		return nil
	}
	return n.node
}

// NodeName returns the node's name, "" if nodeless.
func (n *NodeInfo) NodeName() string {
	if n == nil || n.node == nil {
		return ""
	}
	return n.node.Name
}

// podList returns the pod list (a full slice of podBuf: appending to it
// copies), nil when empty; affList, antiList and nonHostList the three
// sub-lists.
func (n *NodeInfo) podList() []*PodInfo {
	np := n.numPods()
	if np == 0 {
		return nil
	}
	return n.podBuf[:np:np]
}

// numPods is the length of the pod list at the head of podBuf.
func (n *NodeInfo) numPods() int {
	return len(n.podBuf) - int(n.nAff) - int(n.nAnti) - int(n.nNonHost)
}

func (n *NodeInfo) affList() []*PodInfo {
	if n.nAff == 0 {
		return nil
	}
	i := n.numPods()
	return n.podBuf[i : i+int(n.nAff) : i+int(n.nAff)]
}

func (n *NodeInfo) antiList() []*PodInfo {
	if n.nAnti == 0 {
		return nil
	}
	i := len(n.podBuf) - int(n.nNonHost) - int(n.nAnti)
	return n.podBuf[i : i+int(n.nAnti) : i+int(n.nAnti)]
}

func (n *NodeInfo) nonHostList() []*PodInfo {
	if n.nNonHost == 0 {
		return nil
	}
	return n.podBuf[len(n.podBuf)-int(n.nNonHost):]
}

// NumPods returns len(Pods()) without copying.
func (n *NodeInfo) NumPods() int {
	if n == nil {
		return 0
	}
	return n.numPods()
}

// PodAt returns Pods()[i] without copying, nil if i is out of range.
func (n *NodeInfo) PodAt(i int) *PodInfo {
	if n == nil {
		return nil
	}
	return podAt(n.podList(), i)
}

// PodWithAffinityAt returns PodsWithAffinity()[i], nil if out of range.
func (n *NodeInfo) PodWithAffinityAt(i int) *PodInfo {
	if n == nil {
		return nil
	}
	return podAt(n.affList(), i)
}

// PodWithRequiredAntiAffinityAt returns PodsWithRequiredAntiAffinity()[i],
// nil if out of range.
func (n *NodeInfo) PodWithRequiredAntiAffinityAt(i int) *PodInfo {
	if n == nil {
		return nil
	}
	return podAt(n.antiList(), i)
}

// PodWithRequiredNonHostScopedAntiAffinityAt returns
// PodsWithRequiredNonHostScopedAntiAffinity()[i], nil if out of range.
func (n *NodeInfo) PodWithRequiredNonHostScopedAntiAffinityAt(i int) *PodInfo {
	if n == nil {
		return nil
	}
	return podAt(n.nonHostList(), i)
}

func podAt(s []*PodInfo, i int) *PodInfo {
	if i < 0 || i >= len(s) {
		return nil
	}
	return s[i]
}

// Pods returns a copy of the pods in upstream order (4.1), nil when empty.
func (n *NodeInfo) Pods() []*PodInfo {
	if n == nil {
		return nil
	}
	return slices.Clone(n.podList())
}

// PodsWithAffinity returns a copy of the affinity sub-list, nil when empty.
func (n *NodeInfo) PodsWithAffinity() []*PodInfo {
	if n == nil {
		return nil
	}
	return slices.Clone(n.affList())
}

// PodsWithRequiredAntiAffinity returns a copy of the required
// anti-affinity sub-list, nil when empty.
func (n *NodeInfo) PodsWithRequiredAntiAffinity() []*PodInfo {
	if n == nil {
		return nil
	}
	return slices.Clone(n.antiList())
}

// PodsWithRequiredNonHostScopedAntiAffinity returns a copy of the required
// non-host-scoped anti-affinity sub-list (upstream v1.37's
// PodsWithRequiredNonHostScopedAntiAffinity: the pods with a required
// anti-affinity term whose topology key is not kubernetes.io/hostname), nil
// when empty. It is kept whatever upstream's feature gate
// InterPodAffinityHostnameFastPath says (see
// PodHasRequiredNonHostScopedAntiAffinity).
func (n *NodeInfo) PodsWithRequiredNonHostScopedAntiAffinity() []*PodInfo {
	if n == nil {
		return nil
	}
	return slices.Clone(n.nonHostList())
}

// NumPodsWithAffinity returns len(PodsWithAffinity()) without copying.
func (n *NodeInfo) NumPodsWithAffinity() int {
	if n == nil {
		return 0
	}
	return int(n.nAff)
}

// NumPodsWithRequiredAntiAffinity returns len(PodsWithRequiredAntiAffinity())
// without copying.
func (n *NodeInfo) NumPodsWithRequiredAntiAffinity() int {
	if n == nil {
		return 0
	}
	return int(n.nAnti)
}

// NumPodsWithRequiredNonHostScopedAntiAffinity returns
// len(PodsWithRequiredNonHostScopedAntiAffinity()) without copying.
func (n *NodeInfo) NumPodsWithRequiredNonHostScopedAntiAffinity() int {
	if n == nil {
		return 0
	}
	return int(n.nNonHost)
}

// Requested returns the sum of the pods' Requests (4.5); AllowedPodNumber
// is always 0.
func (n *NodeInfo) Requested() Resource {
	if n == nil {
		return Resource{}
	}
	return n.requested
}

// NonZeroRequested returns the sums of the pods' non-zero cpu and memory;
// its other fields are zero.
func (n *NodeInfo) NonZeroRequested() Resource {
	if n == nil {
		return Resource{}
	}
	return Resource{MilliCPU: n.nonZeroCPU, Memory: n.nonZeroMem}
}

// Allocatable returns NewResource(node.Status.Allocatable) as of the last
// SetNode (kept, though meaningless, on a nodeless entry).
func (n *NodeInfo) Allocatable() Resource {
	if n == nil {
		return Resource{}
	}
	return n.allocatable
}

// UsedPorts returns a fresh copy of the used host ports (never nil).
func (n *NodeInfo) UsedPorts() HostPortInfo {
	h := make(HostPortInfo)
	if n == nil {
		return h
	}
	for _, p := range n.usedPorts {
		h.Add(p.IP, string(p.Protocol), p.Port)
	}
	return h
}

// NumUsedPorts returns UsedPorts().Len() without copying.
func (n *NodeInfo) NumUsedPorts() int {
	if n == nil {
		return 0
	}
	return len(n.usedPorts)
}

// HasHostPort reports whether UsedPorts holds exactly (ip, protocol, port)
// after normalisation ("" IP is 0.0.0.0, "" protocol is TCP).
func (n *NodeInfo) HasHostPort(ip string, protocol string, port int32) bool {
	if n == nil {
		return false
	}
	hp := NewHostPort(ip, protocol, port)
	return slices.Contains(n.usedPorts, hp)
}

// UsesAnyHostPort reports whether UsedPorts holds any of ports (as
// HostPorts are normalised).
func (n *NodeInfo) UsesAnyHostPort(ports []HostPort) bool {
	if n == nil {
		return false
	}
	for _, hp := range ports {
		if slices.Contains(n.usedPorts, hp) {
			return true
		}
	}
	return false
}

// HostPortConflict reports whether (ip, protocol, port) conflicts with the
// used ports, with upstream HostPortInfo.CheckConflict semantics.
func (n *NodeInfo) HostPortConflict(ip string, protocol string, port int32) bool {
	if n == nil || port <= 0 {
		return false
	}
	hp := NewHostPort(ip, protocol, port)
	for _, u := range n.usedPorts {
		if u.Protocol == hp.Protocol && u.Port == hp.Port &&
			(hp.IP == DefaultBindAllHostIP || u.IP == DefaultBindAllHostIP || u.IP == hp.IP) {
			return true
		}
	}
	return false
}

// ImageStates returns a fresh copy of the image summaries (never nil).
func (n *NodeInfo) ImageStates() map[string]ImageStateSummary {
	if n == nil {
		return make(map[string]ImageStateSummary)
	}
	if n.imageStates != nil {
		out := make(map[string]ImageStateSummary, len(n.imageStates))
		for k, v := range n.imageStates {
			out[k] = v
		}
		return out
	}
	out := make(map[string]ImageStateSummary, len(n.imageNames))
	for _, name := range n.imageNames {
		out[name] = n.imageSummary(name)
	}
	return out
}

// ImageState returns the summary of image name, if the node has it.
func (n *NodeInfo) ImageState(name string) (ImageStateSummary, bool) {
	if n == nil {
		return ImageStateSummary{}, false
	}
	if n.imageStates != nil {
		s, ok := n.imageStates[name]
		return s, ok
	}
	if !containsString(n.imageNames, name) {
		return ImageStateSummary{}, false
	}
	return n.imageSummary(name), true
}

// NumImageStates returns len(ImageStates()) without copying.
func (n *NodeInfo) NumImageStates() int {
	if n == nil {
		return 0
	}
	if n.imageStates != nil {
		return len(n.imageStates)
	}
	return len(n.imageNames)
}

// PVCRefCounts returns a fresh copy of the PVC reference counts keyed
// "<namespace>/<claim>" (never nil).
func (n *NodeInfo) PVCRefCounts() map[string]int {
	if n == nil {
		return make(map[string]int)
	}
	m := make(map[string]int, len(n.pvcRefs))
	for _, r := range n.pvcRefs {
		m[r.key] = r.count
	}
	return m
}

// PVCRefCount returns the reference count of key, 0 if absent.
func (n *NodeInfo) PVCRefCount(key string) int {
	if n == nil {
		return 0
	}
	if i, ok := findPVC(n.pvcRefs, key); ok {
		return n.pvcRefs[i].count
	}
	return 0
}

// NumPVCRefCounts returns len(PVCRefCounts()) without copying.
func (n *NodeInfo) NumPVCRefCounts() int {
	if n == nil {
		return 0
	}
	return len(n.pvcRefs)
}

// RangePVCRefCounts calls fn for each PVC key and count in ascending key
// order until fn returns false. It does not allocate.
func (n *NodeInfo) RangePVCRefCounts(fn func(key string, count int) bool) {
	if n == nil {
		return
	}
	for _, r := range n.pvcRefs {
		if !fn(r.key, r.count) {
			return
		}
	}
}

// Generation returns the generation the entry had when it was frozen.
func (n *NodeInfo) Generation() int64 {
	if n == nil {
		return 0
	}
	return n.generation
}

// String formats the NodeInfo for logs and test failures.
func (n *NodeInfo) String() string {
	if n == nil {
		return "<nil>"
	}
	pods := n.podList()
	names := make([]string, len(pods))
	for i, p := range pods {
		if pod := p.Pod(); pod != nil {
			names[i] = pod.Name
		}
	}
	name := "<no node>"
	if n.node != nil {
		name = n.node.Name
	}
	return fmt.Sprintf("&NodeInfo{Node:%s, Generation:%d, Pods:[%s], Requested:%v, NonZeroRequested:%v, UsedPorts:%v, Allocatable:%v}",
		name, n.generation, strings.Join(names, " "), n.requested, n.NonZeroRequested(), n.usedPorts, n.allocatable)
}

func findPVC(s []pvcRef, key string) (int, bool) {
	return slices.BinarySearchFunc(s, key, func(e pvcRef, k string) int { return strings.Compare(e.key, k) })
}
