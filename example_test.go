package schedcache_test

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
)

func exampleNode(name, zone string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			v1.LabelTopologyRegion: "r1",
			v1.LabelTopologyZone:   zone,
		}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("4"),
			v1.ResourceMemory: resource.MustParse("16Gi"),
			v1.ResourcePods:   resource.MustParse("110"),
		}},
	}
}

func examplePod(name, node, cpu string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: v1.PodSpec{
			NodeName: node,
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
			}}},
		},
	}
}

// The scheduler's flow: the informer adds nodes, the scheduler assumes a
// pod on the node it picked and finishes the binding, the informer then
// confirms the pod. A snapshot is one atomic load and never changes.
func Example() {
	logger := klog.Background()
	c, err := schedcache.New(context.Background(), schedcache.WithTTL(0))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	for _, n := range []*v1.Node{exampleNode("a1", "A"), exampleNode("a2", "A"), exampleNode("b1", "B")} {
		if _, err := c.AddNode(logger, n); err != nil {
			panic(err)
		}
	}

	pod := examplePod("web-1", "b1", "500m")
	if err := c.AssumePod(logger, pod); err != nil {
		panic(err)
	}
	if err := c.FinishBinding(logger, pod); err != nil {
		panic(err)
	}
	assumed, _ := c.IsAssumedPod(pod)
	fmt.Println("assumed:", assumed)

	if err := c.AddPod(logger, pod); err != nil { // the informer's confirmation
		panic(err)
	}
	assumed, _ = c.IsAssumedPod(pod)
	fmt.Println("assumed after AddPod:", assumed)

	snap := c.Snapshot()
	for i := 0; i < snap.NumNodes(); i++ { // zone-interleaved order
		ni := snap.At(i)
		fmt.Printf("%s: %d pods, %dm cpu requested\n", ni.NodeName(), ni.NumPods(), ni.Requested().MilliCPU)
	}
	// Output:
	// assumed: true
	// assumed after AddPod: false
	// a1: 0 pods, 0m cpu requested
	// b1: 1 pods, 500m cpu requested
	// a2: 0 pods, 0m cpu requested
}

// A scheduler that keeps one snapshot for its lifetime refreshes it at the
// start of every cycle, as with upstream's UpdateSnapshot.
func ExampleCache_UpdateSnapshot() {
	logger := klog.Background()
	c, err := schedcache.New(context.Background())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	snap := schedcache.NewEmptySnapshot()
	for cycle, node := range []string{"n1", "n2"} {
		if _, err := c.AddNode(logger, exampleNode(node, "A")); err != nil {
			panic(err)
		}
		if err := c.UpdateSnapshot(logger, snap); err != nil {
			panic(err)
		}
		list, _ := snap.NodeInfos().List()
		fmt.Println("cycle", cycle, "nodes:", len(list))
	}
	if _, err := snap.NodeInfos().Get("n3"); errors.Is(err, schedcache.ErrNodeInfoNotFound) {
		fmt.Println("n3 not found")
	}
	// Output:
	// cycle 0 nodes: 1
	// cycle 1 nodes: 2
	// n3 not found
}

// Errors are typed. Where upstream would exit the process the cache
// returns a *CorruptionError and changes nothing.
func ExampleCache_RemovePod() {
	logger := klog.Background()
	c, err := schedcache.New(context.Background())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.AddNode(logger, exampleNode("n1", "A")); err != nil {
		panic(err)
	}

	err = c.RemovePod(logger, examplePod("unknown", "n1", "1"))
	fmt.Println("not found:", errors.Is(err, schedcache.ErrPodNotFound))

	pod := examplePod("p", "n1", "1")
	if err := c.AddPod(logger, pod); err != nil {
		panic(err)
	}
	stale := examplePod("p", "n2", "1") // names another node than the cached pod
	var corrupt *schedcache.CorruptionError
	err = c.RemovePod(logger, stale)
	fmt.Println("corruption:", errors.As(err, &corrupt), errors.Is(err, schedcache.ErrCorrupted))
	n, _ := c.PodCount()
	fmt.Println("pods still cached:", n)
	// Output:
	// not found: true
	// corruption: true true
	// pods still cached: 1
}

// Informer events can be queued without waiting for the coordinator; they
// are applied in order, and Sync waits until everything queued before it
// is visible. Errors found when they are applied go to the handler.
func ExampleCache_AddPodAsync() {
	logger := klog.Background()
	c, err := schedcache.New(context.Background(),
		schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) { fmt.Println("async error:", e.Err) }))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.AddNode(logger, exampleNode("n1", "A")); err != nil {
		panic(err)
	}

	for i := range 3 {
		if err := c.AddPodAsync(examplePod(fmt.Sprintf("p%d", i), "n1", "100m")); err != nil {
			panic(err)
		}
	}
	if err := c.Sync(); err != nil {
		panic(err)
	}
	ni, _ := c.Snapshot().Get("n1")
	fmt.Println(ni.NumPods(), "pods,", ni.Requested().MilliCPU, "m cpu")
	// Output:
	// 3 pods, 300 m cpu
}
