package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// cycleLog is shared by every instance of the Cycle plugin: what its
// binding-cycle points saw. Guarded by mu.
type cycleLog struct {
	mu        sync.Mutex
	attempts  map[string]int // Reserve calls per pod
	unreserve []string       // pods Unreserve was called for, in order
	postBind  []string
}

func (l *cycleLog) reserve(pod string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts[pod]++
	return l.attempts[pod]
}

func (l *cycleLog) tries(pod string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts[pod]
}

// cyclePlugin is an out-of-tree Reserve and Permit plugin whose verdicts
// depend on the pod's namespace:
//
//   - reserve: Reserve fails (an error) on a pod's first attempt;
//   - allow: the first pod waits (30 s); the second allows it and goes on;
//   - reject: the first pod waits; the second rejects it and goes on; the
//     first is allowed at once on its next attempt;
//   - timeout: the pod waits 10 s on its first attempt (nobody allows
//     it), and is allowed at once on its next.
type cyclePlugin struct {
	h   fwk.Handle
	log *cycleLog
}

func (*cyclePlugin) Name() string { return "Cycle" }

func (p *cyclePlugin) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	if n := p.log.reserve(pod.Name); pod.Namespace == "reserve" && n == 1 {
		return fwk.AsStatus(fmt.Errorf("Cycle: first Reserve of %s fails", pod.Name))
	}
	return nil
}

func (p *cyclePlugin) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	p.log.mu.Lock()
	p.log.unreserve = append(p.log.unreserve, pod.Name)
	p.log.mu.Unlock()
}

func (p *cyclePlugin) Permit(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	first := strings.HasSuffix(pod.Name, "-000000")
	peer := types.UID(strings.TrimSuffix(pod.Name, "-000001") + "-000000")
	switch pod.Namespace {
	case "allow":
		if first {
			return fwk.NewStatus(fwk.Wait, "waiting for the second pod"), 30 * time.Second
		}
		if wp := p.h.GetWaitingPod(peer); wp != nil {
			wp.Allow(p.Name())
		}
	case "reject":
		if first && p.log.tries(pod.Name) == 1 {
			return fwk.NewStatus(fwk.Wait, "waiting to be rejected"), 30 * time.Second
		}
		if !first {
			if wp := p.h.GetWaitingPod(peer); wp != nil {
				wp.Reject(p.Name(), "rejected by the second pod")
			}
		}
	case "timeout":
		if p.log.tries(pod.Name) == 1 {
			return fwk.NewStatus(fwk.Wait, "waiting for nobody"), 10 * time.Second
		}
	}
	return nil, 0
}

func (p *cyclePlugin) PostBind(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	p.log.mu.Lock()
	p.log.postBind = append(p.log.postBind, pod.Name)
	p.log.mu.Unlock()
}

const cycleConfig = v1Head + `profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Cycle
`

const cycleScenario = `name: bindcycle
cluster:
  zones: 1
  seed: 1
  allocatable: {cpu: "4", memory: 32Gi, pods: 110}
  images: {perNode: 0, poolSize: 0}
workload:
  schedulers: 1
  bindingFailureRate: 0
  confirmDelay: 1ms
phases:
- name: nodes
  createNodes: {count: 4}
- name: allow
  createPods: {count: 2, namespace: allow, template: {plain: true, containers: 1, cpu: 100m, memory: 100Mi}}
- name: reject
  createPods: {count: 2, namespace: reject, template: {plain: true, containers: 1, cpu: 100m, memory: 100Mi}}
- name: reserve
  createPods: {count: 3, namespace: reserve, template: {plain: true, containers: 1, cpu: 100m, memory: 100Mi}}
- name: timeout
  createPods: {count: 1, namespace: timeout, template: {plain: true, containers: 1, cpu: 100m, memory: 100Mi}}
- name: later
  sleep: {duration: 7m}
- name: all
  barrier: {}
`

