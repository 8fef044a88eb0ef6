package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Cluster topology and node shape.
const (
	Region = "region-1"
	ZoneA  = "zone-a" // 50% of the nodes
	ZoneB  = "zone-b" // 30%
	ZoneC  = "zone-c" // 20%

	GPUEvery    = 10 // nodes 0, 10, 20, ... have GPUs
	GPUsPerNode = 8

	NodeCPU               = 64  // cores
	NodeMemoryGi          = 256 // Gi
	NodeEphemeralGi       = 500 // Gi
	NodePods              = 110
	ImagesPerNode         = 20
	ImagePoolSize         = numImages
	ImageMinBytes   int64 = 10 << 20
	ImageMaxBytes   int64 = 2 << 30
)

// ResourceGPU is the extended resource of every GPUEvery-th node.
const ResourceGPU v1.ResourceName = "example.com/gpu"

// zonePattern gives the zones of ten consecutive nodes: 5 a, 3 b, 2 c.
var zonePattern = [10]string{ZoneA, ZoneB, ZoneA, ZoneC, ZoneA, ZoneB, ZoneA, ZoneB, ZoneA, ZoneC}

// ZoneOf returns the zone of the node with index i. Every block of ten
// consecutive indices starting at a multiple of ten holds exactly 5 nodes of
// zone-a, 3 of zone-b and 2 of zone-c, and the pattern rotates from block to
// block so that GPU nodes are spread over the zones in the same proportions.
func ZoneOf(i int) string {
	return zonePattern[(i%10+i/10)%10]
}

// NodeName returns the name of the node with index i: "node-00042".
func NodeName(i int) string { return indexName("node-", i, 5) }

// PodName returns the name, also used as UID, of the pod with index i:
// "pod-0000042".
func PodName(i int) string { return indexName("pod-", i, 7) }

// epoch is the creation and heartbeat time base of generated objects.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ClusterSpec is a plain value describing a cluster for Build.
type ClusterSpec struct {
	Nodes       int // 5000 standard; 50000 for -50k
	PodsPerNode int // 30
	Seed        int64
	// Shape is the nodes' and pods' shape; nil: the standard shape. It is
	// shared, never copied: nobody may change it once handed to Build.
	Shape *Shape
}

// Standard returns the standard cluster: 5,000 nodes, 30 pods each, seed 1.
func Standard() ClusterSpec { return ClusterSpec{Nodes: 5000, PodsPerNode: 30, Seed: 1} }

// Standard50k returns the -50k cluster: 50,000 nodes, 30 pods each, seed 1.
func Standard50k() ClusterSpec { return ClusterSpec{Nodes: 50000, PodsPerNode: 30, Seed: 1} }

// ImageSpec is read-only: its Names slice is shared with the nodes that hold
// the image. It is one image of the pool: its names (one or two) and size.
type ImageSpec struct {
	Names     []string
	SizeBytes int64
}

// Cluster is read-only once built, and then safe for concurrent reads; its
// objects share parts with one another (see the package documentation). It is
// a generated cluster.
type Cluster struct {
	Spec ClusterSpec
	// Nodes[i] is named NodeName(i) and lies in zone ZoneOf(i).
	Nodes []*v1.Node
	// Pods[n] is named PodName(n) and bound to Nodes[n/PodsPerNode].
	Pods []*v1.Pod
	// Images is the pool of ImagePoolSize images the nodes hold.
	Images []ImageSpec
}

