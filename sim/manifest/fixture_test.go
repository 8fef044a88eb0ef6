package manifest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// The fixture sim/testdata/cluster-300.yaml.gz is an anonymised cluster in
// the shape of `kubectl get nodes,pods -A -o yaml`: 300 nodes in six node
// pools over three zones, and the pods of DaemonSets, Deployments,
// StatefulSets and Jobs, some pending, some finished. It is generated, not
// taken from a cluster: every name is a hash. TestFixture checks that the
// committed file is what genFixture makes; to change it, change genFixture
// and run
//
//	go test ./sim/manifest -run TestFixture -update
var update = flag.Bool("update", false, "rewrite sim/testdata/cluster-300.yaml.gz from genFixture")

const fixturePath = "../testdata/cluster-300.yaml.gz"

func TestFixture(t *testing.T) {
	if !testing.Short() || *update {
		checkFixture(t)
	}
	c, err := Load([]string{fixturePath}, Options{})
	require.NoError(t, err)
	require.Len(t, c.Nodes, 300)
	require.Empty(t, c.Skipped)
	require.Positive(t, c.Terminal)
	require.Positive(t, len(c.Pending))
	require.Greater(t, len(c.Bound), 3000)
	zones := map[string]int{}
	for _, n := range c.Nodes {
		zones[n.Labels[v1.LabelTopologyZone]]++
	}
	require.Len(t, zones, 3)
	t.Logf("%s; %d terminal pods", c.Summary(), c.Terminal)
}

// checkFixture compares the fixture with genFixture's output (and
// rewrites it first with -update). It takes seconds: not with -short.
func checkFixture(t *testing.T) {
	want := genFixture()
	if *update {
		var b bytes.Buffer
		w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
		require.NoError(t, err)
		_, err = w.Write(want)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		require.NoError(t, os.WriteFile(fixturePath, b.Bytes(), 0o644))
	}
	f, err := os.Open(fixturePath)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	got, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "%s is not what genFixture makes: run go test ./sim/manifest -run TestFixture -update", fixturePath)
}

// fixture generator: a PRNG and names.
type fixGen struct {
	r     *rand.Rand
	epoch time.Time
	rv    int
}

// hash is an anonymised name: the first n hex digits of a hash of s.
func hash(s string, n int) string {
	h := sha256.Sum256([]byte("schedcache-fixture/" + s))
	return hex.EncodeToString(h[:])[:n]
}

func (g *fixGen) uid() types.UID {
	var b [16]byte
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80 // version 4, variant 1
	h := hex.EncodeToString(b[:])
	return types.UID(h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:])
}

func (g *fixGen) nextRV() string {
	g.rv += 1 + g.r.IntN(500)
	return fmt.Sprint(g.rv)
}

func (g *fixGen) time(maxDays int) metav1.Time {
	return metav1.NewTime(g.epoch.Add(time.Duration(g.r.IntN(maxDays*24*3600)) * time.Second))
}

// suffix is a pod-name suffix as the ReplicaSet controller writes it.
func (g *fixGen) suffix(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.IntN(len(alphabet))]
	}
	return string(b)
}

type fixPool struct {
	name, instance string
	count          int
	cpu, memGi     int64 // capacity
	allocCPU       int64 // millicores
	allocMemMi     int64
	gpus           int64
	taints         []v1.Taint
	labels         map[string]string
}

var fixPools = []fixPool{
	{name: "system", instance: "t3.xlarge", count: 9, cpu: 4, memGi: 16, allocCPU: 3920, allocMemMi: 14_300,
		taints: []v1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectNoSchedule}}},
	{name: "general", instance: "m6i.4xlarge", count: 150, cpu: 16, memGi: 64, allocCPU: 15_890, allocMemMi: 59_500},
	{name: "highmem", instance: "r6i.8xlarge", count: 54, cpu: 32, memGi: 256, allocCPU: 31_850, allocMemMi: 246_000,
		labels: map[string]string{"workload-class": "memory"}},
	{name: "compute", instance: "c6i.16xlarge", count: 45, cpu: 64, memGi: 128, allocCPU: 63_770, allocMemMi: 121_000,
		labels: map[string]string{"workload-class": "compute"}},
	{name: "gpu", instance: "g5.4xlarge", count: 12, cpu: 16, memGi: 64, allocCPU: 15_890, allocMemMi: 59_500, gpus: 1,
		taints: []v1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: v1.TaintEffectNoSchedule}},
		labels: map[string]string{"accelerator": "gpu"}},
	{name: "spot", instance: "m6i.2xlarge", count: 30, cpu: 8, memGi: 32, allocCPU: 7910, allocMemMi: 29_000,
		taints: []v1.Taint{{Key: "spot.example.com/interruptible", Value: "true", Effect: v1.TaintEffectNoSchedule}},
		labels: map[string]string{"spot.example.com/interruptible": "true"}},
}

