package nodeinfo

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The rules of a pod's requests that changed between upstream v1.35.4 and
// v1.37.2 (semantics 4.2, 4.3), one case list per rule. Every figure was
// measured on upstream k8s.io/kubernetes v1.37.2 with the default feature
// gates: framework.NewPodInfo(pod).CalculateResource() (Resource, Non0CPU,
// Non0Mem), and the same amounts from NodeInfo.AddPod on an empty
// NodeInfo. The functions named are those of k8s.io/component-helpers
// v0.37.2 resource unless a package is given.

// v137Case is one pod and what upstream v1.37.2 computes for it.
type v137Case struct {
	rule, name       string
	pod              *v1.Pod
	want             Resource
	non0CPU, non0Mem int64
}

// statusEntry returns a container status named name with the given
// resources (nil: none) and allocatedResources.
func statusEntry(name string, res *v1.ResourceRequirements, allocated v1.ResourceList) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, Resources: res, AllocatedResources: allocated}
}

func requests(rl v1.ResourceList) *v1.ResourceRequirements {
	return &v1.ResourceRequirements{Requests: rl}
}

func withStatuses(st ...v1.ContainerStatus) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st...) }
}

func withInitStatuses(st ...v1.ContainerStatus) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, st...) }
}

// withPodStatus sets the pod-level status.resources (nil: unset) and
// status.allocatedResources.
func withPodStatus(res *v1.ResourceRequirements, allocated v1.ResourceList) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Status.Resources, p.Status.AllocatedResources = res, allocated }
}

var infeasible = withResizePending(v1.PodReasonInfeasible)

