package workload

import (
	"errors"
	"flag"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

var test50k = flag.Bool("workload.50k", false, "also build the 50k-node cluster (about 20 s and a few GB)")

// standard is the 5k cluster shared by the tests, which only read it.
var standard = sync.OnceValue(func() *Cluster { return Build(Standard()) })

// deepEqualClusters reports whether a and b are deep-equal as
// reflect.DeepEqual(a, b) would, comparing the pods on all CPUs. It compares
// only every stride-th pod.
func deepEqualClusters(a, b *Cluster, stride int) bool {
	if a.Spec != b.Spec || len(a.Pods) != len(b.Pods) ||
		!reflect.DeepEqual(a.Nodes, b.Nodes) || !reflect.DeepEqual(a.Images, b.Images) {
		return false
	}
	workers := runtime.GOMAXPROCS(0)
	equal := make([]bool, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			equal[w] = true
			for i := w * stride; i < len(a.Pods) && equal[w]; i += workers * stride {
				equal[w] = reflect.DeepEqual(a.Pods[i], b.Pods[i])
			}
		})
	}
	wg.Wait()
	return !slices.Contains(equal, false)
}

func TestBuildDeterministic(t *testing.T) {
	a := standard()
	b := Build(Standard())
	stride := 1
	if testing.Short() {
		stride = 5 // deep-comparing 150,000 pods takes half a minute under -race
	}
	require.True(t, deepEqualClusters(a, b, stride), "two builds of the same spec differ")

	small := ClusterSpec{Nodes: 100, PodsPerNode: 30, Seed: 1}
	c1 := Build(small)
	// Node i and its pods depend only on the seed and i.
	require.True(t, reflect.DeepEqual(c1.Nodes, a.Nodes[:100]))
	require.True(t, reflect.DeepEqual(c1.Pods, a.Pods[:3000]))

	small.Seed = 2
	c2 := Build(small)
	require.False(t, reflect.DeepEqual(c1.Pods, c2.Pods), "seeds 1 and 2 give the same pods")
	require.False(t, reflect.DeepEqual(c1.Images, c2.Images), "seeds 1 and 2 give the same images")
}

func TestBuildIndependentOfGOMAXPROCS(t *testing.T) {
	spec := ClusterSpec{Nodes: 1000, PodsPerNode: 5, Seed: 7}
	prev := runtime.GOMAXPROCS(1)
	one := Build(spec)
	runtime.GOMAXPROCS(4)
	four := Build(spec)
	runtime.GOMAXPROCS(prev)
	require.True(t, reflect.DeepEqual(one, four))
}

func TestBuildEmptyAndInvalid(t *testing.T) {
	c := Build(ClusterSpec{Seed: 3})
	require.Empty(t, c.Nodes)
	require.Empty(t, c.Pods)
	require.Len(t, c.Images, ImagePoolSize)
	require.Panics(t, func() { Build(ClusterSpec{Nodes: -1}) })
	require.Panics(t, func() { Build(ClusterSpec{Nodes: 1, PodsPerNode: -1}) })
}

func TestStandardSpecs(t *testing.T) {
	require.Equal(t, ClusterSpec{Nodes: 5000, PodsPerNode: 30, Seed: 1}, Standard())
	require.Equal(t, ClusterSpec{Nodes: 50000, PodsPerNode: 30, Seed: 1}, Standard50k())
}

func TestZonesExact(t *testing.T) {
	c := standard()
	require.Len(t, c.Nodes, 5000)
	counts := map[string]int{}
	gpuCounts := map[string]int{}
	for i, n := range c.Nodes {
		require.Equal(t, NodeName(i), n.Name)
		require.Equal(t, Region, n.Labels[v1.LabelTopologyRegion])
		require.Equal(t, n.Name, n.Labels[v1.LabelHostname])
		z := n.Labels[v1.LabelTopologyZone]
		require.Equal(t, ZoneOf(i), z)
		counts[z]++
		if i%GPUEvery == 0 {
			gpuCounts[z]++
		}
	}
	require.Equal(t, map[string]int{ZoneA: 2500, ZoneB: 1500, ZoneC: 1000}, counts)
	require.Equal(t, map[string]int{ZoneA: 250, ZoneB: 150, ZoneC: 100}, gpuCounts)
	// Interleaved: every block of ten holds 5/3/2.
	for b := 0; b < 5000; b += 10 {
		block := map[string]int{}
		for i := b; i < b+10; i++ {
			block[ZoneOf(i)]++
		}
		require.Equal(t, map[string]int{ZoneA: 5, ZoneB: 3, ZoneC: 2}, block)
	}
}

