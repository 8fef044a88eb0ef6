package fwkadapter_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/kube/fwkadapter"
	"github.com/schedcache/schedcache/nodeinfo"
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

func info(t *testing.T, p *v1.Pod) fwk.PodInfo {
	t.Helper()
	pi, err := nodeinfo.NewPodInfo(p)
	require.NoError(t, err)
	return fwkadapter.WrapPod(pi)
}

// The nominator follows upstream's modes: ModeOverride takes the
// nominating info's node, otherwise the pod's status; an assigned pod, a
// deleted one or an empty node drops the nomination; handed-out slices
// never change.
func TestNominator(t *testing.T) {
	n := fwkadapter.NewNominator()
	logger := klog.Background()
	require.False(t, n.Has("n1"))
	require.Nil(t, n.NominatedPodsForNode("n1"))
	a, b := pendingPod("a", "n1"), pendingPod("b", "")
	n.AddNominatedPod(logger, info(t, a), nil)
	n.AddNominatedPod(logger, info(t, b), &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: "n1"})
	require.Equal(t, 2, n.Len())
	held := n.NominatedPodsForNode("n1")
	require.ElementsMatch(t, []string{"a", "b"}, podNames(held))
	require.True(t, n.Has("n1"))
	require.Same(t, b, n.Pod("d/b"))

	n.AddNominatedPod(logger, info(t, b), &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: "n2"})
	require.Equal(t, []string{"a"}, podNames(n.NominatedPodsForNode("n1")))
	require.Equal(t, []string{"b"}, podNames(n.NominatedPodsForNode("n2")))
	require.ElementsMatch(t, []string{"a", "b"}, podNames(held), "a handed-out slice is never changed")

	// An update keeps the nomination with the new object.
	b2 := b.DeepCopy()
	b2.Labels = map[string]string{"v": "2"}
	n.UpdateNominatedPod(logger, b, info(t, b2))
	require.Equal(t, "n2", n.Nominated("b"))
	require.Same(t, b2, n.Pod("d/b"))

	// The informer: a bound pod loses its nomination; a status without
	// one clears it; a pod never nominated is not tracked.
	bound := a.DeepCopy()
	bound.Spec.NodeName = "n1"
	n.Observe(bound)
	require.Empty(t, n.NominatedPodsForNode("n1"))
	require.False(t, n.Has("n1"))
	n.Observe(pendingPod("b", ""))
	require.Empty(t, n.NominatedPodsForNode("n2"))
	require.Nil(t, n.Pod("d/b"))
	n.Observe(pendingPod("c", ""))
	require.Empty(t, n.Nominated("c"))

	n.Observe(pendingPod("c", "n3"))
	require.Equal(t, "n3", n.Nominated("c"))
	deleting := pendingPod("c", "n3")
	deleting.DeletionTimestamp = &metav1.Time{}
	n.Observe(deleting)
	require.Empty(t, n.Nominated("c"), "a pod being deleted is not nominated")

	n.Set(pendingPod("e", ""), "n4")
	n.DeleteNominatedPodIfExists(pendingPod("e", ""))
	require.False(t, n.Has("n4"))

	// Bad input: nil pods are ignored; a pod whose affinity does not
	// parse is not nominated (upstream's NewPodInfo refuses it).
	n.Set(nil, "n1")
	n.DeleteNominatedPodIfExists(nil)
	n.Observe(nil)
	bad := pendingPod("bad", "")
	bad.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}},
		TopologyKey:   "zone",
	}}}}
	n.Set(bad, "n1")
	require.False(t, n.Has("n1"))
}

// Readers and writers at once (run under -race).
func TestNominatorConcurrent(t *testing.T) {
	n := fwkadapter.NewNominator()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				p := pendingPod(string(rune('a'+w))+string(rune('0'+i%10)), "")
				n.Set(p, "n1")
				_ = n.NominatedPodsForNode("n1")
				_ = n.Has("n1")
				n.DeleteNominatedPodIfExists(p)
			}
		}()
	}
	wg.Wait()
	require.False(t, n.Has("n1"))
}
