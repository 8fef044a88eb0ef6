package sim

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache/sim/trace"
)

// A CSV trace, its JSON Lines twin and the gzip of either parse to the
// same rows, sorted by submit time (ties in file order).
func TestParseTrace(t *testing.T) {
	csvText := "# a comment\nsubmit,duration,cpu,memory,template,namespace,priority\n" +
		"2.5,3s,500m,1Gi,big,batch,100\n" +
		"1s,,1,512Mi,,,\n" +
		"2500ms,1.5,250m,256Mi,,ml,-5\n"
	jsonl := `{"submit": 2.5, "duration": "3s", "cpu": "500m", "memory": "1Gi", "template": "big", "namespace": "batch", "priority": 100}` + "\n\n" +
		`{"submit": "1s", "cpu": 1, "memory": "512Mi"}` + "\n" +
		`{"submit": "2500ms", "duration": 1.5, "cpu": "250m", "memory": "256Mi", "namespace": "ml", "priority": -5}` + "\n"
	gz := func(s string) string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, _ = w.Write([]byte(s))
		require.NoError(t, w.Close())
		return b.String()
	}
	tmpls := []string{"", "big"}
	var want []TraceArrival
	for i, in := range []string{csvText, jsonl, gz(csvText), gz(jsonl)} {
		p := writeTestFile(t, "trace", in)
		rows, err := loadTrace(p, tmpls)
		require.NoError(t, err, i)
		require.Len(t, rows, 3)
		require.Equal(t, time.Second, rows[0].Submit)
		require.Equal(t, int64(1000), rows[0].CPUMilli)
		require.Equal(t, int64(512<<20), rows[0].Memory)
		require.Equal(t, -1, rows[0].Template)
		require.Zero(t, rows[0].Duration)
		require.Nil(t, rows[0].Priority)
		require.Equal(t, 2500*time.Millisecond, rows[1].Submit)
		require.Equal(t, 1, rows[1].Template, "ties keep the file's order")
		require.Equal(t, "batch", rows[1].Namespace)
		require.Equal(t, int32(100), *rows[1].Priority)
		require.Equal(t, 3*time.Second, rows[1].Duration)
		require.Equal(t, 1500*time.Millisecond, rows[2].Duration)
		require.Equal(t, int32(-5), *rows[2].Priority)
		for k := range rows {
			rows[k].Line = 0
		}
		if want == nil {
			want = rows
		}
		require.Equal(t, want, rows, i)
	}
	rows, err := loadTrace("testdata/jobs.csv", nil)
	require.NoError(t, err)
	require.Len(t, rows, 40)
}

