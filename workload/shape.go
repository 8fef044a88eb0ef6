package workload

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Shape is immutable once handed to Build (the cluster, its nodes and pods
// share its slices and maps): what a cluster's nodes and pods look like
// beyond the standard shape. A nil *Shape in ClusterSpec is the standard
// shape exactly (the same objects from the same seed); so is a Shape whose
// fields are all zero except Images, which then must say what it wants.
type Shape struct {
	// Allocatable (and capacity) of every node; 0 keeps NodeCPU cores,
	// NodeMemoryGi Gi and NodePods pods.
	CPUMilli    int64
	MemoryBytes int64
	MaxPods     int64
	// Images the nodes hold; nil: ImagesPerNode of a pool of ImagePoolSize.
	Images *ImageShape
	// Labels and Taints each go on a fraction of the nodes, drawn from the
	// seed (Build: exactly round(Fraction*Nodes) nodes, one draw per rule;
	// Cluster.NewNode: each rule with probability Fraction).
	Labels []LabelRule
	Taints []TaintRule
	// Unschedulable is the fraction of nodes cordoned: spec.unschedulable
	// and the node.kubernetes.io/unschedulable:NoSchedule taint, as the
	// node lifecycle controller leaves a cordoned node.
	Unschedulable float64
	// PodMix replaces the standard pod by weighted templates (nil: the
	// standard pod).
	PodMix []PodTemplate
}

// ImageShape is a plain value: PerNode distinct images per node out of the
// first PoolSize images of the pool (PoolSize <= ImagePoolSize; PerNode <=
// PoolSize; 0 images per node is allowed).
type ImageShape struct {
	PerNode, PoolSize int
}

// LabelRule is a plain value: label Key=Value on a fraction of the nodes.
type LabelRule struct {
	Key, Value string
	Fraction   float64
}

// TaintRule is a plain value: a taint on a fraction of the nodes.
type TaintRule struct {
	Key, Value string
	Effect     v1.TaintEffect
	Fraction   float64
}

// Range is a plain value: an integer drawn uniformly in [Min, Max]; the
// zero Range means "the standard draw".
type Range struct {
	Min, Max int64
}

func (g Range) set() bool { return g.Max > 0 }

func (g Range) draw(r *rand.Rand) int64 {
	if g.Max <= g.Min {
		return g.Min
	}
	return g.Min + r.Int64N(g.Max-g.Min+1)
}

// MaxContainers bounds PodTemplate.Containers.
const MaxContainers = 3

// PodTemplate is immutable once handed to Build (pods share its
// Tolerations and NodeSelector): one kind of pod of a mix. A pod of the
// template starts as the standard pod drawn from the same stream and then
// takes what the template sets.
type PodTemplate struct {
	// Weight is the template's share of the pods against the other
	// templates' weights (at least 1).
	Weight int
	// Plain drops the standard pod's extras: init containers, sidecars,
	// overhead, host ports, volumes and pod (anti-)affinity.
	Plain bool
	// Containers, when set, is the container count (1 to MaxContainers).
	Containers Range
	// CPUMilli and MemoryBytes, when set, are every container's requests
	// (the standard pod's best-effort share then requests too).
	CPUMilli    Range
	MemoryBytes Range
	// Tolerations and NodeSelector go on every pod of the template.
	Tolerations  []v1.Toleration
	NodeSelector map[string]string
	// Annotations, when set, are added to every pod of the template's
	// own (each such pod gets a new map).
	Annotations map[string]string
}

// shapeStreams: the seed streams of the label, taint and cordon draws
// (node streams are numbered from 0, the image pool is 1<<63).
const (
	labelStream  = 1<<62 + iota<<20
	taintStream  = 1<<62 + iota<<20
	cordonStream = 1<<62 + iota<<20
)

// Validate checks s and returns an error naming the first field at fault.
func (s *Shape) Validate() error {
	if s == nil {
		return nil
	}
	switch {
	case s.CPUMilli < 0:
		return fmt.Errorf("workload: CPUMilli %d < 0", s.CPUMilli)
	case s.MemoryBytes < 0:
		return fmt.Errorf("workload: MemoryBytes %d < 0", s.MemoryBytes)
	case s.MaxPods < 0:
		return fmt.Errorf("workload: MaxPods %d < 0", s.MaxPods)
	case math.IsNaN(s.Unschedulable) || s.Unschedulable < 0 || s.Unschedulable > 1:
		return fmt.Errorf("workload: Unschedulable %v not in [0, 1]", s.Unschedulable)
	}
	if im := s.Images; im != nil && (im.PoolSize < 0 || im.PoolSize > ImagePoolSize || im.PerNode < 0 || im.PerNode > im.PoolSize) {
		return fmt.Errorf("workload: Images %+v: need 0 <= PerNode <= PoolSize <= %d", *im, ImagePoolSize)
	}
	for i, l := range s.Labels {
		if math.IsNaN(l.Fraction) || l.Fraction < 0 || l.Fraction > 1 || l.Key == "" {
			return fmt.Errorf("workload: Labels[%d] %+v: need a key and a fraction in [0, 1]", i, l)
		}
	}
	for i, t := range s.Taints {
		if math.IsNaN(t.Fraction) || t.Fraction < 0 || t.Fraction > 1 || t.Key == "" {
			return fmt.Errorf("workload: Taints[%d] %+v: need a key and a fraction in [0, 1]", i, t)
		}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("workload: Taints[%d]: effect %q", i, t.Effect)
		}
	}
	for i, t := range s.PodMix {
		switch {
		case t.Weight < 1:
			return fmt.Errorf("workload: PodMix[%d]: weight %d < 1", i, t.Weight)
		case t.Containers.set() && (t.Containers.Min < 1 || t.Containers.Max > MaxContainers || t.Containers.Min > t.Containers.Max):
			return fmt.Errorf("workload: PodMix[%d]: containers %+v not within [1, %d]", i, t.Containers, MaxContainers)
		case t.CPUMilli.set() && (t.CPUMilli.Min < 0 || t.CPUMilli.Min > t.CPUMilli.Max):
			return fmt.Errorf("workload: PodMix[%d]: cpu %+v", i, t.CPUMilli)
		case t.MemoryBytes.set() && (t.MemoryBytes.Min < 0 || t.MemoryBytes.Min > t.MemoryBytes.Max):
			return fmt.Errorf("workload: PodMix[%d]: memory %+v", i, t.MemoryBytes)
		}
	}
	return nil
}

