package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// cycleFit is a test picker whose node pickers are scanFit's with a
// binding cycle (BindingCycle) that decides by namespace:
//
//   - pair: a pod whose index is even waits (30 s) until the next pod's
//     Reserve allows it;
//   - lonely: the pod waits 10 s on its first attempt, nobody allows it;
//     later attempts go on at once;
//   - fail: Reserve fails (an error) on a pod's first attempt.
type cycleFit struct {
	scanFit
	made []*cycleNode // owned by the run's main goroutine
}

type cycleNode struct {
	*scanFitNode
	tries    map[string]int     // owned by the scheduler: Reserve calls per pod
	waiting  []*v1.Pod          // owned by the scheduler: in the order they began
	allowed  map[types.UID]bool // owned by the scheduler
	rejected map[types.UID]bool // owned by the scheduler
	log      []string           // owned by the scheduler: "unreserve NAME", "postbind NAME"
}

func (p *cycleFit) NewNodePicker(ctx context.Context, cfg PickerConfig) (NodePicker, error) {
	np := &cycleNode{scanFitNode: &scanFitNode{nominated: map[string]string{}}, tries: map[string]int{},
		allowed: map[types.UID]bool{}, rejected: map[types.UID]bool{}}
	p.made = append(p.made, np)
	return np, nil
}

func (np *cycleNode) Reserve(_ context.Context, pod *v1.Pod, _ string) (PermitResult, error) {
	np.tries[pod.Name]++
	n := np.tries[pod.Name]
	var idx int
	if _, err := fmt.Sscanf(pod.Name[strings.LastIndex(pod.Name, "-")+1:], "%d", &idx); err != nil {
		return PermitResult{}, err
	}
	switch {
	case pod.Namespace == "fail" && n == 1:
		np.log = append(np.log, "unreserve "+pod.Name)
		return PermitResult{Failed: true, Stage: "reserve", Plugin: "Test", Message: "first Reserve fails"}, nil
	case pod.Namespace == "pair" && idx%2 == 0:
		np.waiting = append(np.waiting, pod)
		return PermitResult{Wait: true, Timeout: 30 * time.Second, Plugin: "Test"}, nil
	case pod.Namespace == "pair":
		for _, w := range np.waiting {
			if strings.HasSuffix(w.Name, fmt.Sprintf("-%06d", idx-1)) {
				np.allowed[w.UID] = true
			}
		}
	case pod.Namespace == "lonely" && n == 1:
		np.waiting = append(np.waiting, pod)
		return PermitResult{Wait: true, Timeout: 10 * time.Second, Plugin: "Test"}, nil
	}
	return PermitResult{}, nil
}

func (np *cycleNode) Resolved() []types.UID {
	var out []types.UID
	kept := np.waiting[:0]
	for _, w := range np.waiting {
		if np.allowed[w.UID] || np.rejected[w.UID] {
			out = append(out, w.UID)
			continue
		}
		kept = append(kept, w)
	}
	np.waiting = kept
	return out
}

func (np *cycleNode) Expire(pod *v1.Pod, _ string) { np.rejected[pod.UID] = true }

func (np *cycleNode) Bind(_ context.Context, pod *v1.Pod, _ string, api func() error) (BindResult, error) {
	if np.rejected[pod.UID] {
		delete(np.rejected, pod.UID)
		return BindResult{Stage: "permit", Rejected: true, Plugin: "Test", Message: "timed out"}, nil
	}
	if err := api(); err != nil {
		return BindResult{Stage: "bind", Called: true, APIErr: err}, nil
	}
	return BindResult{Called: true}, nil
}

func (np *cycleNode) PostBind(_ context.Context, pod *v1.Pod, _ string) {
	np.log = append(np.log, "postbind "+pod.Name)
}

func (np *cycleNode) Unreserve(_ context.Context, pod *v1.Pod, _ string) {
	np.log = append(np.log, "unreserve "+pod.Name)
}

func (np *cycleNode) Activated() []types.UID { return nil }