// Feed hands every node, then every pod, of c to addNode and addPod (a
// cache's AddNodeAsync and AddPodAsync, say), in order, and returns the
// first error, wrapped with the object's name.
func (c *Cluster) Feed(addNode func(*v1.Node) error, addPod func(*v1.Pod) error) error {
	for _, n := range c.Nodes {
		if err := addNode(n); err != nil {
			return fmt.Errorf("workload: node %s: %w", n.Name, err)
		}
	}
	for _, p := range c.Pods {
		if err := addPod(p); err != nil {
			return fmt.Errorf("workload: pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// Build generates the cluster spec describes. The same spec gives a
// deep-equal cluster. It uses up to GOMAXPROCS goroutines, all finished on
// return; the result does not depend on their number. It panics if a count
// in spec is negative or spec.Shape.Validate fails (callers validate first).
func Build(spec ClusterSpec) *Cluster {
	if spec.Nodes < 0 || spec.PodsPerNode < 0 {
		panic(fmt.Sprintf("workload: invalid ClusterSpec %+v", spec))
	}
	if err := spec.Shape.Validate(); err != nil {
		panic(err.Error())
	}
	c := &Cluster{
		Spec:   spec,
		Nodes:  make([]*v1.Node, spec.Nodes),
		Pods:   make([]*v1.Pod, spec.Nodes*spec.PodsPerNode),
		Images: spec.Shape.imagePool(spec.Seed),
	}
	ns := spec.Shape.resolve()
	const minNodesPerWorker = 256
	workers := min(runtime.GOMAXPROCS(0), (spec.Nodes+minNodesPerWorker-1)/minNodesPerWorker)
	if workers <= 1 {
		c.buildNodes(0, spec.Nodes, ns)
	} else {
		var wg sync.WaitGroup
		for w := range workers {
			lo, hi := spec.Nodes*w/workers, spec.Nodes*(w+1)/workers
			wg.Go(func() { c.buildNodes(lo, hi, ns) })
		}
		wg.Wait()
	}
	spec.Shape.decorate(c.Nodes, spec.Seed)
	return c
}

// buildNodes fills c.Nodes[lo:hi] and their pods. Node i and its pods are
// drawn from stream i of the seed, so the result does not depend on how the
// nodes are split among goroutines.
func (c *Cluster) buildNodes(lo, hi int, ns *nodeShape) {
	var pcg rand.PCG
	r := rand.New(&pcg)
	alloc := &containerAlloc{}
	per := c.Spec.PodsPerNode
	for i := lo; i < hi; i++ {
		seedPCG(&pcg, c.Spec.Seed, uint64(i))
		node := newNode(r, i, c.Images, ns)
		c.Nodes[i] = node
		pods := make([]v1.Pod, per)
		for k := range pods {
			n := i*per + k
			c.fillPod(&pods[k], r, PodName(n), node.Name, alloc)
			c.Pods[n] = &pods[k]
		}
	}
}

// imagePoolStream is the stream of the seed that draws the image pool; node
// streams are numbered from 0.
const imagePoolStream = 1 << 63

// NewImagePool returns the pool of ImagePoolSize images for seed. Image i is
// named "registry.example.com/img-<i>:v1" (three digits), half of the images
// also have a digest name, and sizes are log-uniform in
// [ImageMinBytes, ImageMaxBytes].
func NewImagePool(seed int64) []ImageSpec {
	r := rand.New(newPCG(seed, imagePoolStream))
	v := vocab()
	pool := make([]ImageSpec, numImages)
	logRange := math.Log(float64(ImageMaxBytes) / float64(ImageMinBytes))
	const hexDigits = "0123456789abcdef"
	for i := range pool {
		size := int64(float64(ImageMinBytes) * math.Exp(r.Float64()*logRange))
		pool[i].SizeBytes = min(max(size, ImageMinBytes), ImageMaxBytes)
		if r.IntN(2) == 0 {
			pool[i].Names = []string{v.imageNames[i]}
			continue
		}
		digest := make([]byte, 0, 64)
		for range 4 {
			x := r.Uint64()
			for range 16 {
				digest = append(digest, hexDigits[x&15])
				x >>= 4
			}
		}
		pool[i].Names = []string{
			v.imageNames[i],
			"registry.example.com/" + indexName("img-", i, 3) + "@sha256:" + string(digest),
		}
	}
	return pool
}

// nodeVocabulary holds the immutable objects that nodes share.
type nodeVocabulary struct {
	resources [2]v1.ResourceList // without, with GPUs
	ready     []v1.NodeCondition
}

var nodeVocab = sync.OnceValue(func() *nodeVocabulary {
	v := &nodeVocabulary{}
	for g := range v.resources {
		v.resources[g] = v1.ResourceList{
			v1.ResourceCPU:              *resource.NewQuantity(NodeCPU, resource.DecimalSI),
			v1.ResourceMemory:           *resource.NewQuantity(NodeMemoryGi<<30, resource.BinarySI),
			v1.ResourceEphemeralStorage: *resource.NewQuantity(NodeEphemeralGi<<30, resource.BinarySI),
			v1.ResourcePods:             *resource.NewQuantity(NodePods, resource.DecimalSI),
		}
	}
	v.resources[1][ResourceGPU] = *resource.NewQuantity(GPUsPerNode, resource.DecimalSI)
	v.ready = readyConditions(0)
	return v
})

// readyConditions returns a Ready=True condition list whose heartbeat is
// heartbeat seconds after the epoch.
func readyConditions(heartbeat int64) []v1.NodeCondition {
	return []v1.NodeCondition{{
		Type:               v1.NodeReady,
		Status:             v1.ConditionTrue,
		LastHeartbeatTime:  metav1.NewTime(epoch.Add(time.Duration(heartbeat) * time.Second)),
		LastTransitionTime: metav1.NewTime(epoch),
		Reason:             "KubeletReady",
		Message:            "kubelet is posting ready status",
	}}
}

// NewNode returns the node with index i of the standard shape: named
// NodeName(i), in zone ZoneOf(i), with GPUs if i is a multiple of GPUEvery,
// Ready, holding ImagesPerNode distinct images drawn with r from images (all
// of them if there are fewer). Capacity equals allocatable. The node shares
// its resource lists, conditions and image names with other nodes.
func NewNode(r *rand.Rand, i int, images []ImageSpec) *v1.Node {
	return newNode(r, i, images, (*Shape)(nil).resolve())
}

// newNode is NewNode with the resources and image count of ns.
func newNode(r *rand.Rand, i int, images []ImageSpec, ns *nodeShape) *v1.Node {
	v := nodeVocab()
	name := NodeName(i)
	n := &v1.Node{}
	n.Name = name
	n.UID = types.UID(name)
	n.ResourceVersion = "1"
	n.CreationTimestamp = metav1.NewTime(epoch)
	n.Labels = map[string]string{
		v1.LabelTopologyRegion: Region,
		v1.LabelTopologyZone:   ZoneOf(i),
		v1.LabelHostname:       name,
		v1.LabelOSStable:       "linux",
		v1.LabelArchStable:     "amd64",
	}
	res := ns.resources[0]
	if i%GPUEvery == 0 {
		res = ns.resources[1]
	}
	n.Status.Capacity = res
	n.Status.Allocatable = res
	n.Status.Conditions = v.ready
	n.Status.Images = pickImages(r, images, ns.perNode)
	return n
}

// pickImages draws min(perNode, len(images)) distinct images.
func pickImages(r *rand.Rand, images []ImageSpec, perNode int) []v1.ContainerImage {
	k := min(perNode, len(images))
	var buf [ImagesPerNode]int
	picked := buf[:0:ImagesPerNode]
	if k > ImagesPerNode {
		picked = make([]int, 0, k)
	}
	picked = picked[:k]
	out := make([]v1.ContainerImage, k)
	for j := 0; j < k; {
		x := r.IntN(len(images))
		dup := false
		for _, p := range picked[:j] {
			if p == x {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		picked[j] = x
		out[j] = v1.ContainerImage{Names: images[x].Names, SizeBytes: images[x].SizeBytes}
		j++
	}
	return out
}