const (
	fixRegion  = "region-1"
	resGPU     = v1.ResourceName("nvidia.com/gpu")
	labelPool  = "node.example.com/pool"
	fixNodeCap = 110
)

var fixZones = []string{"region-1a", "region-1b", "region-1c"}

// fixImage is one image of the fixture's registry.
type fixImage struct {
	name, digest string
	size         int64
}

// fixNode is a node being filled.
type fixNode struct {
	n                *v1.Node
	pool             *fixPool
	cpu, mem, gpu    int64 // free: millicores, MiB, GPUs
	pods             int
	apps             map[string]bool
	notReady, cordon bool
}

// fixApp is a workload whose pods the generator places.
type fixApp struct {
	kind, name, ns string
	ownerUID       types.UID
	replicas       int
	cpu, memMi     int64 // per pod, first container
	sidecar        bool
	gpu            bool
	pool           string // required pool ("": any untainted)
	tolerate       []v1.Toleration
	antiRequired   bool
	antiPreferred  bool
	spread         bool
	priority       string
	phase          v1.PodPhase // Succeeded or Failed for finished Job pods
}

func genFixture() []byte {
	g := &fixGen{r: rand.New(rand.NewPCG(28, 2)), epoch: time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC), rv: 4_000_000}
	images := make([]fixImage, 60)
	for i := range images {
		d := sha256.Sum256([]byte(fmt.Sprint("image", i)))
		images[i] = fixImage{name: "registry.example.com/" + hash(fmt.Sprint("image", i), 10), digest: hex.EncodeToString(d[:]),
			size: int64(8<<20) + g.r.Int64N(900<<20)}
	}
	var nodes []*fixNode
	for pi := range fixPools {
		p := &fixPools[pi]
		for i := 0; i < p.count; i++ {
			nodes = append(nodes, g.node(p, i, len(nodes), images))
		}
	}
	// Two cordoned nodes and one NotReady, among the general pool.
	nodes[20].cordon, nodes[77].cordon, nodes[130].notReady = true, true, true
	for _, fn := range nodes {
		if fn.cordon {
			fn.n.Spec.Unschedulable = true
			fn.n.Spec.Taints = append(fn.n.Spec.Taints, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
		}
		if fn.notReady {
			fn.n.Status.Conditions[0].Status = v1.ConditionUnknown
			fn.n.Status.Conditions[0].Reason = "NodeStatusUnknown"
			fn.n.Status.Conditions[0].Message = "Kubelet stopped posting node status."
			fn.n.Spec.Taints = append(fn.n.Spec.Taints,
				v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoSchedule},
				v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute, TimeAdded: ptrTime(g.time(1))})
		}
	}
	var pods []*v1.Pod
	// DaemonSets: on every node, and the GPU plugin on the GPU nodes.
	for _, ds := range []struct {
		name, ns   string
		cpu, memMi int64
		pool       string
	}{{"node-agent", "kube-system", 50, 64, ""}, {"log-agent", "ns-" + hash("ns-monitoring", 6), 100, 200, ""}, {"gpu-plugin", "kube-system", 20, 32, "gpu"}} {
		uid := g.uid()
		name := ds.name + "-" + hash("ds/"+ds.name, 5)
		for _, fn := range nodes {
			if ds.pool != "" && fn.pool.name != ds.pool {
				continue
			}
			app := &fixApp{kind: "DaemonSet", name: name, ns: ds.ns, ownerUID: uid, cpu: ds.cpu, memMi: ds.memMi, priority: "system-node-critical",
				tolerate: []v1.Toleration{{Operator: v1.TolerationOpExists}}}
			p := g.pod(app, name+"-"+g.suffix(5), images)
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{fn.n.Name}}}}}}}}
			g.bind(p, fn, app)
			pods = append(pods, p)
		}
	}
	// The workloads, placed in turn.
	var apps []*fixApp
	namespaces := make([]string, 14)
	for i := range namespaces {
		namespaces[i] = "ns-" + hash(fmt.Sprint("namespace", i), 6)
	}
	replicaChoices := []int{1, 2, 2, 3, 3, 3, 4, 5, 6, 8, 10, 12, 16, 20, 30, 40}
	cpuChoices := []int64{50, 100, 100, 200, 250, 250, 500, 500, 750, 1000, 1000, 1500, 2000, 4000}
	memChoices := []int64{64, 128, 256, 256, 512, 512, 768, 1024, 1024, 2048, 4096, 8192}
	for i := range 230 {
		a := &fixApp{kind: "ReplicaSet", ns: namespaces[g.r.IntN(len(namespaces))], ownerUID: g.uid(),
			replicas: replicaChoices[g.r.IntN(len(replicaChoices))],
			cpu:      cpuChoices[g.r.IntN(len(cpuChoices))], memMi: memChoices[g.r.IntN(len(memChoices))]}
		a.name = "app-" + hash(fmt.Sprint("deployment", i), 8) + "-" + g.suffix(9)
		a.sidecar = g.r.IntN(4) == 0
		switch x := g.r.IntN(100); {
		case x < 12:
			a.pool, a.memMi = "highmem", a.memMi*8
		case x < 18:
			a.pool, a.cpu = "compute", a.cpu*4
		case x < 26:
			a.pool = "spot"
			a.tolerate = []v1.Toleration{{Key: "spot.example.com/interruptible", Operator: v1.TolerationOpEqual, Value: "true", Effect: v1.TaintEffectNoSchedule}}
		}
		switch x := g.r.IntN(100); {
		case x < 8:
			a.antiRequired = true
		case x < 35:
			a.antiPreferred = true
		}
		a.spread = g.r.IntN(100) < 18
		apps = append(apps, a)
	}
	// Special workloads: cluster DNS on the system pool, GPU trainers (one
	// too many to fit), a batch of large pods that mostly stay pending,
	// and an anti-affine set larger than its pool.
	apps = append(apps,
		&fixApp{kind: "ReplicaSet", name: "dns-" + g.suffix(9), ns: "kube-system", ownerUID: g.uid(), replicas: 3, cpu: 100, memMi: 70, pool: "system",
			antiRequired: true, priority: "system-cluster-critical",
			tolerate: []v1.Toleration{{Key: "CriticalAddonsOnly", Operator: v1.TolerationOpExists}}},
		&fixApp{kind: "ReplicaSet", name: "trainer-" + hash("trainer", 6) + "-" + g.suffix(9), ns: namespaces[3], ownerUID: g.uid(), replicas: 13, cpu: 8000, memMi: 32_768,
			gpu: true, pool: "gpu", tolerate: []v1.Toleration{{Key: "nvidia.com/gpu", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}},
		&fixApp{kind: "ReplicaSet", name: "batch-" + hash("batch", 6) + "-" + g.suffix(9), ns: namespaces[5], ownerUID: g.uid(), replicas: 60, cpu: 48_000, memMi: 65_536, pool: "compute"},
		&fixApp{kind: "ReplicaSet", name: "cache-" + hash("cache", 6) + "-" + g.suffix(9), ns: namespaces[7], ownerUID: g.uid(), replicas: 60, cpu: 1000, memMi: 16_384,
			pool: "highmem", antiRequired: true},
	)
	for i := range 4 {
		apps = append(apps, &fixApp{kind: "StatefulSet", name: "db-" + hash(fmt.Sprint("statefulset", i), 6), ns: namespaces[(i*5)%len(namespaces)],
			ownerUID: g.uid(), replicas: 3, cpu: 2000, memMi: 8192, antiRequired: true, spread: true})
	}
	for i := range 5 {
		phase := v1.PodSucceeded
		if i == 4 {
			phase = v1.PodFailed
		}
		apps = append(apps, &fixApp{kind: "Job", name: "job-" + hash(fmt.Sprint("job", i), 8), ns: namespaces[(i*3+1)%len(namespaces)],
			ownerUID: g.uid(), replicas: 4 + g.r.IntN(8), cpu: 500, memMi: 512, phase: phase})
	}
	for _, a := range apps {
		for k := 0; k < a.replicas; k++ {
			name := a.name + "-" + g.suffix(5)
			switch a.kind {
			case "StatefulSet":
				name = fmt.Sprintf("%s-%d", a.name, k)
			case "Job":
				name = a.name + "-" + g.suffix(5)
			}
			p := g.pod(a, name, images)
			if fn := g.place(nodes, a); fn != nil {
				g.bind(p, fn, a)
			} else {
				p.Status.Phase = v1.PodPending
				p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
					LastTransitionTime: p.CreationTimestamp,
					Message:            fmt.Sprintf("0/%d nodes are available: insufficient resources or no node matches the pod's affinity and tolerations.", len(nodes))}}
			}
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].n.Name < nodes[j].n.Name })
	var items []any
	for _, fn := range nodes {
		items = append(items, toMap(fn.n))
	}
	for _, p := range pods {
		items = append(items, toMap(p))
	}
	out, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": items})
	if err != nil {
		panic(err)
	}
	return out
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// toMap is obj as a generic map (the YAML's keys sorted as kubectl's).
func toMap(obj any) map[string]any {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return m
}

