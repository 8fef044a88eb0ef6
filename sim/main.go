// Package sim is the cluster simulator behind cmd/loadgen. It simulates a
// large cluster against schedcache: it builds the standard cluster of the
// workload package from a seed, loads it through the asynchronous
// (informer-style) event path (the nodes synchronously in deterministic
// mode), then runs schedulers that schedule new pods on snapshots (a
// Picker: least-allocated among sampled nodes by default, or any other
// through MainWith, such as the bench module's upstream plugins),
// AssumePod, BindPod through a simulated dispatcher, FinishBinding) while
// an informer confirms them with AddPod after a delay and deletes old pods
// to keep the cluster at a steady size. The simulated API server can churn
// pods and nodes (updates, deletions, nodes added, drained, removed,
// NotReady, zone outages, an expiry storm) and its informer can reorder,
// lose events and relist with tombstones. At the end, and during the run
// with -audit-every or on demand (MainWithAudits; SIGUSR1 in cmd/loadgen),
// it audits the cache against the simulated API server's ground truth and
// prints what it did (text, and JSON with -json).
//
// With no flags it runs the standard 5,000-node cluster for 5 seconds.
// -deterministic runs in virtual time on one goroutine: one seed reproduces
// the run event for event. Every flag is checked before any work; see
// docs/loadgen.md. -sweep-seeds, -sweep-presets or -sweep-scenarios with
// -out DIR run every combination one after another (or only the
// -sweep-index / $JOB_COMPLETION_INDEX one) and write a report per run and
// summary.json; -svg plots the 1 s windows. -record PATH (with
// -deterministic) writes every cache call to a trace; -replay PATH replays
// one against a fresh cache and checks every result and the final totals.
//
// Exit codes: 0 success, 1 the run failed, 2 invalid flags or an
// over-full cluster, 3 the audit found the cache diverging from the truth (or a replay
// diverging from its trace), 4 a phases scenario's threshold was violated.
package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Exit codes.
const (
	exitOK         = 0
	exitFailed     = 1
	exitUsage      = 2
	exitDivergence = 3
	exitThresholds = 4
)

// Main runs the loadgen command with args (without the program name),
// writing reports to stdout and messages to stderr; tty says whether stderr
// is a terminal (progress lines are written only then). It returns the exit
// code: 0 success, 1 the run failed, 2 invalid flags or an over-full
// cluster, 3 a divergence, 4 a violated threshold. It never exits the process; cancelling ctx stops
// a run early (its report is still written).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	return realMain(ctx, args, stdout, stderr, tty, hooks{})
}

// MainWithAudits is Main where a receive on audits asks a real-time run
// for an audit at once (cmd/loadgen sends one per SIGUSR1); it is reported
// among the mid-run audits. A deterministic run ignores audits.
func MainWithAudits(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool, audits <-chan struct{}) int {
	return realMain(ctx, args, stdout, stderr, tty, hooks{auditNow: audits})
}

// realMain is the whole command; it returns the exit code.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool, h hooks) int {
	if path, ok, err := replayPath(args); ok {
		if err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return exitUsage
		}
		return runReplay(ctx, path, stdout, stderr)
	}
	sp, rest, err := splitSweep(args)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return exitUsage
	}
	if sp != nil {
		return runSweep(ctx, sp, rest, stdout, stderr, tty, h)
	}
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if errors.Is(err, errListPresets) {
		listPresets(stdout)
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return exitUsage
	}
	if err := checkOutputs(cfg); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return exitUsage
	}
	// Create the output files before any work, so that a bad path is
	// reported at once; they replace their destinations only once the
	// report is written (outputs.commit).
	text := stdout
	if cfg.JSON == "-" || cfg.CSV == "-" || cfg.SVG == "-" {
		text = stderr // stdout carries the JSON, CSV or SVG
	}
	outs := &outputs{stdout: stdout}
	defer outs.abort() // a no-op once committed
	jsonOut, err := outs.open(cfg.JSON)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: -json:", err)
		return exitUsage
	}
	csvOut, err := outs.open(cfg.CSV)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: -csv:", err)
		return exitUsage
	}
	svgOut, err := outs.open(cfg.SVG)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: -svg:", err)
		return exitUsage
	}
	prof, err := startProfiles(cfg.Profile, outs, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		if errors.Is(err, ErrUsage) {
			return exitUsage
		}
		return exitFailed
	}
	defer prof.stop() // a no-op once stopped
	rep, err := run(ctx, cfg, progressWriter(stderr, tty, cfg), h)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		if errors.Is(err, ErrUsage) {
			return exitUsage
		}
		return exitFailed
	}
	rep.Print(text)
	if csvOut != nil {
		if err := rep.WriteCSV(csvOut); err != nil {
			fmt.Fprintln(stderr, "loadgen: -csv:", err)
			return exitFailed
		}
	}
	if svgOut != nil {
		if err := rep.WriteSVG(svgOut); err != nil {
			fmt.Fprintln(stderr, "loadgen: -svg:", err)
			return exitFailed
		}
	}
	if jsonOut != nil {
		if err := rep.WriteJSON(jsonOut); err != nil {
			fmt.Fprintln(stderr, "loadgen: -json:", err)
			return exitFailed
		}
	}
	if err := prof.stop(); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return exitFailed
	}
	if err := outs.commit(); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return exitFailed
	}
	if !rep.Consistent {
		fmt.Fprintln(stderr, "loadgen: the cache diverges from the simulated API server (see the audit above)")
		return exitDivergence
	}
	if v := rep.violations(); len(v) > 0 && rep.Stopped != "interrupted" {
		fmt.Fprintf(stderr, "loadgen: %d thresholds violated: %s\n", len(v), strings.Join(v, "; "))
		return exitThresholds
	}
	return exitOK
}

