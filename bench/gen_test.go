package bench

// Random pods and nodes for the differential tests: small universes, so that
// names, ports, claims and images collide often, and the request-calculation
// corner cases (init containers, sidecars, pod-level resources, overhead,
// status resources during a resize, odd quantities, scalar names) show up.

import (
	"fmt"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type gen struct {
	r *rand.Rand
	// groupNames, if set, are the pod groups a third of the pods name
	// (Spec.SchedulingGroup, in the pod's namespace).
	groupNames []string
	// antiKeys, if set, varies the topology keys of required
	// anti-affinity terms (hostname only, hostname and zone, region,
	// zone), so that some of those pods are hostname-scoped and stay out
	// of the non-host-scoped anti-affinity lists; without it every such
	// term is zone-scoped.
	antiKeys bool
}

func newGen(seed uint64) *gen { return &gen{r: rand.New(rand.NewPCG(seed, 0x5eed))} }

func (g *gen) pct(p int) bool { return g.r.IntN(100) < p }

func pick[T any](g *gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

var (
	cpuQuantities = []string{"0", "1m", "50m", "100m", "250m", "1", "1.5", "2", "0.0001", "333m"}
	memQuantities = []string{"0", "1", "1Ki", "64Mi", "200Mi", "1.5Gi", "1000", "0.5", "4Gi", "1e3"}
	ephQuantities = []string{"0", "1Gi", "100Mi", "512", "2.5Gi"}
	scalarNames   = []v1.ResourceName{
		"example.com/gpu", "nvidia.com/gpu", "hugepages-2Mi", "hugepages-1Gi",
		"attachable-volumes-aws-ebs", "kubernetes.io/batch-cpu", "random-invalid-extended-key",
		"requests.example.com/bad", v1.ResourcePods,
	}
	scalarQuantities = []string{"0", "1", "2", "3", "2Mi", "0.5", "1500m"}
	namespaces       = []string{"ns-a", "ns-b"}
	claimNames       = []string{"c0", "c1", "c2", "c3"}
	hostIPs          = []string{"", "0.0.0.0", "127.0.0.1", "10.0.0.1"}
	protocols        = []v1.Protocol{"", v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}
	hostPorts        = []int32{0, 80, 443, 8080}
)

// resourceList returns a random request list; nil or empty sometimes.
func (g *gen) resourceList() v1.ResourceList {
	switch {
	case g.pct(10):
		return nil
	case g.pct(5):
		return v1.ResourceList{}
	}
	rl := v1.ResourceList{}
	if g.pct(80) {
		rl[v1.ResourceCPU] = resource.MustParse(pick(g, cpuQuantities...))
	}
	if g.pct(80) {
		rl[v1.ResourceMemory] = resource.MustParse(pick(g, memQuantities...))
	}
	if g.pct(20) {
		rl[v1.ResourceEphemeralStorage] = resource.MustParse(pick(g, ephQuantities...))
	}
	for range g.r.IntN(3) {
		if g.pct(40) {
			rl[pick(g, scalarNames...)] = resource.MustParse(pick(g, scalarQuantities...))
		}
	}
	return rl
}

func (g *gen) ports() []v1.ContainerPort {
	if !g.pct(25) {
		return nil
	}
	out := make([]v1.ContainerPort, 1+g.r.IntN(2))
	for i := range out {
		out[i] = v1.ContainerPort{
			ContainerPort: 8080,
			HostPort:      pick(g, hostPorts...),
			HostIP:        pick(g, hostIPs...),
			Protocol:      pick(g, protocols...),
		}
	}
	return out
}

func (g *gen) container(name string) v1.Container {
	c := v1.Container{Name: name, Image: "img"}
	c.Resources.Requests = g.resourceList()
	if g.pct(20) {
		c.Resources.Limits = g.resourceList()
	}
	c.Ports = g.ports()
	return c
}

var always = v1.ContainerRestartPolicyAlways

// pod returns a random pod with the given UID, bound to node.
func (g *gen) pod(uid, node string) *v1.Pod {
	p := &v1.Pod{}
	p.Name = uid
	p.UID = types.UID(uid)
	p.Namespace = pick(g, namespaces...)
	p.Spec.NodeName = node
	n := g.r.IntN(4) // 0 containers now and then: the cache does not validate
	if n == 0 && g.pct(70) {
		n = 1
	}
	for i := range n {
		p.Spec.Containers = append(p.Spec.Containers, g.container(fmt.Sprintf("c%d", i)))
	}
	if g.pct(35) {
		for i := range 1 + g.r.IntN(3) {
			c := g.container(fmt.Sprintf("i%d", i))
			if g.pct(50) {
				c.RestartPolicy = &always // sidecar
			}
			if g.pct(10) {
				c.Name = "c0" // clashes with a regular container's status name
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
	}
	if g.pct(15) {
		p.Spec.Overhead = g.resourceList()
	}
	if g.pct(15) {
		rr := &v1.ResourceRequirements{}
		if !g.pct(10) {
			rr.Requests = v1.ResourceList{}
			// Pod-level quantities in int64 form only: upstream aliases a
			// pod-level quantity held as an inf.Dec (e.g. "1.5Gi") into
			// its sum and then adds the overhead to it in place, mutating
			// the pod (TestUpstreamMutatesPodLevelRequests), so the same
			// pod object would yield different requests on every call.
			if g.pct(60) {
				q := resource.MustParse(pick(g, cpuQuantities...))
				rr.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI)
			}
			if g.pct(60) {
				q := resource.MustParse(pick(g, memQuantities...))
				rr.Requests[v1.ResourceMemory] = *resource.NewQuantity(q.Value(), resource.BinarySI)
			}
			if g.pct(20) {
				rr.Requests["hugepages-2Mi"] = resource.MustParse("2Mi")
			}
			if g.pct(20) {
				q := resource.MustParse(pick(g, ephQuantities...))
				rr.Requests[v1.ResourceEphemeralStorage] = *resource.NewQuantity(q.Value(), resource.BinarySI)
			}
		}
		p.Spec.Resources = rr
	}
	if g.pct(20) {
		g.statuses(p)
	}
	if g.pct(25) {
		vols := 1 + g.r.IntN(2)
		for i := range vols {
			v := v1.Volume{Name: fmt.Sprintf("v%d", i)}
			if g.pct(85) {
				v.PersistentVolumeClaim = &v1.PersistentVolumeClaimVolumeSource{ClaimName: pick(g, claimNames...)}
			} else {
				v.Ephemeral = &v1.EphemeralVolumeSource{}
			}
			p.Spec.Volumes = append(p.Spec.Volumes, v)
		}
	}
	p.Spec.Affinity = g.affinity()
	if len(g.groupNames) > 0 && g.pct(33) {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: strPtr(pick(g, g.groupNames...))}
	}
	return p
}

// statuses adds container statuses with resources (an in-place resize in
// progress), sometimes pod-level status resources and a PodResizePending
// condition.
func (g *gen) statuses(p *v1.Pod) {
	st := func(name string) v1.ContainerStatus {
		cs := v1.ContainerStatus{Name: name}
		if g.pct(70) {
			cs.Resources = &v1.ResourceRequirements{Requests: g.resourceList()}
		}
		if g.pct(50) {
			cs.AllocatedResources = g.resourceList()
		}
		return cs
	}
	for _, c := range p.Spec.Containers {
		if g.pct(70) {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st(c.Name))
		}
	}
	for _, c := range p.Spec.InitContainers {
		if g.pct(60) {
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, st(c.Name))
		}
	}
	if g.pct(10) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st("ghost"))
	}
	// Pod-level status resources (v1.36+, InPlacePodLevelResourcesVerticalScaling
	// on by default): with both set they replace the container statuses'
	// totals, and Resources alone enters the pod-level requests.
	if g.pct(35) {
		p.Status.Resources = &v1.ResourceRequirements{}
		if g.pct(80) {
			p.Status.Resources.Requests = g.resourceList()
		}
	}
	if g.pct(35) {
		p.Status.AllocatedResources = g.resourceList()
	}
	if g.pct(40) {
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{
			Type:   v1.PodResizePending,
			Status: v1.ConditionTrue,
			Reason: pick(g, v1.PodReasonInfeasible, v1.PodReasonDeferred),
		})
		if g.pct(30) {
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{
				Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonInfeasible,
			})
		}
	}
}

