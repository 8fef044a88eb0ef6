package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/watchdog"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m,
		// klog's flush daemon, started by klog's init for the process.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}

// Invalid flags of loadgen-fwk's own, and loadgen's, exit 2 with a
// message naming the flag, before any work.
func TestFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-plugins", "bogus"}, `unknown plugin "bogus"`},
		{[]string{"-plugins=NodeResourcesFit,Nope"}, `unknown plugin "Nope"`},
		{[]string{"--plugins", ""}, `unknown plugin ""`},
		{[]string{"-plugins", "NodePorts,NodePorts"}, "twice"},
		{[]string{"-plugins"}, "flag needs an argument: -plugins"},
		{[]string{"-percentage-of-nodes-to-score", "101"}, "-percentage-of-nodes-to-score"},
		{[]string{"-percentage-of-nodes-to-score=x"}, "-percentage-of-nodes-to-score"},
		{[]string{"-parallelism", "0"}, "-parallelism"},
		{[]string{"-plugins", "default", "-nodes", "0"}, "nodes"},
		{[]string{"-memo", "maybe"}, "-memo: want on or off"},
		{[]string{"-carry", "maybe"}, "-carry: want on or off"},
		{[]string{"-carry"}, "flag needs an argument: -carry"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr, false)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// splitArgs takes out only loadgen-fwk's flags, in every spelling, and
// leaves loadgen's in order.
func TestSplitArgs(t *testing.T) {
	ours, rest, err := splitArgs([]string{"-nodes", "50", "--plugins=NodePorts", "-parallelism", "4", "-json", "-", "-percentage-of-nodes-to-score=20"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rest, " "); got != "-nodes 50 -json -" {
		t.Errorf("rest %q", got)
	}
	if ours["plugins"] != "NodePorts" || ours["parallelism"] != "4" || ours["percentage-of-nodes-to-score"] != "20" {
		t.Errorf("ours %v", ours)
	}
}

// A small run with a subset of plugins: the report names the picker and
// counts rejections for exactly those plugins.
func TestRunSubset(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-plugins", "NodeResourcesFit,InterPodAffinity", "-deterministic",
		"-nodes", "60", "-pods-per-node", "10", "-duration", "50ms", "-json", "-", "-quiet"}, &stdout, &stderr, false)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Picker    string `json:"picker"`
		DataItems []struct {
			Data   map[string]float64 `json:"data"`
			Labels map[string]string  `json:"labels"`
		} `json:"dataItems"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Picker != "upstream-plugins" {
		t.Fatalf("picker %q", rep.Picker)
	}
	for _, it := range rep.DataItems {
		if it.Labels["Metric"] == "PluginRejections" {
			if len(it.Data) != 2 {
				t.Fatalf("rejections %v", it.Data)
			}
			if _, ok := it.Data["InterPodAffinity"]; !ok {
				t.Fatalf("rejections %v", it.Data)
			}
			return
		}
	}
	t.Fatal("no PluginRejections item")
}

// The perf-* presets (scheduler_perf's workloads as phases) run with the
// real plugins at -scale 0.01 (50 nodes): every measured pod is
// scheduled, the constraints the least-allocated picker leaves out are
// evaluated (InterPodAffinity and PodTopologySpread reject nodes), and a
// high-priority pod that NodeResourcesFit rejects everywhere preempts.
func TestPerfPresets(t *testing.T) {
	type phase struct {
		Name        string `json:"name"`
		Pods        int64  `json:"pods"`
		Scheduled   int64  `json:"scheduled"`
		Finished    bool   `json:"finished"`
		Preemptions int64  `json:"preemptions"`
	}
	for _, tc := range []struct{ preset, plugin string }{
		{"perf-scheduling-basic", ""},
		{"perf-pod-anti-affinity", "InterPodAffinity"},
		{"perf-node-affinity", ""},
		{"perf-topology-spreading", "PodTopologySpread"},
		{"perf-preemption-basic", "NodeResourcesFit"},
		{"perf-gang", ""},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"-preset", tc.preset, "-scale", "0.01", "-json", "-", "-quiet"}, &stdout, &stderr, false)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			var rep struct {
				Picker     string  `json:"picker"`
				Consistent bool    `json:"consistent"`
				Phases     []phase `json:"phases"`
				DataItems  []struct {
					Data   map[string]float64 `json:"data"`
					Labels map[string]string  `json:"labels"`
				} `json:"dataItems"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Picker != "upstream-plugins" || !rep.Consistent {
				t.Fatalf("picker %q, consistent %v", rep.Picker, rep.Consistent)
			}
			var m *phase
			for i := range rep.Phases {
				if rep.Phases[i].Name == "measure" {
					m = &rep.Phases[i]
				}
			}
			if m == nil || !m.Finished || m.Pods == 0 || m.Scheduled != m.Pods {
				t.Fatalf("measured phase %+v", m)
			}
			if tc.preset == "perf-preemption-basic" && m.Preemptions != m.Pods {
				t.Fatalf("preemptions %d of %d pods", m.Preemptions, m.Pods)
			}
			if tc.plugin == "" {
				return
			}
			for _, it := range rep.DataItems {
				if it.Labels["Metric"] == "PluginRejections" {
					if it.Data[tc.plugin] <= 0 {
						t.Fatalf("%s rejected no node: %v", tc.plugin, it.Data)
					}
					return
				}
			}
			t.Fatal("no PluginRejections item")
		})
	}
}
