package workload

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

// model is a minimal consistent cache: it checks that every event applies.
type model struct {
	t     *testing.T
	pods  map[string]*v1.Pod // by UID
	nodes map[string]*v1.Node
	// removed holds the names of removed nodes, which must never come back.
	removed map[string]bool
	counts  [NumEventKinds]int
}

func newModel(t *testing.T, c *Cluster) *model {
	m := &model{t: t, pods: map[string]*v1.Pod{}, nodes: map[string]*v1.Node{}, removed: map[string]bool{}}
	for _, n := range c.Nodes {
		m.nodes[n.Name] = n
	}
	for _, p := range c.Pods {
		m.pods[string(p.UID)] = p
	}
	return m
}

// apply checks that ev applies to the model and applies it. It tests with
// plain comparisons: it runs for every event.
func (m *model) apply(i int, ev Event) {
	t := m.t
	if ev.Kind < 0 || ev.Kind >= NumEventKinds {
		t.Fatalf("event %d: kind %v", i, ev.Kind)
	}
	m.counts[ev.Kind]++
	switch ev.Kind {
	case AddPod:
		if ev.Pod == nil || ev.OldPod != nil || ev.Node != nil || ev.OldNode != nil {
			t.Fatalf("event %d: AddPod with fields %+v", i, ev)
		}
		uid := string(ev.Pod.UID)
		if _, ok := m.pods[uid]; ok {
			t.Fatalf("event %d: add of present pod %s", i, uid)
		}
		if _, ok := m.nodes[ev.Pod.Spec.NodeName]; !ok {
			t.Fatalf("event %d: pod %s added to absent node %q", i, uid, ev.Pod.Spec.NodeName)
		}
		m.pods[uid] = ev.Pod
	case UpdatePod:
		if ev.Pod == nil || ev.OldPod == nil || ev.Node != nil || ev.OldNode != nil {
			t.Fatalf("event %d: UpdatePod with fields %+v", i, ev)
		}
		uid := string(ev.OldPod.UID)
		if m.pods[uid] != ev.OldPod {
			t.Fatalf("event %d: update of absent or stale pod %s", i, uid)
		}
		if ev.Pod.UID != ev.OldPod.UID || ev.Pod.Spec.NodeName != ev.OldPod.Spec.NodeName ||
			ev.Pod.ResourceVersion == ev.OldPod.ResourceVersion ||
			ev.Pod.Labels[LabelTrack] == ev.OldPod.Labels[LabelTrack] {
			t.Fatalf("event %d: bad update of pod %s", i, uid)
		}
		m.pods[uid] = ev.Pod
	case RemovePod:
		if ev.Pod == nil || ev.OldPod != nil || ev.Node != nil || ev.OldNode != nil {
			t.Fatalf("event %d: RemovePod with fields %+v", i, ev)
		}
		uid := string(ev.Pod.UID)
		if m.pods[uid] != ev.Pod {
			t.Fatalf("event %d: remove of absent or stale pod %s", i, uid)
		}
		delete(m.pods, uid)
	case AddNode:
		if ev.Node == nil || ev.OldNode != nil || ev.Pod != nil || ev.OldPod != nil {
			t.Fatalf("event %d: AddNode with fields %+v", i, ev)
		}
		if _, ok := m.nodes[ev.Node.Name]; ok || m.removed[ev.Node.Name] {
			t.Fatalf("event %d: add of present or former node %s", i, ev.Node.Name)
		}
		m.nodes[ev.Node.Name] = ev.Node
	case UpdateNode:
		if ev.Node == nil || ev.OldNode == nil || ev.Pod != nil || ev.OldPod != nil {
			t.Fatalf("event %d: UpdateNode with fields %+v", i, ev)
		}
		if m.nodes[ev.OldNode.Name] != ev.OldNode {
			t.Fatalf("event %d: update of absent or stale node %s", i, ev.OldNode.Name)
		}
		if ev.Node.Name != ev.OldNode.Name || ev.Node.ResourceVersion == ev.OldNode.ResourceVersion {
			t.Fatalf("event %d: bad update of node %s", i, ev.Node.Name)
		}
		m.nodes[ev.Node.Name] = ev.Node
	case RemoveNode:
		if ev.Node == nil || ev.OldNode != nil || ev.Pod != nil || ev.OldPod != nil {
			t.Fatalf("event %d: RemoveNode with fields %+v", i, ev)
		}
		if m.nodes[ev.Node.Name] != ev.Node {
			t.Fatalf("event %d: remove of absent or stale node %s", i, ev.Node.Name)
		}
		delete(m.nodes, ev.Node.Name)
		m.removed[ev.Node.Name] = true
	}
}

func (m *model) podEvents() int { return m.counts[AddPod] + m.counts[UpdatePod] + m.counts[RemovePod] }

func TestInformerChurnValid(t *testing.T) {
	c := standard()
	before := slices.Clone(c.Pods)
	s := NewInformerChurn(c, 1)
	m := newModel(t, c)
	const n = 100000
	for i := range n {
		m.apply(i, s.Next())
	}
	require.Equal(t, len(m.pods), s.NumPods())
	require.Len(t, m.nodes, len(c.Nodes))
	require.Zero(t, m.counts[AddNode]+m.counts[RemoveNode])
	pe := m.podEvents()
	require.Equal(t, n, pe+m.counts[UpdateNode])
	require.Equal(t, pe/100, m.counts[UpdateNode], "one node update per 100 pod events")
	for k, want := range map[PodEventKind]float64{AddPod: 40, UpdatePod: 20, RemovePod: 40} {
		require.InDelta(t, want, 100*float64(m.counts[k])/float64(pe), 2, "%v", k)
	}
	t.Logf("counts %v, live pods %d", m.counts, len(m.pods))
	// The cluster is untouched.
	require.True(t, slices.Equal(before, c.Pods))
	for _, p := range c.Pods {
		if p.ResourceVersion != "1" {
			t.Fatalf("cluster pod %s changed", p.Name)
		}
	}
}