// Every bad trace is refused with a message naming the file, the line and
// the column, wrapping ErrUsage.
func TestParseTraceErrors(t *testing.T) {
	head := "submit,cpu,memory,duration,template,namespace,priority\n"
	for _, c := range []struct{ in, want string }{
		{"", ": no arrivals: the trace is empty"},
		{"submit,cpu,memory\n", ": no arrivals: the trace has no row"},
		{"submit,cpu,colour\n1,1,1\n", ":1: column 3: unknown column \"colour\" (have: submit, duration, cpu, memory, template, namespace, priority)"},
		{"submit,cpu,cpu,memory\n", ":1: column 3: column \"cpu\" given twice"},
		{"submit,cpu\n1,1\n", ":1: the header names no \"memory\" column (need submit, cpu, memory)"},
		{head + "1,1,1Gi\n", ":2: the row's field count differs from the header's"},
		{head + ",1,1Gi,,,,\n", ":2: submit: missing"},
		{head + "soon,1,1Gi,,,,\n", ":2: submit: not a time (like 12.5s, or seconds: 12.5): \"soon\""},
		{head + "-1,1,1Gi,,,,\n", ":2: submit: must not be negative, got -1"},
		{head + "NaN,1,1Gi,,,,\n", ":2: submit: not a finite time: \"NaN\""},
		{head + "1e9,1,1Gi,,,,\n", ":2: submit: at most 24h0m0s, got 1e9 s"},
		{head + "1,1,1Gi,0s,,,\n", ":2: duration: must be positive (leave it empty for none)"},
		{head + "1,lots,1Gi,,,,\n", ":2: cpu: not a quantity (like 500m, 2, 512Mi): \"lots\""},
		{head + "1,-1,1Gi,,,,\n", ":2: cpu: must not be negative, got -1"},
		{head + "1,1,1Ei,,,,\n", ":2: memory: too large"},
		{head + "1,1,1Gi,,web,,\n", ":2: template: \"web\": the run has no podMix template"},
		{head + "1,1,1Gi,,,Bad_NS,\n", ":2: namespace: \"Bad_NS\": a lowercase RFC 1123 label"},
		{head + "1,1,1Gi,,,,high\n", ":2: priority: not a 32-bit integer: \"high\""},
		{head + "1,1,1Gi,,,,\"x\n", ":2: character 15: extraneous or missing \" in quoted-field"},
		{"{\"submit\": 1, \"cpu\": 1, \"memory\": \"1Gi\"}\n{\"submit\": 1, \"cpu\": 1, \"memory\": \"1Gi\", \"gpu\": 1}\n", ":2: gpu: unknown field (have: submit, duration, cpu, memory, template, namespace, priority)"},
		{"{\"submit\": 1, \"cpu\": 1}\n", ":1: memory: missing"},
		{"{\"submit\": true, \"cpu\": 1, \"memory\": 1}\n", ":1: submit: want a string or a number, got true"},
		{"{\"submit\": 1,\n", ":1: not a JSON object: unexpected end of JSON input"},
	} {
		p := writeTestFile(t, "bad.csv", c.in)
		_, err := loadTrace(p, nil)
		require.Error(t, err, c.in)
		require.ErrorIs(t, err, ErrUsage)
		var te *TraceError
		require.True(t, errors.As(err, &te), "%T", err)
		require.Contains(t, err.Error(), "-arrivals-from "+p+c.want, c.in)
	}
	// A corrupt gzip stream.
	p := writeTestFile(t, "bad.gz", "\x1f\x8b\x08\x00garbage")
	_, err := loadTrace(p, nil)
	require.ErrorIs(t, err, ErrUsage)
	require.Contains(t, err.Error(), "-arrivals-from "+p+": read: unexpected EOF")
	// The flags.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-arrivals-from", "testdata/none.csv"}, "-arrivals-from: open testdata/none.csv: no such file or directory"},
		{[]string{"-arrivals-speed", "2"}, "-arrivals-speed: needs -arrivals-from"},
		{[]string{"-arrivals-from", "testdata/jobs.csv", "-arrivals-speed", "0"}, "-arrivals-speed: must be a positive factor up to 1e+06, got 0"},
		{[]string{"-arrivals-from", "testdata/jobs.csv", "-arrival", "poisson", "-rate", "3"}, "-arrival: not with -arrivals-from (the trace is the arrivals)"},
		{[]string{"-arrival", "trace"}, "-arrival: trace needs -arrivals-from"},
	} {
		_, err := parseFlags(c.args, io.Discard)
		require.ErrorIs(t, err, ErrUsage, c.args)
		require.Contains(t, err.Error(), c.want)
	}
}

// A deterministic replay of the sample trace honours the submit times
// (no pod is assumed before it is submitted), runs each pod for its
// duration, and a scenario's arrivals.from names templates by name.
func TestTraceReplay(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	args := []string{"-deterministic", "-nodes", "3", "-pods-per-node", "0", "-duration", "30s", "-arrivals-from", "testdata/jobs.csv", "-record", rec, "-json", "-"}
	code, a, stderr := runJSON(t, args, hooks{})
	require.Equal(t, exitOK, code, stderr)
	rows, err := loadTrace("testdata/jobs.csv", nil)
	require.NoError(t, err)
	require.Equal(t, "trace", a.Arrivals.Mode)
	require.Equal(t, int64(40), a.Arrivals.Arrived)
	require.Equal(t, int64(40), a.Counts.Scheduled+a.Counts.FailedBindings)
	require.Equal(t, a.Counts.Scheduled, a.Lifecycle.Completed, "every pod runs its 1-8 s within the 30 s")
	require.GreaterOrEqual(t, a.Lifecycle.P50S, 1.0)
	require.True(t, a.Consistent)
	f, err := os.Open(rec)
	require.NoError(t, err)
	defer f.Close()
	r := trace.NewReader(f)
	seen := 0
	for {
		x, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if x.Op != trace.AssumePod || !strings.HasPrefix(x.Pod.Name, "trace-") {
			continue
		}
		var i int
		_, err = fmt.Sscanf(x.Pod.Name, "trace-%d", &i)
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Duration(x.At), rows[i].Submit, "pod %s assumed before it was submitted", x.Pod.Name)
		seen++
	}
	require.GreaterOrEqual(t, seen, 40)
	_, b, _ := runJSON(t, args, hooks{})
	require.Equal(t, a.Digest, b.Digest)

	// A scenario: templates by name, the trace relative to the file.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.jsonl"), []byte(
		`{"submit": "0.5s", "cpu": "1", "memory": "1Gi", "template": "batch"}`+"\n"+
			`{"submit": "1s", "cpu": "1", "memory": "1Gi", "template": "web"}`+"\n"), 0o644))
	sc := filepath.Join(dir, "s.yaml")
	require.NoError(t, os.WriteFile(sc, []byte(`cluster: {nodes: 2, podsPerNode: 0}
podMix:
  - {name: batch, runFor: {fixed: 2s}, failRate: 1}
  - {name: web}
run: {duration: 10s}
arrivals: {from: t.jsonl, speed: 2}
`), 0o644))
	code, c, stderr := runJSON(t, []string{"-scenario", sc, "-deterministic", "-json", "-"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, int64(2), c.Arrivals.Arrived)
	require.Equal(t, int64(1), c.Lifecycle.Completed, "the batch pod runs 2 s; the web pod has no lifecycle")
	require.Equal(t, int64(1), c.Lifecycle.Failed)
	require.True(t, c.Consistent)
}

