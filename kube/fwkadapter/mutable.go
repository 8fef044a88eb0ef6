package fwkadapter

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
)

// MutableNodeInfo is a private, mutable fwk.NodeInfo: what Snapshot()
// returns, aggregated with upstream's rules (pkg/scheduler/framework
// NodeInfo: AddPodInfo appends, RemovePod swap-deletes, ports and PVC
// counts follow each pod, every change takes a new generation).
//
// Contract: owned by whoever took it; not safe for concurrent mutation
// (concurrent reads are fine); no method blocks. It shares *v1.Pod,
// *v1.Node and fwk.PodInfo values with the snapshot, which it never
// modifies. Bad input is refused without a panic: RemovePod returns typed
// errors; AddPodInfo with a nil PodInfo or pod and SetNode with a nil node
// change nothing and log an error (their signatures have no error).
type MutableNodeInfo struct {
	// Every field is owned by the MutableNodeInfo's owner.
	node                         *v1.Node
	pods                         []fwk.PodInfo
	podsWithAffinity             []fwk.PodInfo
	podsWithRequiredAntiAffinity []fwk.PodInfo
	// podsWithRequiredNonHostScopedAntiAffinity is kept only while the
	// hostname fast path is on (SetHostnameFastPath), as upstream's.
	podsWithRequiredNonHostScopedAntiAffinity []fwk.PodInfo
	usedPorts                                 fwk.HostPortInfo
	requested                                 *Resource
	nonZeroRequested                          *Resource
	allocatable                               *Resource
	imageStates                               map[string]*fwk.ImageStateSummary
	pvcRefCounts                              map[string]int
	generation                                int64
	declaredFeatures                          ndf.FeatureSet
}

var _ fwk.NodeInfo = (*MutableNodeInfo)(nil)

// errNilMutable reports a method called on a nil *MutableNodeInfo.
var errNilMutable = fmt.Errorf("%w: nil MutableNodeInfo", ErrReadOnly)

// NewMutableNodeInfo returns an empty MutableNodeInfo (upstream's
// NewNodeInfo()), with node set if node is not nil.
func NewMutableNodeInfo(node *v1.Node) *MutableNodeInfo {
	m := &MutableNodeInfo{
		requested:        &Resource{},
		nonZeroRequested: &Resource{},
		allocatable:      &Resource{},
		usedPorts:        make(fwk.HostPortInfo),
		imageStates:      make(map[string]*fwk.ImageStateSummary),
		pvcRefCounts:     make(map[string]int),
		generation:       nodeinfo.NextGeneration(),
	}
	if node != nil {
		m.SetNode(node)
	}
	return m
}

// The getters return upstream's fields (shared with the copy: callers must
// not modify them); every method is nil-safe.

func (m *MutableNodeInfo) Node() *v1.Node {
	if m == nil {
		return nil
	}
	return m.node
}
func (m *MutableNodeInfo) GetPods() []fwk.PodInfo {
	if m == nil {
		return nil
	}
	return m.pods
}
func (m *MutableNodeInfo) GetPodsWithAffinity() []fwk.PodInfo {
	if m == nil {
		return nil
	}
	return m.podsWithAffinity
}
func (m *MutableNodeInfo) GetUsedPorts() fwk.HostPortInfo {
	if m == nil {
		return nil
	}
	return m.usedPorts
}
func (m *MutableNodeInfo) GetRequested() fwk.Resource {
	if m == nil {
		return &Resource{}
	}
	return m.requested
}
func (m *MutableNodeInfo) GetNonZeroRequested() fwk.Resource {
	if m == nil {
		return &Resource{}
	}
	return m.nonZeroRequested
}
func (m *MutableNodeInfo) GetAllocatable() fwk.Resource {
	if m == nil {
		return &Resource{}
	}
	return m.allocatable
}
func (m *MutableNodeInfo) GetPVCRefCounts() map[string]int {
	if m == nil {
		return nil
	}
	return m.pvcRefCounts
}
func (m *MutableNodeInfo) GetGeneration() int64 {
	if m == nil {
		return 0
	}
	return m.generation
}
func (m *MutableNodeInfo) GetNodeDeclaredFeatures() ndf.FeatureSet {
	if m == nil {
		return ndf.FeatureSet{}
	}
	return m.declaredFeatures
}
func (m *MutableNodeInfo) GetPodsWithRequiredAntiAffinity() []fwk.PodInfo {
	if m == nil {
		return nil
	}
	return m.podsWithRequiredAntiAffinity
}
func (m *MutableNodeInfo) GetPodsWithRequiredNonHostScopedAntiAffinity() []fwk.PodInfo {
	if m == nil {
		return nil
	}
	return m.podsWithRequiredNonHostScopedAntiAffinity
}
func (m *MutableNodeInfo) GetImageStates() map[string]*fwk.ImageStateSummary {
	if m == nil {
		return nil
	}
	return m.imageStates
}

