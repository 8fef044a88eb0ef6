package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// TestRunSmall runs a small workload end to end: one line on stdout, the
// short-window warning on stderr, the JSON written.
func TestRunSmall(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-workload", "topology-spread", "-nodes", "30", "-pods", "20", "-json", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if lines := strings.Split(strings.TrimSpace(stdout.String()), "\n"); len(lines) != 1 ||
		!strings.Contains(lines[0], "topology-spread: 30 nodes, 30 initial, 20/20 pods bound") {
		t.Errorf("stdout %q", stdout.String())
	}
	if !strings.Contains(stderr.String(), "too short for figures") {
		t.Errorf("stderr %q: want the short-window warning", stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var o Output
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	if o.Result.Bound != 20 || o.Result.PodsPerSecond <= 0 || len(o.Args) != 8 || o.Result.GOMAXPROCS < 1 {
		t.Errorf("JSON %s", b)
	}
}

// TestBadInput: a bad flag, workload or configuration file exits 2 with
// one clear line.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sched.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 101\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-workload", "nope"}, `unknown workload "nope"`},
		{[]string{"-nodes", "0"}, "nodes must be at least 1"},
		{[]string{"-rate", "-3"}, "-rate"},
		{[]string{"-nodes", "x"}, "invalid value"},
		{[]string{"-config", cfg}, cfg + "): percentageOfNodesToScore: Invalid value: 101"},
		{[]string{"-config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q: want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}
