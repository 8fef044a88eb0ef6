package nodeinfo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// plainish strips from a random pod, each with probability 3/4, what
// plainPodRequests refuses, so that both of its answers are common.
func plainish(r *rand.Rand, pod *v1.Pod) {
	if r.IntN(4) > 0 {
		pod.Spec.InitContainers = nil
		pod.Spec.Overhead = nil
		pod.Spec.Resources = nil
	}
	if r.IntN(4) == 0 {
		for _, st := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
			for i := range st {
				st[i].Resources = nil
			}
		}
	}
	if r.IntN(4) > 0 {
		cpuMem := func(rl v1.ResourceList) {
			for name := range rl {
				if name != v1.ResourceCPU && name != v1.ResourceMemory {
					delete(rl, name)
				}
			}
		}
		for i := range pod.Spec.Containers {
			cpuMem(pod.Spec.Containers[i].Resources.Requests)
		}
		for _, st := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
			for i := range st {
				if st[i].Resources != nil {
					cpuMem(st[i].Resources.Requests)
				}
				cpuMem(st[i].AllocatedResources)
			}
		}
	}
}

// The int64 path gives exactly the exact path's requests and non-zero
// amounts on every pod it accepts, and accepts the common pod.
func TestPlainPodRequestsMatchExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	accepted, refused := 0, 0
	for i := range 20000 {
		pod := genPod(r, fmt.Sprint(i), "ns")
		plainish(r, pod)
		req, c0, m0, ok := plainPodRequests(pod)
		if !ok {
			refused++
			continue
		}
		accepted++
		wreq, wc0, wm0 := podRequestsExact(pod)
		require.Equal(t, wreq, req, "pod %d requests", i)
		require.Equal(t, wc0, c0, "pod %d non-zero cpu", i)
		require.Equal(t, wm0, m0, "pod %d non-zero memory", i)
	}
	require.Greater(t, accepted, 2000)
	require.Greater(t, refused, 2000)
}

// Edge cases: no containers; empty and nil lists; a key other than cpu
// and memory; amounts that are not whole units; sums past int64; a
// status with resources; negative amounts.
func TestPlainPodRequestsEdges(t *testing.T) {
	ctr := func(rl v1.ResourceList) v1.Container {
		return v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: rl}}
	}
	q := resource.MustParse
	huge := *resource.NewQuantity(math.MaxInt64-5, resource.DecimalSI)
	cases := []struct {
		name string
		pod  *v1.Pod
		ok   bool
	}{
		{"no containers", &v1.Pod{}, true},
		{"nil and empty lists", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(nil), ctr(v1.ResourceList{})}}}, true},
		{"cpu and memory", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"cpu": q("250m"), "memory": q("1Gi")}), ctr(v1.ResourceList{"cpu": q("2")})}}}, true},
		{"negative", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"cpu": q("-1"), "memory": q("-5")})}}}, true},
		{"ephemeral storage", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"cpu": q("1"), "ephemeral-storage": q("1Gi")})}}}, false},
		{"extended", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"example.com/x": q("1")})}}}, false},
		{"half a millicore", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"cpu": q("0.5m")})}}}, false},
		{"fractional byte", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"memory": q("1500m")})}}}, false},
		{"memory sum past int64", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"memory": huge}), ctr(v1.ResourceList{"memory": huge})}}}, false},
		{"non-zero default past int64", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"cpu": q("1"), "memory": huge}), ctr(nil)}}}, false},
		{"status resources", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"cpu": q("1")})}}, Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "c", Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("2"), "memory": q("1Mi")}}, AllocatedResources: v1.ResourceList{"memory": q("2Mi")}}}}}, true},
		{"status resources, infeasible resize", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{"cpu": q("3")})}}, Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodResizePending, Reason: v1.PodReasonInfeasible}}, ContainerStatuses: []v1.ContainerStatus{{Name: "c", Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("2")}}}}}}, true},
		{"status with a gpu", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(nil)}}, Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "c", Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": q("1")}}}}}}, false},
		{"overhead", &v1.Pod{Spec: v1.PodSpec{Overhead: v1.ResourceList{"cpu": q("1")}}}, false},
		{"pod-level", &v1.Pod{Spec: v1.PodSpec{Resources: &v1.ResourceRequirements{}}}, false},
		{"init container", &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{ctr(nil)}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, c0, m0, ok := plainPodRequests(tc.pod)
			require.Equal(t, tc.ok, ok)
			if !ok {
				return
			}
			wreq, wc0, wm0 := podRequestsExact(tc.pod)
			require.Equal(t, wreq, req)
			require.Equal(t, wc0, c0)
			require.Equal(t, wm0, m0)
		})
	}
}