func TestNodeShape(t *testing.T) {
	c := standard()
	pool := map[string]int64{}
	for _, img := range c.Images {
		for _, name := range img.Names {
			pool[name] = img.SizeBytes
		}
	}
	gpus := 0
	for i, n := range c.Nodes {
		for _, list := range []v1.ResourceList{n.Status.Allocatable, n.Status.Capacity} {
			if list.Cpu().Value() != NodeCPU || list.Memory().Value() != NodeMemoryGi<<30 ||
				list.StorageEphemeral().Value() != NodeEphemeralGi<<30 || list.Pods().Value() != NodePods {
				t.Fatalf("node %d: resources %v", i, list)
			}
			gpu, ok := list[ResourceGPU]
			if ok != (i%10 == 0) || ok && gpu.Value() != GPUsPerNode {
				t.Fatalf("node %d: GPUs %v, %v", i, ok, gpu)
			}
			gpus += b2i(ok)
		}
		if len(n.Status.Images) != ImagesPerNode {
			t.Fatalf("node %d: %d images", i, len(n.Status.Images))
		}
		seen := map[string]bool{}
		for _, img := range n.Status.Images {
			if len(img.Names) == 0 || seen[img.Names[0]] || pool[img.Names[0]] != img.SizeBytes {
				t.Fatalf("node %d: bad or repeated image %v", i, img)
			}
			seen[img.Names[0]] = true
		}
		cond := n.Status.Conditions
		if len(cond) != 1 || cond[0].Type != v1.NodeReady || cond[0].Status != v1.ConditionTrue {
			t.Fatalf("node %d: conditions %v", i, cond)
		}
	}
	require.Equal(t, 2*500, gpus)
}

func TestImagePool(t *testing.T) {
	c := standard()
	require.Len(t, c.Images, 200)
	two := 0
	for i, img := range c.Images {
		require.Equal(t, imageName(i), img.Names[0])
		require.True(t, strings.HasPrefix(img.Names[0], "registry.example.com/img-"))
		require.GreaterOrEqual(t, img.SizeBytes, int64(10<<20))
		require.LessOrEqual(t, img.SizeBytes, int64(2<<30))
		require.True(t, len(img.Names) == 1 || len(img.Names) == 2)
		if len(img.Names) == 2 {
			two++
			require.Contains(t, img.Names[1], "@sha256:")
		}
	}
	require.Equal(t, "registry.example.com/img-042:v1", c.Images[42].Names[0])
	require.InDelta(t, 100, two, 30)
}

// podShape summarises one pod for the distribution tests.
type podShape struct {
	init, sidecar, noRequests, overhead, hostPort, pvc, affinity, preferred, required, anti bool
}

func shapeOf(p *v1.Pod) podShape {
	var s podShape
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			s.sidecar = true
		} else {
			s.init = true
		}
	}
	s.noRequests = true
	for _, cs := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for _, c := range cs {
			if len(c.Resources.Requests) > 0 {
				s.noRequests = false
			}
			for _, port := range c.Ports {
				if port.HostPort != 0 {
					s.hostPort = true
				}
			}
		}
	}
	s.overhead = len(p.Spec.Overhead) > 0
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			s.pvc = true
		}
	}
	if a := p.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			s.preferred = len(pa.PreferredDuringSchedulingIgnoredDuringExecution) > 0
			s.required = len(pa.RequiredDuringSchedulingIgnoredDuringExecution) > 0
			s.affinity = s.preferred || s.required
		}
		s.anti = a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
	}
	return s
}