// Snapshot returns a deep copy (upstream's SnapshotConcrete).
func (m *MutableNodeInfo) Snapshot() fwk.NodeInfo {
	if m == nil {
		return NewMutableNodeInfo(nil)
	}
	c := &MutableNodeInfo{
		node:             m.node,
		requested:        m.requested.Clone(),
		nonZeroRequested: m.nonZeroRequested.Clone(),
		allocatable:      m.allocatable.Clone(),
		usedPorts:        copyPorts(m.usedPorts),
		imageStates:      make(map[string]*fwk.ImageStateSummary, len(m.imageStates)),
		pvcRefCounts:     make(map[string]int, len(m.pvcRefCounts)),
		generation:       m.generation,
		declaredFeatures: m.declaredFeatures.Clone(),
	}
	if len(m.pods) > 0 {
		c.pods = append([]fwk.PodInfo(nil), m.pods...)
	}
	if len(m.podsWithAffinity) > 0 {
		c.podsWithAffinity = append([]fwk.PodInfo(nil), m.podsWithAffinity...)
	}
	if len(m.podsWithRequiredAntiAffinity) > 0 {
		c.podsWithRequiredAntiAffinity = append([]fwk.PodInfo(nil), m.podsWithRequiredAntiAffinity...)
	}
	if len(m.podsWithRequiredNonHostScopedAntiAffinity) > 0 {
		c.podsWithRequiredNonHostScopedAntiAffinity = append([]fwk.PodInfo(nil), m.podsWithRequiredNonHostScopedAntiAffinity...)
	}
	for k, s := range m.imageStates {
		c.imageStates[k] = &fwk.ImageStateSummary{Size: s.Size, NumNodes: s.NumNodes}
	}
	for k, v := range m.pvcRefCounts {
		c.pvcRefCounts[k] = v
	}
	return c
}

// String formats the copy for logs, as upstream's.
func (m *MutableNodeInfo) String() string {
	if m == nil {
		return "<nil>"
	}
	keys := make([]string, len(m.pods))
	for i, p := range m.pods {
		if pod := p.GetPod(); pod != nil {
			keys[i] = pod.Name
		}
	}
	return fmt.Sprintf("&NodeInfo{Pods:%v, RequestedResource:%#v, NonZeroRequest: %#v, UsedPort: %#v, AllocatableResource:%#v}",
		keys, m.requested, m.nonZeroRequested, m.usedPorts, m.allocatable)
}

// AddPodInfo adds podInfo (any fwk.PodInfo) with upstream's rules.
func (m *MutableNodeInfo) AddPodInfo(podInfo fwk.PodInfo) {
	if m == nil {
		klog.Background().Error(errNilMutable, "AddPodInfo ignored")
		return
	}
	if podInfo == nil || podInfo.GetPod() == nil {
		klog.Background().Error(ErrNilPod, "AddPodInfo ignored", "node", nodeName(m.node))
		return
	}
	pod := podInfo.GetPod()
	m.pods = append(m.pods, podInfo)
	if nodeinfo.PodHasAffinity(pod) {
		m.podsWithAffinity = append(m.podsWithAffinity, podInfo)
	}
	if nodeinfo.PodHasRequiredAntiAffinity(pod) {
		m.podsWithRequiredAntiAffinity = append(m.podsWithRequiredAntiAffinity, podInfo)
	}
	if hostnameFastPath.Load() && nodeinfo.PodHasRequiredNonHostScopedAntiAffinity(pod) {
		m.podsWithRequiredNonHostScopedAntiAffinity = append(m.podsWithRequiredNonHostScopedAntiAffinity, podInfo)
	}
	m.update(podInfo, 1)
}

