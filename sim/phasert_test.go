package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rtPhaseBody is the real-time test workload: 50 nodes; 200 pods (not
// waited for), a barrier, 100 of them deleted, 10 nodes more, 200 more
// measured against thresholds that hold.
const rtPhaseBody = `cluster: {seed: 5, zones: 3, allocatable: {cpu: "4", memory: 32Gi, pods: 110}, images: {perNode: 0, poolSize: 0}}
workload: {schedulers: 3, sample: 20, bindingFailureRate: 0.05, confirmDelay: 2ms}
phases:
- createNodes: {count: 50}
- name: init
  createPods:
    count: 200
    namespace: init
    skipWait: true
    template: {plain: true, containers: 1, cpu: 100m, memory: 500Mi}
- barrier: {}
- deletePods: {namespace: init, count: 100}
- createNodes: {count: 10}
- name: measure
  createPods:
    count: 200
    namespace: measure
    collectMetrics: true
    template: {plain: true, containers: 1, cpu: 100m, memory: 500Mi}
  thresholds: {minThroughput: 10, maxUnschedulable: 0, maxP99: 30s, maxAttemptP99: 30s}
`

// A phases plan runs in real time: the phases in order on the wall clock,
// failed bindings retried, the measured phase's wall-clock throughput and
// latencies reported and its thresholds checked; the cache ends as the
// API server.
func TestPhasesRealtime(t *testing.T) {
	p := writeScenario(t, rtPhaseBody)
	code, a, stderr := runJSON(t, []string{"-scenario", p, "-deterministic=false", "-json", "-"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.False(t, a.Config.Deterministic)
	require.True(t, a.Consistent, "%+v", a.Audit)
	require.Equal(t, "phases", a.Stopped)
	require.Len(t, a.Phases, 6)
	nodes, init, barrier, del, more, m := a.Phases[0], a.Phases[1], a.Phases[2], a.Phases[3], a.Phases[4], a.Phases[5]
	require.Equal(t, int64(50), nodes.Nodes)
	require.Equal(t, int64(200), init.Pods)
	require.True(t, init.Finished)
	require.Equal(t, int64(200), init.Scheduled+barrier.Scheduled, "the barrier waits for the init pods (some bound before it starts)")
	require.Zero(t, init.Unschedulable+barrier.Unschedulable)
	require.Equal(t, int64(100), del.Deleted)
	require.Equal(t, int64(10), more.Nodes)
	require.True(t, m.Measured)
	require.True(t, m.Finished)
	require.Equal(t, "measure", m.Namespace)
	require.Equal(t, int64(200), m.Scheduled)
	require.Zero(t, m.Unschedulable)
	for i := 1; i < len(a.Phases); i++ {
		require.GreaterOrEqual(t, a.Phases[i].StartSeconds, a.Phases[i-1].EndSeconds, "phase %d starts after the one before", i)
	}
	require.NotNil(t, m.Throughput)
	span := m.EndSeconds - m.StartSeconds
	require.Positive(t, span)
	require.InDelta(t, 200/span, m.Throughput.PodsPerSec, 200/span*0.01+1, "wall-clock throughput")
	require.Positive(t, m.Latency.P50)
	require.LessOrEqual(t, m.Latency.P50, m.Latency.P99)
	require.LessOrEqual(t, m.Latency.P99, 1000*span+1, "no pod waits longer than the phase")
	require.Positive(t, m.Attempt.P99)
	require.Len(t, m.Thresholds, 4)
	for _, th := range m.Thresholds {
		require.True(t, th.OK, "%+v", th)
	}
	require.True(t, *a.ThresholdsOK)
	require.Equal(t, 300, a.Counts.FinalPods, "200 + 200 - 100 pods bound")
	require.Positive(t, a.Counts.FailedBindings, "failed bindings are retried")

	var out bytes.Buffer
	require.Equal(t, exitOK, realMain(context.Background(), []string{"-scenario", p, "-deterministic=false"}, &out, io.Discard, false, hooks{}))
	for _, want := range []string{"stopped by phases", "phases:    6 phases (1 measured); thresholds: 4 checked, 0 violated",
		"6 createPods      measure [measured]:", "scheduling latency (creation to binding):", "100 deleted from init"} {
		require.Contains(t, out.String(), want)
	}
}

// A violated threshold of a real-time run exits 4 after its report.
func TestPhasesRealtimeThresholds(t *testing.T) {
	fail := writeScenario(t, strings.Replace(rtPhaseBody, "minThroughput: 10,", "minThroughput: 10000000, minScheduled: 201,", 1))
	var stdout, stderr bytes.Buffer
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	require.Equal(t, 4, Main(context.Background(), []string{"-scenario", fail, "-deterministic=false", "-json", jsonPath}, &stdout, &stderr, false), stderr.String())
	require.Contains(t, stderr.String(), "loadgen: 2 thresholds violated: phase measure: minThroughput >= 10000000 pods/s: got ")
	require.Contains(t, stderr.String(), "phase measure: minScheduled >= 201 pods: got 200")
	require.Contains(t, stdout.String(), "thresholds: 5 checked, 2 violated")
	r := readJSONReport(t, jsonPath)
	require.False(t, *r.ThresholdsOK)
	require.True(t, r.Consistent)

	// Cut by -duration in a phase before the measured one: the run stops
	// at its duration and the measured phase fails "finished".
	long := writeScenario(t, strings.Replace(rtPhaseBody, "- barrier: {}\n", "- barrier: {}\n- sleep: {duration: 1h}\n", 1))
	stdout.Reset()
	stderr.Reset()
	start := time.Now()
	require.Equal(t, 4, Main(context.Background(), []string{"-scenario", long, "-deterministic=false", "-duration", "300ms", "-json", jsonPath}, &stdout, &stderr, false), stderr.String())
	require.Less(t, time.Since(start), 20*time.Second)
	require.Contains(t, stderr.String(), "phase measure: the phase did not finish")
	r = readJSONReport(t, jsonPath)
	require.Equal(t, "duration", r.Stopped)
	require.InDelta(t, 0.3, r.Phases[3].EndSeconds, 0.001, "the sleep is cut at the run's end")
	require.False(t, r.Phases[3].Finished)
}

// Sleep, churn (waited for and in the background), rate-limited
// deletions and a start/stop span run in order in real time; the cache
// ends consistent.
func TestPhasesRealtimeChurnAndSpans(t *testing.T) {
	p := writeScenario(t, `cluster: {seed: 4, zones: 2, allocatable: {cpu: "8", memory: 32Gi, pods: 110}}
workload: {schedulers: 2, sample: 20, bindingFailureRate: 0.02, confirmDelay: 1ms}
phases:
- createNodes: {count: 20}
- createNodes: {count: 10, labels: [{key: pool, value: late, fraction: 1}]}
- createPods: {count: 200, namespace: a, template: {plain: true, cpu: 100m, memory: 100Mi}}
- churn: {podUpdateRate: 500, drainRate: 5, notReadyRate: 5, nodeAddRate: 5, duration: 300ms}
- churn: {podDeleteRate: 100, skipWait: true}
- name: span
  startCollecting: {}
- createPods: {count: 50, namespace: b, template: {plain: true, cpu: 100m, memory: 100Mi, nodeSelector: {pool: late}}}
- sleep: {duration: 200ms}
- deletePods: {namespace: a, all: true, rate: 1000}
- stopCollecting: {}
- barrier: {}
`)
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-deterministic=false", "-json", "-", "-duration", "60s", "-audit-every", "50ms"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, r.Consistent, "%+v", r.Audit)
	require.Equal(t, "phases", r.Stopped, "the phases end the run before its -duration")
	require.Positive(t, r.MidAudits.Count, "audits pause the phases too")
	require.Equal(t, int64(10), r.Phases[1].Nodes)
	churn := r.Phases[3]
	require.Positive(t, churn.ChurnActions)
	require.GreaterOrEqual(t, churn.EndSeconds-churn.StartSeconds, 0.3)
	span := phaseByName(t, r, "span")
	require.True(t, span.Measured)
	require.True(t, span.Finished)
	require.Equal(t, int64(50), span.Scheduled+span.Unschedulable, "the span counts the pods settled inside it")
	require.Greater(t, span.EndSeconds-span.StartSeconds, 0.2, "the span holds the sleep and more")
	require.Equal(t, span.EndSeconds, r.Phases[9].StartSeconds, "stopCollecting ends the span")
	del := r.Phases[8]
	require.Positive(t, del.Deleted)
	require.Greater(t, del.EndSeconds, del.StartSeconds, "deletions at 1000/s take time")
}

// An interrupt in the middle of a real-time phase ends the run with a
// complete report marked interrupted: the phases before it finished, the
// one running cut; exit 0 (cmd/loadgen adds 128 + the signal), and no
// threshold fails; every goroutine is joined (goleak in TestMain).
func TestPhasesRealtimeInterrupt(t *testing.T) {
	p := writeScenario(t, strings.Replace(rtPhaseBody, "- barrier: {}\n", "- barrier: {}\n- name: nap\n  sleep: {duration: 1h}\n", 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tm := time.AfterFunc(300*time.Millisecond, cancel)
	defer tm.Stop()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	require.Equal(t, 0, Main(ctx, []string{"-scenario", p, "-deterministic=false", "-json", "-"}, &stdout, &stderr, false), stderr.String())
	require.Less(t, time.Since(start), 20*time.Second, "the run stops at the interrupt")
	var r JSONReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &r))
	require.Equal(t, "interrupted", r.Stopped)
	require.True(t, r.Consistent, "%+v", r.Audit)
	require.True(t, r.Phases[2].Finished, "the barrier finished")
	nap := phaseByName(t, &r, "nap")
	require.False(t, nap.Finished)
	require.False(t, phaseByName(t, &r, "measure").Finished)
	require.Contains(t, strings.Join(r.Warnings, "\n"), "phase nap did not finish: the run was interrupted")
	require.NotContains(t, stderr.String(), "thresholds violated")
}
