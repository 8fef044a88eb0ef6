package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// cancelPicker picks like LeastAllocated until its cancelAt-th pick (over
// every scheduler), which cancels the run's context; from then on every
// pick waits for the run's supervisor to see the cancellation and fails
// with an error wrapping ctx.Err(): schedulers failing during an
// interrupt.
type cancelPicker struct {
	cancel   context.CancelFunc // immutable
	cancelAt int64              // immutable
	picks    atomic.Int64
}

func (p *cancelPicker) Name() string      { return "cancel" }
func (p *cancelPicker) Plugins() []string { return nil }
func (p *cancelPicker) NewNodePicker(context.Context, PickerConfig) (NodePicker, error) {
	return cancelNodePicker{p}, nil
}

type cancelNodePicker struct{ p *cancelPicker }

func (np cancelNodePicker) Pick(ctx context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, r *rand.Rand, _ []int64) (string, error) {
	if np.p.picks.Add(1) == np.p.cancelAt {
		np.p.cancel()
	}
	if ctx.Err() != nil {
		time.Sleep(200 * time.Millisecond) // the supervisor fails the run first
		return "", fmt.Errorf("cancel picker: %w", ctx.Err())
	}
	return pick(r, snap, pod, 8), nil
}

func (cancelNodePicker) Close() error { return nil }

// Cancelling a real-time run's context while its schedulers fail ends the
// run with a report marked interrupted: no panic (issue 28: the first
// failure, context.Canceled, and a later wrapped one were stored in one
// atomic.Value, whose CompareAndSwap panics on differing types).
func TestRealtimeInterruptWhileSchedulersFail(t *testing.T) {
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		cfg := smallConfig()
		cfg.Duration, cfg.Schedulers = 10*time.Second, 4
		start := time.Now()
		rep, err := run(ctx, cfg, nil, hooks{picker: &cancelPicker{cancel: cancel, cancelAt: 50}})
		cancel()
		require.NoError(t, err)
		require.NotNil(t, rep)
		require.Equal(t, "interrupted", rep.Stopped)
		require.Less(t, time.Since(start), 5*time.Second, "the run stops at the interrupt")
		require.True(t, rep.Consistent, "audit %+v", rep.Audit)
	}
}

// Cancelling a deterministic run's context ends it with a report marked
// interrupted, not with the error of the call it interrupted (issue 28:
// `AssumePod …: cache is closed`).
func TestDeterministicInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := smallConfig()
	cfg.Deterministic, cfg.Duration = true, time.Hour
	start := time.Now()
	rep, err := run(ctx, cfg, nil, hooks{picker: &cancelPicker{cancel: cancel, cancelAt: 500}})
	require.NoError(t, err)
	require.NotNil(t, rep)
	require.Equal(t, "interrupted", rep.Stopped)
	require.Less(t, time.Since(start), 10*time.Second, "the run stops at the interrupt")
	require.Less(t, rep.Elapsed, time.Hour)
	require.Positive(t, rep.Scheduled)
	require.True(t, rep.Consistent, "audit %+v", rep.Audit)
}

// After an interrupt, the cancelled context's error and the cache's
// ErrClosed (wrapped) are the interrupt's doing; other errors, and any
// error before it, are failures.
func TestDeterministicInterruptedErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d := &detRun{ctx: ctx}
	closed := fmt.Errorf("AssumePod p: %w", schedcache.ErrClosed)
	require.False(t, d.interrupted(closed))
	cancel()
	require.True(t, d.interrupted(closed))
	require.True(t, d.interrupted(fmt.Errorf("pick p: %w", context.Canceled)))
	require.False(t, d.interrupted(errors.New("picker broke")))
}

// The per-window throughput counts every full window of the run, the
// trailing empty ones too (issue 28: avg 367 over windows 774, 288, 38, 0),
// in the text and JSON reports and as many windows as the CSV's rows.
func TestWindowsCountTrailingEmpty(t *testing.T) {
	require.Equal(t, []float64{774, 288, 38, 0}, windowsOf([]int64{774, 288, 38}, 4*time.Second, time.Second))
	require.Equal(t, []float64{5, 0}, windowsOf([]int64{5}, 2500*time.Millisecond, time.Second))

	dir := t.TempDir()
	csvPath := filepath.Join(dir, "f.csv")
	args := []string{"-nodes", "10", "-pods-per-node", "0", "-keep-pods", "-duration", "4s", "-deterministic", "-csv", csvPath}
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, realMain(context.Background(), args, &stdout, &stderr, false, hooks{}), stderr.String())
	raw, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	rows := strings.Split(strings.TrimSpace(string(raw)), "\n")[1:]
	require.Len(t, rows, 4)
	sum := 0.0
	for _, row := range rows {
		var x float64
		_, err := fmt.Sscan(strings.Split(row, ",")[2], &x)
		require.NoError(t, err)
		sum += x
	}
	require.True(t, strings.HasSuffix(rows[3], ",0.0,0,0,0.0000,0.0000"), "the last window is empty: %s", rows[3])
	require.Contains(t, stdout.String(), fmt.Sprintf("per 1 s window avg %.0f ", sum/4))
}