// RemovePod removes the pod with pod's UID, with upstream's rules. It
// returns ErrNilPod or ErrEmptyUID for a pod without a key and a
// *PodNotFoundError (ErrPodNotFound) when the node does not hold it; m is
// then unchanged except, as upstream, for the affinity sub-lists of a pod
// found only there.
func (m *MutableNodeInfo) RemovePod(logger klog.Logger, pod *v1.Pod) error {
	if m == nil {
		return errNilMutable
	}
	k, err := nodeinfo.PodKey(pod)
	if err != nil {
		return err
	}
	if nodeinfo.PodHasAffinity(pod) {
		m.podsWithAffinity, _ = removeFromSlice(m.podsWithAffinity, k)
	}
	if nodeinfo.PodHasRequiredAntiAffinity(pod) {
		m.podsWithRequiredAntiAffinity, _ = removeFromSlice(m.podsWithRequiredAntiAffinity, k)
	}
	if hostnameFastPath.Load() && nodeinfo.PodHasRequiredNonHostScopedAntiAffinity(pod) {
		m.podsWithRequiredNonHostScopedAntiAffinity, _ = removeFromSlice(m.podsWithRequiredNonHostScopedAntiAffinity, k)
	}
	var removed fwk.PodInfo
	if m.pods, removed = removeFromSlice(m.pods, k); removed != nil {
		m.update(removed, -1)
		return nil
	}
	return &PodNotFoundError{Pod: pod.Namespace + "/" + pod.Name, Node: nodeName(m.node)}
}

// removeFromSlice is upstream's: swap the last element into the removed
// one's place; nil when the slice empties.
func removeFromSlice(s []fwk.PodInfo, k string) ([]fwk.PodInfo, fwk.PodInfo) {
	var removed fwk.PodInfo
	for i := range s {
		pod := s[i].GetPod()
		if pod == nil || pod.UID == "" {
			continue
		}
		if string(pod.UID) == k {
			removed = s[i]
			s[i] = s[len(s)-1]
			s = s[:len(s)-1]
			break
		}
	}
	if len(s) == 0 {
		return nil, removed
	}
	return s, removed
}

// update is upstream's NodeInfo.update.
func (m *MutableNodeInfo) update(podInfo fwk.PodInfo, sign int64) {
	res := podInfo.CalculateResource()
	if r := res.Resource; r != nil {
		m.requested.MilliCPU += sign * r.GetMilliCPU()
		m.requested.Memory += sign * r.GetMemory()
		m.requested.EphemeralStorage += sign * r.GetEphemeralStorage()
		scalars := r.GetScalarResources()
		if m.requested.ScalarResources == nil && len(scalars) > 0 {
			m.requested.ScalarResources = map[v1.ResourceName]int64{}
		}
		for name, q := range scalars {
			m.requested.ScalarResources[name] += sign * q
		}
	}
	m.nonZeroRequested.MilliCPU += sign * res.Non0CPU
	m.nonZeroRequested.Memory += sign * res.Non0Mem

	ports, pvcs := portsAndClaims(podInfo)
	for _, p := range ports {
		if sign > 0 {
			m.usedPorts.Add(p.IP, string(p.Protocol), p.Port)
		} else {
			m.usedPorts.Remove(p.IP, string(p.Protocol), p.Port)
		}
	}
	for _, key := range pvcs {
		if sign > 0 {
			m.pvcRefCounts[key]++
		} else {
			m.pvcRefCounts[key]--
			if m.pvcRefCounts[key] <= 0 {
				delete(m.pvcRefCounts, key)
			}
		}
	}
	m.generation = nodeinfo.NextGeneration()
}

// portsAndClaims returns the pod's host ports and PVC keys, computed by
// schedcache's framework (the same rules as upstream's GetHostPorts and
// claim keys): precomputed for a schedcache PodInfo, else from the pod.
func portsAndClaims(podInfo fwk.PodInfo) ([]nodeinfo.HostPort, []string) {
	if p, ok := podInfo.(*PodInfo); ok {
		return p.Unwrap().HostPorts(), p.Unwrap().PVCKeys()
	}
	fp, err := nodeinfo.NewPodInfoAnyUID(podInfo.GetPod())
	if err != nil {
		return nil, nil
	}
	return fp.HostPorts(), fp.PVCKeys()
}

// SetNode sets the node object and its allocatable (a nil node is ignored
// and logged).
func (m *MutableNodeInfo) SetNode(node *v1.Node) {
	if m == nil {
		klog.Background().Error(errNilMutable, "SetNode ignored")
		return
	}
	if node == nil {
		klog.Background().Error(nodeinfo.ErrNilNode, "SetNode ignored")
		return
	}
	m.node = node
	m.allocatable = NewResource(nodeinfo.NewResource(node.Status.Allocatable))
	m.declaredFeatures = ndf.DefaultFramework.TryMap(node.Status.DeclaredFeatures)
	m.generation = nodeinfo.NextGeneration()
}