// podRequests returns the CPU (milli) and memory a pod requests, computed as
// upstream's resource helper does, overhead included.
func podRequests(p *v1.Pod) (cpu, mem int64) {
	for _, c := range p.Spec.Containers {
		cpu += c.Resources.Requests.Cpu().MilliValue()
		mem += c.Resources.Requests.Memory().Value()
	}
	var sideCPU, sideMem, initCPU, initMem int64
	for _, c := range p.Spec.InitContainers {
		ccpu, cmem := c.Resources.Requests.Cpu().MilliValue(), c.Resources.Requests.Memory().Value()
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			cpu += ccpu
			mem += cmem
			sideCPU += ccpu
			sideMem += cmem
			ccpu, cmem = sideCPU, sideMem
		} else {
			ccpu += sideCPU
			cmem += sideMem
		}
		initCPU = max(initCPU, ccpu)
		initMem = max(initMem, cmem)
	}
	cpu = max(cpu, initCPU) + p.Spec.Overhead.Cpu().MilliValue()
	mem = max(mem, initMem) + p.Spec.Overhead.Memory().Value()
	return cpu, mem
}

func TestPodDistributions(t *testing.T) {
	c := standard()
	require.Len(t, c.Pods, 150000)
	var counts struct {
		init, sidecar, noRequests, overhead, hostPort, pvc, affinity, preferred, required, anti int
	}
	containers := [4]int{}
	uids := make(map[string]struct{}, len(c.Pods))
	claims := map[string]int{}
	namespaces := map[string]bool{}
	for n, p := range c.Pods {
		if p.Name != PodName(n) || p.Spec.NodeName != c.Nodes[n/30].Name || p.Status.Phase != v1.PodRunning {
			t.Fatalf("pod %d: %s on %q, %s", n, p.Name, p.Spec.NodeName, p.Status.Phase)
		}
		uids[string(p.UID)] = struct{}{}
		namespaces[p.Namespace] = true
		nc := len(p.Spec.Containers)
		if nc < 1 || nc > 3 {
			t.Fatalf("pod %d: %d containers", n, nc)
		}
		containers[nc]++
		for _, ct := range p.Spec.Containers {
			if len(ct.Resources.Requests) == 0 {
				continue
			}
			cpu, mem := ct.Resources.Requests.Cpu().MilliValue(), ct.Resources.Requests.Memory().Value()
			if cpu < 50 || cpu > 2000 || mem < 64<<20 || mem > 4<<30 {
				t.Fatalf("pod %d: requests %dm CPU, %d memory", n, cpu, mem)
			}
		}
		s := shapeOf(p)
		counts.init += b2i(s.init)
		counts.sidecar += b2i(s.sidecar)
		counts.noRequests += b2i(s.noRequests)
		counts.overhead += b2i(s.overhead)
		counts.hostPort += b2i(s.hostPort)
		counts.pvc += b2i(s.pvc)
		counts.affinity += b2i(s.affinity)
		counts.preferred += b2i(s.preferred)
		counts.required += b2i(s.required)
		counts.anti += b2i(s.anti)
		if s.pvc {
			claims[p.Namespace+"/"+p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName]++
		}
		if s.hostPort {
			for _, ct := range p.Spec.Containers {
				for _, port := range ct.Ports {
					if port.HostPort < HostPortMin || port.HostPort > HostPortMax {
						t.Fatalf("pod %d: host port %d", n, port.HostPort)
					}
				}
			}
		}
	}
	require.Len(t, uids, len(c.Pods), "UIDs are not unique")
	require.Len(t, namespaces, NumNamespaces)
	total := float64(len(c.Pods))
	pct := func(name string, got, want int) {
		t.Helper()
		require.InDelta(t, float64(want), 100*float64(got)/total, 1, "%s: %d of %d pods", name, got, len(c.Pods))
	}
	pct("init", counts.init, PercentInit)
	pct("sidecar", counts.sidecar, PercentSidecar)
	pct("no requests", counts.noRequests, PercentNoRequests)
	pct("overhead", counts.overhead, PercentOverhead)
	pct("host port", counts.hostPort, PercentHostPort)
	pct("pvc", counts.pvc, PercentPVC)
	pct("affinity", counts.affinity, PercentAffinity)
	pct("preferred affinity", counts.preferred, PercentAffinity/2)
	pct("required affinity", counts.required, PercentAffinity/2)
	pct("anti-affinity", counts.anti, PercentAntiAffinity)
	for k := 1; k <= 3; k++ {
		pct("containers", containers[k], 33)
	}
	repeated := 0
	for _, n := range claims {
		if n > 1 {
			repeated++
		}
	}
	require.Positive(t, repeated, "no claim is used twice")
}

