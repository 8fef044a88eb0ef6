package sim

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// flaky is a test picker: least-allocated, except that every pod whose
// name ends in "3" fails its attempt with an *AttemptError (reason
// "flaky") and every pod whose name ends in "5" with a bare error
// wrapping ErrAttempt (reason "error").
type flaky struct {
	mu    sync.Mutex
	calls int // guarded by mu
}

func (*flaky) Name() string      { return "flaky" }
func (*flaky) Plugins() []string { return nil }
func (p *flaky) NewNodePicker(ctx context.Context, cfg PickerConfig) (NodePicker, error) {
	np, err := LeastAllocated{}.NewNodePicker(ctx, cfg)
	return &flakyNode{p: p, np: np}, err
}

type flakyNode struct {
	p  *flaky     // immutable
	np NodePicker // used by the node picker's scheduler
}

func (f *flakyNode) Pick(ctx context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, r *rand.Rand, rej []int64) (string, error) {
	f.p.mu.Lock()
	f.p.calls++
	f.p.mu.Unlock()
	switch name := pod.Pod().Name; {
	case strings.HasSuffix(name, "3"):
		return "", &AttemptError{Reason: "flaky", Err: errors.New("told to fail " + name)}
	case strings.HasSuffix(name, "5"):
		return "", errors.Join(ErrAttempt, errors.New("bare"))
	}
	return f.np.Pick(ctx, snap, pod, r, rej)
}

func (f *flakyNode) Close() error { return f.np.Close() }

// A pick that fails with an error wrapping ErrAttempt fails that pod's
// attempt only, in every engine: the run completes, the report counts the
// failures by reason with the first messages, and (with phases) the pods
// are settled failed.
func TestAttemptErrors(t *testing.T) {
	phases := phaseHead + "- name: p\n  createPods: {count: 30, template: {plain: true, cpu: 100m, memory: 100Mi}}\n"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"deterministic", []string{"-nodes", "20", "-pods-per-node", "2", "-duration", "100ms", "-deterministic"}},
		{"real-time", []string{"-nodes", "20", "-pods-per-node", "2", "-pods", "60", "-duration", "10s", "-schedulers", "2"}},
		{"phases", []string{"-scenario", writeScenario(t, phases)}},
		{"phases-real-time", []string{"-scenario", writeScenario(t, phases), "-deterministic=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &flaky{}
			code, rep, stderr := runJSON(t, append(tc.args, "-json", "-"), hooks{picker: p})
			require.Equal(t, exitOK, code, stderr)
			a := rep.AttemptErrors
			require.NotNil(t, a, "no attempt errors reported")
			require.Equal(t, a.ByReason["flaky"]+a.ByReason["error"], a.Count)
			require.Positive(t, a.ByReason["flaky"])
			require.Positive(t, a.ByReason["error"])
			require.LessOrEqual(t, len(a.First), maxAttemptMessages)
			require.NotEmpty(t, a.First)
			require.Contains(t, a.First[0], "sim: attempt failed")
			require.Positive(t, rep.Counts.Scheduled)
			require.True(t, rep.Consistent)
			if len(rep.Phases) > 0 {
				ph := rep.Phases[len(rep.Phases)-1]
				// p-00000N: pods 3, 5, 13, 15, 23, 25 fail.
				require.Equal(t, int64(6), ph.Failed, "%+v", ph)
				require.Equal(t, int64(24), ph.Scheduled, "%+v", ph)
				require.Equal(t, int64(6), a.Count)
			}
		})
	}
	var out bytes.Buffer
	r := &Report{Picker: "x", AttemptErrors: &AttemptErrors{Count: 3, ByReason: map[string]int64{"b": 1, "a": 2}, First: []string{"p: e"}}}
	r.printPicker(&out)
	require.Equal(t, "picker:    x\nattempt errors: 3 attempts failed by the picker (a 2, b 1), pods not placed; first: p: e\n", out.String())
}
