package bench

// TestDiffPodInfoDRA: the per-pod requests of TestDiffPodInfo on pods with
// status.nodeAllocatableResourceClaimStatuses, with upstream's
// DRANodeAllocatableResources gate and schedcache's
// nodeinfo.SetDRANodeAllocatableResources on together, and off together.

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	upframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
)

// claimResource returns a name and an amount for a claim status: cpu and
// memory mostly, then ephemeral storage and the scalar names (hugepages,
// extended, and names that reach no Resource).
func (g *gen) claimResource() (v1.ResourceName, resource.Quantity) {
	switch {
	case g.pct(40):
		return v1.ResourceCPU, resource.MustParse(pick(g, cpuQuantities...))
	case g.pct(60):
		return v1.ResourceMemory, resource.MustParse(pick(g, memQuantities...))
	case g.pct(30):
		return v1.ResourceEphemeralStorage, resource.MustParse(pick(g, ephQuantities...))
	}
	return pick(g, scalarNames...), resource.MustParse(pick(g, scalarQuantities...))
}

// claims gives p one to three node-allocatable claim statuses: each
// references some of p's containers (init containers and a name no
// container has included, or none), maps some resources (now and then
// without a quantity) and has some overheads (perPod, perContainer, both
// or neither).
func (g *gen) claims(p *v1.Pod) {
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range p.Spec.InitContainers {
		names = append(names, c.Name)
	}
	names = append(names, "ghost")
	for i := range 1 + g.r.IntN(3) {
		c := v1.NodeAllocatableResourceClaimStatus{ResourceClaimName: fmt.Sprintf("claim-%d", i)}
		for _, n := range names {
			if g.pct(40) {
				c.Containers = append(c.Containers, n)
			}
		}
		for range g.r.IntN(4) {
			name, q := g.claimResource()
			m := v1.NodeAllocatableMappedResources{Name: name}
			if !g.pct(10) {
				m.Quantity = &q
			}
			c.Mapping = append(c.Mapping, m)
		}
		for range g.r.IntN(3) {
			name, q := g.claimResource()
			o := v1.NodeAllocatableOverheadResources{Name: name}
			if g.pct(60) {
				o.PerPod = new(q.DeepCopy())
			}
			if g.pct(60) {
				_, q2 := g.claimResource()
				o.PerContainer = &q2
			}
			c.Overhead = append(c.Overhead, o)
		}
		p.Status.NodeAllocatableResourceClaimStatuses = append(p.Status.NodeAllocatableResourceClaimStatuses, c)
	}
}