func TestPodsFitNodes(t *testing.T) {
	c := standard()
	per := c.Spec.PodsPerNode
	var sumCPU, sumMem, maxCPU int64
	for i, n := range c.Nodes {
		var cpu, mem int64
		for _, p := range c.Pods[i*per : (i+1)*per] {
			pc, pm := podRequests(p)
			cpu += pc
			mem += pm
		}
		if cpu > n.Status.Allocatable.Cpu().MilliValue() || mem > n.Status.Allocatable.Memory().Value() {
			t.Fatalf("node %d: pods request %dm CPU, %d memory", i, cpu, mem)
		}
		sumCPU += cpu
		sumMem += mem
		maxCPU = max(maxCPU, cpu)
	}
	meanCPU := float64(sumCPU) / float64(len(c.Nodes)) / 1000
	meanMemGi := float64(sumMem) / float64(len(c.Nodes)) / (1 << 30)
	t.Logf("requested per node: mean %.1f CPU (max %.1f) of %d, mean %.1f Gi of %d Gi",
		meanCPU, float64(maxCPU)/1000, NodeCPU, meanMemGi, NodeMemoryGi)
	require.Less(t, meanCPU, 0.75*NodeCPU)
	require.Less(t, meanMemGi, 0.5*NodeMemoryGi)
}

func TestNewPod(t *testing.T) {
	r := NewRand(5)
	p := NewPod(r, "pod-x", "")
	require.Equal(t, "pod-x", p.Name)
	require.Equal(t, "pod-x", string(p.UID))
	require.Empty(t, p.Spec.NodeName)
	require.Equal(t, v1.PodPending, p.Status.Phase)
	require.Equal(t, "1", p.ResourceVersion)

	q := NewPod(NewRand(5), "pod-x", "")
	require.True(t, reflect.DeepEqual(p, q))

	b := NewPod(r, "pod-y", "node-00001")
	require.Equal(t, "node-00001", b.Spec.NodeName)
	require.Equal(t, v1.PodRunning, b.Status.Phase)
}

func TestNames(t *testing.T) {
	require.Equal(t, "node-00042", NodeName(42))
	require.Equal(t, "node-123456", NodeName(123456))
	require.Equal(t, "pod-0000042", PodName(42))
	require.Equal(t, "pod-12345678", PodName(12345678))
}

func TestBuild50k(t *testing.T) {
	if testing.Short() || !*test50k {
		t.Skip("run with -workload.50k (and without -short) to build the 50k cluster")
	}
	start := time.Now()
	c := Build(Standard50k())
	elapsed := time.Since(start)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("Build(Standard50k()): %v, live heap %d MiB", elapsed, ms.HeapAlloc>>20)
	require.Len(t, c.Nodes, 50000)
	require.Len(t, c.Pods, 1500000)
	runtime.KeepAlive(c)
}

// Feed hands over every node, then every pod, in order, and stops at the
// first error, naming the object.
func TestClusterFeed(t *testing.T) {
	c := Build(ClusterSpec{Nodes: 3, PodsPerNode: 2, Seed: 1})
	var got []string
	addN := func(n *v1.Node) error { got = append(got, n.Name); return nil }
	addP := func(p *v1.Pod) error { got = append(got, p.Name); return nil }
	if err := c.Feed(addN, addP); err != nil {
		t.Fatal(err)
	}
	want := []string{NodeName(0), NodeName(1), NodeName(2), PodName(0), PodName(1), PodName(2), PodName(3), PodName(4), PodName(5)}
	if !slices.Equal(got, want) {
		t.Fatalf("fed %v, want %v", got, want)
	}
	boom := errors.New("boom")
	calls := 0
	err := c.Feed(addN, func(p *v1.Pod) error { calls++; return boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), PodName(0)) || calls != 1 {
		t.Fatalf("Feed = %v after %d pod calls; want boom naming %s after 1", err, calls, PodName(0))
	}
}
