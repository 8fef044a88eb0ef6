package nodeinfo

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A pod's requests with DRANodeAllocatableResources on
// (SetDRANodeAllocatableResources): upstream v1.37.2's
// PodInfo.CalculateResource passes the gate to k8s.io/component-helpers
// v0.37.2 resource.PodRequests as UseDRANodeAllocatableResourceClaimStatus,
// and addDRANodeAllocatableClaimResources adds the claim statuses'
// quantities to the spec total and to the allocated total aggregated from
// the containers. The cases port those of component-helpers'
// TestPodRequestsAndLimitsWithDRA and TestPodResourceRequestsWithSharedDRAClaims
// (requests only; limits are not part of the cache) plus the points they
// leave open (actuated totals, infeasible resizes, non-zero requests,
// presence of a zero amount, exactness); bench's TestDiffPodInfoDRA checks
// them all against upstream.

// withDRAGate turns SetDRANodeAllocatableResources to on for t's duration.
func withDRAGate(t *testing.T, on bool) {
	t.Helper()
	was := DRANodeAllocatableResources()
	SetDRANodeAllocatableResources(on)
	t.Cleanup(func() { SetDRANodeAllocatableResources(was) })
}

type claimOpt func(*v1.NodeAllocatableResourceClaimStatus)

func qp(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// mapped adds a mapping of name with quantity q ("": none).
func mapped(name v1.ResourceName, q string) claimOpt {
	return func(c *v1.NodeAllocatableResourceClaimStatus) {
		m := v1.NodeAllocatableMappedResources{Name: name}
		if q != "" {
			m.Quantity = qp(q)
		}
		c.Mapping = append(c.Mapping, m)
	}
}

// overhead adds an overhead of name with perPod and perContainer ("":
// unset).
func overhead(name v1.ResourceName, perPod, perContainer string) claimOpt {
	return func(c *v1.NodeAllocatableResourceClaimStatus) {
		o := v1.NodeAllocatableOverheadResources{Name: name}
		if perPod != "" {
			o.PerPod = qp(perPod)
		}
		if perContainer != "" {
			o.PerContainer = qp(perContainer)
		}
		c.Overhead = append(c.Overhead, o)
	}
}

// withClaim appends a claim status for the named containers.
func withClaim(name string, containers []string, opts ...claimOpt) func(*v1.Pod) {
	return func(p *v1.Pod) {
		c := v1.NodeAllocatableResourceClaimStatus{ResourceClaimName: name, Containers: containers}
		for _, o := range opts {
			o(&c)
		}
		p.Status.NodeAllocatableResourceClaimStatuses = append(p.Status.NodeAllocatableResourceClaimStatuses, c)
	}
}

func cs(names ...string) []string { return names }

// draCase is a pod and what upstream computes for it with the gate on.
type draCase struct {
	name             string
	pod              *v1.Pod
	want             Resource
	non0CPU, non0Mem int64
}

var draCases = []draCase{
	// component-helpers TestPodRequestsAndLimitsWithDRA.
	{
		name: "no claim statuses",
		pod:  mkPod("u", withContainers(ctr("c1", rl("cpu", "100m", "memory", "1Gi")))),
		want: Resource{MilliCPU: 100, Memory: 1024 * mi}, non0CPU: 100, non0Mem: 1024 * mi,
	},
	{
		name: "one claim of one container: its cpu and hugepages join",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "100m", "memory", "1Gi", "hugepages-1Gi", "2"))),
			withClaim("claim-1", cs("c1"), mapped("cpu", "50m"), mapped("hugepages-1Gi", "1"))),
		want: Resource{MilliCPU: 150, Memory: 1024 * mi}.WithScalar("hugepages-1Gi", 3), non0CPU: 150, non0Mem: 1024 * mi,
	},
	{
		name: "two claims of one container add up",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "100m", "memory", "1Gi"))),
			withClaim("claim-1", cs("c1"), mapped("cpu", "50m")),
			withClaim("claim-2", cs("c1"), mapped("cpu", "25m"), mapped("memory", "512Mi"))),
		want: Resource{MilliCPU: 175, Memory: 1536 * mi}, non0CPU: 175, non0Mem: 1536 * mi,
	},
	{
		name: "a claim shared by two containers counts once",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "100m")), ctr("c2", rl("cpu", "200m"))),
			withClaim("claim-1", cs("c1", "c2"), mapped("cpu", "50m"))),
		want: Resource{MilliCPU: 350}, non0CPU: 350, non0Mem: 400 * mi,
	},
	{
		name: "a claim for each of two containers",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "100m", "hugepages-1Gi", "1")), ctr("c2", rl("cpu", "200m", "memory", "1Gi", "hugepages-1Gi", "2"))),
			withClaim("claim-1", cs("c1"), mapped("cpu", "50m"), mapped("hugepages-1Gi", "1")),
			withClaim("claim-2", cs("c2"), mapped("cpu", "25m"), mapped("memory", "512Mi"), mapped("hugepages-1Gi", "2"))),
		// Non-zero memory: c1's default 200Mi + 1Gi + the claim's 512Mi.
		want: Resource{MilliCPU: 375, Memory: 1536 * mi}.WithScalar("hugepages-1Gi", 6), non0CPU: 375, non0Mem: 1736 * mi,
	},
	{
		name: "an init container's claim is added to the pod's total, after the init maximum",
		pod: mkPod("u", withInit(ctr("ic1", rl("cpu", "100m"))), withContainers(ctr("c1", rl("cpu", "50m"))),
			withClaim("claim", cs("ic1"), mapped("cpu", "25m"))),
		want: Resource{MilliCPU: 125}, non0CPU: 125, non0Mem: 200 * mi,
	},
	{
		name: "pod-level cpu replaces the claim's cpu; container memory stays",
		pod: mkPod("u", withPodRequests(rl("cpu", "2")), withContainers(ctr("c1", rl("cpu", "1", "memory", "1Gi"))),
			withClaim("claim", cs("c1"), mapped("cpu", "3"))),
		want: Resource{MilliCPU: 2000, Memory: 1024 * mi}, non0CPU: 2000, non0Mem: 1024 * mi,
	},
	{
		name: "overhead per pod plus per container times the claim's containers",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "100m", "memory", "1Gi")), ctr("c2", rl("cpu", "100m", "memory", "1Gi"))),
			withClaim("claim", cs("c1", "c2"), overhead("memory", "1Gi", "500Mi"))),
		want: Resource{MilliCPU: 200, Memory: 4072 * mi}, non0CPU: 200, non0Mem: 4072 * mi,
	},
	{
		name: "mapping and overhead of one claim",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "1Gi")), ctr("c2", rl("memory", "1Gi"))),
			withClaim("claim-1", cs("c1", "c2"), mapped("memory", "2Gi"), overhead("memory", "1Gi", "500Mi"))),
		want: Resource{Memory: 6120 * mi}, non0CPU: 200, non0Mem: 6120 * mi,
	},
	{
		name: "overhead per pod only",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "1Gi"))),
			withClaim("claim", cs("c1"), overhead("memory", "1Gi", ""))),
		want: Resource{Memory: 2048 * mi}, non0CPU: 100, non0Mem: 2048 * mi,
	},
	{
		name: "overhead per container only",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "1Gi"))),
			withClaim("claim", cs("c1"), overhead("memory", "", "500Mi"))),
		want: Resource{Memory: 1524 * mi}, non0CPU: 100, non0Mem: 1524 * mi,
	},
	{
		name: "a claim no container references: its mapping counts",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "1Gi"))),
			withClaim("unref", cs(), mapped("memory", "2Gi"))),
		want: Resource{Memory: 3072 * mi}, non0CPU: 100, non0Mem: 3072 * mi,
	},
	{
		name: "a claim no container references: per pod counts, per container zero times",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "1Gi"))),
			withClaim("unref", cs(), overhead("memory", "1Gi", "500Mi"))),
		want: Resource{Memory: 2048 * mi}, non0CPU: 100, non0Mem: 2048 * mi,
	},
	{
		name: "a claim no container references, per container only: nothing",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "1Gi"))),
			withClaim("unref", cs(), overhead("memory", "", "500Mi"))),
		want: Resource{Memory: 1024 * mi}, non0CPU: 100, non0Mem: 1024 * mi,
	},
	{
		// Spec 1Gi + 2Gi + the claim's 2 x 1Gi = 5Gi, allocated 5Gi and
		// actuated 6Gi from the pod-level status, which get no claims.
		name: "pod-level status totals get no claims: actuated 6Gi wins over spec + claims 5Gi",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "1Gi")), ctr("c2", rl("memory", "2Gi"))),
			withStatus("c1", rl("memory", "2Gi"), rl("memory", "1Gi")), withStatus("c2", rl("memory", "2Gi"), rl("memory", "2Gi")),
			withPodStatus(requests(rl("memory", "6Gi")), rl("memory", "5Gi")),
			withClaim("shared", cs("c1", "c2"), overhead("memory", "", "1Gi"))),
		want: Resource{Memory: 6 * 1024 * mi}, non0CPU: 200, non0Mem: 6 * 1024 * mi,
	},
	{
		name: "pod-level cpu with claims and pod-level status",
		pod: mkPod("u", withPodRequests(rl("cpu", "3")), withContainers(ctr("c1", rl("memory", "1Gi")), ctr("c2", rl("memory", "2Gi"))),
			withStatus("c1", rl("memory", "1Gi"), rl("memory", "1Gi")), withStatus("c2", rl("memory", "2Gi"), rl("memory", "2Gi")),
			withPodStatus(requests(rl("cpu", "3", "memory", "5Gi")), rl("cpu", "3", "memory", "5Gi")),
			withClaim("shared-cpu", cs("c1", "c2"), mapped("cpu", "1")),
			withClaim("shared-mem", cs("c1", "c2"), overhead("memory", "", "1Gi"))),
		want: Resource{MilliCPU: 3000, Memory: 5 * 1024 * mi}, non0CPU: 3000, non0Mem: 5 * 1024 * mi,
	},
	{
		name: "pod-level cpu resized up from 3 to 4, with claims",
		pod: mkPod("u", withPodRequests(rl("cpu", "4")), withContainers(ctr("c1", rl("memory", "1Gi")), ctr("c2", rl("memory", "2Gi"))),
			withStatus("c1", rl("memory", "1Gi"), rl("memory", "1Gi")), withStatus("c2", rl("memory", "2Gi"), rl("memory", "2Gi")),
			withPodStatus(requests(rl("cpu", "3", "memory", "5Gi")), rl("cpu", "3", "memory", "5Gi")),
			withClaim("shared-cpu", cs("c1", "c2"), mapped("cpu", "1")),
			withClaim("shared-mem", cs("c1", "c2"), overhead("memory", "", "1Gi"))),
		want: Resource{MilliCPU: 4000, Memory: 5 * 1024 * mi}, non0CPU: 4000, non0Mem: 5 * 1024 * mi,
	},
	{
		// Spec 4Gi + 2Gi and allocated 4Gi + 2Gi, each + 2Gi of claims;
		// actuated 2Gi + 2Gi.
		name: "container resize, no pod-level status: claims join the spec and allocated totals",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "4Gi")), ctr("c2", rl("memory", "2Gi"))),
			withStatus("c1", rl("memory", "2Gi"), rl("memory", "4Gi")), withStatus("c2", rl("memory", "2Gi"), rl("memory", "2Gi")),
			withClaim("shared", cs("c1", "c2"), overhead("memory", "", "1Gi"))),
		want: Resource{Memory: 8 * 1024 * mi}, non0CPU: 200, non0Mem: 8 * 1024 * mi,
	},
	{
		name: "cpu and memory claims without container limits",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "100m", "memory", "1Gi"))),
			withClaim("claim-1", cs("c1"), mapped("cpu", "50m"), mapped("memory", "512Mi"))),
		want: Resource{MilliCPU: 150, Memory: 1536 * mi}, non0CPU: 150, non0Mem: 1536 * mi,
	},
	{
		name: "a hugepages claim for a container that requests none",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "100m"))),
			withClaim("claim-1", cs("c1"), mapped("hugepages-1Gi", "1"))),
		want: Resource{MilliCPU: 100}.WithScalar("hugepages-1Gi", 1), non0CPU: 100, non0Mem: 200 * mi,
	},

	// component-helpers TestPodResourceRequestsWithSharedDRAClaims.
	{
		name: "shared claim, 3Gi per container for two: 4Gi + 6Gi",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "2Gi")), ctr("c2", rl("memory", "2Gi"))),
			withClaim("shared", cs("c1", "c2"), overhead("memory", "", "3Gi"))),
		want: Resource{Memory: 10 * 1024 * mi}, non0CPU: 200, non0Mem: 10 * 1024 * mi,
	},
	{
		name: "shared claim with pod-level status 10Gi: max(10Gi, 10Gi)",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "2Gi")), ctr("c2", rl("memory", "2Gi"))),
			withPodStatus(requests(rl("memory", "10Gi")), rl("memory", "10Gi")),
			withClaim("shared", cs("c1", "c2"), overhead("memory", "", "3Gi"))),
		want: Resource{Memory: 10 * 1024 * mi}, non0CPU: 200, non0Mem: 10 * 1024 * mi,
	},
	{
		name: "shared claim while c1 resizes up to 3Gi: spec + claims 11Gi over status 10Gi",
		pod: mkPod("u", withContainers(ctr("c1", rl("memory", "3Gi")), ctr("c2", rl("memory", "2Gi"))),
			withPodStatus(requests(rl("memory", "10Gi")), rl("memory", "10Gi")),
			withClaim("shared", cs("c1", "c2"), overhead("memory", "", "3Gi"))),
		want: Resource{Memory: 11 * 1024 * mi}, non0CPU: 200, non0Mem: 11 * 1024 * mi,
	},

	// What those cases leave open.
	{
		// Spec 1 + 0.5 and allocated 1 + 0.5 against actuated 2: the
		// actuated total gets no claims (else 2.5).
		name: "the actuated total gets no claims",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "1"))), withStatus("c1", rl("cpu", "2"), rl("cpu", "1")),
			withClaim("claim", cs("c1"), mapped("cpu", "500m"))),
		want: Resource{MilliCPU: 2000}, non0CPU: 2000, non0Mem: 200 * mi,
	},
	{
		// The spec total is left out; allocated 2 + 0.5, actuated (falling
		// back to allocated) 2.
		name: "infeasible resize: the claims join the allocated total",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "1"))), withStatuses(statusEntry("c1", nil, rl("cpu", "2"))), infeasible,
			withClaim("claim", cs("c1"), mapped("cpu", "500m"))),
		want: Resource{MilliCPU: 2500}, non0CPU: 2500, non0Mem: 200 * mi,
	},
	{
		name: "infeasible resize without statuses: the claims alone",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "1", "memory", "1Gi"))), infeasible,
			withClaim("claim", cs("c1"), mapped("cpu", "500m"))),
		want: Resource{MilliCPU: 500}, non0CPU: 600, non0Mem: 200 * mi,
	},
	{
		name: "infeasible resize with pod-level status totals: no claims",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "5"))), withPodStatus(requests(rl("cpu", "1")), rl("cpu", "2")), infeasible,
			withClaim("claim", cs("c1"), mapped("cpu", "500m"))),
		want: Resource{MilliCPU: 2000}, non0CPU: 2000, non0Mem: 0,
	},
	{
		name: "pod-level memory replaces the claim's memory, its cpu stays",
		pod: mkPod("u", withPodRequests(rl("memory", "1Gi")), withContainers(ctr("c1", rl("cpu", "100m"))),
			withClaim("claim", cs("c1"), mapped("cpu", "50m"), mapped("memory", "512Mi"))),
		want: Resource{MilliCPU: 150, Memory: 1024 * mi}, non0CPU: 150, non0Mem: 1024 * mi,
	},
	{
		// With pod-level requests the memory default applies only when the
		// requests lack memory; the claim's memory is there.
		name: "pod-level cpu: a claim's memory is not missing, no default",
		pod: mkPod("u", withPodRequests(rl("cpu", "1")), withContainers(ctr("c1", nil)),
			withClaim("claim", cs("c1"), mapped("memory", "100Mi"))),
		want: Resource{MilliCPU: 1000, Memory: 100 * mi}, non0CPU: 1000, non0Mem: 100 * mi,
	},
	{
		// An overhead entry is added even when it comes to zero, so memory
		// is present (0) and gets no default.
		name: "pod-level cpu: a zero overhead makes memory present",
		pod: mkPod("u", withPodRequests(rl("cpu", "1")), withContainers(ctr("c1", nil)),
			withClaim("unref", cs(), overhead("memory", "", "1Gi"))),
		want: Resource{MilliCPU: 1000}, non0CPU: 1000, non0Mem: 0,
	},
	{
		name: "a zero extended-resource overhead is present",
		pod: mkPod("u", withContainers(ctr("c1", nil)),
			withClaim("unref", cs(), overhead("example.com/gpu", "", "1"))),
		want: Resource{}.WithScalar("example.com/gpu", 0), non0CPU: 100, non0Mem: 200 * mi,
	},
	{
		name: "a mapping without a quantity adds nothing",
		pod: mkPod("u", withPodRequests(rl("cpu", "1")), withContainers(ctr("c1", nil)),
			withClaim("claim", cs("c1"), mapped("memory", ""))),
		want: Resource{MilliCPU: 1000}, non0CPU: 1000, non0Mem: 200 * mi,
	},
	{
		name: "extended resources and ephemeral storage; names that reach no Resource are dropped",
		pod: mkPod("u", withContainers(ctr("c1", rl("example.com/gpu", "1"))),
			withClaim("claim", cs("c1"), mapped("example.com/gpu", "2"), mapped("ephemeral-storage", "1Ki"), mapped("random-invalid-extended-key", "5"))),
		want: Resource{EphemeralStorage: 1024}.WithScalar("example.com/gpu", 3), non0CPU: 100, non0Mem: 200 * mi,
	},
	{
		// Two halves of a millicore (and of a byte) make one, rounded once
		// on the total: per claim they would make two.
		name: "amounts exact, rounded once on the total",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "0.5m", "memory", "0.5"))),
			withClaim("a", cs("c1"), mapped("cpu", "0.5m"), mapped("memory", "0.5")),
			withClaim("b", cs("c1"), overhead("cpu", "0.25m", "0.25m"))),
		want: Resource{MilliCPU: 2, Memory: 1}, non0CPU: 2, non0Mem: 1,
	},
	{
		// Not valid in the API, which the cache does not check: without
		// statuses the actuated total is the spec without the claims, and
		// wins over the lowered spec and allocated totals.
		name: "a negative claim amount: the actuated total (the spec) wins",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "1", "memory", "1Gi"))),
			withClaim("claim", cs("c1"), mapped("cpu", "-500m"), mapped("memory", "1Mi"))),
		want: Resource{MilliCPU: 1000, Memory: 1025 * mi}, non0CPU: 1000, non0Mem: 1025 * mi,
	},
	{
		name: "a sidecar's claim, after the sidecar sums",
		pod: mkPod("u", withInit(sidecar("s", rl("cpu", "200m")), ctr("i", rl("cpu", "1"))), withContainers(ctr("c", rl("cpu", "300m"))),
			withClaim("claim", cs("s"), mapped("cpu", "100m"))),
		// max(300m + 200m, 1 + 200m) + 100m.
		want: Resource{MilliCPU: 1300}, non0CPU: 1300, non0Mem: 400 * mi,
	},
	{
		name: "with spec overhead",
		pod: mkPod("u", withContainers(ctr("c1", rl("cpu", "100m"))), withOverhead(rl("cpu", "10m")),
			withClaim("claim", cs("c1"), mapped("cpu", "50m"))),
		want: Resource{MilliCPU: 160}, non0CPU: 160, non0Mem: 200 * mi,
	},
}

