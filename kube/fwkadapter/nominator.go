package fwkadapter

import (
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
)

// Nominator is a fwk.PodNominator: the pending pods preemption nominated
// to a node, which upstream's RunFilterPluginsWithNominatedPods counts on
// that node (so that pods of lower priority do not take the room freed
// for them) and whose nominations DefaultPreemption clears when it
// preempts for a pod of higher priority. It follows upstream's modes: a
// NominatingInfo in ModeOverride gives the node, otherwise the pod's
// status.nominatedNodeName; an assigned pod, a pod being deleted, a pod
// whose affinity does not parse (upstream's NewPodInfo refuses it) or an
// empty node drops the nomination.
//
// Contract: safe for concurrent use (Filter reads it from the
// parallelizer's goroutines); the slices it hands out are never changed.
// The zero Nominator is not usable: make one with NewNominator.
type Nominator struct {
	n      atomic.Int64             // pods nominated: a lock-free answer when none is
	mu     sync.RWMutex             // guards the maps
	byNode map[string][]fwk.PodInfo // guarded by mu; each slice replaced, never changed
	byUID  map[types.UID]string     // guarded by mu: pod -> node
	byKey  map[string]*v1.Pod       // guarded by mu: "namespace/name" -> pod
}

var _ fwk.PodNominator = (*Nominator)(nil)

// NewNominator returns an empty Nominator.
func NewNominator() *Nominator {
	return &Nominator{byNode: map[string][]fwk.PodInfo{}, byUID: map[types.UID]string{}, byKey: map[string]*v1.Pod{}}
}

// Set nominates pod to node; node "" (or an assigned, deleted or
// unreadable pod) drops its nomination. A nil pod is ignored.
func (n *Nominator) Set(pod *v1.Pod, node string) {
	if pod == nil {
		return
	}
	var pi fwk.PodInfo
	if node != "" && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
		p, err := nodeinfo.NewPodInfo(pod)
		if err == nil {
			err = (*PodInfo)(p).AffinityParseError()
		}
		if err != nil {
			node = "" // a pod the framework cannot read is never scheduled either
		} else {
			pi = WrapPod(p)
		}
	} else {
		node = ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropLocked(pod.UID)
	if node == "" {
		return
	}
	n.byUID[pod.UID] = node
	n.byKey[pod.Namespace+"/"+pod.Name] = pod
	n.n.Add(1)
	n.byNode[node] = append(slices.Clip(n.byNode[node]), pi)
}

// dropLocked forgets uid's nomination; mu is held.
func (n *Nominator) dropLocked(uid types.UID) {
	node, ok := n.byUID[uid]
	if !ok {
		return
	}
	delete(n.byUID, uid)
	n.n.Add(-1)
	old := n.byNode[node]
	out := make([]fwk.PodInfo, 0, len(old))
	for _, pi := range old {
		if p := pi.GetPod(); p.UID == uid {
			delete(n.byKey, p.Namespace+"/"+p.Name)
			continue
		}
		out = append(out, pi)
	}
	if len(out) == 0 {
		delete(n.byNode, node)
	} else {
		n.byNode[node] = out
	}
}

// Len returns the number of pods nominated (lock-free).
func (n *Nominator) Len() int { return int(n.n.Load()) }

// Has reports whether pods are nominated to node.
func (n *Nominator) Has(node string) bool {
	if n.n.Load() == 0 {
		return false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return len(n.byNode[node]) > 0
}

// Nominated returns the node the pod of uid is nominated to ("" none).
func (n *Nominator) Nominated(uid types.UID) string {
	if n.n.Load() == 0 {
		return ""
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byUID[uid]
}

// Pod returns the nominated pod "namespace/name", or nil.
func (n *Nominator) Pod(key string) *v1.Pod {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byKey[key]
}

// Observe follows a pending pod as an informer shows it: its
// status.nominatedNodeName becomes its nomination (an update by another
// scheduler, or this one's patch coming back), unless it is assigned or
// being deleted. A pod never nominated and showing none is not tracked.
func (n *Nominator) Observe(pod *v1.Pod) {
	if pod != nil && (pod.Status.NominatedNodeName != "" || n.Nominated(pod.UID) != "") {
		n.Set(pod, pod.Status.NominatedNodeName)
	}
}

// AddNominatedPod implements fwk.PodNominator: the nominating info's node
// in ModeOverride, else the pod's status.nominatedNodeName.
func (n *Nominator) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	pod := pi.GetPod()
	node := pod.Status.NominatedNodeName
	if ni.Mode() == fwk.ModeOverride {
		node = ni.NominatedNodeName
	}
	n.Set(pod, node)
}

// DeleteNominatedPodIfExists implements fwk.PodNominator.
func (n *Nominator) DeleteNominatedPodIfExists(pod *v1.Pod) {
	if pod == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropLocked(pod.UID)
}

// UpdateNominatedPod implements fwk.PodNominator: an updated pod keeps its
// nomination, with the new pod object.
func (n *Nominator) UpdateNominatedPod(_ klog.Logger, _ *v1.Pod, pi fwk.PodInfo) {
	if node := n.Nominated(pi.GetPod().UID); node != "" {
		n.Set(pi.GetPod(), node)
	}
}

// NominatedPodsForNode implements fwk.PodNominator. The slice is shared
// and never changed.
func (n *Nominator) NominatedPodsForNode(node string) []fwk.PodInfo {
	if n.n.Load() == 0 {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byNode[node]
}
