package nodeinfo

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

func TestPodKey(t *testing.T) {
	_, err := PodKey(nil)
	require.ErrorIs(t, err, ErrNilPod)
	_, err = PodKey(mkPod(""))
	require.ErrorIs(t, err, ErrEmptyUID)
	k, err := PodKey(mkPod("uid-1"))
	require.NoError(t, err)
	require.Equal(t, "uid-1", k)

	_, err = NewPodInfo(nil)
	require.ErrorIs(t, err, ErrNilPod)
	_, err = NewPodInfo(mkPod(""))
	require.ErrorIs(t, err, ErrEmptyUID)
}

func TestPodInfoRequests(t *testing.T) {
	cpuMem := func(cpu, mem int64) Resource { return Resource{MilliCPU: cpu, Memory: mem} }
	tests := []struct {
		name     string
		pod      *v1.Pod
		want     Resource
		non0CPU  int64
		non0Mem  int64
		nScalars int
	}{
		{
			name:    "4.3 container without requests",
			pod:     mkPod("u", withContainers(ctr("a", nil))),
			want:    cpuMem(0, 0),
			non0CPU: 100, non0Mem: 200 * mi,
		},
		{
			name:    "no containers at all",
			pod:     mkPod("u"),
			want:    cpuMem(0, 0),
			non0CPU: 0, non0Mem: 0,
		},
		{
			name:    "4.3 explicit cpu 0 plus request-less init container",
			pod:     mkPod("u", withContainers(ctr("a", rl("cpu", "0"))), withInit(ctr("i", nil))),
			want:    cpuMem(0, 0),
			non0CPU: 100, non0Mem: 200 * mi,
		},
		{
			name:    "explicit zeros stay zero",
			pod:     mkPod("u", withContainers(ctr("a", rl("cpu", "0", "memory", "0")))),
			want:    cpuMem(0, 0),
			non0CPU: 0, non0Mem: 0,
		},
		{
			name:    "defaults apply per container",
			pod:     mkPod("u", withContainers(ctr("a", rl("cpu", "250m")), ctr("b", rl("memory", "1Gi")))),
			want:    cpuMem(250, 1024*mi),
			non0CPU: 350, non0Mem: 1024*mi + 200*mi,
		},
		{
			name:    "4.3 pod-level cpu only, two request-less containers",
			pod:     mkPod("u", withContainers(ctr("a", nil), ctr("b", nil)), withPodRequests(rl("cpu", "300m"))),
			want:    cpuMem(300, 0),
			non0CPU: 300, non0Mem: 400 * mi,
		},
		{
			name: "4.3 pod-level cpu only plus overhead memory 10",
			pod: mkPod("u", withContainers(ctr("a", nil), ctr("b", nil)), withPodRequests(rl("cpu", "300m")),
				withOverhead(rl("memory", "10"))),
			want:    cpuMem(300, 10),
			non0CPU: 300, non0Mem: 10,
		},
		{
			name:    "pod-level memory only: cpu default per container",
			pod:     mkPod("u", withContainers(ctr("a", nil), ctr("b", nil)), withPodRequests(rl("memory", "1Gi"))),
			want:    cpuMem(0, 1024*mi),
			non0CPU: 200, non0Mem: 1024 * mi,
		},
		{
			name:    "init container max",
			pod:     mkPod("u", withContainers(ctr("a", rl("cpu", "100m", "memory", "1Gi")), ctr("b", rl("cpu", "200m"))), withInit(ctr("i", rl("cpu", "500m", "memory", "512Mi")))),
			want:    cpuMem(500, 1024*mi),
			non0CPU: 500, non0Mem: 1024*mi + 200*mi,
		},
		{
			name: "sidecar sums, plain init after it adds the sidecars",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m"))),
				withInit(sidecar("s", rl("cpu", "50m")), ctr("i", rl("cpu", "200m")))),
			want:    cpuMem(250, 0), // max(100+50, 200+50)
			non0CPU: 250, non0Mem: 400 * mi,
		},
		{
			name: "plain init before the sidecar does not see it",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m"))),
				withInit(ctr("i", rl("cpu", "200m")), sidecar("s", rl("cpu", "50m")))),
			want:    cpuMem(200, 0), // max(100+50, 200)
			non0CPU: 200, non0Mem: 400 * mi,
		},
		{
			name: "pod-level override of cpu and hugepages; ephemeral storage from containers",
			pod: mkPod("u",
				withContainers(ctr("a", rl("cpu", "1", "memory", "1Gi", "ephemeral-storage", "1Gi", "hugepages-2Mi", "4Mi"))),
				withPodRequests(rl("cpu", "2", "hugepages-2Mi", "8Mi", "ephemeral-storage", "5Gi"))),
			want:    Resource{MilliCPU: 2000, Memory: 1024 * mi, EphemeralStorage: 1024 * mi}.WithScalar("hugepages-2Mi", 8*mi),
			non0CPU: 2000, non0Mem: 1024 * mi, nScalars: 1,
		},
		{
			name: "pod-level requests without cpu/memory/hugepages are not in effect",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m"))),
				withPodRequests(rl("ephemeral-storage", "5Gi"))),
			want:    cpuMem(100, 0),
			non0CPU: 100, non0Mem: 200 * mi,
		},
		{
			name: "overhead",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m", "memory", "100Mi")), ctr("b", nil)),
				withOverhead(rl("cpu", "250m", "memory", "120Mi", "example.com/foo", "1"))),
			want:    Resource{MilliCPU: 350, Memory: 220 * mi}.WithScalar("example.com/foo", 1),
			non0CPU: 450, non0Mem: 420 * mi, nScalars: 1,
		},
		{
			name: "resize: max of spec, status and allocated (status wins)",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m", "memory", "1Gi"))),
				withStatus("a", rl("cpu", "200m"), rl("cpu", "150m", "memory", "2Gi"))),
			want:    cpuMem(200, 2048*mi),
			non0CPU: 200, non0Mem: 2048 * mi,
		},
		{
			name: "resize: spec wins when largest",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "300m"))),
				withStatus("a", rl("cpu", "200m"), rl("cpu", "250m"))),
			want:    cpuMem(300, 0),
			non0CPU: 300, non0Mem: 200 * mi,
		},
		{
			name: "resize infeasible: spec left out",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "300m", "memory", "1Gi"))),
				withStatus("a", rl("cpu", "200m"), rl("cpu", "250m")), withResizePending(v1.PodReasonInfeasible)),
			want:    cpuMem(250, 0),
			non0CPU: 250, non0Mem: 200 * mi,
		},
		{
			name: "resize: only the first PodResizePending condition counts",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "300m"))),
				withStatus("a", rl("cpu", "200m"), nil), withResizePending(v1.PodReasonDeferred, v1.PodReasonInfeasible)),
			want:    cpuMem(300, 0),
			non0CPU: 300, non0Mem: 200 * mi,
		},
		{
			name: "status without resources: actuated falls back to allocated",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m"))), func(p *v1.Pod) {
				p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "a", AllocatedResources: rl("cpu", "900m")}}
			}),
			want:    cpuMem(900, 0),
			non0CPU: 900, non0Mem: 200 * mi,
		},
		{
			name: "plain init containers and sidecars both use their status",
			pod: mkPod("u", withInit(ctr("i", rl("cpu", "100m")), sidecar("s", rl("cpu", "10m"))),
				withInitStatus("i", rl("cpu", "900m"), nil), withInitStatus("s", rl("cpu", "40m"), nil)),
			want:    cpuMem(900, 0), // actuated total max(sum 40, init 900)
			non0CPU: 900, non0Mem: 200 * mi,
		},
		{
			name: "container status wins a name clash",
			pod: mkPod("u", withContainers(ctr("a", rl("cpu", "100m"))),
				withStatus("a", rl("cpu", "700m"), nil), withInitStatus("a", rl("cpu", "300m"), nil)),
			want:    cpuMem(700, 0),
			non0CPU: 700, non0Mem: 200 * mi,
		},
		{
			name: "scalars: extended summed, invalid dropped, zero kept",
			pod: mkPod("u", withContainers(
				ctr("a", rl("example.com/foo", "2", "random-invalid-extended-key", "5", "hugepages-2Mi", "2Mi", "kubernetes.io/bar", "1")),
				ctr("b", rl("example.com/foo", "3", "attachable-volumes-aws-ebs", "1", "nvidia.com/gpu", "0", "requests.example.com/x", "1")))),
			want: Resource{}.WithScalar("example.com/foo", 5).WithScalar("hugepages-2Mi", 2*mi).
				WithScalar("kubernetes.io/bar", 1).WithScalar("attachable-volumes-aws-ebs", 1).WithScalar("nvidia.com/gpu", 0),
			non0CPU: 200, non0Mem: 400 * mi, nScalars: 5,
		},
		{
			name:    "ceil once on the aggregate: two 0.5m cpu make 1",
			pod:     mkPod("u", withContainers(ctr("a", rl("cpu", "0.5m", "memory", "0.4")), ctr("b", rl("cpu", "0.5m", "memory", "0.4")), ctr("c", rl("memory", "0.4")))),
			want:    cpuMem(1, 2), // memory 1.2 -> 2
			non0CPU: 101, non0Mem: 2,
		},
		{
			name:    "ephemeral storage and pods",
			pod:     mkPod("u", withContainers(ctr("a", rl("ephemeral-storage", "1Ki", "pods", "2")))),
			want:    Resource{EphemeralStorage: 1024, AllowedPodNumber: 2},
			non0CPU: 100, non0Mem: 200 * mi,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPodInfo(t, tc.pod)
			require.True(t, tc.want.Equal(p.Requests()), "want %v got %v", tc.want, p.Requests())
			require.Equal(t, tc.want, p.Requests())
			require.Equal(t, tc.non0CPU, p.NonZeroCPU(), "non-zero cpu")
			require.Equal(t, tc.non0Mem, p.NonZeroMemory(), "non-zero memory")
			require.Equal(t, tc.nScalars, p.Requests().NumScalars())
		})
	}
}

