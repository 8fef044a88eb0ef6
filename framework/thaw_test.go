package framework

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A thawed NodeInfo aggregates exactly as the NodeState it was frozen
// from, and never changes the NodeInfo.
func TestThaw(t *testing.T) {
	mk := func(uid string, cpu int64, claim string, port int32) *PodInfo {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: "ns"}, Spec: v1.PodSpec{
			Containers: []v1.Container{{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI), "example.com/gpu": *resource.NewQuantity(1, resource.DecimalSI)}},
				Ports: []v1.ContainerPort{{HostPort: port}}}},
			Volumes:  []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			Affinity: &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "k"}}}},
		}}
		pi, err := NewPodInfo(p)
		require.NoError(t, err)
		return pi
	}
	a, b, c := mk("a", 100, "x", 80), mk("b", 200, "y", 81), mk("c", 300, "x", 82)
	ref := NewNodeState(nil)
	ref.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	ref.AddPod(a)
	ref.AddPod(b)
	ni := ref.Freeze()
	before := ni.String()

	th := ni.Thaw(nil)
	require.Same(t, ni, th.Freeze(), "an unchanged thaw freezes to the same NodeInfo")
	require.Equal(t, ni.Generation(), th.Generation())
	require.Equal(t, 1, th.PVCRefCount("ns/x"))
	require.Equal(t, 2, th.NumPodsWithRequiredAntiAffinity())
	for _, s := range []*NodeState{ref, th} {
		s.AddPod(c)
		require.NoError(t, s.RemovePod("a", true, true))
	}
	got, want := th.Freeze(), ref.Freeze()
	require.Equal(t, want.Requested(), got.Requested())
	require.Equal(t, want.NonZeroRequested(), got.NonZeroRequested())
	require.Equal(t, want.UsedPorts(), got.UsedPorts())
	require.Equal(t, want.PVCRefCounts(), got.PVCRefCounts())
	require.Equal(t, want.Pods(), got.Pods())
	require.Equal(t, want.PodsWithRequiredAntiAffinity(), got.PodsWithRequiredAntiAffinity())
	require.Greater(t, got.Generation(), ni.Generation())
	require.Equal(t, before, ni.String(), "the thawed NodeInfo did not change")
	require.Equal(t, 2, ni.NumPods())
}
