package nodeinfo

import (
	"fmt"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Random pod generator shared by the randomized tests. It covers every input
// the aggregation rules read: containers, sidecars, plain init containers,
// status resources (with duplicate and missing names), resize conditions,
// pod-level requests, overhead, host ports, PVC and ephemeral volumes and
// affinity shapes.

var genResourceNames = []v1.ResourceName{
	v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods,
	"example.com/foo", "nvidia.com/gpu", "hugepages-2Mi", "hugepages-1Gi",
	"random-invalid-extended-key", "kubernetes.io/bar", "attachable-volumes-aws-ebs",
	"requests.example.com/x", "example.com/UPPER_case",
}

var genQuantities = []string{
	"0", "1", "2", "3", "7", "100m", "250m", "0.5m", "1500m", "1.5", "100Mi", "1Gi",
	"200Mi", "1e3", "7n", "12345", "2k", "999999u", "1Ki", "0.1", "3500m",
}

func genQuantity(r *rand.Rand) resource.Quantity {
	return resource.MustParse(genQuantities[r.IntN(len(genQuantities))])
}

func genList(r *rand.Rand, maxKeys int) v1.ResourceList {
	n := r.IntN(maxKeys + 1)
	if n == 0 {
		if r.IntN(2) == 0 {
			return nil
		}
		return v1.ResourceList{}
	}
	rl := make(v1.ResourceList, n)
	for range n {
		// Bias towards cpu and memory.
		var name v1.ResourceName
		if r.IntN(3) > 0 {
			name = genResourceNames[r.IntN(2)]
		} else {
			name = genResourceNames[r.IntN(len(genResourceNames))]
		}
		rl[name] = genQuantity(r)
	}
	return rl
}

func genPorts(r *rand.Rand) []v1.ContainerPort {
	n := r.IntN(3)
	if n == 0 {
		return nil
	}
	ips := []string{"", "0.0.0.0", "127.0.0.1", "10.0.0.1"}
	protos := []v1.Protocol{"", v1.ProtocolTCP, v1.ProtocolUDP}
	out := make([]v1.ContainerPort, n)
	for i := range out {
		out[i] = v1.ContainerPort{
			ContainerPort: 80,
			HostPort:      int32(r.IntN(4)), // 0 means no host port
			HostIP:        ips[r.IntN(len(ips))],
			Protocol:      protos[r.IntN(len(protos))],
		}
	}
	return out
}

var containerNames = []string{"a", "b", "c", "d", "e"}

func genContainer(r *rand.Rand, name string) v1.Container {
	return v1.Container{
		Name:      name,
		Resources: v1.ResourceRequirements{Requests: genList(r, 3)},
		Ports:     genPorts(r),
	}
}

func genStatuses(r *rand.Rand) []v1.ContainerStatus {
	n := r.IntN(4)
	if n == 0 {
		return nil
	}
	out := make([]v1.ContainerStatus, n)
	for i := range out {
		out[i].Name = containerNames[r.IntN(len(containerNames))]
		if r.IntN(4) > 0 {
			out[i].Resources = &v1.ResourceRequirements{Requests: genList(r, 2)}
		}
		if r.IntN(2) == 0 {
			out[i].AllocatedResources = genList(r, 2)
		}
	}
	return out
}

// genPod returns a random pod with the given UID in namespace ns.
func genPod(r *rand.Rand, uid, ns string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + uid, Namespace: ns, UID: types.UID(uid)},
	}
	names := append([]string(nil), containerNames...)
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	nc := r.IntN(4)
	for i := range nc {
		pod.Spec.Containers = append(pod.Spec.Containers, genContainer(r, names[i]))
	}
	ni := r.IntN(4)
	for i := range ni {
		c := genContainer(r, names[(nc+i)%len(names)])
		switch r.IntN(3) {
		case 0:
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		case 1:
			never := v1.ContainerRestartPolicy("OnFailure")
			c.RestartPolicy = &never
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	pod.Status.ContainerStatuses = genStatuses(r)
	pod.Status.InitContainerStatuses = genStatuses(r)
	switch r.IntN(5) {
	case 0:
		pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodResizePending, Reason: v1.PodReasonInfeasible}}
	case 1:
		pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady}, {Type: v1.PodResizePending, Reason: v1.PodReasonDeferred}, {Type: v1.PodResizePending, Reason: v1.PodReasonInfeasible}}
	}
	if r.IntN(4) == 0 {
		pod.Spec.Resources = &v1.ResourceRequirements{Requests: genList(r, 3)}
	}
	if r.IntN(4) == 0 {
		pod.Spec.Overhead = genList(r, 2)
	}
	nv := r.IntN(4)
	for i := range nv {
		v := v1.Volume{Name: fmt.Sprintf("v%d", i)}
		switch r.IntN(3) {
		case 0:
			v.PersistentVolumeClaim = &v1.PersistentVolumeClaimVolumeSource{ClaimName: []string{"a", "b", "c"}[r.IntN(3)]}
		case 1:
			v.Ephemeral = &v1.EphemeralVolumeSource{}
		default:
			v.EmptyDir = &v1.EmptyDirVolumeSource{}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, v)
	}
	switch r.IntN(8) {
	case 0:
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{}}
	case 1:
		pod.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{}}
	case 2:
		pod.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{}}
	case 3:
		pod.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "zone"}},
		}}
	case 4: // required anti-affinity scoped to the hostname only: not non-host-scoped
		pod.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: v1.LabelHostname}},
		}}
	case 5: // a hostname term and a zone term: non-host-scoped
		pod.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: v1.LabelHostname}, {TopologyKey: v1.LabelTopologyZone}},
		}}
	}
	return pod
}