// A trace replay stops once the trace is used up and every traced pod is
// decided and, with a duration, completed: at the last completion, before
// -duration (0 accepted with a trace: until then); -duration and -pods
// still end it first. Deterministic: the same digest twice. A trace
// without durations ends at its last decision, an unschedulable pod
// included.
func TestTraceReplayEnds(t *testing.T) {
	base := []string{"-deterministic", "-nodes", "3", "-pods-per-node", "0", "-arrivals-from", "testdata/jobs.csv", "-json", "-"}
	for _, dur := range []string{"24h", "0"} {
		args := append([]string{"-duration", dur}, base...)
		code, a, stderr := runJSON(t, args, hooks{})
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, "trace", a.Stopped, "-duration %s", dur)
		require.Equal(t, int64(40), a.Arrivals.Arrived)
		require.Equal(t, int64(40), a.Counts.Scheduled+a.Counts.FailedBindings)
		require.Equal(t, a.Counts.Scheduled, a.Lifecycle.Completed, "every bound pod completed")
		require.Zero(t, a.Lifecycle.Running)
		require.Less(t, a.Timing.RunSeconds, 30.0, "the run ends with the trace, not at -duration")
		require.Greater(t, a.Timing.RunSeconds, 10.0, "the last job is submitted near 10 s and runs at least 1 s")
		require.True(t, a.Consistent)
		_, b, _ := runJSON(t, args, hooks{})
		require.Equal(t, a.Digest, b.Digest)
	}
	code, c, stderr := runJSON(t, append([]string{"-duration", "5s"}, base...), hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "duration", c.Stopped, "-duration ends it first")
	require.Less(t, c.Arrivals.Arrived, int64(40))
	code, c, stderr = runJSON(t, append([]string{"-duration", "0", "-pods", "10"}, base...), hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "pods", c.Stopped, "-pods ends it first")

	// No durations: it ends at the last decision.
	tr := writeTestFile(t, "t.jsonl", `{"submit": "1s", "cpu": "1", "memory": "1Gi"}
{"submit": "2s", "cpu": "1000", "memory": "1Gi"}
{"submit": "3s", "cpu": "1", "memory": "1Gi"}
`)
	code, d, stderr := runJSON(t, []string{"-deterministic", "-nodes", "2", "-pods-per-node", "0", "-fail-rate", "0", "-duration", "1h",
		"-arrivals-from", tr, "-json", "-"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "trace", d.Stopped)
	require.Equal(t, int64(2), d.Counts.Scheduled)
	require.Equal(t, int64(1), d.Counts.Unschedulable, "an unschedulable pod is decided")
	require.InDelta(t, 3.0, d.Timing.RunSeconds, 0.01)
}

// In real time too a trace replay ends with its trace.
func TestTraceReplayEndsRealtime(t *testing.T) {
	tr := writeTestFile(t, "t.jsonl", `{"submit": "0.1s", "duration": "0.2s", "cpu": "1", "memory": "1Gi"}
{"submit": "0.2s", "cpu": "1", "memory": "1Gi"}
{"submit": "0.3s", "duration": "0.1s", "cpu": "1", "memory": "1Gi"}
`)
	start := time.Now()
	code, a, stderr := runJSON(t, []string{"-nodes", "2", "-pods-per-node", "0", "-fail-rate", "0", "-schedulers", "1", "-duration", "0",
		"-arrivals-from", tr, "-json", "-"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "trace", a.Stopped)
	require.Equal(t, int64(3), a.Counts.Scheduled)
	require.Equal(t, int64(2), a.Lifecycle.Completed)
	require.Less(t, time.Since(start), 20*time.Second)
	require.Less(t, a.Timing.RunSeconds, 5.0)
	require.GreaterOrEqual(t, a.Timing.RunSeconds, 0.4, "the last pod is submitted at 0.3 s and runs 0.1 s")
}
