package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/watchdog"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

// A regular file is not a terminal, so progress lines stay off when the
// output is redirected.
func TestIsTerminalFalseForFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("a regular file reported as a terminal")
	}
}

// SIGTERM (what a Job's pod receives) stops a real-time run like SIGINT:
// the report is written, the -json file complete and marked interrupted,
// and the exit code is 143 (issue 28).
func TestSIGTERMWritesReport(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "loadgen")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH:", err)
	}
	build := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	errPath := filepath.Join(dir, "stderr")
	stderr, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	jsonPath := filepath.Join(dir, "out.json")
	cmd := exec.Command(bin, "-nodes", "200", "-duration", "30s", "-progress", "-json", jsonPath)
	cmd.Stdout, cmd.Stderr = stdout, stderr // files: no copying goroutines
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the first progress line of the scheduling phase.
	for {
		b, _ := os.ReadFile(errPath)
		if strings.Contains(string(b), "scheduling for") {
			break
		}
		if time.Since(start) > 20*time.Second {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("no progress line in 20 s; stderr:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	b, _ := os.ReadFile(errPath)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("exit: %v, want code 143; stderr:\n%s", err, b)
	}
	if time.Since(start) > 25*time.Second {
		t.Fatalf("the run did not stop at SIGTERM (%v)", time.Since(start))
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Stopped    string `json:"stopped"`
		Consistent bool   `json:"consistent"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("out.json: %v (%d bytes)", err, len(raw))
	}
	if rep.Stopped != "interrupted" || !rep.Consistent {
		t.Fatalf("out.json: stopped %q, consistent %v", rep.Stopped, rep.Consistent)
	}
	text, _ := os.ReadFile(filepath.Join(dir, "stdout"))
	if !strings.Contains(string(text), "stopped by interrupted") {
		t.Fatalf("text report:\n%s", text)
	}
}

// A run stopped by a signal that would have exited 0 exits 128 + the
// signal's number; a failure keeps its code.
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		code int
		sig  os.Signal
		want int
	}{{0, nil, 0}, {0, os.Interrupt, 130}, {0, syscall.SIGTERM, 143}, {1, syscall.SIGTERM, 1}, {3, os.Interrupt, 3}} {
		if got := exitCode(c.code, c.sig); got != c.want {
			t.Errorf("exitCode(%d, %v) = %d, want %d", c.code, c.sig, got, c.want)
		}
	}
}

// SIGINT in the middle of a real-time phases run (a sleep phase of an
// hour) stops it at once: exit 130, the -json file complete, marked
// interrupted, the sleep phase unfinished (issue 28).
func TestSIGINTPhasesRealtime(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "loadgen")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH:", err)
	}
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	scenario := filepath.Join(dir, "s.yaml")
	body := `cluster: {seed: 1, allocatable: {cpu: "4", memory: 32Gi, pods: 110}}
phases:
- createNodes: {count: 20}
- createPods: {count: 100, template: {plain: true, cpu: 100m, memory: 100Mi}}
- name: nap
  sleep: {duration: 1h}
`
	if err := os.WriteFile(scenario, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	errPath := filepath.Join(dir, "stderr")
	stderr, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	jsonPath := filepath.Join(dir, "out.json")
	cmd := exec.Command(bin, "-scenario", scenario, "-deterministic=false", "-progress", "-json", jsonPath)
	cmd.Stderr = stderr // a file: no copying goroutine
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for {
		b, _ := os.ReadFile(errPath)
		if strings.Contains(string(b), "phase 3/3 nap") {
			break
		}
		if time.Since(start) > 20*time.Second {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the sleep phase did not start in 20 s; stderr:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	b, _ := os.ReadFile(errPath)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v, want code 130; stderr:\n%s", err, b)
	}
	if time.Since(start) > 25*time.Second {
		t.Fatalf("the run did not stop at SIGINT (%v)", time.Since(start))
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Stopped    string `json:"stopped"`
		Consistent bool   `json:"consistent"`
		Phases     []struct {
			Name      string `json:"name"`
			Finished  bool   `json:"finished"`
			Scheduled int64  `json:"scheduled"`
		} `json:"phases"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("out.json: %v (%d bytes)", err, len(raw))
	}
	if rep.Stopped != "interrupted" || !rep.Consistent || len(rep.Phases) != 3 {
		t.Fatalf("out.json: stopped %q, consistent %v, %d phases", rep.Stopped, rep.Consistent, len(rep.Phases))
	}
	if p := rep.Phases[1]; !p.Finished || p.Scheduled != 100 {
		t.Fatalf("createPods phase: %+v", p)
	}
	if p := rep.Phases[2]; p.Name != "nap" || p.Finished {
		t.Fatalf("sleep phase: %+v", p)
	}
}
