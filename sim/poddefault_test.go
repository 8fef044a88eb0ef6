package sim

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// seenPicker is LeastAllocated that keeps the pods it is asked to place
// and counts its picks (Counting).
type seenPicker struct {
	mu   sync.Mutex
	pods []*v1.Pod // guarded by mu
}

func (p *seenPicker) Name() string      { return "seen" }
func (p *seenPicker) Plugins() []string { return nil }
func (p *seenPicker) NewNodePicker(_ context.Context, cfg PickerConfig) (NodePicker, error) {
	return &seenNodePicker{p: p, la: leastAllocated{sample: cfg.Sample}}, nil
}

type seenNodePicker struct {
	p     *seenPicker    // immutable
	la    leastAllocated // immutable
	picks int64          // owned by the picker's scheduler
}

func (np *seenNodePicker) Pick(ctx context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, r *rand.Rand, rej []int64) (string, error) {
	np.p.mu.Lock()
	np.p.pods = append(np.p.pods, pod.Pod())
	np.p.mu.Unlock()
	np.picks++
	return np.la.Pick(ctx, snap, pod, r, rej)
}
func (np *seenNodePicker) Close() error { return nil }
func (np *seenNodePicker) Counters() []PickerCounter {
	return []PickerCounter{{Name: "picks", Value: np.picks}, {Name: "one", Value: 1}}
}

// podDefault pods are scheduler_perf's pod-default.yaml exactly (the
// anchor's DefaultPod in the bench module): one pause container with port
// 80, the template's requests as requests and limits, no labels but the
// template's; and a picker's counters are summed over its schedulers.
func TestPhasePodDefault(t *testing.T) {
	p := writeScenario(t, `cluster: {seed: 2, allocatable: {cpu: "4", memory: 32Gi, pods: 110}}
workload: {schedulers: 2, sample: 4, bindingFailureRate: 0}
phases:
- createNodes: {count: 4}
- name: measure
  createPods:
    count: 6
    collectMetrics: true
    template: {podDefault: true, cpu: 200m, labels: {color: green}}
`)
	sp := &seenPicker{}
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{picker: sp})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, r.Consistent)
	require.Len(t, sp.pods, 6)
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("500Mi")}
	for _, pod := range sp.pods {
		require.Equal(t, map[string]string{"color": "green"}, pod.Labels)
		require.Empty(t, pod.Annotations)
		require.Len(t, pod.Spec.Containers, 1)
		c := pod.Spec.Containers[0]
		require.Equal(t, "pause", c.Name)
		require.Equal(t, PodDefaultImage, c.Image)
		require.Equal(t, []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}}, c.Ports)
		for name, q := range rl {
			require.Zero(t, q.Cmp(c.Resources.Requests[name]), "request %s", name)
			require.Zero(t, q.Cmp(c.Resources.Limits[name]), "limit %s", name)
		}
		require.Empty(t, pod.Spec.InitContainers)
		require.Empty(t, pod.Spec.Volumes)
		require.Nil(t, pod.Spec.Affinity)
		require.Empty(t, pod.Spec.Tolerations)
		require.Equal(t, v1.DefaultSchedulerName, pod.Spec.SchedulerName)
	}
	require.Equal(t, []PickerCounter{{Name: "picks", Value: 6}, {Name: "one", Value: 2}}, r.PickerCounters)
	// The phase's process figures: CPU time and GCs over its span, and
	// pods per CPU second from them (CPU time may read 0 on so short a
	// phase: the kernel accounts it in ticks).
	m := phaseByName(t, r, "measure")
	require.GreaterOrEqual(t, m.CPUSeconds, 0.0)
	if m.CPUSeconds > 0 {
		require.InDelta(t, float64(m.Scheduled)/m.CPUSeconds, m.PodsPerCPUSec, 1e-6)
	} else {
		require.Zero(t, m.PodsPerCPUSec)
	}
}
