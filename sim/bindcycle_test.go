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