func TestPodInfoDoesNotMutatePod(t *testing.T) {
	pod := mkPod("u", withContainers(ctr("a", rl("cpu", "100m", "example.com/foo", "1")), ctr("b", rl("cpu", "9223372036854775807"))),
		withInit(sidecar("s", rl("cpu", "50m"))), withOverhead(rl("cpu", "1")),
		withStatus("a", rl("cpu", "200m"), rl("cpu", "1")))
	before := pod.DeepCopy()
	_ = rawPodInfo(t, pod)
	_ = rawPodInfo(t, pod)
	require.Equal(t, before, pod)
}

func TestPodInfoSaturates(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		wantCPU int64
		wantMem int64
	}{
		{"huge cpu", mkPod("u", withContainers(ctr("a", rl("cpu", "10E", "memory", "8E")), ctr("b", rl("memory", "8E")))), 1<<63 - 1, 1<<63 - 1},
		{"sum overflows int64 quantity", mkPod("u", withContainers(ctr("a", rl("memory", "9223372036854775807")), ctr("b", rl("memory", "9223372036854775807")))), 0, 1<<63 - 1},
		{"negative huge", mkPod("u", withContainers(ctr("a", rl("cpu", "-10E", "memory", "-9E")), ctr("b", rl("memory", "-9E")))), -1 << 63, -1 << 63},
		{"int64 overflow midway, back in range at the end", mkPod("u",
			withContainers(ctr("a", rl("cpu", "4611686018427387904m", "memory", "4611686018427387904")), ctr("b", rl("cpu", "4611686018427387904m", "memory", "4611686018427387904"))),
			withOverhead(rl("cpu", "-4611686018427387904m", "memory", "-4611686018427387905"))), 1 << 62, 1<<62 - 1},
		{"exactly max", mkPod("u", withContainers(ctr("a", rl("memory", "9223372036854775807")))), 0, 1<<63 - 1},
		{"just below max after ceil", mkPod("u", withContainers(ctr("a", rl("cpu", "9223372036854775806m")))), 1<<63 - 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := rawPodInfo(t, tc.pod)
			require.Equal(t, tc.wantCPU, p.Requests().MilliCPU)
			require.Equal(t, tc.wantMem, p.Requests().Memory)
		})
	}
}

