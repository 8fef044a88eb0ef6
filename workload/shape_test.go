package workload

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A shape that sets nothing but the standard image count builds the same
// cluster as no shape: the draws are the same.
func TestShapeStandardIsStandard(t *testing.T) {
	spec := ClusterSpec{Nodes: 300, PodsPerNode: 5, Seed: 7}
	a := Build(spec)
	spec.Shape = &Shape{Images: &ImageShape{PerNode: ImagesPerNode, PoolSize: ImagePoolSize}}
	b := Build(spec)
	require.True(t, reflect.DeepEqual(a.Nodes, b.Nodes))
	require.True(t, reflect.DeepEqual(a.Pods, b.Pods))
	require.True(t, reflect.DeepEqual(a.Images, b.Images))
	r1, r2 := NewRand(3), NewRand(3)
	require.True(t, reflect.DeepEqual(a.NewNode(r1, 9), b.NewNode(r2, 9)))
	require.True(t, reflect.DeepEqual(a.NewPod(r1, "x", ""), b.NewPod(r2, "x", "")))
	require.True(t, reflect.DeepEqual(NewPod(NewRand(4), "y", "n"), a.NewPod(NewRand(4), "y", "n")))
}

func TestShapeNodes(t *testing.T) {
	shape := &Shape{
		CPUMilli: 4000, MemoryBytes: 32 << 30, MaxPods: 50,
		Images:        &ImageShape{PerNode: 0, PoolSize: 0},
		Labels:        []LabelRule{{Key: "disk", Value: "ssd", Fraction: 0.3}},
		Taints:        []TaintRule{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule, Fraction: 0.1}, {Key: "spot", Effect: v1.TaintEffectPreferNoSchedule, Fraction: 1}},
		Unschedulable: 0.05,
	}
	spec := ClusterSpec{Nodes: 1000, PodsPerNode: 2, Seed: 3, Shape: shape}
	c := Build(spec)
	require.Empty(t, c.Images)
	ssd, dedicated, spot, cordoned := 0, 0, 0, 0
	for i, n := range c.Nodes {
		require.Equal(t, "4", n.Status.Allocatable.Cpu().String())
		require.Equal(t, int64(32<<30), n.Status.Allocatable.Memory().Value())
		require.Equal(t, int64(50), n.Status.Allocatable.Pods().Value())
		require.Empty(t, n.Status.Images)
		require.Equal(t, i%GPUEvery == 0, !n.Status.Allocatable.Name(ResourceGPU, resource.DecimalSI).IsZero())
		if n.Labels["disk"] == "ssd" {
			ssd++
		}
		for _, tn := range n.Spec.Taints {
			switch tn.Key {
			case "dedicated":
				require.Equal(t, "gpu", tn.Value)
				dedicated++
			case "spot":
				spot++
			case v1.TaintNodeUnschedulable:
				require.True(t, n.Spec.Unschedulable)
			}
		}
		if n.Spec.Unschedulable {
			cordoned++
		}
	}
	require.Equal(t, []int{300, 100, 1000, 50}, []int{ssd, dedicated, spot, cordoned}, "exactly round(fraction*nodes) each")
	require.True(t, reflect.DeepEqual(c.Nodes, Build(spec).Nodes), "the same seed picks the same nodes")
	spec.Seed = 4
	other := Build(spec)
	same := true
	for i := range c.Nodes {
		same = same && c.Nodes[i].Labels["disk"] == other.Nodes[i].Labels["disk"]
	}
	require.False(t, same, "another seed picks other nodes")

	// A node added later: each rule with its fraction as probability.
	r := NewRand(1)
	spotAdded := 0
	for i := range 200 {
		n := c.NewNode(r, 5000+i)
		require.Equal(t, int64(50), n.Status.Allocatable.Pods().Value())
		for _, tn := range n.Spec.Taints {
			if tn.Key == "spot" {
				spotAdded++
			}
		}
	}
	require.Equal(t, 200, spotAdded)
}

func TestShapeImages(t *testing.T) {
	c := Build(ClusterSpec{Nodes: 50, Seed: 1, Shape: &Shape{Images: &ImageShape{PerNode: 3, PoolSize: 5}}})
	require.Len(t, c.Images, 5)
	require.Equal(t, NewImagePool(1)[:5], c.Images, "the pool is a prefix of the standard pool")
	for _, n := range c.Nodes {
		require.Len(t, n.Status.Images, 3)
	}
}

func TestPodMix(t *testing.T) {
	tol := []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	shape := &Shape{PodMix: []PodTemplate{
		{Weight: 3, Plain: true, Containers: Range{1, 1}, CPUMilli: Range{100, 100}, MemoryBytes: Range{500 << 20, 500 << 20}},
		{Weight: 1, Tolerations: tol, NodeSelector: map[string]string{"disk": "ssd"}, CPUMilli: Range{200, 300}},
	}}
	c := Build(ClusterSpec{Nodes: 100, PodsPerNode: 40, Seed: 2, Shape: shape})
	plain, tolerant := 0, 0
	for _, p := range c.Pods {
		if p.Spec.NodeSelector != nil {
			tolerant++
			require.Equal(t, tol, p.Spec.Tolerations)
			for _, ct := range p.Spec.Containers {
				m := ct.Resources.Requests.Cpu().MilliValue()
				require.True(t, m >= 200 && m <= 300, "cpu %dm", m)
			}
			continue
		}
		plain++
		require.Len(t, p.Spec.Containers, 1)
		require.Empty(t, p.Spec.InitContainers)
		require.Nil(t, p.Spec.Affinity)
		require.Nil(t, p.Spec.Overhead)
		require.Empty(t, p.Spec.Volumes)
		require.Empty(t, p.Spec.Containers[0].Ports)
		require.Equal(t, "100m", p.Spec.Containers[0].Resources.Requests.Cpu().String())
		require.Equal(t, "500Mi", p.Spec.Containers[0].Resources.Requests.Memory().String())
	}
	require.InDelta(t, 3000, plain, 150, "weights 3:1 of 4000 pods")
	require.Equal(t, 4000, plain+tolerant)
	p := c.NewPod(NewRand(1), "x", "")
	require.Equal(t, v1.PodPending, p.Status.Phase)
}

func TestShapeValidate(t *testing.T) {
	for _, s := range []*Shape{
		{CPUMilli: -1},
		{Unschedulable: 1.5},
		{Images: &ImageShape{PerNode: 5, PoolSize: 3}},
		{Images: &ImageShape{PoolSize: ImagePoolSize + 1}},
		{Labels: []LabelRule{{Key: "", Fraction: 0.5}}},
		{Taints: []TaintRule{{Key: "k", Effect: "Sometimes", Fraction: 0.5}}},
		{PodMix: []PodTemplate{{Weight: 0}}},
		{PodMix: []PodTemplate{{Weight: 1, Containers: Range{1, 4}}}},
	} {
		require.Error(t, s.Validate(), "%+v", s)
		require.Panics(t, func() { Build(ClusterSpec{Nodes: 1, Shape: s}) })
	}
	require.NoError(t, (*Shape)(nil).Validate())
}
