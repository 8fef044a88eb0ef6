package app

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// nominator is the frameworks' fwk.PodNominator: the pending pods of the
// profiles that preemption nominated to a node (status.nominatedNodeName,
// or the PostFilter result before the API server shows it).
// RunFilterPluginsWithNominatedPods counts them on their node, so that
// pods of lower priority do not take the room freed for them, and
// DefaultPreemption clears the nominations of lower-priority pods on the
// node it preempts on. Fed by the pod informer's handlers and by the
// scheduling loop.
//
// Contract: safe for concurrent use (Filter reads it from the
// parallelizer's goroutines); the slices it hands out are never changed.
type nominator struct {
	mu     sync.RWMutex
	byNode map[string][]fwk.PodInfo // guarded by mu; each slice replaced, never changed
	byUID  map[types.UID]string     // guarded by mu: pod -> node
}

func newNominator() *nominator {
	return &nominator{byNode: map[string][]fwk.PodInfo{}, byUID: map[types.UID]string{}}
}

// set nominates pod to node; "" (or an assigned or deleted pod) drops
// its nomination.
func (n *nominator) set(pod *v1.Pod, node string) {
	var pi fwk.PodInfo
	if node != "" && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
		p, err := framework.NewPodInfo(pod)
		if err != nil {
			node = "" // a pod the framework cannot read is never scheduled either
		} else {
			pi = p
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
	n.byNode[node] = append(slices.Clip(n.byNode[node]), pi)
}

// dropLocked forgets uid's nomination; mu is held.
func (n *nominator) dropLocked(uid types.UID) {
	node, ok := n.byUID[uid]
	if !ok {
		return
	}
	delete(n.byUID, uid)
	old := n.byNode[node]
	out := make([]fwk.PodInfo, 0, len(old))
	for _, pi := range old {
		if pi.GetPod().UID != uid {
			out = append(out, pi)
		}
	}
	if len(out) == 0 {
		delete(n.byNode, node)
	} else {
		n.byNode[node] = out
	}
}

// nominated returns pod's nominated node ("" none).
func (n *nominator) nominated(uid types.UID) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byUID[uid]
}

// AddNominatedPod: as upstream's, the nominating info's node in
// ModeOverride, else the pod's status.nominatedNodeName.
func (n *nominator) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	pod := pi.GetPod()
	node := pod.Status.NominatedNodeName
	if ni.Mode() == fwk.ModeOverride {
		node = ni.NominatedNodeName
	}
	n.set(pod, node)
}

func (n *nominator) DeleteNominatedPodIfExists(pod *v1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropLocked(pod.UID)
}

// UpdateNominatedPod keeps the nomination of an updated pod, with the new
// pod object.
func (n *nominator) UpdateNominatedPod(_ klog.Logger, _ *v1.Pod, pi fwk.PodInfo) {
	if node := n.nominated(pi.GetPod().UID); node != "" {
		n.set(pi.GetPod(), node)
	}
}

func (n *nominator) NominatedPodsForNode(node string) []fwk.PodInfo {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byNode[node]
}

// observe follows a pending pod of the profiles from the informer: its
// status.nominatedNodeName becomes its nomination (an update by another
// replica, or this one's patch coming back), unless it is assigned or
// being deleted.
func (n *nominator) observe(pod *v1.Pod) {
	if pod.Status.NominatedNodeName != "" || n.nominated(pod.UID) != "" {
		n.set(pod, pod.Status.NominatedNodeName)
	}
}