// checkOutputs refuses two outputs with one destination: -json, -csv and
// -svg each need their own file, and "-" (stdout) takes one of them. Two
// names of one existing file (a link) are refused as well.
func checkOutputs(cfg Config) error {
	outs := []struct{ flag, path string }{{"-json", cfg.JSON}, {"-csv", cfg.CSV}, {"-svg", cfg.SVG},
		{"-cpuprofile", cfg.Profile.CPU}, {"-memprofile", cfg.Profile.Mem}, {"-trace", cfg.Profile.Trace}}
	for i, a := range outs {
		for _, b := range outs[i+1:] {
			if a.path == "" || b.path == "" {
				continue
			}
			if filepath.Clean(a.path) == filepath.Clean(b.path) || sameFile(a.path, b.path) {
				return &UsageError{Flag: a.flag[1:], Msg: fmt.Sprintf("%s also writes to %q: give each output its own file", b.flag, a.path)}
			}
		}
	}
	return nil
}

// sameFile says whether a and b name one existing file.
func sameFile(a, b string) bool {
	if a == "-" || b == "-" {
		return false
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// outputs holds the output files of a run, owned by realMain. Each is
// written to a temporary file in its destination's directory and renamed
// over the destination only once the whole report is written (commit):
// a run that fails, or is killed, leaves no empty or partial file, and an
// existing file of that name is left as it was.
type outputs struct {
	stdout io.Writer
	files  []outFile
}

// outFile is one output: its temporary file and its destination.
type outFile struct {
	f    *os.File
	path string
}

// open returns where the output path goes: nil for "", stdout for "-",
// else a temporary file next to path. The error names path.
func (o *outputs) open(path string) (io.Writer, error) {
	switch path {
	case "":
		return nil, nil
	case "-":
		return o.stdout, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot create %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp's 0600 is for secrets
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("cannot create %s: %w", path, err)
	}
	o.files = append(o.files, outFile{f, path})
	return f, nil
}

// commit closes every file and renames it over its destination; on an
// error the files not yet renamed are removed. The error names the path.
func (o *outputs) commit() error {
	files := o.files
	o.files = nil
	for i, of := range files {
		err := of.f.Close()
		if err == nil {
			err = os.Rename(of.f.Name(), of.path)
		}
		if err != nil {
			os.Remove(of.f.Name())
			(&outputs{files: files[i+1:]}).abort()
			return fmt.Errorf("writing %s: %w", of.path, err)
		}
	}
	return nil
}

// writeFile writes path through write, all or nothing: a temporary file
// renamed over path once write has succeeded.
func writeFile(path string, write func(io.Writer) error) error {
	o := &outputs{}
	w, err := o.open(path)
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		o.abort()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return o.commit()
}

// abort closes and removes the temporary files: no output is written.
func (o *outputs) abort() {
	for _, of := range o.files {
		of.f.Close()
		os.Remove(of.f.Name())
	}
	o.files = nil
}