func TestPodInfoHostPorts(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := mkPod("u", func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{
			{Name: "plain", Ports: []v1.ContainerPort{{HostPort: 1}}},
			{Name: "side", RestartPolicy: &always, Ports: []v1.ContainerPort{{HostPort: 2, Protocol: v1.ProtocolUDP}, {HostPort: 0, ContainerPort: 9}}},
		}
		p.Spec.Containers = []v1.Container{
			{Name: "a", Ports: []v1.ContainerPort{{ContainerPort: 80}, {HostPort: 3, HostIP: "10.0.0.1"}}},
			{Name: "b", Ports: []v1.ContainerPort{{HostPort: 4, HostIP: "127.0.0.1", Protocol: v1.ProtocolSCTP}}},
		}
	})
	p := mustPodInfo(t, pod)
	require.Equal(t, []HostPort{
		{IP: "0.0.0.0", Protocol: v1.ProtocolUDP, Port: 2},
		{IP: "10.0.0.1", Protocol: v1.ProtocolTCP, Port: 3},
		{IP: "127.0.0.1", Protocol: v1.ProtocolSCTP, Port: 4},
	}, p.HostPorts())
	require.Nil(t, mustPodInfo(t, mkPod("v", withContainers(ctr("a", nil)))).HostPorts())
}