// draPods are component-helpers v0.37.2's DRA request cases (helpers_test.go
// TestPodRequestsAndLimitsWithDRA, TestPodResourceRequestsWithSharedDRAClaims)
// and the points they leave open, as pods.
func draPods() []*v1.Pod {
	rl := func(kv ...string) v1.ResourceList {
		out := v1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	q := func(s string) *resource.Quantity { return new(resource.MustParse(s)) }
	ctr := func(name string, req v1.ResourceList) v1.Container {
		return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req}}
	}
	status := func(name string, actuated, allocated v1.ResourceList) v1.ContainerStatus {
		s := v1.ContainerStatus{Name: name, AllocatedResources: allocated}
		if actuated != nil {
			s.Resources = &v1.ResourceRequirements{Requests: actuated}
		}
		return s
	}
	claim := func(containers []string, mapping []v1.NodeAllocatableMappedResources, overhead ...v1.NodeAllocatableOverheadResources) v1.NodeAllocatableResourceClaimStatus {
		return v1.NodeAllocatableResourceClaimStatus{ResourceClaimName: "claim", Containers: containers, Mapping: mapping, Overhead: overhead}
	}
	mapped := func(kv ...string) []v1.NodeAllocatableMappedResources {
		var out []v1.NodeAllocatableMappedResources
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, v1.NodeAllocatableMappedResources{Name: v1.ResourceName(kv[i]), Quantity: q(kv[i+1])})
		}
		return out
	}
	oh := func(name v1.ResourceName, perPod, perContainer string) v1.NodeAllocatableOverheadResources {
		o := v1.NodeAllocatableOverheadResources{Name: name}
		if perPod != "" {
			o.PerPod = q(perPod)
		}
		if perContainer != "" {
			o.PerContainer = q(perContainer)
		}
		return o
	}
	two := []string{"c1", "c2"}
	mk := func(uid string, spec v1.PodSpec, st v1.PodStatus) *v1.Pod {
		p := &v1.Pod{Spec: spec, Status: st}
		p.Name, p.UID, p.Namespace = uid, types.UID("dra-"+uid), "ns-a"
		return p
	}
	infeasible := []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonInfeasible}}
	podLevel := func(kv ...string) *v1.ResourceRequirements {
		// int64 form: see gen.pod on upstream's pod-level aliasing.
		r := &v1.ResourceRequirements{Requests: v1.ResourceList{}}
		for name, x := range rl(kv...) {
			r.Requests[name] = *resource.NewMilliQuantity(x.MilliValue(), resource.DecimalSI)
		}
		return r
	}
	return []*v1.Pod{
		mk("hugepages", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("cpu", "100m", "memory", "1Gi", "hugepages-1Gi", "2"))}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim([]string{"c1"}, mapped("cpu", "50m", "hugepages-1Gi", "1"))}}),
		mk("shared-once", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("cpu", "100m")), ctr("c2", rl("cpu", "200m"))}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim(two, mapped("cpu", "50m"))}}),
		mk("init", v1.PodSpec{InitContainers: []v1.Container{ctr("ic1", rl("cpu", "100m"))}, Containers: []v1.Container{ctr("c1", rl("cpu", "50m"))}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim([]string{"ic1"}, mapped("cpu", "25m"))}}),
		mk("pod-level-cpu", v1.PodSpec{Resources: podLevel("cpu", "2"), Containers: []v1.Container{ctr("c1", rl("cpu", "1", "memory", "1Gi"))}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim([]string{"c1"}, mapped("cpu", "3"))}}),
		mk("overheads", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("memory", "1Gi")), ctr("c2", rl("memory", "1Gi"))}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim(two, mapped("memory", "2Gi"), oh("memory", "1Gi", "500Mi"))}}),
		mk("unreferenced", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("memory", "1Gi"))}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim(nil, mapped("memory", "2Gi"), oh("memory", "1Gi", "500Mi"), oh("memory", "", "7Gi"))}}),
		mk("pod-status-totals", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("memory", "1Gi")), ctr("c2", rl("memory", "2Gi"))}},
			v1.PodStatus{
				ContainerStatuses:  []v1.ContainerStatus{status("c1", rl("memory", "2Gi"), rl("memory", "1Gi")), status("c2", rl("memory", "2Gi"), rl("memory", "2Gi"))},
				Resources:          &v1.ResourceRequirements{Requests: rl("memory", "6Gi")},
				AllocatedResources: rl("memory", "5Gi"),
				NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{
					claim(two, nil, oh("memory", "", "1Gi"))},
			}),
		mk("pod-level-resize", v1.PodSpec{Resources: podLevel("cpu", "4"), Containers: []v1.Container{ctr("c1", rl("memory", "1Gi")), ctr("c2", rl("memory", "2Gi"))}},
			v1.PodStatus{
				ContainerStatuses:  []v1.ContainerStatus{status("c1", rl("memory", "1Gi"), rl("memory", "1Gi")), status("c2", rl("memory", "2Gi"), rl("memory", "2Gi"))},
				Resources:          &v1.ResourceRequirements{Requests: rl("cpu", "3", "memory", "5Gi")},
				AllocatedResources: rl("cpu", "3", "memory", "5Gi"),
				NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{
					claim(two, mapped("cpu", "1")), claim(two, nil, oh("memory", "", "1Gi"))},
			}),
		mk("container-resize", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("memory", "4Gi")), ctr("c2", rl("memory", "2Gi"))}},
			v1.PodStatus{
				ContainerStatuses: []v1.ContainerStatus{status("c1", rl("memory", "2Gi"), rl("memory", "4Gi")), status("c2", rl("memory", "2Gi"), rl("memory", "2Gi"))},
				NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{
					claim(two, nil, oh("memory", "", "1Gi"))},
			}),
		mk("shared-3Gi", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("memory", "2Gi")), ctr("c2", rl("memory", "2Gi"))}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim(two, nil, oh("memory", "", "3Gi"))}}),
		mk("actuated-no-claims", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("cpu", "1"))}},
			v1.PodStatus{
				ContainerStatuses:                    []v1.ContainerStatus{status("c1", rl("cpu", "2"), rl("cpu", "1"))},
				NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim([]string{"c1"}, mapped("cpu", "500m"))},
			}),
		mk("infeasible", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("cpu", "1")), ctr("c2", rl("cpu", "1"))}},
			v1.PodStatus{
				Conditions:                           infeasible,
				ContainerStatuses:                    []v1.ContainerStatus{status("c1", nil, rl("cpu", "2"))},
				NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim([]string{"c1"}, mapped("cpu", "500m"))},
			}),
		mk("pod-level-zero-overhead", v1.PodSpec{Resources: podLevel("cpu", "1"), Containers: []v1.Container{ctr("c1", nil)}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{
				claim(nil, []v1.NodeAllocatableMappedResources{{Name: "example.com/gpu"}}, oh("memory", "", "1Gi"), oh("example.com/gpu", "", "1"))}}),
		// Not valid in the API, which the cache does not check: a
		// negative amount lowers the spec and allocated totals, not the
		// actuated one (here the spec), so the spec wins.
		mk("negative", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("cpu", "1", "memory", "1Gi"))}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim([]string{"c1"}, mapped("cpu", "-500m", "memory", "1Mi"))}}),
		mk("halves", v1.PodSpec{Containers: []v1.Container{ctr("c1", rl("cpu", "0.5m", "memory", "0.5"))}},
			v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{
				claim([]string{"c1"}, mapped("cpu", "0.5m", "memory", "0.5")), claim([]string{"c1"}, nil, oh("cpu", "0.25m", "0.25m"))}}),
		mk("sidecar-overhead", v1.PodSpec{
			InitContainers: []v1.Container{func() v1.Container { c := ctr("s", rl("cpu", "200m")); c.RestartPolicy = &always; return c }(), ctr("i", rl("cpu", "1"))},
			Containers:     []v1.Container{ctr("c", rl("cpu", "300m"))},
			Overhead:       rl("cpu", "10m"),
		}, v1.PodStatus{NodeAllocatableResourceClaimStatuses: []v1.NodeAllocatableResourceClaimStatus{claim([]string{"s"}, mapped("cpu", "100m", "ephemeral-storage", "1Ki", "random-invalid-extended-key", "5"))}}),
	}
}

