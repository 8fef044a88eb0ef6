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
		cpuMemOnly(pod)
	}
}

// cpuMemOnly deletes every name but cpu and memory from every list of pod
// the requests are read from: containers' and init containers' requests,
// overhead, and statuses' resources.
func cpuMemOnly(pod *v1.Pod) {
	keep := func(rl v1.ResourceList) {
		for name := range rl {
			if name != v1.ResourceCPU && name != v1.ResourceMemory {
				delete(rl, name)
			}
		}
	}
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			keep(cs[i].Resources.Requests)
		}
	}
	keep(pod.Spec.Overhead)
	for _, st := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range st {
			if st[i].Resources != nil {
				keep(st[i].Resources.Requests)
			}
			keep(st[i].AllocatedResources)
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
		requireExact(t, pod, req, c0, m0, fmt.Sprint("pod ", i))
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
			requireExact(t, tc.pod, req, c0, m0, tc.name)
		})
	}
}

// initish strips from a random pod, each with probability 3/4, what
// plainInitPodRequests refuses: pod-level resources, and every name but
// cpu and memory in any list it reads (init containers and overhead
// included).
func initish(r *rand.Rand, pod *v1.Pod) {
	if r.IntN(4) > 0 {
		pod.Spec.Resources = nil
	}
	if r.IntN(4) > 0 {
		cpuMemOnly(pod)
	}
}

// The int64 path for init containers and overhead gives exactly the exact
// path's requests and non-zero amounts on every pod it accepts, accepts
// pods with init containers, sidecars and overhead, and refuses the rest.
func TestPlainInitPodRequestsMatchExact(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 13))
	accepted, refused, withInit, withOverhead := 0, 0, 0, 0
	for i := range 20000 {
		pod := genPod(r, fmt.Sprint(i), "ns")
		initish(r, pod)
		req, c0, m0, ok := plainInitPodRequests(pod)
		if !ok {
			refused++
			continue
		}
		accepted++
		if len(pod.Spec.InitContainers) > 0 {
			withInit++
		}
		if len(pod.Spec.Overhead) > 0 {
			withOverhead++
		}
		requireExact(t, pod, req, c0, m0, fmt.Sprint("pod ", i))
	}
	require.Greater(t, accepted, 2000)
	require.Greater(t, refused, 2000)
	require.Greater(t, withInit, 500)
	require.Greater(t, withOverhead, 500)
}

// Edge cases of the init path: a sidecar's sum runs through later init
// containers; plain init containers and sidecars both use their status
// (actuated total: max(1 + 3, 3, 7 + 3) = 10 cpu); overhead adds to both
// the plain and the defaulted amounts; and the refusals.
func TestPlainInitPodRequestsEdges(t *testing.T) {
	ctr := func(name string, rl v1.ResourceList) v1.Container {
		return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: rl}}
	}
	always := v1.ContainerRestartPolicyAlways
	side := func(name string, rl v1.ResourceList) v1.Container {
		c := ctr(name, rl)
		c.RestartPolicy = &always
		return c
	}
	q := resource.MustParse
	huge := *resource.NewQuantity(math.MaxInt64-5, resource.DecimalSI)
	status := v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{
		{Name: "i", Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("7")}}},
		{Name: "s", Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("3")}}},
	}}
	cases := []struct {
		name         string
		pod          *v1.Pod
		ok           bool
		cpu, mem, c0 int64
	}{
		{"sidecar then init", &v1.Pod{Spec: v1.PodSpec{
			Containers:     []v1.Container{ctr("a", v1.ResourceList{"cpu": q("1")})},
			InitContainers: []v1.Container{side("s", v1.ResourceList{"cpu": q("500m")}), ctr("i", v1.ResourceList{"cpu": q("2")})},
		}}, true, 2500, 0, 2500},
		{"statuses: init and sidecar both use theirs", &v1.Pod{Spec: v1.PodSpec{
			Containers:     []v1.Container{ctr("a", v1.ResourceList{"cpu": q("1")})},
			InitContainers: []v1.Container{side("s", v1.ResourceList{"cpu": q("500m")}), ctr("i", v1.ResourceList{"cpu": q("1")})},
		}, Status: status}, true, 10000, 0, 10000},
		{"overhead only", &v1.Pod{Spec: v1.PodSpec{Overhead: v1.ResourceList{"cpu": q("10m"), "memory": q("16Mi")}}}, true, 10, 16 << 20, 10},
		{"negative init", &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{ctr("i", v1.ResourceList{"cpu": q("-1")})}}}, true, -1000, 0, -1000},
		{"overhead with ephemeral storage", &v1.Pod{Spec: v1.PodSpec{Overhead: v1.ResourceList{"cpu": q("1"), "ephemeral-storage": q("1Gi")}}}, false, 0, 0, 0},
		{"init with a gpu", &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{ctr("i", v1.ResourceList{"nvidia.com/gpu": q("1")})}}}, false, 0, 0, 0},
		{"fractional overhead", &v1.Pod{Spec: v1.PodSpec{Overhead: v1.ResourceList{"cpu": q("0.5m")}}}, false, 0, 0, 0},
		{"sidecar sum past int64", &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{side("s", v1.ResourceList{"memory": huge}), side("t", v1.ResourceList{"memory": huge})}}}, false, 0, 0, 0},
		{"pod-level", &v1.Pod{Spec: v1.PodSpec{Resources: &v1.ResourceRequirements{}, InitContainers: []v1.Container{ctr("i", nil)}}}, false, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, c0, m0, ok := plainInitPodRequests(tc.pod)
			require.Equal(t, tc.ok, ok)
			if !ok {
				return
			}
			require.Equal(t, tc.cpu, req.MilliCPU)
			require.Equal(t, tc.mem, req.Memory)
			require.Equal(t, tc.c0, c0)
			requireExact(t, tc.pod, req, c0, m0, tc.name)
		})
	}
}

// requireExact fails t unless req, non0CPU and non0Mem are what the exact
// path computes for pod.
func requireExact(t *testing.T, pod *v1.Pod, req Resource, non0CPU, non0Mem int64, msg string) {
	t.Helper()
	wreq, wc0, wm0 := podRequestsExact(pod)
	require.Equal(t, wreq, req, "%s: requests", msg)
	require.Equal(t, wc0, non0CPU, "%s: non-zero cpu", msg)
	require.Equal(t, wm0, non0Mem, "%s: non-zero memory", msg)
}