func TestPodInfoPVCKeysAndAffinity(t *testing.T) {
	p := mustPodInfo(t, mkPod("u", withPVCs("a", "b", "a"), withEphemeralVolume(), withNode("n1")))
	require.Equal(t, []string{"ns/a", "ns/b", "ns/a"}, p.PVCKeys())
	require.Equal(t, "n1", p.NodeName())
	require.Equal(t, "u", p.Key())
	require.Nil(t, mustPodInfo(t, mkPod("v", withEphemeralVolume())).PVCKeys())

	emptyTopology := &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{}}}}
	preferredZone := &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
		{Weight: 1, PodAffinityTerm: v1.PodAffinityTerm{TopologyKey: v1.LabelTopologyZone}}}}}
	requiredZoneAffinity := &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		{TopologyKey: v1.LabelTopologyZone}}}}
	tests := []struct {
		name                   string
		aff                    *v1.Affinity
		affinity, req, nonHost bool
	}{
		{"none", nil, false, false, false},
		{"node affinity only", nodeAffinityOnly, false, false, false},
		{"pod affinity without terms", podAffinity, true, false, false},
		{"required pod affinity, zone", requiredZoneAffinity, true, false, false},
		{"preferred anti-affinity", preferredAntiAff, true, false, false},
		{"preferred anti-affinity, zone", preferredZone, true, false, false},
		{"required anti-affinity", requiredAntiAff, true, true, true},
		{"required anti-affinity, hostname terms only", hostnameAntiAff, true, true, false},
		{"required anti-affinity, hostname and zone terms", mixedAntiAff, true, true, true},
		{"required anti-affinity, empty topology key", emptyTopology, true, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := mkPod("u", withAffinity(tc.aff))
			p := mustPodInfo(t, pod)
			require.Equal(t, tc.affinity, p.HasAffinity())
			require.Equal(t, tc.req, p.HasRequiredAntiAffinity())
			require.Equal(t, tc.nonHost, p.HasRequiredNonHostScopedAntiAffinity())
			require.Equal(t, tc.affinity, PodHasAffinity(pod))
			require.Equal(t, tc.req, PodHasRequiredAntiAffinity(pod))
			require.Equal(t, tc.nonHost, PodHasRequiredNonHostScopedAntiAffinity(pod))
		})
	}
	require.False(t, PodHasAffinity(nil))
	require.False(t, PodHasRequiredAntiAffinity(nil))
	require.False(t, PodHasRequiredNonHostScopedAntiAffinity(nil))
}

func TestPodInfoNilSafe(t *testing.T) {
	var p *PodInfo
	require.Nil(t, p.Pod())
	require.Equal(t, "", p.Key())
	require.Equal(t, "", p.NodeName())
	require.Equal(t, Resource{}, p.Requests())
	require.Zero(t, p.NonZeroCPU())
	require.Zero(t, p.NonZeroMemory())
	require.False(t, p.HasAffinity())
	require.False(t, p.HasRequiredAntiAffinity())
	require.False(t, p.HasRequiredNonHostScopedAntiAffinity())
	require.Nil(t, p.HostPorts())
	require.Nil(t, p.PVCKeys())
}

func TestOddInputsDoNotPanic(t *testing.T) {
	odd := []string{"1e100", "-1e100", "1e-9", "-1e-9", "0.000000001", "99999999999999999999999", "-99999999999999999999999m", "9223372036854775808", "-9223372036854775809"}
	for _, v := range odd {
		t.Run(v, func(t *testing.T) {
			list := rl("cpu", v, "memory", v, "example.com/foo", v, "pods", v, "ephemeral-storage", v)
			r := NewResource(list)
			pod := mkPod("u", withContainers(ctr("a", list), ctr("b", list)), withInit(sidecar("s", list), ctr("i", list)),
				withStatus("a", list, list), withPodRequests(list), withOverhead(list))
			p := rawPodInfo(t, pod)
			s := NewNodeState(nil)
			s.SetNode(mkNode("n", list))
			s.AddPod(p)
			s.AddPod(p)
			require.NoError(t, s.RemovePod("u", true, true, true))
			n := s.Freeze()
			require.Equal(t, p.Requests().MilliCPU, n.Requested().MilliCPU)
			require.Equal(t, r, n.Allocatable())
			if q := list[v1.ResourceCPU]; q.Sign() > 0 {
				require.Positive(t, p.Requests().MilliCPU)
			} else {
				require.LessOrEqual(t, p.Requests().MilliCPU, int64(0))
			}
		})
	}
	// Pods with empty containers, statuses and nil maps.
	pod := mkPod("u", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{{}}
		p.Spec.InitContainers = []v1.Container{{}}
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Resources: &v1.ResourceRequirements{}}}
		p.Spec.Resources = &v1.ResourceRequirements{}
		p.Spec.Volumes = []v1.Volume{{}}
		p.Spec.Affinity = &v1.Affinity{}
	})
	p := rawPodInfo(t, pod)
	require.Equal(t, Resource{}, p.Requests())
	require.Equal(t, int64(100), p.NonZeroCPU())
	s := NewNodeState(nil)
	s.AddPod(&PodInfo{}) // a zero PodInfo is harmless
	s.AddPod(p)
	require.Equal(t, 2, s.NumPods())
}