// A picker that is a BindingCycle runs the binding cycle: a pod told to
// wait holds its node until allowed, or until its timeout in simulated
// time, after which it is unreserved, forgotten and, unschedulable, tried
// again after the 5 minutes upstream keeps such pods; a failed Reserve
// backs off and is retried. Every pod ends bound, PostBind runs once per
// pod, and the run is reproducible.
func TestBindingCyclePicker(t *testing.T) {
	p := writeScenario(t, `cluster: {seed: 3, allocatable: {cpu: "4", memory: 32Gi, pods: 110}, images: {perNode: 0, poolSize: 0}}
workload: {schedulers: 1, bindingFailureRate: 0, confirmDelay: 1ms}
phases:
- createNodes: {count: 2}
- name: pair
  createPods: {count: 4, namespace: pair, template: {plain: true, containers: 1, cpu: 100m, memory: 1Gi}}
- name: fail
  createPods: {count: 2, namespace: fail, template: {plain: true, containers: 1, cpu: 100m, memory: 1Gi}}
- name: lonely
  createPods: {count: 1, namespace: lonely, template: {plain: true, containers: 1, cpu: 100m, memory: 1Gi}}
- name: later
  sleep: {duration: 7m}
- name: all
  barrier: {}
`)
	run := func() (*JSONReport, *cycleFit) {
		picker := &cycleFit{}
		code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{picker: picker})
		require.Equal(t, exitOK, code, stderr)
		require.True(t, r.Consistent)
		return r, picker
	}
	r, picker := run()
	require.Equal(t, int64(7), r.Counts.Scheduled)
	require.NotNil(t, r.BindingCycle)
	bc := *r.BindingCycle
	require.Equal(t, BindingCycleCounts{Reserved: 8, ReserveFailures: 2, PermitWaits: 3, PermitTimeouts: 1, WaitRejections: 1, Bound: 7}, bc)
	require.Len(t, picker.made, 1)
	log := picker.made[0].log
	var un, post []string
	for _, l := range log {
		if name, ok := strings.CutPrefix(l, "unreserve "); ok {
			un = append(un, name)
		} else {
			post = append(post, strings.TrimPrefix(l, "postbind "))
		}
	}
	slices.Sort(un)
	require.Equal(t, []string{"ph2-000000", "ph2-000001", "ph3-000000"}, un)
	require.Len(t, post, 7)
	require.Equal(t, 2, picker.made[0].tries["ph3-000000"], "the timed-out pod was tried again")
	lonely := phaseByName(t, r, "lonely")
	require.Equal(t, int64(1), lonely.Unschedulable, "a wait that times out is a rejection: unschedulable")
	r2, _ := run()
	require.Equal(t, r.Digest, r2.Digest)
}

// groupFit is cycleFit as a PodGroupPicker whose node pickers are
// Enqueuers: a pod-group member of namespace held is kept out of the
// queue the first two times it is asked about.
type groupFit struct {
	cycleFit
	asks  map[string]int // owned by the run's goroutine
	asked []string       // owned by the run's goroutine: "name true|false"
}

func (p *groupFit) PodGroups() bool { return true }

func (p *groupFit) NewNodePicker(ctx context.Context, cfg PickerConfig) (NodePicker, error) {
	np, err := p.cycleFit.NewNodePicker(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return groupNode{cycleNode: np.(*cycleNode), p: p}, nil
}

type groupNode struct {
	*cycleNode
	p *groupFit
}

func (n groupNode) PreEnqueue(_ context.Context, pod *v1.Pod) (bool, string, error) {
	if n.p.asks == nil {
		n.p.asks = map[string]int{}
	}
	n.p.asks[pod.Name]++
	ok := pod.Namespace != "held" || n.p.asks[pod.Name] >= 3
	n.p.asked = append(n.p.asked, fmt.Sprintf("%s %v", pod.Name, ok))
	return ok, "Test", nil
}

// With a picker that schedules pod groups, a gang is a PodGroup in the
// cache and its members carry spec.schedulingGroup; the picker's
// PreEnqueue decides when a member joins the queue, and a member it held
// is asked again at the next pod creation and at the next cluster event
// (here the other pod's binding, delivered). Pods in no group are not
// asked.
func TestPodGroupsPreEnqueue(t *testing.T) {
	p := writeScenario(t, `cluster: {seed: 3, allocatable: {cpu: "4", memory: 32Gi, pods: 110}, images: {perNode: 0, poolSize: 0}}
workload: {schedulers: 1, bindingFailureRate: 0, confirmDelay: 1ms}
phases:
- createNodes: {count: 2}
- name: held
  createPods: {count: 2, namespace: held, skipWait: true, template: {plain: true, containers: 1, cpu: 100m, memory: 1Gi, gangSize: 2}}
- name: other
  createPods: {count: 1, namespace: other, template: {plain: true, containers: 1, cpu: 100m, memory: 1Gi}}
- name: all
  barrier: {}
`)
	picker := &groupFit{}
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{picker: picker})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, r.Consistent)
	require.Equal(t, int64(3), r.Counts.Scheduled)
	require.Equal(t, &PodGroupCounts{Groups: 1, Whole: 1, Members: 2, Bound: 2}, r.PodGroups)
	require.Equal(t, []string{
		"ph1-000000 false", "ph1-000001 false", // created
		"ph1-000000 false", "ph1-000001 false", // the next phase's pods created
		"ph1-000000 true", "ph1-000001 true", // the other pod's binding delivered
	}, picker.asked)
}
