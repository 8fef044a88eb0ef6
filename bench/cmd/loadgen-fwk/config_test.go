package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

const v1Head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

// The documented example (docs/loadgen.md, "A configuration file").
const (
	exampleConfig   = "../../testdata/kube-scheduler-config.yaml"
	exampleScenario = "../../testdata/two-profiles-scenario.yaml"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A bad -config exits 2 before any work, naming the file and the cause
// (upstream's validation message where upstream refuses it); -config
// beside a flag it overrides is refused.
func TestConfigFlagErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"malformed.yaml", v1Head + "profiles: [\n", "yaml"},
		{"version.yaml", "apiVersion: kubescheduler.config.k8s.io/v1beta9\nkind: KubeSchedulerConfiguration\n", "v1beta9"},
		{"percentage.yaml", v1Head + "percentageOfNodesToScore: 101\n", "percentageOfNodesToScore: Invalid value: 101"},
		{"args.yaml", v1Head + "profiles:\n- pluginConfig:\n  - name: NodeResourcesBalancedAllocation\n    args: {resources: [{name: cpu, weight: -1}]}\n", "weight"},
		{"unknown.yaml", v1Head + "profiles:\n- plugins:\n    score:\n      enabled:\n      - {name: Bogus, weight: 1}\n", `unknown plugin "Bogus"`},
		{"unfed.yaml", v1Head + "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: VolumeZone\n", "VolumeZone"},
	} {
		path := writeFile(t, tc.name, tc.text)
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"-config", path, "-nodes", "10"}, &stdout, &stderr, false)
		if code != 2 || !strings.Contains(stderr.String(), path) || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming the file and %q", tc.name, code, stderr.String(), tc.want)
		}
	}
	for _, args := range [][]string{
		{"-config", exampleConfig, "-plugins", "default"},
		{"-parallelism=4", "-config", exampleConfig},
		{"--config", exampleConfig, "-percentage-of-nodes-to-score", "10"},
		{"-config", ""},
		{"-config", "/no/such/file.yaml"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr, false); code != 2 || !strings.Contains(stderr.String(), "-config") {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming -config", args, code, stderr.String())
		}
	}
}