func (g *fixGen) node(p *fixPool, i, global int, images []fixImage) *fixNode {
	name := "node-" + hash(fmt.Sprint("node", global), 10)
	zone := fixZones[(i+global)%len(fixZones)]
	n := &v1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
	n.Name, n.UID, n.ResourceVersion, n.CreationTimestamp = name, g.uid(), g.nextRV(), g.time(60)
	n.Labels = map[string]string{
		"beta.kubernetes.io/arch":        "amd64",
		"beta.kubernetes.io/os":          "linux",
		v1.LabelArchStable:               "amd64",
		v1.LabelOSStable:                 "linux",
		v1.LabelHostname:                 name,
		v1.LabelInstanceTypeStable:       p.instance,
		v1.LabelInstanceType:             p.instance,
		v1.LabelTopologyRegion:           fixRegion,
		v1.LabelTopologyZone:             zone,
		v1.LabelFailureDomainBetaRegion:  fixRegion,
		v1.LabelFailureDomainBetaZone:    zone,
		labelPool:                        p.name,
		"node.example.com/image-version": "2026.02.1",
		"topology.example.com/rack":      fmt.Sprintf("rack-%02d", global%24),
	}
	for k, v := range p.labels {
		n.Labels[k] = v
	}
	n.Annotations = map[string]string{
		"node.alpha.kubernetes.io/ttl":                           "0",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
	}
	n.Spec.ProviderID = "cloud://" + zone + "/" + hash(name+"/instance", 17)
	n.Spec.PodCIDR = fmt.Sprintf("10.%d.%d.0/24", 64+global/256, global%256)
	n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
	n.Spec.Taints = append([]v1.Taint(nil), p.taints...)
	capacity := v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(p.cpu, resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(p.memGi<<30, resource.BinarySI),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		v1.ResourcePods:             *resource.NewQuantity(fixNodeCap, resource.DecimalSI),
		"hugepages-2Mi":             resource.MustParse("0"),
	}
	alloc := v1.ResourceList{
		v1.ResourceCPU:              *resource.NewMilliQuantity(p.allocCPU, resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(p.allocMemMi<<20, resource.BinarySI),
		v1.ResourceEphemeralStorage: resource.MustParse("95Gi"),
		v1.ResourcePods:             *resource.NewQuantity(fixNodeCap, resource.DecimalSI),
		"hugepages-2Mi":             resource.MustParse("0"),
	}
	if p.gpus > 0 {
		capacity[resGPU] = *resource.NewQuantity(p.gpus, resource.DecimalSI)
		alloc[resGPU] = *resource.NewQuantity(p.gpus, resource.DecimalSI)
	}
	n.Status.Capacity, n.Status.Allocatable = capacity, alloc
	heartbeat := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).Add(-time.Duration(g.r.IntN(40)) * time.Second))
	since := n.CreationTimestamp
	cond := func(t v1.NodeConditionType, s v1.ConditionStatus, reason, msg string) v1.NodeCondition {
		return v1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: heartbeat, LastTransitionTime: since, Reason: reason, Message: msg}
	}
	n.Status.Conditions = []v1.NodeCondition{
		cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		cond(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
	}
	n.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", 16+global/65536, global/256%256, global%256+1)},
		{Type: v1.NodeHostName, Address: name},
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	n.Status.NodeInfo = v1.NodeSystemInfo{
		MachineID: hash(name+"/machine", 32), SystemUUID: string(g.uid()), BootID: string(g.uid()),
		KernelVersion: "6.6.87", OSImage: "Example Linux 2026.02", ContainerRuntimeVersion: "containerd://2.1.4",
		KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64",
	}
	k := 8 + g.r.IntN(8)
	perm := g.r.Perm(len(images))[:k]
	sort.Ints(perm)
	for _, x := range perm {
		im := images[x]
		n.Status.Images = append(n.Status.Images, v1.ContainerImage{
			Names: []string{im.name + "@sha256:" + im.digest, im.name + ":v" + fmt.Sprint(1+x%7)}, SizeBytes: im.size})
	}
	fn := &fixNode{n: n, pool: p, cpu: p.allocCPU, mem: p.allocMemMi, gpu: p.gpus, apps: map[string]bool{}}
	return fn
}

