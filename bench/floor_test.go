package bench

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/workload"
)

// floorCache is the least a scheduler cache does per pod event, with none of
// either implementation's bookkeeping (no assumed state, no snapshots, no
// lists, no locks, no goroutines): it builds the pod's PodInfo (both
// implementations precompute it), finds the pod by key in one map and its
// node by name in another, and keeps per node a running request sum and a
// slice of its pods. BenchmarkScaleFloor runs W1's and W2's event streams on
// it at 5,000 and 50,000 nodes: the difference between the two sizes is the
// cost of touching 10x more state (cache and TLB misses on this machine),
// which an implementation that touches at least this state pays as well.
//
// Contract: not safe for concurrent use.
type floorCache struct {
	pods  map[string]*floorPod  // pod key -> pod
	nodes map[string]*floorNode // node name -> node
}

type floorPod struct {
	info *nodeinfo.PodInfo
	node *floorNode
}

type floorNode struct {
	node     *v1.Node
	cpu, mem int64
	pods     []*nodeinfo.PodInfo
}

func newFloorCache(c *workload.Cluster) (*floorCache, error) {
	f := &floorCache{pods: make(map[string]*floorPod, len(c.Pods)), nodes: make(map[string]*floorNode, len(c.Nodes))}
	for _, n := range c.Nodes {
		f.nodes[n.Name] = &floorNode{node: n}
	}
	for _, p := range c.Pods {
		if err := f.add(p); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (f *floorCache) add(p *v1.Pod) error {
	info, err := nodeinfo.NewPodInfo(p)
	if err != nil {
		return err
	}
	key := info.Key()
	if _, ok := f.pods[key]; ok {
		return fmt.Errorf("floor: pod %s already cached", key)
	}
	n := f.nodes[p.Spec.NodeName]
	if n == nil {
		n = &floorNode{}
		f.nodes[p.Spec.NodeName] = n
	}
	r := info.Requests()
	n.cpu += r.MilliCPU
	n.mem += r.Memory
	n.pods = append(n.pods, info)
	f.pods[key] = &floorPod{info: info, node: n}
	return nil
}

func (f *floorCache) remove(p *v1.Pod) error {
	key, err := nodeinfo.PodKey(p)
	if err != nil {
		return err
	}
	fp := f.pods[key]
	if fp == nil {
		return fmt.Errorf("floor: pod %s not cached", key)
	}
	n := fp.node
	i := slices.Index(n.pods, fp.info)
	if i < 0 {
		return fmt.Errorf("floor: pod %s not on its node", key)
	}
	last := len(n.pods) - 1
	n.pods[i] = n.pods[last]
	n.pods[last] = nil
	n.pods = n.pods[:last]
	r := fp.info.Requests()
	n.cpu -= r.MilliCPU
	n.mem -= r.Memory
	delete(f.pods, key)
	return nil
}

func (f *floorCache) apply(ev workload.Event) error {
	switch ev.Kind {
	case workload.AddPod:
		return f.add(ev.Pod)
	case workload.RemovePod:
		return f.remove(ev.Pod)
	case workload.UpdatePod:
		if err := f.remove(ev.OldPod); err != nil {
			return err
		}
		return f.add(ev.Pod)
	case workload.UpdateNode:
		n := f.nodes[ev.Node.Name]
		if n == nil {
			return fmt.Errorf("floor: node %s not cached", ev.Node.Name)
		}
		n.node = ev.Node
		return nil
	}
	return fmt.Errorf("floor: unexpected event kind %v", ev.Kind)
}

// BenchmarkScaleFloor: W1's writer stream (pod adds and removes) and W2's
// informer stream applied to floorCache, on the loaded standard cluster and
// (with -bench.50k) the 50,000-node one. Loading is setup; ns/op is per
// event. Compare the two sizes' ns/op with those of BenchmarkW1 (readers=0)
// and BenchmarkW2: the docs quote the three 50k-minus-5k differences.
func BenchmarkScaleFloor(b *testing.B) {
	for _, w := range []struct {
		name string
		mix  func(*workload.Cluster) *workload.InformerChurn
	}{
		{"W1", func(c *workload.Cluster) *workload.InformerChurn {
			return workload.NewInformerChurnMix(c, 101, workload.W1Mix())
		}},
		{"W2", func(c *workload.Cluster) *workload.InformerChurn { return workload.NewInformerChurn(c, 202) }},
	} {
		for _, spec := range specs(true) {
			b.Run(fmt.Sprintf("impl=floor/workload=%s/nodes=%s", w.name, sizeName(spec)), func(b *testing.B) {
				releaseFixture() // only this benchmark's state is live
				c := clusterFor(spec)
				f, err := newFloorCache(c)
				if err != nil {
					b.Fatal(err)
				}
				events := w.mix(c).Generate(b.N)
				settleHeap()
				b.ReportAllocs()
				b.ResetTimer()
				cpu := takeCPU()
				for _, ev := range events {
					if err := f.apply(ev); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				cpu.report(b, b.N)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
				runtime.KeepAlive(f)
			})
		}
	}
}

// The floor does the cache's arithmetic right: after a W2 stream on a small
// cluster, every node's sums and pod slice are those of the pods the map
// holds, and the map holds exactly the stream's live pods.
func TestFloorCache(t *testing.T) {
	c := workload.Build(workload.ClusterSpec{Nodes: 40, PodsPerNode: 5, Seed: 3})
	f, err := newFloorCache(c)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, p := range c.Pods {
		live[string(p.UID)] = true
	}
	for _, ev := range workload.NewInformerChurn(c, 4).Generate(5000) {
		if err := f.apply(ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case workload.AddPod:
			live[string(ev.Pod.UID)] = true
		case workload.RemovePod:
			delete(live, string(ev.Pod.UID))
		}
	}
	if len(f.pods) != len(live) {
		t.Fatalf("floor holds %d pods, the stream left %d", len(f.pods), len(live))
	}
	want := map[*floorNode][2]int64{}
	count := map[*floorNode]int{}
	for key, fp := range f.pods {
		if !live[key] {
			t.Fatalf("floor holds %s, which the stream removed", key)
		}
		r := fp.info.Requests()
		s := want[fp.node]
		want[fp.node] = [2]int64{s[0] + r.MilliCPU, s[1] + r.Memory}
		count[fp.node]++
		if !slices.Contains(fp.node.pods, fp.info) {
			t.Fatalf("pod %s missing from its node's slice", key)
		}
	}
	for name, n := range f.nodes {
		if got := [2]int64{n.cpu, n.mem}; got != want[n] {
			t.Fatalf("node %s: sums %v, its pods add up to %v", name, got, want[n])
		}
		if len(n.pods) != count[n] {
			t.Fatalf("node %s: %d pods in its slice, %d in the map", name, len(n.pods), count[n])
		}
	}
}