// nodeShape is what buildNodes needs of a shape, resolved once.
type nodeShape struct {
	resources [2]v1.ResourceList // without, with GPUs; shared by the nodes
	perNode   int                // images per node
}

func (s *Shape) resolve() *nodeShape {
	v := nodeVocab()
	if s == nil {
		return &nodeShape{resources: v.resources, perNode: ImagesPerNode}
	}
	ns := &nodeShape{resources: v.resources, perNode: ImagesPerNode}
	if s.Images != nil {
		ns.perNode = s.Images.PerNode
	}
	if s.CPUMilli != 0 || s.MemoryBytes != 0 || s.MaxPods != 0 {
		cpu, mem, pods := int64(NodeCPU*1000), int64(NodeMemoryGi<<30), int64(NodePods)
		if s.CPUMilli != 0 {
			cpu = s.CPUMilli
		}
		if s.MemoryBytes != 0 {
			mem = s.MemoryBytes
		}
		if s.MaxPods != 0 {
			pods = s.MaxPods
		}
		for g := range ns.resources {
			ns.resources[g] = v1.ResourceList{
				v1.ResourceCPU:              *resource.NewMilliQuantity(cpu, resource.DecimalSI),
				v1.ResourceMemory:           *resource.NewQuantity(mem, resource.BinarySI),
				v1.ResourceEphemeralStorage: *resource.NewQuantity(NodeEphemeralGi<<30, resource.BinarySI),
				v1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
			}
		}
		ns.resources[1][ResourceGPU] = *resource.NewQuantity(GPUsPerNode, resource.DecimalSI)
	}
	return ns
}

// imagePool returns the pool of the shape: the first PoolSize images of
// NewImagePool(seed).
func (s *Shape) imagePool(seed int64) []ImageSpec {
	pool := NewImagePool(seed)
	if s != nil && s.Images != nil {
		pool = pool[:s.Images.PoolSize:s.Images.PoolSize]
	}
	return pool
}

// decorate puts the shape's labels, taints and cordons on the nodes of c:
// for each rule, exactly round(fraction*len(nodes)) nodes drawn with the
// rule's own stream of the seed.
func (s *Shape) decorate(nodes []*v1.Node, seed int64) {
	if s == nil {
		return
	}
	chosen := func(stream uint64, fraction float64, apply func(n *v1.Node)) {
		k := int(math.Round(fraction * float64(len(nodes))))
		if k == 0 {
			return
		}
		perm := rand.New(newPCG(seed, stream)).Perm(len(nodes))
		for _, i := range perm[:k] {
			apply(nodes[i])
		}
	}
	for j, l := range s.Labels {
		chosen(labelStream+uint64(j), l.Fraction, func(n *v1.Node) { n.Labels[l.Key] = l.Value })
	}
	for j, t := range s.Taints {
		taint := v1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
		chosen(taintStream+uint64(j), t.Fraction, func(n *v1.Node) { n.Spec.Taints = append(n.Spec.Taints, taint) })
	}
	chosen(cordonStream, s.Unschedulable, cordon)
}