// checkDRACase builds tc's PodInfo and checks its amounts, and that a
// NodeState takes the same.
func checkDRACase(t *testing.T, pod *v1.Pod, want Resource, non0CPU, non0Mem int64) {
	t.Helper()
	before := pod.DeepCopy()
	p := mustPodInfo(t, pod)
	require.Equal(t, want, p.Requests(), "requests: want %v got %v", want, p.Requests())
	require.Equal(t, non0CPU, p.NonZeroCPU(), "non-zero cpu")
	require.Equal(t, non0Mem, p.NonZeroMemory(), "non-zero memory")
	require.Equal(t, before, pod, "the pod was modified")
	s := NewNodeState(NextGeneration)
	s.AddPod(p)
	ni := s.Freeze()
	require.Equal(t, want.MilliCPU, ni.Requested().MilliCPU)
	require.Equal(t, want.Memory, ni.Requested().Memory)
	require.Equal(t, non0CPU, ni.NonZeroRequested().MilliCPU)
	require.Equal(t, non0Mem, ni.NonZeroRequested().Memory)
}

func TestDRANodeAllocatableResources(t *testing.T) {
	withDRAGate(t, true)
	for _, tc := range draCases {
		t.Run(tc.name, func(t *testing.T) {
			checkDRACase(t, tc.pod, tc.want, tc.non0CPU, tc.non0Mem)
		})
	}
}