// pod makes a pod of a (not yet placed).
func (g *fixGen) pod(a *fixApp, name string, images []fixImage) *v1.Pod {
	p := &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	p.Name, p.Namespace, p.UID, p.ResourceVersion, p.CreationTimestamp = name, a.ns, g.uid(), g.nextRV(), g.time(60)
	p.Labels = map[string]string{"app": a.name}
	switch a.kind {
	case "ReplicaSet":
		p.GenerateName = a.name + "-"
		p.Labels["pod-template-hash"] = a.name[len(a.name)-9:]
	case "DaemonSet", "Job":
		p.GenerateName = a.name + "-"
		p.Labels["controller-revision-hash"] = hash(a.name+"/rev", 10)
	case "StatefulSet":
		p.Labels["statefulset.kubernetes.io/pod-name"] = name
	}
	apiVersion := "apps/v1"
	if a.kind == "Job" {
		apiVersion = "batch/v1"
	}
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: a.kind, Name: a.name, UID: a.ownerUID, Controller: &yes, BlockOwnerDeletion: &yes}}
	im := images[int(a.ownerUID[0])%len(images)]
	c := v1.Container{Name: "main", Image: im.name + ":v1", ImagePullPolicy: v1.PullIfNotPresent,
		TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
		Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(a.cpu, resource.DecimalSI), v1.ResourceMemory: *resource.NewQuantity(a.memMi<<20, resource.BinarySI)},
			Limits:   v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(a.memMi<<20, resource.BinarySI)},
		}}
	if a.gpu {
		c.Resources.Requests[resGPU] = *resource.NewQuantity(1, resource.DecimalSI)
		c.Resources.Limits[resGPU] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	if a.kind != "DaemonSet" {
		c.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}}
	}
	p.Spec.Containers = []v1.Container{c}
	if a.sidecar {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "proxy", Image: "registry.example.com/" + hash("proxy", 10) + ":v3",
			ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")}}})
	}
	grace := int64(30)
	p.Spec.TerminationGracePeriodSeconds = &grace
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	if a.kind == "Job" {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
	}
	p.Spec.DNSPolicy = v1.DNSClusterFirst
	p.Spec.SchedulerName = v1.DefaultSchedulerName
	p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = "default", "default"
	p.Spec.SecurityContext = &v1.PodSecurityContext{}
	p.Spec.EnableServiceLinks = &yes
	prio, preempt := int32(0), v1.PreemptLowerPriority
	switch a.priority {
	case "system-node-critical":
		prio = 2000001000
	case "system-cluster-critical":
		prio = 2000000000
	}
	p.Spec.PriorityClassName = a.priority
	p.Spec.Priority, p.Spec.PreemptionPolicy = &prio, &preempt
	sec := int64(300)
	p.Spec.Tolerations = append(append([]v1.Toleration(nil), a.tolerate...),
		v1.Toleration{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &sec},
		v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: &sec})
	if a.pool != "" && a.kind != "DaemonSet" {
		p.Spec.NodeSelector = map[string]string{labelPool: a.pool}
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": a.name}}
	switch {
	case a.antiRequired:
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{LabelSelector: sel, TopologyKey: v1.LabelHostname}}}}
	case a.antiPreferred:
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
			{Weight: 100, PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: v1.LabelHostname}}}}}
	}
	if a.spread {
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
			WhenUnsatisfiable: v1.ScheduleAnyway, LabelSelector: sel}}
	}
	if a.kind == "StatefulSet" {
		p.Spec.Hostname, p.Spec.Subdomain = name, a.name
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}
	}
	p.Status.QOSClass = v1.PodQOSBurstable
	return p
}