func cordon(n *v1.Node) {
	n.Spec.Unschedulable = true
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
}

// NewNode returns a new node with index i of c's shape, drawn with r: the
// node NewNode(r, i, c.Images) draws, with the shape's allocatable and
// image count, and each label, taint and cordon of the shape with its
// fraction as probability (drawn with r after the node, only when the
// shape has rules). With the standard shape it is NewNode(r, i, c.Images).
func (c *Cluster) NewNode(r *rand.Rand, i int) *v1.Node {
	s := c.Spec.Shape
	if s == nil {
		return NewNode(r, i, c.Images)
	}
	n := newNode(r, i, c.Images, s.resolve())
	for _, l := range s.Labels {
		if r.Float64() < l.Fraction {
			n.Labels[l.Key] = l.Value
		}
	}
	for _, t := range s.Taints {
		if r.Float64() < t.Fraction {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	if s.Unschedulable > 0 && r.Float64() < s.Unschedulable {
		cordon(n)
	}
	return n
}

// NewPod returns a new pod of c's pod mix, drawn with r, named and
// identified by uid and bound to nodeName ("" pending). With no mix it is
// NewPod(r, uid, nodeName).
func (c *Cluster) NewPod(r *rand.Rand, uid, nodeName string) *v1.Pod {
	p := new(v1.Pod)
	c.fillPod(p, r, uid, nodeName, nil)
	return p
}

// fillPod writes a pod of c's mix into the zero pod p.
func (c *Cluster) fillPod(p *v1.Pod, r *rand.Rand, uid, nodeName string, alloc *containerAlloc) {
	var mix []PodTemplate
	if c.Spec.Shape != nil {
		mix = c.Spec.Shape.PodMix
	}
	if len(mix) == 0 {
		fillPod(p, r, uid, nodeName, alloc)
		return
	}
	t := &mix[0]
	if len(mix) > 1 {
		total := 0
		for i := range mix {
			total += mix[i].Weight
		}
		x := r.IntN(total)
		for i := range mix {
			if x < mix[i].Weight {
				t = &mix[i]
				break
			}
			x -= mix[i].Weight
		}
	}
	fillPod(p, r, uid, nodeName, alloc)
	t.apply(p, r, alloc)
}

// apply makes the standard pod p one of the template.
func (t *PodTemplate) apply(p *v1.Pod, r *rand.Rand, alloc *containerAlloc) {
	s := &p.Spec
	if t.Plain {
		s.InitContainers, s.Overhead, s.RuntimeClassName, s.Volumes, s.Affinity = nil, nil, nil, nil, nil
		for i := range s.Containers {
			s.Containers[i].Ports = nil
		}
	}
	if t.Containers.set() {
		if n := int(t.Containers.draw(r)); n != len(s.Containers) {
			old := s.Containers
			s.Containers = alloc.take(n)
			for i := range s.Containers {
				c := &s.Containers[i]
				if i < len(old) {
					*c = old[i]
					continue
				}
				c.Name = containerNames[i]
				c.Image = old[0].Image
				c.Resources.Requests = old[0].Resources.Requests
			}
		}
	}
	if t.CPUMilli.set() || t.MemoryBytes.set() {
		for i := range s.Containers {
			c := &s.Containers[i]
			req := v1.ResourceList{}
			if t.CPUMilli.set() {
				req[v1.ResourceCPU] = *resource.NewMilliQuantity(t.CPUMilli.draw(r), resource.DecimalSI)
			} else if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
				req[v1.ResourceCPU] = q
			}
			if t.MemoryBytes.set() {
				req[v1.ResourceMemory] = *resource.NewQuantity(t.MemoryBytes.draw(r), resource.BinarySI)
			} else if q, ok := c.Resources.Requests[v1.ResourceMemory]; ok {
				req[v1.ResourceMemory] = q
			}
			c.Resources.Requests = req
		}
		p.Status.QOSClass = v1.PodQOSBurstable
	}
	s.Tolerations = t.Tolerations
	s.NodeSelector = t.NodeSelector
	if len(t.Annotations) > 0 {
		m := make(map[string]string, len(p.Annotations)+len(t.Annotations))
		maps.Copy(m, p.Annotations)
		maps.Copy(m, t.Annotations)
		p.Annotations = m
	}
}