func TestInformerChurnDeterministic(t *testing.T) {
	c := Build(ClusterSpec{Nodes: 50, PodsPerNode: 10, Seed: 4})
	a := NewInformerChurn(c, 9).Generate(3000)
	s := NewInformerChurn(c, 9)
	for i := range a {
		require.True(t, reflect.DeepEqual(a[i], s.Next()), "event %d", i)
	}
	other := NewInformerChurn(c, 10).Generate(3000)
	require.False(t, reflect.DeepEqual(a, other))
}

func TestInformerChurnSmallCluster(t *testing.T) {
	// Remove-heavy churn on a tiny cluster empties it and keeps going.
	c := Build(ClusterSpec{Nodes: 2, PodsPerNode: 2, Seed: 1})
	s := NewInformerChurnMix(c, 1, ChurnMix{Add: 1, Remove: 9, NodeUpdateEvery: 3})
	m := newModel(t, c)
	for i := range 2000 {
		m.apply(i, s.Next())
	}
	require.Positive(t, m.counts[AddPod])
	require.Positive(t, m.counts[UpdateNode])
}

func TestW1Mix(t *testing.T) {
	c := Build(ClusterSpec{Nodes: 100, PodsPerNode: 30, Seed: 1})
	s := NewInformerChurnMix(c, 1, W1Mix())
	m := newModel(t, c)
	for i := range 10000 {
		m.apply(i, s.Next())
	}
	require.Zero(t, m.counts[UpdatePod])
	require.Zero(t, m.counts[UpdateNode])
	require.InDelta(t, 5000, m.counts[AddPod], 300)
}

func TestChurnPanics(t *testing.T) {
	c := Build(ClusterSpec{Nodes: 1, PodsPerNode: 1, Seed: 1})
	require.Panics(t, func() { NewInformerChurnMix(c, 1, ChurnMix{}) })
	require.Panics(t, func() { NewInformerChurnMix(c, 1, ChurnMix{Add: -1, Remove: 2}) })
	require.Panics(t, func() { NewInformerChurn(Build(ClusterSpec{Seed: 1}), 1) })
	require.Panics(t, func() { NewNodeChurnMix(c, 1, NodeChurnMix{Pods: W2Mix(), NodeOpEvery: -1}) })
}

func TestNodeChurnValid(t *testing.T) {
	c := standard()
	s := NewNodeChurn(c, 1)
	m := newModel(t, c)
	zoneMoves := 0
	const n = 100000
	for i := range n {
		ev := s.Next()
		if ev.Kind == UpdateNode && ev.OldNode.Labels[v1.LabelTopologyZone] != ev.Node.Labels[v1.LabelTopologyZone] {
			zoneMoves++
			require.Contains(t, []string{ZoneA, ZoneB, ZoneC}, ev.Node.Labels[v1.LabelTopologyZone])
			require.Equal(t, Region, ev.Node.Labels[v1.LabelTopologyRegion])
			require.Equal(t, ev.OldNode.Labels[v1.LabelHostname], ev.Node.Labels[v1.LabelHostname])
		}
		m.apply(i, ev)
	}
	require.Equal(t, len(m.pods), s.NumPods())
	require.Equal(t, len(m.nodes), s.NumNodes())
	pe := m.podEvents()
	// One of each per 1,000 pod events; zone moves are offset by 500.
	require.InDelta(t, float64(pe)/1000, zoneMoves, 1)
	require.Equal(t, pe/1000, m.counts[AddNode]+m.counts[RemoveNode])
	require.InDelta(t, m.counts[AddNode], m.counts[RemoveNode], 1)
	require.InDelta(t, len(c.Nodes), len(m.nodes), 1)
	require.Equal(t, pe/100+zoneMoves, m.counts[UpdateNode])
	for k, want := range map[PodEventKind]float64{AddPod: 40, UpdatePod: 20, RemovePod: 40} {
		require.InDelta(t, want, 100*float64(m.counts[k])/float64(pe), 2, "%v", k)
	}
	t.Logf("counts %v, zone moves %d", m.counts, zoneMoves)
}

func TestNodeChurnNeverRemovesLastNode(t *testing.T) {
	c := Build(ClusterSpec{Nodes: 1, PodsPerNode: 3, Seed: 1})
	s := NewNodeChurnMix(c, 1, NodeChurnMix{Pods: W2Mix(), NodeOpEvery: 1, ZoneMoveEvery: 2})
	m := newModel(t, c)
	for i := range 5000 {
		m.apply(i, s.Next())
		require.NotEmpty(t, m.nodes)
	}
	require.Positive(t, m.counts[RemoveNode])
}

func TestEventKindString(t *testing.T) {
	require.Equal(t, "AddPod", AddPod.String())
	require.Equal(t, "RemoveNode", RemoveNode.String())
	require.Equal(t, "PodEventKind(9)", PodEventKind(9).String())
	require.True(t, UpdatePod.IsPod())
	require.False(t, UpdateNode.IsPod())
}
