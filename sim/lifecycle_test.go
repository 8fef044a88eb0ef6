package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lifeScenario is two nodes of 4 CPUs that hold four 2-CPU pods at a
// time; pods arrive at 8/s and run 1 s: the run schedules many more than
// four only because completions free the nodes.
const lifeScenario = `
cluster:
  nodes: 2
  podsPerNode: 0
  allocatable: {cpu: "4", memory: 64Gi, pods: 110}
workload:
  schedulers: 1
  keepPods: %s
podMix:
  - name: big
    plain: true
    containers: {min: 1, max: 1}
    cpu: {min: "2", max: "2"}
    memory: {min: 1Gi, max: 1Gi}
    runFor: {fixed: 1s}
    failRate: 0.25
run:
  duration: 12s
arrivals:
  mode: poisson
  rate: 8
`

func writeTestFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

// In deterministic mode a pod with a lifecycle runs for its duration,
// completes Succeeded or Failed (at the fail rate) and is deleted, which
// frees its node: a cluster that holds four pods schedules dozens; the
// audit stays clean and the digest is the seed's.
func TestLifecycleDeterministic(t *testing.T) {
	for _, keep := range []string{"true", "false"} {
		sc := writeTestFile(t, "life.yaml", fmt.Sprintf(lifeScenario, keep))
		args := []string{"-scenario", sc, "-deterministic", "-json", "-"}
		code, a, stderr := runJSON(t, args, hooks{})
		require.Equal(t, exitOK, code, stderr)
		code, b, _ := runJSON(t, args, hooks{})
		require.Equal(t, exitOK, code)
		require.Equal(t, a.Digest, b.Digest, "the same seed gives the same run")
		l := a.Lifecycle
		require.NotNil(t, l)
		require.Equal(t, a.Lifecycle, b.Lifecycle)
		require.Greater(t, a.Counts.Scheduled, int64(40), "completions free capacity: far more than the 4 pods the cluster holds at once")
		require.Equal(t, a.Counts.Scheduled, l.Started)
		require.Equal(t, l.Completed, l.Succeeded+l.Failed)
		require.Equal(t, l.Started, l.Completed+l.Running+l.Gone)
		require.LessOrEqual(t, l.Running, int64(4))
		require.Positive(t, l.Failed)
		require.InDelta(t, 0.25, float64(l.Failed)/float64(l.Completed), 0.12)
		require.GreaterOrEqual(t, l.P50S, 1.0, "a pod completes 1 s after its binding is delivered, later than its submission")
		require.Less(t, l.P50S, 2.0)
		require.Zero(t, a.Churn.ConfirmDeletes, "a pod with a lifecycle leaves on its own")
		require.True(t, a.Audit.OK)
		require.True(t, a.Consistent)
	}
}

// -pod-duration and -pod-fail-rate give every pod a lifecycle; a fail
// rate of 1 fails every completion; the flags are checked.
func TestLifecycleFlags(t *testing.T) {
	args := []string{"-deterministic", "-nodes", "4", "-pods-per-node", "0", "-duration", "10s", "-arrival", "poisson", "-rate", "20",
		"-pod-duration", "exp:500ms", "-pod-fail-rate", "1", "-json", "-"}
	code, a, stderr := runJSON(t, args, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Positive(t, a.Lifecycle.Completed)
	require.Equal(t, a.Lifecycle.Completed, a.Lifecycle.Failed)
	require.True(t, a.Consistent)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-pod-duration", "soon"}, `-pod-duration: invalid value "soon": not a duration (like 30s): "soon"`},
		{[]string{"-pod-duration", "-1s"}, `-pod-duration: invalid value "-1s": must be positive, got -1s`},
		{[]string{"-pod-duration", "5s..1s"}, `-pod-duration: invalid value "5s..1s": min 5s is more than max 1s`},
		{[]string{"-pod-fail-rate", "1.5"}, `-pod-fail-rate: must be a fraction in [0, 1], got 1.5`},
		{[]string{"-pod-fail-rate", "NaN"}, `-pod-fail-rate: must be a fraction in [0, 1], got NaN`},
	} {
		_, err := parseFlags(c.args, nil)
		require.ErrorIs(t, err, ErrUsage, c.args)
		require.Contains(t, err.Error(), c.want)
	}
	for _, c := range []struct{ field, want string }{
		{"runFor: {fixed: 1s, min: 1s, max: 2s}", "podMix[0].runFor: give one of fixed, min and max, or exponential"},
		{"runFor: {min: 1s}", "podMix[0].runFor.max: missing"},
		{"runFor: {exponential: {mean: -3s}}", "podMix[0].runFor.exponential.mean: must be positive, got -3s"},
		{"failRate: 2", "podMix[0].failRate: must be a fraction in [0, 1], got 2"},
		{"name: Big_One", `podMix[0].name: "Big_One": a lowercase RFC 1123 label`},
	} {
		sc := writeTestFile(t, "s.yaml", "cluster: {nodes: 2}\nrun: {duration: 1s}\npodMix:\n  - "+c.field+"\n")
		_, err := parseFlags([]string{"-scenario", sc}, nil)
		require.ErrorIs(t, err, ErrUsage, c.field)
		require.Contains(t, err.Error(), "s.yaml:4: "+c.want)
	}
}