// "-" means stdout for -csv (and -json), the text report then going to
// stderr; two outputs with one destination are refused (exit 2, both
// flags named) before any work; a failed run leaves no output file
// (issue 28).
func TestOutputDestinations(t *testing.T) {
	base := []string{"-deterministic", "-nodes", "20", "-pods-per-node", "5", "-duration", "2s"}
	var stdout, stderr bytes.Buffer
	dir := t.TempDir()
	t.Chdir(dir)
	require.Equal(t, exitOK, realMain(context.Background(), append(base, "-csv", "-"), &stdout, &stderr, false, hooks{}), stderr.String())
	require.True(t, strings.HasPrefix(stdout.String(), "time_s,scheduled,"), stdout.String())
	require.Contains(t, stderr.String(), "schedcache loadgen:")
	_, err := os.Stat(filepath.Join(dir, "-"))
	require.True(t, os.IsNotExist(err), "a file named - was written")

	for _, args := range [][]string{{"-json", "x", "-csv", "x"}, {"-json", "-", "-csv", "-"}, {"-csv", "x", "-svg", "./x"}} {
		stdout.Reset()
		stderr.Reset()
		require.Equal(t, exitUsage, realMain(context.Background(), append(base, args...), &stdout, &stderr, false, hooks{}), args)
		require.Contains(t, stderr.String(), args[0], args)
		require.Contains(t, stderr.String(), args[2], args)
		_, err := os.Stat(filepath.Join(dir, "x"))
		require.True(t, os.IsNotExist(err), "%v created x", args)
	}

	// A failed run (its picker breaks) removes the files it created.
	j, c, s := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.svg")
	args := append(base, "-json", j, "-csv", c, "-svg", s)
	require.Equal(t, exitFailed, realMain(context.Background(), args, &stdout, &stderr, false, hooks{picker: &firstFit{failAt: 3}}))
	for _, p := range []string{j, c, s} {
		_, err := os.Stat(p)
		require.True(t, os.IsNotExist(err), "%s left behind by a failed run", p)
	}
	require.Equal(t, exitOK, realMain(context.Background(), args, &stdout, &stderr, false, hooks{}), stderr.String())
	for _, p := range []string{j, c, s} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Positive(t, fi.Size(), p)
	}
}

// The outputs are written to temporary files renamed over their
// destinations once the report is written: a failed run leaves an
// existing file as it was (it used to truncate, then remove it) and no
// temporary file; a successful one leaves only its outputs; two names of
// one file are refused (issue 28).
func TestOutputsAllOrNothing(t *testing.T) {
	base := []string{"-deterministic", "-nodes", "20", "-pods-per-node", "5", "-duration", "2s"}
	dir := t.TempDir()
	j, c := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv")
	require.NoError(t, os.WriteFile(j, []byte("old report\n"), 0o644))
	var stdout, stderr bytes.Buffer
	args := append(base, "-json", j, "-csv", c)
	require.Equal(t, exitFailed, realMain(context.Background(), args, &stdout, &stderr, false, hooks{picker: &firstFit{failAt: 3}}))
	b, err := os.ReadFile(j)
	require.NoError(t, err)
	require.Equal(t, "old report\n", string(b), "a failed run changed an existing output")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "a failed run left files: %v", ents)

	require.Equal(t, exitOK, realMain(context.Background(), args, &stdout, &stderr, false, hooks{}), stderr.String())
	ents, err = os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"r.csv", "r.json"}, names)
	b, err = os.ReadFile(j)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "{"), string(b))
	fi, err := os.Stat(j)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	// A link to the JSON report is the same destination.
	l := filepath.Join(dir, "link.json")
	require.NoError(t, os.Link(j, l))
	stderr.Reset()
	require.Equal(t, exitUsage, realMain(context.Background(), append(base, "-json", j, "-svg", l), &stdout, &stderr, false, hooks{}))
	require.Contains(t, stderr.String(), "-json: -svg also writes to")

	// A destination that is a directory is refused before any work.
	stderr.Reset()
	require.Equal(t, exitUsage, realMain(context.Background(), append(base, "-json", dir), &stdout, &stderr, false, hooks{}))
	require.Contains(t, stderr.String(), "is a directory")
}