// With the gate off (the default) the claim statuses change nothing: every
// case gives what the same pod without them gives (upstream's "flag
// disabled" case, for all of them).
func TestDRANodeAllocatableResourcesOff(t *testing.T) {
	require.False(t, DRANodeAllocatableResources(), "off by default, as upstream's gate")
	withDRAGate(t, false)
	changed := 0
	for _, tc := range draCases {
		t.Run(tc.name, func(t *testing.T) {
			bare := tc.pod.DeepCopy()
			bare.Status.NodeAllocatableResourceClaimStatuses = nil
			b := mustPodInfo(t, bare)
			checkDRACase(t, tc.pod, b.Requests(), b.NonZeroCPU(), b.NonZeroMemory())
			if b.Requests().MilliCPU != tc.want.MilliCPU || b.Requests().Memory != tc.want.Memory || b.NonZeroMemory() != tc.non0Mem {
				changed++
			}
		})
	}
	require.Greater(t, changed, len(draCases)/2, "the cases must mostly depend on the gate")
}

// A PodInfo keeps what it computed when built: turning the setting off
// later changes neither it nor what a removal subtracts.
func TestDRANodeAllocatableResourcesBuiltWhileOn(t *testing.T) {
	pod := mkPod("u", withContainers(ctr("c1", rl("cpu", "1"))), withClaim("claim", cs("c1"), mapped("cpu", "1")))
	withDRAGate(t, true)
	on := mustPodInfo(t, pod)
	s := NewNodeState(NextGeneration)
	s.AddPod(on)
	SetDRANodeAllocatableResources(false)
	off := mustPodInfo(t, pod)
	require.Equal(t, int64(2000), on.Requests().MilliCPU)
	require.Equal(t, int64(1000), off.Requests().MilliCPU)
	require.Equal(t, int64(2000), s.Freeze().Requested().MilliCPU)
	require.NoError(t, s.RemovePod(on.Key(), false, false, false))
	require.Equal(t, int64(0), s.Freeze().Requested().MilliCPU)
}