var v137Cases = []v137Case{
	// AggregateContainerRequests: the spec, actuated and allocated lists are
	// each aggregated over the whole pod (aggregateContainerResourcesByFn
	// with containerSpecRequests, containerActuatedRequests and
	// containerAllocatedRequests), then maxed per name. v1.35.4 took the
	// maximum per container and summed those.
	{
		rule: "whole-pod totals", name: "two containers, spec 1 and 2, status 2 and 1",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "1")), ctr("b", rl("cpu", "2"))),
			withStatuses(statusEntry("a", requests(rl("cpu", "2")), rl("cpu", "2")), statusEntry("b", requests(rl("cpu", "1")), rl("cpu", "1")))),
		want: Resource{MilliCPU: 3000}, non0CPU: 3000, non0Mem: 400 * mi, // v1.35.4: 4000
	},
	{
		rule: "whole-pod totals", name: "cpu from the actuated total, memory from the allocated total",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "1", "memory", "1Gi")), ctr("b", rl("cpu", "1", "memory", "1Gi"))),
			withStatuses(statusEntry("a", requests(rl("cpu", "2", "memory", "1Gi")), rl("cpu", "1", "memory", "1Gi")),
				statusEntry("b", requests(rl("cpu", "500m", "memory", "1Gi")), rl("cpu", "1", "memory", "3Gi")))),
		want: Resource{MilliCPU: 2500, Memory: 4096 * mi}, non0CPU: 2500, non0Mem: 4096 * mi, // v1.35.4: cpu 3000
	},
	{
		rule: "whole-pod totals", name: "sidecar statuses join the actuated total",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "1"))), withInit(sidecar("s", rl("cpu", "2"))),
			withStatuses(statusEntry("a", requests(rl("cpu", "3")), nil)), withInitStatuses(statusEntry("s", requests(rl("cpu", "500m")), nil))),
		want: Resource{MilliCPU: 3500}, non0CPU: 3500, non0Mem: 400 * mi, // v1.35.4: 5000
	},
	{
		// applyNonMissing is applied to every container's list of each kind:
		// the actuated list {memory: 1Ki} gets the cpu default, the spec and
		// allocated lists (both empty) get both defaults.
		rule: "whole-pod totals", name: "non-zero defaults per list, before the maximum",
		pod:  mkPod("u", withContainers(ctr("c", nil)), withStatuses(statusEntry("c", requests(rl("memory", "1Ki")), nil))),
		want: Resource{Memory: 1024}, non0CPU: 100, non0Mem: 200 * mi, // v1.35.4: non-zero memory 1024
	},

	// aggregateContainerResourcesByFn reads the status entry of every
	// container, plain init containers included.
	{
		rule: "plain init container statuses", name: "allocated cpu 3 of a plain init container",
		pod: mkPod("u", withContainers(ctr("c", rl("cpu", "500m"))), withInit(ctr("i", rl("cpu", "1"))),
			withInitStatuses(statusEntry("i", nil, rl("cpu", "3")))),
		want: Resource{MilliCPU: 3000}, non0CPU: 3000, non0Mem: 200 * mi, // v1.35.4: 1000
	},
	{
		rule: "plain init container statuses", name: "actuated cpu 900m of a plain init container before a sidecar",
		pod: mkPod("u", withInit(ctr("i", rl("cpu", "100m")), sidecar("s", rl("cpu", "10m"))),
			withInitStatus("i", rl("cpu", "900m"), nil), withInitStatus("s", rl("cpu", "40m"), nil)),
		want: Resource{MilliCPU: 900}, non0CPU: 900, non0Mem: 200 * mi, // v1.35.4: 100
	},

	// findContainerStatus: the first container status of that name, else
	// the first init container status (v1.35.4 indexed both lists by name,
	// init statuses last, so the last init status won).
	{
		rule: "status lookup", name: "a container status wins over an init container status of the same name",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m"))),
			withStatus("a", rl("cpu", "700m"), nil), withInitStatus("a", rl("cpu", "300m"), nil)),
		want: Resource{MilliCPU: 700}, non0CPU: 700, non0Mem: 200 * mi, // v1.35.4: 300
	},
	{
		rule: "status lookup", name: "the first of two entries of one name",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m"))),
			withStatus("a", rl("cpu", "2"), nil), withStatus("a", rl("cpu", "5"), nil)),
		want: Resource{MilliCPU: 2000}, non0CPU: 2000, non0Mem: 200 * mi, // v1.35.4: 5000
	},
	{
		rule: "status lookup", name: "an init container named like a regular container reads the regular status",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m"))), withInit(ctr("a", rl("cpu", "1"))),
			withStatus("a", rl("cpu", "200m"), nil), withInitStatus("a", rl("cpu", "5"), nil)),
		want: Resource{MilliCPU: 1000}, non0CPU: 1000, non0Mem: 200 * mi, // v1.35.4: 5000
	},

	// containerActuatedRequests falls back to the status entry's
	// allocatedResources when resources.requests is unset; an entry
	// without resources counts (v1.35.4 ignored it).
	{
		rule: "actuated falls back to allocated", name: "status with allocatedResources only",
		pod:  mkPod("u", withContainers(ctr("a", rl("cpu", "100m"))), withStatuses(statusEntry("a", nil, rl("cpu", "900m")))),
		want: Resource{MilliCPU: 900}, non0CPU: 900, non0Mem: 200 * mi, // v1.35.4: 100
	},

	// IsPodResizeInfeasible: the spec total is left out, and a container
	// without allocated (or actuated) status contributes nothing to those
	// totals, only the non-zero defaults (containerAllocatedRequests and
	// containerActuatedRequests return nil).
	{
		rule: "infeasible resize", name: "container without status adds nothing",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "1")), ctr("b", rl("cpu", "2"))),
			withStatuses(statusEntry("a", nil, rl("cpu", "1500m"))), infeasible),
		want: Resource{MilliCPU: 1500}, non0CPU: 1600, non0Mem: 400 * mi, // v1.35.4: 3000, non-zero 3000
	},
	{
		rule: "infeasible resize", name: "no statuses at all",
		pod:  mkPod("u", withContainers(ctr("a", rl("cpu", "1", "memory", "1Gi"))), infeasible),
		want: Resource{}, non0CPU: 100, non0Mem: 200 * mi, // v1.35.4: 1000 and 1Gi
	},
	{
		rule: "infeasible resize", name: "a Deferred PodResizePending condition first decides",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "1", "memory", "1Gi"))),
			withResizePending(v1.PodReasonDeferred, v1.PodReasonInfeasible)),
		want: Resource{MilliCPU: 1000, Memory: 1024 * mi}, non0CPU: 1000, non0Mem: 1024 * mi,
	},

	// AggregateContainerRequests with InPlacePodLevelResourcesVerticalScaling
	// (beta, on by default since v1.36): with status.allocatedResources,
	// status.resources and status.resources.requests all set (empty lists
	// included), those two lists are the allocated and actuated totals, as
	// they are, without the non-zero defaults; container statuses are not
	// read.
	{
		rule: "pod-level status totals", name: "actuated 3, allocated 2, spec 1; container allocated 5 unread",
		pod: mkPod("u", withContainers(ctr("c", rl("cpu", "1"))), withStatuses(statusEntry("c", nil, rl("cpu", "5"))),
			withPodStatus(requests(rl("cpu", "3")), rl("cpu", "2"))),
		want: Resource{MilliCPU: 3000}, non0CPU: 3000, non0Mem: 200 * mi, // v1.35.4: 1000
	},
	{
		rule: "pod-level status totals", name: "empty lists still replace the container statuses",
		pod: mkPod("u", withContainers(ctr("c", rl("cpu", "1"))), withStatus("c", rl("cpu", "5"), rl("cpu", "5")),
			withPodStatus(requests(v1.ResourceList{}), v1.ResourceList{})),
		want: Resource{MilliCPU: 1000}, non0CPU: 1000, non0Mem: 200 * mi, // v1.35.4: 5000
	},
	{
		rule: "pod-level status totals", name: "names beyond cpu and memory count",
		pod: mkPod("u", withContainers(ctr("c", nil)),
			withPodStatus(requests(v1.ResourceList{}), rl("ephemeral-storage", "512", "example.com/gpu", "1"))),
		want: Resource{EphemeralStorage: 512}.WithScalar("example.com/gpu", 1), non0CPU: 100, non0Mem: 200 * mi, // v1.35.4: none
	},
	{
		rule: "pod-level status totals", name: "no defaults for the pod-level lists",
		pod:  mkPod("u", withPodStatus(requests(rl("cpu", "50m")), rl("cpu", "50m"))),
		want: Resource{MilliCPU: 50}, non0CPU: 50, non0Mem: 0, // v1.35.4: 0
	},
	{
		rule: "pod-level status totals", name: "infeasible: the spec total left out",
		pod: mkPod("u", withContainers(ctr("c", rl("cpu", "5"))),
			withPodStatus(requests(rl("cpu", "1")), rl("cpu", "2")), infeasible),
		want: Resource{MilliCPU: 2000}, non0CPU: 2000, non0Mem: 0, // v1.35.4: 5000, non-zero memory 200Mi
	},
	{
		rule: "pod-level status totals", name: "allocatedResources unset: container statuses are read",
		pod: mkPod("u", withContainers(ctr("c", rl("cpu", "1"))), withStatuses(statusEntry("c", nil, rl("cpu", "2"))),
			withPodStatus(requests(rl("cpu", "9")), nil)),
		want: Resource{MilliCPU: 2000}, non0CPU: 2000, non0Mem: 200 * mi, // v1.35.4: 1000
	},

	// PodRequests with pod-level requests in effect: once status.resources
	// is set, the effective pod-level list is the per-name maximum of
	// spec.resources.requests (left out when the resize is infeasible),
	// status.resources.requests and status.allocatedResources
	// (effectivePodLevelResources); its cpu, memory and hugepages-*
	// replace the aggregate's (applyPodLevelResources). v1.35.4 read
	// spec.resources.requests only.
	{
		rule: "pod-level effective requests", name: "status memory sets a name the spec does not",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "500m", "memory", "50Mi"))), withPodRequests(rl("cpu", "1")),
			withPodStatus(requests(rl("memory", "100Mi")), nil)),
		want: Resource{MilliCPU: 1000, Memory: 100 * mi}, non0CPU: 1000, non0Mem: 100 * mi, // v1.35.4: memory 50Mi
	},
	{
		rule: "pod-level effective requests", name: "infeasible: spec cpu 2 left out for status cpu 1",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "500m"))), withPodRequests(rl("cpu", "2")),
			withPodStatus(requests(rl("cpu", "1")), nil), infeasible),
		want: Resource{MilliCPU: 1000}, non0CPU: 1000, non0Mem: 200 * mi, // v1.35.4: 2000
	},
	{
		rule: "pod-level effective requests", name: "status.resources without requests: allocated cpu 3 joins",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "500m"))), withPodRequests(rl("cpu", "1")),
			withPodStatus(&v1.ResourceRequirements{}, rl("cpu", "3"))),
		want: Resource{MilliCPU: 3000}, non0CPU: 3000, non0Mem: 200 * mi, // v1.35.4: 1000
	},
	{
		rule: "pod-level effective requests", name: "hugepages from the status",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "500m", "hugepages-2Mi", "2Mi"))), withPodRequests(rl("cpu", "1", "hugepages-2Mi", "2Mi")),
			withPodStatus(requests(rl("hugepages-2Mi", "4Mi")), nil)),
		want: Resource{MilliCPU: 1000}.WithScalar("hugepages-2Mi", 4*mi), non0CPU: 1000, non0Mem: 200 * mi, // v1.35.4: 2Mi
	},

	// pkg/scheduler/framework PodInfo.CalculateResource sets
	// UseDRANodeAllocatableResourceClaimStatus from
	// DRANodeAllocatableResources, alpha and off by default at v1.37.2:
	// addDRANodeAllocatableClaimResources adds nothing.
	{
		rule: "DRA claim statuses", name: "not read with the default gates",
		pod: mkPod("u", withContainers(ctr("a", rl("cpu", "1"))), func(p *v1.Pod) {
			q := resource.MustParse("1")
			p.Status.NodeAllocatableResourceClaimStatuses = []v1.NodeAllocatableResourceClaimStatus{{
				ResourceClaimName: "claim", Containers: []string{"a"},
				Mapping: []v1.NodeAllocatableMappedResources{{Name: v1.ResourceCPU, Quantity: &q}},
			}}
		}),
		want: Resource{MilliCPU: 1000}, non0CPU: 1000, non0Mem: 200 * mi, // 2000 with the gate on
	},
}