// place picks the node for a pod of a: the least allocated of a few
// fitting nodes drawn at random, or nil.
func (g *fixGen) place(nodes []*fixNode, a *fixApp) *fixNode {
	var best *fixNode
	bestScore := -1.0
	for try := 0; try < 400; try++ {
		fn := nodes[g.r.IntN(len(nodes))]
		if !g.fits(fn, a) {
			continue
		}
		score := float64(fn.cpu)/float64(fn.pool.allocCPU) + float64(fn.mem)/float64(fn.pool.allocMemMi)
		if score > bestScore {
			best, bestScore = fn, score
		}
		if try > 40 && best != nil {
			break
		}
	}
	return best
}

func (g *fixGen) fits(fn *fixNode, a *fixApp) bool {
	if fn.cordon || fn.notReady || fn.pods >= fixNodeCap {
		return false
	}
	if a.pool != "" && fn.pool.name != a.pool {
		return false
	}
	for _, t := range fn.pool.taints {
		ok := false
		for _, tol := range a.tolerate {
			if (tol.Key == "" || tol.Key == t.Key) && (tol.Operator == v1.TolerationOpExists || tol.Value == t.Value) &&
				(tol.Effect == "" || tol.Effect == t.Effect) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	need := a.cpu
	mem := a.memMi
	if a.sidecar {
		need, mem = need+100, mem+128
	}
	if fn.cpu < need || fn.mem < mem || (a.gpu && fn.gpu < 1) {
		return false
	}
	return !a.antiRequired || !fn.apps[a.name]
}

// bind puts p on fn and fills its running status.
func (g *fixGen) bind(p *v1.Pod, fn *fixNode, a *fixApp) {
	p.Spec.NodeName = fn.n.Name
	fn.cpu -= a.cpu
	fn.mem -= a.memMi
	if a.sidecar {
		fn.cpu, fn.mem = fn.cpu-100, fn.mem-128
	}
	if a.gpu {
		fn.gpu--
	}
	fn.pods++
	fn.apps[a.name] = true
	start := metav1.NewTime(p.CreationTimestamp.Add(time.Duration(1+g.r.IntN(20)) * time.Second))
	p.Status.Phase = v1.PodRunning
	if a.phase != "" {
		p.Status.Phase = a.phase
	}
	p.Status.HostIP = fn.n.Status.Addresses[0].Address
	p.Status.HostIPs = []v1.HostIP{{IP: p.Status.HostIP}}
	p.Status.PodIP = fmt.Sprintf("%s.%d", strings.TrimSuffix(fn.n.Spec.PodCIDR, ".0/24"), 2+fn.pods)
	p.Status.PodIPs = []v1.PodIP{{IP: p.Status.PodIP}}
	p.Status.StartTime = &start
	ready := v1.ConditionTrue
	if p.Status.Phase != v1.PodRunning {
		ready = v1.ConditionFalse
	}
	p.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: start},
		{Type: v1.PodReady, Status: ready, LastTransitionTime: start},
		{Type: v1.ContainersReady, Status: ready, LastTransitionTime: start},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: p.CreationTimestamp},
	}
}