// draList is upstream's addDRANodeAllocatableClaimResources on an empty
// list, written with ResourceLists.
func draList(pod *v1.Pod) v1.ResourceList {
	out := v1.ResourceList{}
	for _, c := range pod.Status.NodeAllocatableResourceClaimStatuses {
		for _, m := range c.Mapping {
			if m.Quantity != nil {
				q := out[m.Name]
				q.Add(*m.Quantity)
				out[m.Name] = q
			}
		}
		for _, o := range c.Overhead {
			var q resource.Quantity
			if o.PerPod != nil {
				q.Add(*o.PerPod)
			}
			if o.PerContainer != nil && len(c.Containers) > 0 {
				per := o.PerContainer.DeepCopy()
				per.Mul(int64(len(c.Containers)))
				q.Add(per)
			}
			s := out[o.Name]
			s.Add(q)
			out[o.Name] = s
		}
	}
	return out
}

// genClaims gives pod up to three claim statuses over its containers, with
// mappings and overheads of the generator's names and quantities; with
// cpuMem, the first claim maps cpu and memory.
func genClaims(r *rand.Rand, pod *v1.Pod, cpuMem bool) {
	var names []string
	for _, c := range append(append([]v1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...) {
		names = append(names, c.Name)
	}
	n := r.IntN(4)
	if cpuMem && n == 0 {
		n = 1
	}
	for i := range n {
		c := v1.NodeAllocatableResourceClaimStatus{ResourceClaimName: fmt.Sprint("claim-", i)}
		for _, name := range names {
			if r.IntN(2) == 0 {
				c.Containers = append(c.Containers, name)
			}
		}
		if cpuMem && i == 0 {
			c.Mapping = append(c.Mapping, v1.NodeAllocatableMappedResources{Name: v1.ResourceCPU, Quantity: new(genQuantity(r))},
				v1.NodeAllocatableMappedResources{Name: v1.ResourceMemory, Quantity: new(genQuantity(r))})
		}
		for range r.IntN(3) {
			m := v1.NodeAllocatableMappedResources{Name: genResourceNames[r.IntN(len(genResourceNames))]}
			if r.IntN(5) > 0 {
				m.Quantity = new(genQuantity(r))
			}
			c.Mapping = append(c.Mapping, m)
		}
		for range r.IntN(3) {
			o := v1.NodeAllocatableOverheadResources{Name: genResourceNames[r.IntN(len(genResourceNames))]}
			if r.IntN(3) > 0 {
				o.PerPod = new(genQuantity(r))
			}
			if r.IntN(3) > 0 {
				o.PerContainer = new(genQuantity(r))
			}
			c.Overhead = append(c.Overhead, o)
		}
		pod.Status.NodeAllocatableResourceClaimStatuses = append(pod.Status.NodeAllocatableResourceClaimStatuses, c)
	}
}

// Two ways to get upstream's amounts with the gate on from the same code
// with it off, on random pods (the module cannot import upstream; bench's
// TestDiffPodInfoDRA compares with it):
//
//   - without init containers, the claims D act as one more regular
//     container whose spec and allocated lists are D and whose actuated
//     list is {cpu: 0, memory: 0} (D holding cpu and memory, no default
//     reaches that container): max(S+D, U, A+D), with every rule of
//     statuses, resizes, pod-level status and pod-level requests;
//   - without status lists and pod-level requests, A = U = S and the
//     claims act as spec.overhead: S + D.
func TestDRANodeAllocatableResourcesEquivalences(t *testing.T) {
	withDRAGate(t, false)
	r := rand.New(rand.NewPCG(27, 1))
	n := 20000
	if testing.Short() {
		n = 4000
	}
	for i := range n {
		pod := genPod(r, fmt.Sprint(i), "ns")
		asContainer := i%2 == 0
		if asContainer {
			pod.Spec.InitContainers = nil
			withRandomPodStatus(r, pod)
		} else {
			pod.Status = v1.PodStatus{}
			pod.Spec.Resources = nil
		}
		genClaims(r, pod, asContainer)
		d := draList(pod)
		eq := pod.DeepCopy()
		if asContainer {
			eq.Spec.Containers = append(eq.Spec.Containers, ctr("dra-claims", d))
			eq.Status.ContainerStatuses = append(eq.Status.ContainerStatuses, v1.ContainerStatus{
				Name: "dra-claims", Resources: requests(rl("cpu", "0", "memory", "0")), AllocatedResources: d,
			})
		} else {
			eq.Spec.Overhead = eq.Spec.Overhead.DeepCopy()
			if eq.Spec.Overhead == nil {
				eq.Spec.Overhead = v1.ResourceList{}
			}
			for name, q := range d {
				s := eq.Spec.Overhead[name]
				s.Add(q)
				eq.Spec.Overhead[name] = s
			}
		}
		SetDRANodeAllocatableResources(false)
		want := computePodInfo(eq)
		SetDRANodeAllocatableResources(true)
		got := computePodInfo(pod)
		SetDRANodeAllocatableResources(false)
		msg := fmt.Sprintf("pod %d (as container %v)", i, asContainer)
		require.Equal(t, want.Requests(), got.Requests(), msg)
		require.Equal(t, want.NonZeroCPU(), got.NonZeroCPU(), msg)
		require.Equal(t, want.NonZeroMemory(), got.NonZeroMemory(), msg)
	}
}