func TestRequestsV137(t *testing.T) {
	for _, tc := range v137Cases {
		t.Run(tc.rule+"/"+tc.name, func(t *testing.T) {
			before := tc.pod.DeepCopy()
			p := mustPodInfo(t, tc.pod)
			require.Equal(t, tc.want, p.Requests(), "requests: want %v got %v", tc.want, p.Requests())
			require.Equal(t, tc.non0CPU, p.NonZeroCPU(), "non-zero cpu")
			require.Equal(t, tc.non0Mem, p.NonZeroMemory(), "non-zero memory")
			require.Equal(t, before, tc.pod, "the pod was modified")
			// The node totals take the same amounts.
			s := NewNodeState(NextGeneration)
			s.AddPod(p)
			ni := s.Freeze()
			require.Equal(t, tc.want.MilliCPU, ni.Requested().MilliCPU)
			require.Equal(t, tc.non0CPU, ni.NonZeroRequested().MilliCPU)
			require.Equal(t, tc.non0Mem, ni.NonZeroRequested().Memory)
		})
	}
}

// withRandomPodStatus sets, each with probability 3/4, the pod-level
// status lists upstream reads (status.resources with its requests, and
// status.allocatedResources), nil and empty lists included.
func withRandomPodStatus(r *rand.Rand, pod *v1.Pod) {
	if r.IntN(4) > 0 {
		pod.Status.Resources = &v1.ResourceRequirements{Requests: genList(r, 2)}
	}
	if r.IntN(4) > 0 {
		pod.Status.AllocatedResources = genList(r, 2)
	}
}

// The int64 paths give exactly the exact path's amounts on pods with
// pod-level status lists, which gen_test's pods lack, and accept such
// pods when their lists are plain.
func TestPlainMatchesExactWithPodStatus(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 2))
	var accepted, fromPodStatus [2]int
	for i := range 40000 {
		pod := genPod(r, fmt.Sprint(i), "ns")
		withRandomPodStatus(r, pod)
		if i%2 == 0 {
			plainish(r, pod)
		} else {
			initish(r, pod)
		}
		for j, plain := range []func(*v1.Pod) (Resource, int64, int64, bool){plainPodRequests, plainInitPodRequests} {
			req, c0, m0, ok := plain(pod)
			if !ok {
				continue
			}
			accepted[j]++
			if podStatusTotals(pod) {
				fromPodStatus[j]++
			}
			requireExact(t, pod, req, c0, m0, fmt.Sprint("pod ", i, " path ", j))
		}
	}
	for j := range 2 {
		require.Greater(t, accepted[j], 2000, "path %d", j)
		require.Greater(t, fromPodStatus[j], 500, "path %d", j)
	}
}