// In real time pods run for wall time: short durations complete within
// the run (hooks.until waits for the deletions rather than sleeping).
func TestLifecycleRealtime(t *testing.T) {
	cfg := defaultConfig()
	cfg.Nodes, cfg.PodsPerNode, cfg.Schedulers, cfg.Sample = 4, 0, 1, 4
	cfg.Duration = 300 * time.Millisecond
	cfg.Arrival, cfg.Rate = arrPoisson, 200
	cfg.Life.Default = LifeSpec{Kind: lifeUniform, A: 5 * time.Millisecond, B: 20 * time.Millisecond, FailRate: 0.5, FailSet: true}
	require.NoError(t, cfg.Validate())
	rep, err := run(context.Background(), cfg, nil, hooks{until: func(p runProgress) bool { return p.Informer.PodDeletes >= 10 }})
	require.NoError(t, err)
	l := rep.Lifecycle
	require.NotNil(t, l)
	require.GreaterOrEqual(t, l.Completed, int64(10))
	require.Positive(t, l.Succeeded)
	require.Positive(t, l.Failed)
	require.Equal(t, l.Completed, rep.Informer.PodDeletes)
	require.GreaterOrEqual(t, l.SubmitToCompletion.P50, 5*time.Millisecond)
	require.True(t, rep.Consistent, "audit %+v", rep.Audit)
}

// phaseLifeScenario: two nodes of 4 CPUs hold four 2-CPU pods; the first
// createPods fills them, the sleep outlasts the pods' run time (%s: the
// template's lifecycle fields), and the second createPods fits only
// because the first phase's pods completed.
const phaseLifeScenario = `cluster: {seed: 1, allocatable: {cpu: "4", memory: 32Gi, pods: 110}}
workload: {schedulers: 1}
phases:
- createNodes: {count: 2}
- name: first
  createPods:
    count: 4
    namespace: a
    template: {plain: true, containers: 1, cpu: "2", memory: 1Gi%s}
- barrier: {}
- sleep: {duration: 3s}
- name: second
  createPods:
    count: 4
    namespace: b
    collectMetrics: true
    template: {plain: true, containers: 1, cpu: "2", memory: 1Gi}
  thresholds: {maxUnschedulable: 0}
`

// Pods a phase creates with runFor complete and free their nodes: a later
// phase fits only because of that; the per-phase and lifecycle reports
// count the completions; the barrier does not wait for completions; the
// digest is the seed's.
func TestPhasesLifecycle(t *testing.T) {
	sc := writeScenario(t, fmt.Sprintf(phaseLifeScenario, ", runFor: {fixed: 1s}, failRate: 0.5"))
	args := []string{"-scenario", sc, "-json", "-"}
	code, a, stderr := runJSON(t, args, hooks{})
	require.Equal(t, exitOK, code, stderr)
	_, b, _ := runJSON(t, args, hooks{})
	require.Equal(t, a.Digest, b.Digest, "the same seed gives the same run")
	require.True(t, a.Consistent)
	require.True(t, a.Audit.OK)
	first, barrier, sleep, second := phaseByName(t, a, "first"), a.Phases[2], a.Phases[3], phaseByName(t, a, "second")
	require.Equal(t, int64(4), first.Scheduled)
	require.Zero(t, first.Completed, "the phase ends once its pods are bound, before they complete")
	require.Less(t, barrier.EndSeconds, 1.0, "the barrier waits for bindings, not completions")
	require.Equal(t, int64(4), sleep.Completed, "the pods complete during the sleep")
	require.Equal(t, int64(4), second.Scheduled, "the second phase fits only because the first one's pods completed")
	require.Zero(t, second.Unschedulable)
	require.True(t, *a.ThresholdsOK)
	l := a.Lifecycle
	require.NotNil(t, l)
	require.Equal(t, int64(4), l.Started, "only the first phase's pods have a lifecycle")
	require.Equal(t, int64(4), l.Completed)
	require.Equal(t, l.Failed, sleep.CompletedFail)
	require.Equal(t, l.Succeeded, sleep.Completed-sleep.CompletedFail)
	require.Zero(t, l.Running)
	require.Equal(t, 4, a.Counts.FinalPods, "the second phase's pods remain")

	// Without runFor the first phase's pods stay: the second finds no room.
	sc = writeScenario(t, fmt.Sprintf(phaseLifeScenario, ""))
	code, c, _ := runJSON(t, []string{"-scenario", sc, "-json", "-"}, hooks{})
	require.Equal(t, exitThresholds, code)
	require.Equal(t, int64(4), phaseByName(t, c, "second").Unschedulable)
	require.Nil(t, c.Lifecycle)

	// -pod-duration gives every phase pod a lifecycle.
	code, d, stderr := runJSON(t, []string{"-scenario", sc, "-json", "-", "-pod-duration", "1s"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, int64(4), phaseByName(t, d, "second").Scheduled)
	require.Equal(t, int64(8), d.Lifecycle.Started)
	require.Equal(t, int64(4), d.Lifecycle.Running, "the run ends with the phases: the second phase's pods still run")
}

// A createPods phase without a template makes pods of the pod mix, with
// the mix's runFor, also when the first createNodes phase has a shape of
// its own.
func TestPhasesLifecyclePodMix(t *testing.T) {
	sc := writeScenario(t, `cluster: {seed: 1, allocatable: {cpu: "8", memory: 32Gi, pods: 110}}
podMix:
- {plain: true, containers: {min: 1, max: 1}, cpu: {min: "2", max: "2"}, memory: {min: 1Gi, max: 1Gi}, runFor: {fixed: 1s}}
phases:
- createNodes: {count: 2, allocatable: {cpu: "4"}}
- createPods: {count: 4, namespace: a}
- sleep: {duration: 3s}
- name: second
  createPods: {count: 4, namespace: b}
`)
	code, a, stderr := runJSON(t, []string{"-scenario", sc, "-json", "-"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, int64(4), phaseByName(t, a, "second").Scheduled)
	require.Equal(t, int64(8), a.Lifecycle.Started)
	require.Equal(t, int64(4), a.Lifecycle.Completed)
}