// TestDiffPodInfoDRA compares schedcache's nodeinfo.NewPodInfo with
// upstream's framework.NewPodInfo(pod).CalculateResource() on pods with
// node-allocatable claim statuses (component-helpers' DRA cases, then
// random pods of TestDiffPodInfo's generator, half of them with status
// resources, given claims), with upstream's DRANodeAllocatableResources
// gate and nodeinfo.SetDRANodeAllocatableResources on, then both off.
func TestDiffPodInfoDRA(t *testing.T) {
	n := stepsFor(2000, 20000)
	g := newGen(27)
	pods := draPods()
	fixed := len(pods)
	for i := range n {
		p := g.pod(fmt.Sprintf("p%d", i), "n")
		if i%2 == 0 && len(p.Status.ContainerStatuses) == 0 {
			g.statuses(p)
		}
		g.claims(p)
		pods = append(pods, p)
	}
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("gate=%v", on), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRANodeAllocatableResources, on)
			was := nodeinfo.DRANodeAllocatableResources()
			nodeinfo.SetDRANodeAllocatableResources(on)
			t.Cleanup(func() { nodeinfo.SetDRANodeAllocatableResources(was) })
			moved := 0 // random pods whose upstream requests the claims changed
			for i, p := range pods {
				ours, err := nodeinfo.NewPodInfo(p)
				if err != nil {
					t.Fatalf("NewPodInfo %s: %v", p.UID, err)
				}
				theirs, _ := upframework.NewPodInfo(p.DeepCopy())
				r := theirs.CalculateResource()
				gotReq, wantReq := scRes(ours.Requests()), upRes(r.Resource)
				if diff := diffSums(wantReq, gotReq); diff != "" || ours.NonZeroCPU() != r.Non0CPU || ours.NonZeroMemory() != r.Non0Mem {
					t.Fatalf("gate %v, pod %s: requests differ (-upstream +schedcache):\n%s\nnon-zero cpu upstream %d schedcache %d, memory upstream %d schedcache %d\npod spec: %+v\nstatus: %+v",
						on, p.UID, diff, r.Non0CPU, ours.NonZeroCPU(), r.Non0Mem, ours.NonZeroMemory(), p.Spec, p.Status)
				}
				if i >= fixed {
					bare := p.DeepCopy()
					bare.Status.NodeAllocatableResourceClaimStatuses = nil
					b, _ := upframework.NewPodInfo(bare)
					br := b.CalculateResource()
					if diffSums(upRes(br.Resource), wantReq) != "" || br.Non0CPU != r.Non0CPU || br.Non0Mem != r.Non0Mem {
						moved++
					}
				}
			}
			t.Logf("%d pods (%d fixed); the claims changed upstream's requests of %d of the %d random ones", len(pods), fixed, moved, len(pods)-fixed)
			// The gates took effect: on, the claims change most random pods'
			// requests; off, none.
			if on && moved < (len(pods)-fixed)/2 || !on && moved != 0 {
				t.Fatalf("gate %v: the claims changed %d of %d random pods", on, moved, len(pods)-fixed)
			}
		})
	}
}
