package nodeinfo

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rl builds a resource list from name, quantity pairs.
func rl(kv ...string) v1.ResourceList {
	out := make(v1.ResourceList, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func ctr(name string, req v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req}}
}

func sidecar(name string, req v1.ResourceList) v1.Container {
	c := ctr(name, req)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

// mkPod returns a pod with the given UID in namespace "ns", after applying
// the given mutations.
func mkPod(uid string, muts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + uid, Namespace: "ns", UID: types.UID(uid)}}
	for _, m := range muts {
		m(p)
	}
	return p
}

func withContainers(cs ...v1.Container) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, cs...) }
}

func withInit(cs ...v1.Container) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.InitContainers = append(p.Spec.InitContainers, cs...) }
}

func withPodRequests(req v1.ResourceList) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Resources = &v1.ResourceRequirements{Requests: req} }
}

func withOverhead(o v1.ResourceList) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Overhead = o }
}

func withStatus(name string, actual, allocated v1.ResourceList) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{
			Name: name, Resources: &v1.ResourceRequirements{Requests: actual}, AllocatedResources: allocated,
		})
	}
}

func withInitStatus(name string, actual, allocated v1.ResourceList) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, v1.ContainerStatus{
			Name: name, Resources: &v1.ResourceRequirements{Requests: actual}, AllocatedResources: allocated,
		})
	}
}

func withResizePending(reasons ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for _, r := range reasons {
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodResizePending, Reason: r})
		}
	}
}

func withNode(name string) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.NodeName = name } }

func withPVCs(claims ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for _, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "v-" + c, VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: c},
			}})
		}
	}
}

func withEphemeralVolume() func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "eph", VolumeSource: v1.VolumeSource{
			Ephemeral: &v1.EphemeralVolumeSource{},
		}})
	}
}

func withHostPort(ip string, proto v1.Protocol, port int32) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "port", Ports: []v1.ContainerPort{
			{ContainerPort: 8080, HostIP: ip, Protocol: proto, HostPort: port},
		}})
	}
}

func withAffinity(a *v1.Affinity) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.Affinity = a } }

var (
	podAffinity     = &v1.Affinity{PodAffinity: &v1.PodAffinity{}}
	requiredAntiAff = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "zone"}}}}
	// hostnameAntiAff has required anti-affinity terms, all scoped to the
	// hostname: not non-host-scoped; mixedAntiAff has one hostname term
	// and one zone term: non-host-scoped.
	hostnameAntiAff = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		{TopologyKey: v1.LabelHostname}, {TopologyKey: v1.LabelHostname}}}}
	mixedAntiAff = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		{TopologyKey: v1.LabelHostname}, {TopologyKey: v1.LabelTopologyZone}}}}
	preferredAntiAff = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{}}
	nodeAffinityOnly = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{}}
)

func mustPodInfo(t testing.TB, pod *v1.Pod) *PodInfo {
	t.Helper()
	p, err := NewPodInfo(pod)
	require.NoError(t, err)
	return p
}

func mkNode(name string, alloc v1.ResourceList) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: alloc}}
}

// counter returns a generation source counting from 1 and a reader of its
// last value.
func counter() (next func() int64, last func() int64) {
	var g int64
	return func() int64 { g++; return g }, func() int64 { return g }
}

const mi = 1024 * 1024

// rawPodInfo is the PodInfo computed for pod before the MaxPodQuantity
// check (the arithmetic the saturation tests check). NewPodInfo must
// return the same amounts when they are all within the bound, and a
// *QuantityError otherwise.
func rawPodInfo(t testing.TB, pod *v1.Pod) *PodInfo {
	t.Helper()
	raw := computePodInfo(pod)
	p, err := NewPodInfo(pod)
	if checkQuantities(raw) != nil {
		var qe *QuantityError
		require.ErrorAs(t, err, &qe)
		require.ErrorIs(t, err, ErrQuantityOverflow)
		require.Nil(t, p)
		return raw
	}
	require.NoError(t, err)
	require.Equal(t, raw.Requests(), p.Requests())
	require.Equal(t, raw.NonZeroCPU(), p.NonZeroCPU())
	require.Equal(t, raw.NonZeroMemory(), p.NonZeroMemory())
	return raw
}
