package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache/sim/trace"
)

// recArgs is a tiny deterministic run with every kind of call: loads,
// assumes, bindings, forgets (fail rate), confirmations, deletions and node
// heartbeats.
func recArgs(path string) []string {
	return []string{"-deterministic", "-nodes", "20", "-pods-per-node", "3", "-duration", "10ms",
		"-confirm-delay", "2ms", "-fail-rate", "0.1", "-sample", "5", "-seed", "3", "-record", path, "-json", "-"}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func writeLines(t *testing.T, path string, lines []string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
}

func replay(t *testing.T, path string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := realMain(context.Background(), []string{"-replay", path}, &stdout, &stderr, false, hooks{})
	return code, stdout.String(), stderr.String()
}

// A recorded deterministic run replays on a fresh cache with every result
// and the final totals as recorded; the trace holds every call kind the
// run makes and its End totals are the run's final state.
func TestRecordReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	code, rep, stderr := runJSON(t, recArgs(path), hooks{})
	require.Equal(t, exitOK, code, stderr)

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r := trace.NewReader(f)
	ops := map[trace.Op]int{}
	var end *trace.Totals
	for {
		rec, err := r.Next()
		if err != nil {
			require.ErrorContains(t, err, "EOF")
			break
		}
		ops[rec.Op]++
		if rec.Op == trace.End {
			end = rec.Totals
		}
	}
	require.Equal(t, 20, ops[trace.AddNode])
	require.Equal(t, int(rep.Counts.Scheduled+rep.Counts.FailedBindings), ops[trace.AssumePod])
	require.Equal(t, ops[trace.AssumePod], ops[trace.FinishBinding])
	require.Equal(t, int(rep.Counts.FailedBindings), ops[trace.ForgetPod])
	require.Positive(t, ops[trace.ForgetPod])
	require.Equal(t, 60+int(rep.Counts.Adds), ops[trace.AddPod])
	require.Equal(t, int(rep.Counts.Removes), ops[trace.RemovePod])
	require.Positive(t, ops[trace.UpdateNode])
	require.NotNil(t, end)
	require.Equal(t, rep.Counts.FinalPods, end.Pods)
	require.Equal(t, int(rep.Counts.NodeUpdates), ops[trace.UpdateNode])
	require.Equal(t, 20, end.Nodes)
	require.Len(t, end.PerNode, 20)

	code, out, errOut := replay(t, path)
	require.Equal(t, exitOK, code, out+errOut)
	calls := 0
	for op, n := range ops {
		if op != trace.End {
			calls += n
		}
	}
	require.Contains(t, out, "replayed "+itoa(calls)+" calls: 0 results differ")
	require.Contains(t, out, "final totals match the recorded ones")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A tampered trace is reported with exit 3: one call's recorded result
// changed, the End totals changed, or the End record cut off.
func TestReplayTampered(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	code, _, stderr := runJSON(t, recArgs(path), hooks{})
	require.Equal(t, exitOK, code, stderr)
	lines := readLines(t, path)

	// One AssumePod's result: nil recorded as an error.
	bad := append([]string(nil), lines...)
	idx := -1
	for i, l := range bad {
		if strings.HasPrefix(l, `{"op":"AssumePod"`) {
			bad[i] = strings.Replace(l, `{"op":"AssumePod"`, `{"op":"AssumePod","err":"tampered"`, 1)
			idx = i - 1 // call index: line 0 is Begin
			break
		}
	}
	require.GreaterOrEqual(t, idx, 0)
	p := filepath.Join(dir, "result.jsonl")
	writeLines(t, p, bad)
	code, out, _ := replay(t, p)
	require.Equal(t, exitDivergence, code, out)
	require.Contains(t, out, "1 results differ from the recorded ones (1 error/nil, 0 error text)")
	require.Contains(t, out, "mismatch: call "+itoa(idx)+" (AssumePod ")
	require.Contains(t, out, `recorded "tampered", got nil`)

	// The End totals: one more pod than the cache holds.
	bad = append([]string(nil), lines...)
	var end trace.Record
	require.NoError(t, json.Unmarshal([]byte(bad[len(bad)-1]), &end))
	require.Equal(t, trace.End, end.Op)
	end.Totals.Pods++
	end.Totals.PerNode[0].MilliCPU++
	b, err := json.Marshal(end)
	require.NoError(t, err)
	bad[len(bad)-1] = string(b)
	p = filepath.Join(dir, "totals.jsonl")
	writeLines(t, p, bad)
	code, out, _ = replay(t, p)
	require.Equal(t, exitDivergence, code, out)
	require.Contains(t, out, "0 results differ")
	require.Contains(t, out, "final totals differ")
	require.Contains(t, out, "pods: want ")
	require.Contains(t, out, "node "+end.Totals.PerNode[0].Name+": want")

	// No End record: a truncated trace.
	p = filepath.Join(dir, "cut.jsonl")
	writeLines(t, p, lines[:len(lines)-1])
	code, out, _ = replay(t, p)
	require.Equal(t, exitDivergence, code, out)
	require.Contains(t, out, "no End record")

	// Not a trace at all: the run fails (exit 1), naming the line.
	p = filepath.Join(dir, "junk.jsonl")
	writeLines(t, p, []string{lines[0], "not json"})
	code, _, errOut := replay(t, p)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "line 2")
}

// -record needs -deterministic and no sweep; -replay takes nothing else
// and an existing file. All are usage errors (exit 2) before any work.
func TestRecordReplayValidation(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-record", filepath.Join(dir, "a.jsonl"), "-duration", "10ms"}, "-record: needs -deterministic"},
		{[]string{"-deterministic", "-record", filepath.Join(dir, "a.jsonl"), "-sweep-seeds", "1,2", "-out", dir}, "-record"},
		{[]string{"-replay", filepath.Join(dir, "a.jsonl"), "-nodes", "5"}, "-replay: needs a path and no other flag"},
		{[]string{"-replay"}, "-replay"},
		{[]string{"-replay", ""}, "-replay: needs a trace file"},
		{[]string{"-replay", filepath.Join(dir, "missing.jsonl")}, "-replay"},
		{[]string{"-deterministic", "-nodes", "5", "-record", filepath.Join(dir, "no", "such", "dir.jsonl")}, "-record"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := realMain(context.Background(), tc.args, &stdout, &stderr, false, hooks{})
			require.Equal(t, exitUsage, code, "stderr: %s", stderr.String())
			require.Contains(t, stderr.String(), tc.want)
			require.Empty(t, stdout.String())
		})
	}
}
