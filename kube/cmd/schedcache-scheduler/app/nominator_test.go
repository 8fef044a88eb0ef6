package app

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

func pendingPod(name, nominated string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "d", UID: types.UID(name)},
		Status: v1.PodStatus{NominatedNodeName: nominated}}
}

func podNames(pis []fwk.PodInfo) []string {
	var out []string
	for _, pi := range pis {
		out = append(out, pi.GetPod().Name)
	}
	return out
}

// The nominator follows upstream's modes: ModeOverride takes the
// nominating info's node, otherwise the pod's status; an assigned pod, a
// deleted one or an empty node drops the nomination; handed-out slices
// never change.
func TestNominator(t *testing.T) {
	n := newNominator()
	logger := klog.Background()
	info := func(p *v1.Pod) fwk.PodInfo {
		pi, err := framework.NewPodInfo(p)
		require.NoError(t, err)
		return pi
	}
	a, b := pendingPod("a", "n1"), pendingPod("b", "")
	n.AddNominatedPod(logger, info(a), nil)
	n.AddNominatedPod(logger, info(b), &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: "n1"})
	held := n.NominatedPodsForNode("n1")
	require.ElementsMatch(t, []string{"a", "b"}, podNames(held))

	n.AddNominatedPod(logger, info(b), &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: "n2"})
	require.Equal(t, []string{"a"}, podNames(n.NominatedPodsForNode("n1")))
	require.Equal(t, []string{"b"}, podNames(n.NominatedPodsForNode("n2")))
	require.ElementsMatch(t, []string{"a", "b"}, podNames(held), "a handed-out slice is never changed")

	// The informer: a bound pod loses its nomination; a status without
	// one clears it; a pod never nominated is not tracked.
	bound := a.DeepCopy()
	bound.Spec.NodeName = "n1"
	n.observe(bound)
	require.Empty(t, n.NominatedPodsForNode("n1"))
	n.observe(pendingPod("b", ""))
	require.Empty(t, n.NominatedPodsForNode("n2"))
	n.observe(pendingPod("c", ""))
	require.Empty(t, n.byUID)

	n.observe(pendingPod("c", "n3"))
	require.Equal(t, "n3", n.nominated("c"))
	n.DeleteNominatedPodIfExists(pendingPod("c", ""))
	require.Empty(t, n.byNode)
}