func (g *gen) affinity() *v1.Affinity {
	term := v1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
		TopologyKey:   v1.LabelTopologyZone,
	}
	switch g.r.IntN(10) {
	case 0:
		return &v1.Affinity{PodAffinity: &v1.PodAffinity{}} // counts, with no terms
	case 1:
		return &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term}}}
	case 2:
		terms := []v1.PodAffinityTerm{term}
		if g.antiKeys {
			host, region := term, term
			host.TopologyKey, region.TopologyKey = v1.LabelHostname, v1.LabelTopologyRegion
			switch g.r.IntN(5) {
			case 0, 1:
				terms = []v1.PodAffinityTerm{host} // hostname-scoped: not non-host
			case 2:
				terms = []v1.PodAffinityTerm{host, term} // one non-host term is enough
			case 3:
				terms = []v1.PodAffinityTerm{region}
			}
		}
		return &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
	case 3:
		return &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: term}}}}
	case 4:
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{}} // does not count
	}
	return nil
}

// Node universe.
var (
	diffZones = []map[string]string{
		nil,
		{v1.LabelTopologyRegion: "r1", v1.LabelTopologyZone: "z1"},
		{v1.LabelTopologyRegion: "r1", v1.LabelTopologyZone: "z2"},
		{v1.LabelTopologyRegion: "r1", v1.LabelTopologyZone: "z3"},
		{v1.LabelTopologyZone: "z1"},
		{v1.LabelFailureDomainBetaZone: "z2", v1.LabelTopologyZone: "z9"},
	}
	diffImages = []v1.ContainerImage{
		{Names: []string{"img-a"}, SizeBytes: 100},
		{Names: []string{"img-b", "img-b@sha"}, SizeBytes: 200},
		{Names: []string{"img-c"}, SizeBytes: 300},
		{Names: []string{"img-d", "img-a"}, SizeBytes: 400}, // shares a name with img-a, another size
		{Names: []string{"img-e"}, SizeBytes: 500},
	}
)

// images returns the image pool of the random nodes; it lists one name under
// two sizes, so which node registers a name first matters (semantics 3.5).
func images() []v1.ContainerImage { return diffImages }

// node returns a random node named name in zone variant zone.
func (g *gen) node(name string, zone int) *v1.Node {
	n := &v1.Node{}
	n.Name = name
	n.UID = types.UID(name)
	if z := diffZones[zone]; z != nil {
		n.Labels = map[string]string{v1.LabelHostname: name}
		for k, v := range z {
			n.Labels[k] = v
		}
	}
	alloc := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(pick(g, "4", "8", "16", "7500m")),
		v1.ResourceMemory: resource.MustParse(pick(g, "8Gi", "16Gi", "32Gi")),
		v1.ResourcePods:   resource.MustParse(pick(g, "110", "32")),
	}
	if g.pct(30) {
		alloc["example.com/gpu"] = resource.MustParse("4")
	}
	if g.pct(30) {
		alloc[v1.ResourceEphemeralStorage] = resource.MustParse("100Gi")
	}
	n.Status.Allocatable = alloc
	n.Status.Capacity = alloc
	for _, img := range images() {
		if g.pct(40) {
			n.Status.Images = append(n.Status.Images, img)
		}
	}
	return n
}
