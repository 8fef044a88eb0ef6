package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"github.com/schedcache/schedcache/bench/anchor"
)

// gangScenario: four nodes of one CPU and two gangs of three pods of
// 600m: the first gang fits (one pod a node), the second cannot (one
// node is left), so its member that finds a node waits on GangScheduling's
// Permit until it times out, is unreserved and forgotten, and so on until
// the run's end: never a part of a gang bound.
const gangScenario = `name: gang-whole
cluster:
  zones: 1
  seed: 1
  allocatable: {cpu: "1", memory: 32Gi, pods: 110}
  images: {perNode: 0, poolSize: 0}
workload:
  schedulers: 1
  bindingFailureRate: 0
  confirmDelay: 1ms
phases:
- name: nodes
  createNodes: {count: 4}
- name: gangs
  createPods:
    count: 6
    namespace: gang-ns-0
    skipWait: true
    template: {plain: true, containers: 1, cpu: 600m, memory: 100Mi, gangSize: 3}
- name: wait
  sleep: {duration: 12m}
`

// With GenericWorkload on, gangs are PodGroups scheduled by upstream's
// GangScheduling plugin (PreEnqueue and Permit): each gang is bound whole
// or not at all, and a member held by Permit waits in simulated time.
func TestGangWholeOrNone(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	sc := writeFile(t, "gang.yaml", gangScenario)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-scenario", sc, "-json", "-", "-quiet"}, &stdout, &stderr, false); code != 0 {
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
	if !rep.Consistent || rep.Counts.Scheduled != 3 {
		t.Fatalf("consistent %v, %d pods bound; want 3 (the first gang): %s", rep.Consistent, rep.Counts.Scheduled, stdout.String())
	}
	if bc := rep.BindingCycle; bc["bound"] != 3 || bc["permit_timeouts"] < 2 || bc["permit_waits"] < 4 {
		t.Fatalf("binding cycle %v: want 3 bound, the first gang's 2 waits allowed and the second's timing out", bc)
	}
	// The perf-gang preset (scheduler_perf's GangScheduling) at 50
	// nodes: every gang whole.
	stdout.Reset()
	if code := run(context.Background(), []string{"-preset", "perf-gang", "-scale", "0.01", "-json", "-", "-quiet"}, &stdout, &stderr, false); code != 0 {
		t.Fatalf("perf-gang: exit %d: %s", code, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if bc := rep.BindingCycle; rep.Counts.Scheduled != 30 || bc["bound"] != 30 || bc["permit_waits"] != 20 || bc["permit_timeouts"] != 0 {
		t.Fatalf("perf-gang: %d bound, binding cycle %v: want 30, 20 waits allowed", rep.Counts.Scheduled, bc)
	}
}

// -feature-gates takes upstream's gate names; a bad one exits 2.
func TestFeatureGatesFlag(t *testing.T) {
	for _, v := range []string{"NoSuchGate=true", "GenericWorkload", "GenericWorkload=maybe"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"-feature-gates", v, "-nodes", "10"}, &stdout, &stderr, false); code != 2 || !strings.Contains(stderr.String(), "-feature-gates") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming -feature-gates", v, code, stderr.String())
		}
	}
}

// The differential check of compare.sh at CI size: upstream's own
// scheduler (the anchor's gang workload, GenericWorkload on) and
// loadgen-fwk's perf-gang with GenericWorkload, both at 50 nodes and 30
// pods in gangs of 3, place every gang whole, none in part, and bind as
// many pods.
func TestGangMatchesAnchor(t *testing.T) {
	w, err := anchor.NewWorkload(anchor.Gang, 50, 0, 30)
	if err != nil {
		t.Fatal(err)
	}
	up, err := anchor.Run(context.Background(), w, anchor.Options{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("anchor: %v", err)
	}
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-preset", "perf-gang", "-scale", "0.01", "-json", "-", "-quiet"}, &stdout, &stderr, false); code != 0 {
		t.Fatalf("loadgen-fwk: exit %d: %s", code, stderr.String())
	}
	var rep struct {
		PodGroups struct {
			Groups, Whole, Partial, Bound int
		} `json:"pod_groups"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	g := rep.PodGroups
	if up.GangsPartial != 0 || g.Partial != 0 || up.Gangs != g.Groups || up.GangsPlaced != g.Whole || up.Bound != g.Bound {
		t.Fatalf("anchor: %d gangs, %d whole, %d partial, %d pods bound; loadgen-fwk: %+v", up.Gangs, up.GangsPlaced, up.GangsPartial, up.Bound, g)
	}
}