// The binding cycle runs the profile's own Reserve, Permit and PostBind
// plugins, an out-of-tree one included, in simulated time: a pod a Permit
// plugin holds waits with its resources assumed until another pod's
// Permit allows it, or until a rejection or its timeout, after which
// Unreserve runs, the pod is forgotten and goes back to the queue
// (unschedulable, so it is tried again after the 5 minutes upstream
// keeps such pods); a failed Reserve is unreserved and backs off. Every
// pod ends bound, and the run is the same twice.
func TestBindingCycle(t *testing.T) {
	run := func() (report, *cycleLog, string) {
		log := &cycleLog{attempts: map[string]int{}}
		reg := frameworkruntime.Registry{"Cycle": func(_ context.Context, _ kruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return &cyclePlugin{h: h, log: log}, nil
		}}
		cfg := writeFile(t, "cycle.yaml", cycleConfig)
		sc := writeFile(t, "scenario.yaml", cycleScenario)
		var stdout, stderr bytes.Buffer
		code := runWith(context.Background(), []string{"-config", cfg, "-scenario", sc, "-json", "-", "-quiet"}, &stdout, &stderr, false, reg)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var rep report
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		var bc struct {
			BindingCycle map[string]int64 `json:"binding_cycle"`
			Consistent   bool             `json:"consistent"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &bc); err != nil {
			t.Fatal(err)
		}
		if !bc.Consistent {
			t.Fatalf("inconsistent: %s", stdout.String())
		}
		want := map[string]int64{"reserve_failures": 3, "permit_waits": 3, "permit_timeouts": 1, "wait_rejections": 2, "bound": 8, "bind_failures": 0}
		for k, v := range want {
			if bc.BindingCycle[k] != v {
				t.Errorf("binding_cycle %s = %d, want %d (%v)", k, bc.BindingCycle[k], v, bc.BindingCycle)
			}
		}
		return rep, log, rep.Digest
	}
	rep, log, d1 := run()
	if rep.Counts.Scheduled != 8 {
		t.Fatalf("scheduled %d pods, want 8", rep.Counts.Scheduled)
	}
	// Unreserve: each reserve pod once (its failed Reserve), the rejected
	// and the timed-out pod once each; no pod that bound the first time.
	slices.Sort(log.unreserve)
	wantUn := []string{"ph2-000000", "ph3-000000", "ph3-000001", "ph3-000002", "ph4-000000"}
	if !slices.Equal(log.unreserve, wantUn) {
		t.Errorf("Unreserve for %v, want %v", log.unreserve, wantUn)
	}
	for pod, n := range map[string]int{"ph1-000000": 1, "ph1-000001": 1, "ph2-000000": 2, "ph2-000001": 1, "ph3-000000": 2, "ph4-000000": 2} {
		if got := log.attempts[pod]; got != n {
			t.Errorf("%s: %d Reserve calls, want %d", pod, got, n)
		}
	}
	if len(log.postBind) != 8 {
		t.Errorf("PostBind for %v, want the 8 pods", log.postBind)
	}
	if _, _, d2 := run(); d2 != d1 {
		t.Errorf("digests differ: %s, %s", d1, d2)
	}
}

// clientBinder is an out-of-tree Bind plugin binding through the
// framework's clientset, as a binder other than DefaultBinder would.
type clientBinder struct {
	h     fwk.Handle
	calls *atomic.Int64
}

func (*clientBinder) Name() string { return "ClientBinder" }

func (b *clientBinder) Bind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	b.calls.Add(1)
	binding := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target: v1.ObjectReference{Kind: "Node", Name: node}}
	if err := b.h.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}

// A configuration whose Bind plugin is not DefaultBinder binds through
// the simulator's API server all the same: every binding goes through the
// plugin, the API server's failures (-fail-rate) come back to it, and
// the pods whose binding failed are unreserved, requeued and bound later.
func TestBindingCycleOtherBinder(t *testing.T) {
	var calls atomic.Int64
	reg := frameworkruntime.Registry{"ClientBinder": func(_ context.Context, _ kruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return &clientBinder{h: h, calls: &calls}, nil
	}}
	cfg := writeFile(t, "binder.yaml", v1Head+`profiles:
- schedulerName: default-scheduler
  plugins:
    bind:
      disabled:
      - name: DefaultBinder
      enabled:
      - name: ClientBinder
`)
	var stdout, stderr bytes.Buffer
	code := runWith(context.Background(), []string{"-config", cfg, "-preset", "perf-scheduling-basic", "-scale", "0.01", "-fail-rate", "0.1", "-json", "-", "-quiet"}, &stdout, &stderr, false, reg)
	if code != 0 && code != 4 { // 4: the preset's threshold, with failures
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Consistent   bool             `json:"consistent"`
		BindingCycle map[string]int64 `json:"binding_cycle"`
		Counts       struct {
			Scheduled int64 `json:"scheduled"`
		} `json:"counts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	bc := rep.BindingCycle
	if !rep.Consistent || rep.Counts.Scheduled != 110 || bc["bound"] != 110 || bc["bind_failures"] == 0 {
		t.Fatalf("consistent %v, %d bound, binding cycle %v: want 110 bound, some bindings failed", rep.Consistent, rep.Counts.Scheduled, bc)
	}
	if n := calls.Load(); n != bc["bound"]+bc["bind_failures"] {
		t.Fatalf("ClientBinder called %d times, want every binding (%d)", n, bc["bound"]+bc["bind_failures"])
	}
}