// report is what these tests read of the JSON report.
type report struct {
	Digest        string `json:"digest"`
	AttemptErrors *struct {
		Count    int64            `json:"count"`
		ByReason map[string]int64 `json:"by_reason"`
		First    []string         `json:"first"`
	} `json:"attempt_errors"`
	Counts struct {
		Scheduled int64 `json:"scheduled"`
	} `json:"counts"`
	Phases []struct {
		Name          string `json:"name"`
		Scheduled     int64  `json:"scheduled"`
		Unschedulable int64  `json:"unschedulable"`
		Failed        int64  `json:"failed"`
		Pods          int64  `json:"pods"`
		Preemptions   int64  `json:"preemptions"`
	} `json:"phases"`
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

func (r *report) rejections() map[string]float64 {
	for _, it := range r.DataItems {
		if it.Labels["Metric"] == "PluginRejections" {
			return it.Data
		}
	}
	return nil
}

func runJSON(t *testing.T, reg frameworkruntime.Registry, args ...string) (*report, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runWith(context.Background(), append(args, "-json", "-", "-quiet"), &stdout, &stderr, false, reg)
	if code != 0 {
		t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	return &rep, stderr.String()
}

// The example: each profile schedules its 20 pods, the 5 pods of a
// scheduler no profile names fail their attempts (reported, the run goes
// on), and stderr says which default plugins were left out.
func TestConfigExample(t *testing.T) {
	rep, stderr := runJSON(t, nil, "-config", exampleConfig, "-scenario", exampleScenario)
	want := map[string][2]int64{"spread": {20, 0}, "packed": {20, 0}, "nobody": {0, 5}}
	for _, ph := range rep.Phases {
		if w, ok := want[ph.Name]; ok && (ph.Scheduled != w[0] || ph.Failed != w[1]) {
			t.Errorf("phase %s: %d scheduled, %d failed; want %v", ph.Name, ph.Scheduled, ph.Failed, w)
		}
	}
	if a := rep.AttemptErrors; a == nil || a.Count != 5 || a.ByReason["no-profile"] != 5 || len(a.First) != 5 ||
		!strings.Contains(a.First[0], "no-such-scheduler") {
		t.Errorf("attempt errors %+v", rep.AttemptErrors)
	}
	if !strings.Contains(stderr, `profile "bin-packing": left out`) || !strings.Contains(stderr, "VolumeBinding") {
		t.Errorf("stderr %q", stderr)
	}
}

// evenOnly is an out-of-tree Filter and Score plugin: it rejects nodes
// whose number is odd and prefers high numbers; it panics in Filter for
// pods whose name ends in "7" when panicky. Stateless.
type evenOnly struct{ panicky bool }

func (evenOnly) Name() string { return "EvenOnly" }

func nodeNumber(ni fwk.NodeInfo) int {
	name := ni.Node().Name
	var n int
	_, _ = fmt.Sscanf(name[strings.LastIndexByte(name, '-')+1:], "%d", &n)
	return n
}

func (e evenOnly) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if e.panicky && strings.HasSuffix(pod.Name, "7") {
		panic(fmt.Sprintf("EvenOnly: pod %s", pod.Name))
	}
	if nodeNumber(ni)%2 == 1 {
		return fwk.NewStatus(fwk.Unschedulable, "odd node")
	}
	return nil
}

func (evenOnly) Score(_ context.Context, _ fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	return int64(nodeNumber(ni) % 101), nil
}

func (evenOnly) ScoreExtensions() fwk.ScoreExtensions { return nil }

func registry(panicky bool) frameworkruntime.Registry {
	return frameworkruntime.Registry{"EvenOnly": func(context.Context, kruntime.Object, fwk.Handle) (fwk.Plugin, error) {
		return evenOnly{panicky: panicky}, nil
	}}
}

const evenOnlyConfig = v1Head + `profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - {name: EvenOnly, weight: 5}
`

const evenScenario = `cluster: {seed: 1, allocatable: {cpu: "4", memory: 16Gi, pods: 110}}
phases:
- createNodes: {count: 12}
- name: pods
  createPods: {count: 30, namespace: p, template: {plain: true, cpu: 500m, memory: 1Gi}}
`

// An out-of-tree Filter+Score plugin registered as an embedder would and
// enabled by -config changes the run (its rejections are counted, the
// digest differs from the same run without it); when it panics for
// some pods, those attempts fail with a plugin-panic attempt error and
// the run completes, in the deterministic phases engine and in real time.
func TestOutOfTreeRun(t *testing.T) {
	cfg := writeFile(t, "even.yaml", evenOnlyConfig)
	plain := writeFile(t, "plain.yaml", v1Head)
	sc := writeFile(t, "even-scenario.yaml", evenScenario)

	base, _ := runJSON(t, nil, "-config", plain, "-scenario", sc)
	even, _ := runJSON(t, registry(false), "-config", cfg, "-scenario", sc)
	if even.rejections()["EvenOnly"] <= 0 || even.Digest == base.Digest || even.AttemptErrors != nil {
		t.Errorf("EvenOnly: rejections %v, digest %s (base %s), attempt errors %+v", even.rejections(), even.Digest, base.Digest, even.AttemptErrors)
	}

	boom, _ := runJSON(t, registry(true), "-config", cfg, "-scenario", sc)
	// ph1-000007, -17, -27: three pods fail; the 27 others are settled
	// (placed, or unschedulable on the even nodes left).
	if a := boom.AttemptErrors; a == nil || a.Count != 3 || a.ByReason["plugin-panic"] != 3 ||
		!strings.Contains(a.First[0], `plugin "EvenOnly" panicked in Filter`) {
		t.Fatalf("attempt errors %+v", boom.AttemptErrors)
	}
	for _, ph := range boom.Phases {
		if ph.Name == "pods" && (ph.Failed != 3 || ph.Scheduled+ph.Unschedulable != 27 || ph.Scheduled == 0) {
			t.Errorf("phase %+v: want 3 failed, 27 settled otherwise", ph)
		}
	}

	// Real time, generated pods (sched-S-N): some end in 7.
	rt, _ := runJSON(t, registry(true), "-config", cfg, "-nodes", "20", "-pods", "40", "-duration", "10s", "-schedulers", "2")
	if a := rt.AttemptErrors; a == nil || a.Count == 0 || a.ByReason["plugin-panic"] != a.Count || rt.Counts.Scheduled == 0 {
		t.Errorf("real time: scheduled %d, attempt errors %+v", rt.Counts.Scheduled, rt.AttemptErrors)
	}
}

const preemptScenario = `cluster: {seed: 1, allocatable: {cpu: "4", memory: 32Gi, pods: 110}}
phases:
- createNodes: {count: 4}
- name: low
  createPods: {count: 16, namespace: low, template: {podDefault: true, cpu: 900m, memory: 500Mi}}
- name: measure
  createPods: {count: 2, namespace: high, collectMetrics: true, template: {podDefault: true, cpu: 3970m, memory: 500Mi, priority: 9999999}}
`

// PostFilter runs as the configuration sets it: DefaultPreemption with
// its arguments where the profile has it (the default), nothing where
// the profile disables it: the high-priority pods then stay
// unschedulable and no pod is deleted.
func TestConfigPostFilter(t *testing.T) {
	scenario := writeFile(t, "preempt.yaml", preemptScenario)
	for _, tc := range []struct {
		name, config string
		preempt      bool
	}{
		{"default", "", true},
		{"args", v1Head + "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args: {minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 1}\n", true},
		{"disabled", v1Head + "profiles:\n- plugins:\n    postFilter:\n      disabled:\n      - name: DefaultPreemption\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"-scenario", scenario}
			if tc.config != "" {
				args = append(args, "-config", writeFile(t, tc.name+".yaml", tc.config))
			}
			rep, stderr := runJSON(t, nil, args...)
			var m *struct{ preemptions, scheduled int64 }
			for _, ph := range rep.Phases {
				if ph.Name == "measure" {
					m = &struct{ preemptions, scheduled int64 }{ph.Preemptions, ph.Scheduled}
				}
			}
			if m == nil {
				t.Fatalf("no measure phase; stderr %q", stderr)
			}
			if (m.preemptions > 0) != tc.preempt || (m.scheduled == 2) != tc.preempt {
				t.Errorf("%d preemptions, %d of 2 scheduled; want preemption %v", m.preemptions, m.scheduled, tc.preempt)
			}
		})
	}
}
