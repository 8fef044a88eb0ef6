package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

func smallConfig() Config {
	cfg := defaultConfig()
	cfg.Nodes, cfg.PodsPerNode, cfg.Duration, cfg.Schedulers = 60, 10, 300*time.Millisecond, 2
	return cfg
}

// A short simulation schedules pods, confirms them through the event
// stream, and ends with the cache holding exactly the pods it should.
func TestRunSmall(t *testing.T) {
	rep, err := run(context.Background(), smallConfig(), nil, hooks{})
	require.NoError(t, err)
	require.True(t, rep.Consistent, "final %d pods, expected %d, %d nodes, %d async errors, audit %+v", rep.FinalPods, rep.ExpectedPods, rep.FinalNodes, rep.AsyncErrors, rep.Audit)
	require.True(t, rep.Audit.OK)
	require.Equal(t, 600, rep.InitialPods)
	require.Positive(t, rep.Scheduled)
	require.Equal(t, rep.Scheduled, rep.Adds, "every scheduled pod is confirmed by the informer")
	require.Equal(t, rep.Adds, rep.Removes)
	require.Equal(t, rep.InitialPods, rep.FinalPods, "one removal per confirmation keeps the size steady")
	require.Equal(t, 60, rep.Audit.NodesChecked)
	require.Equal(t, rep.FinalPods, rep.Audit.CachePods)
	requirePendingForgotten(t, rep)
	require.Positive(t, rep.Assume.P50)
	require.Positive(t, rep.HeapInUse)
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"pods/s", "events/s", "assume latency", "snapshot read latency", "consistent: true", "GOMAXPROCS=", "audit:", "0 divergences"} {
		require.Contains(t, out.String(), want)
	}
}

// requirePendingForgotten checks a closed-loop run's pod accounting: every
// pod a scheduler forgot (its binding failed or was refused, or a fresh
// snapshot after AssumePod showed another scheduler had filled the node:
// a conflict) stays pending in the API server, so the truth holds the
// cache's pods and the forgotten ones, and nothing else.
func requirePendingForgotten(t *testing.T, rep *Report) {
	t.Helper()
	require.Equal(t, rep.Forgotten, rep.FailedBindings+rep.RefusedBindings+rep.Conflicts, "a pod is forgotten for a failed or refused binding or a conflict")
	require.Equal(t, int64(rep.Audit.PodsChecked), int64(rep.FinalPods)+rep.Forgotten,
		"the API server also holds the forgotten pods, pending: %d failed bindings, %d refused, %d conflicts", rep.FailedBindings, rep.RefusedBindings, rep.Conflicts)
}

// fullestPicker is a test picker: the node with the most CPU requested,
// whether the pod fits or not. Once that node is full, every decision
// overfills it and is caught as a conflict.
type fullestPicker struct{}

func (fullestPicker) Name() string      { return "fullest" }
func (fullestPicker) Plugins() []string { return nil }
func (fullestPicker) NewNodePicker(context.Context, PickerConfig) (NodePicker, error) {
	return fullestPicker{}, nil
}
func (fullestPicker) Pick(_ context.Context, snap *schedcache.Snapshot, _ *nodeinfo.PodInfo, _ *rand.Rand, _ []int64) (string, error) {
	best, most := "", int64(-1)
	for i := 0; i < snap.NumNodes(); i++ {
		if ni := snap.At(i); ni.Requested().MilliCPU > most {
			best, most = ni.Node().Name, ni.Requested().MilliCPU
		}
	}
	return best, nil
}
func (fullestPicker) Close() error { return nil }

// A conflict (a pod assumed on a node another scheduler filled since the
// snapshot) is forgotten and stays pending in the API server, as a failed
// binding does: the run's figures account for every pod the truth holds.
// TestRunSmall met a conflict only now and then (a nearly full node that
// both schedulers chose at once); here every decision after the first
// node fills is one.
func TestConflictsStayPending(t *testing.T) {
	cfg := smallConfig()
	cfg.KeepPods = true // no confirmation deletes: the node stays full
	rep, err := run(context.Background(), cfg, nil, hooks{picker: fullestPicker{}})
	require.NoError(t, err)
	require.True(t, rep.Consistent, "final %d pods, expected %d, audit %+v", rep.FinalPods, rep.ExpectedPods, rep.Audit)
	require.Positive(t, rep.Conflicts)
	require.Equal(t, int64(rep.InitialPods)+rep.Scheduled, int64(rep.FinalPods))
	requirePendingForgotten(t, rep)
}

// Every bad flag is refused before any work with exit code 2 and a message
// naming the flag; none panics.
func TestValidationRejects(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-nodes=-5"}, "-nodes"},
		{[]string{"-nodes", "0"}, "-nodes"},
		{[]string{"-nodes", "200001"}, "-nodes"},
		{[]string{"-nodes", "abc"}, "-nodes"},
		{[]string{"-pods-per-node", "-3"}, "-pods-per-node"},
		{[]string{"-pods-per-node", "111"}, "-pods-per-node"},
		{[]string{"-nodes", "100", "-pods-per-node", "2000"}, "-pods-per-node"},
		{[]string{"-nodes", "200000", "-pods-per-node", "110"}, "-pods-per-node"},
		{[]string{"-schedulers", "-1"}, "-schedulers"},
		{[]string{"-schedulers", "0"}, "-schedulers"},
		{[]string{"-schedulers", "1025"}, "-schedulers"},
		{[]string{"-fail-rate", "2"}, "-fail-rate"},
		{[]string{"-fail-rate", "-0.01"}, "-fail-rate"},
		{[]string{"-fail-rate", "NaN"}, "-fail-rate"},
		{[]string{"-duration", "-1s"}, "-duration"},
		{[]string{"-duration", "0"}, "-duration"},
		{[]string{"-duration", "25h"}, "-duration"},
		{[]string{"-sample", "0"}, "-sample"},
		{[]string{"-sample", "5001"}, "-sample"},
		{[]string{"-nodes", "10", "-sample", "11"}, "-sample"},
		{[]string{"-shards", "-2"}, "-shards"},
		{[]string{"-shards", "1025"}, "-shards"},
		{[]string{"-confirm-delay", "1h"}, "-confirm-delay"},
		{[]string{"-confirm-delay", "5s"}, "-confirm-delay"}, // = -duration
		{[]string{"-confirm-delay", "-1ms"}, "-confirm-delay"},
		{[]string{"-decision-time", "0"}, "-decision-time"},
		{[]string{"-decision-time", "2s"}, "-decision-time"},
		{[]string{"-duration", "1ms", "-confirm-delay", "0", "-decision-time", "2ms"}, "-decision-time"},
		{[]string{"-audit-every", "-1ms"}, "-audit-every"},
		{[]string{"-audit-every", "6s"}, "-audit-every"}, // longer than the run
		// Churn, bindings, the informer, readers and expiry.
		{[]string{"-pod-update-rate", "-1"}, "-pod-update-rate"},
		{[]string{"-pod-update-rate", "NaN"}, "-pod-update-rate"},
		{[]string{"-pod-delete-rate", "-1"}, "-pod-delete-rate"},
		{[]string{"-node-add-rate", "2000000"}, "-node-add-rate"},
		{[]string{"-node-remove-rate", "-0.5"}, "-node-remove-rate"},
		{[]string{"-drain-rate", "-1"}, "-drain-rate"},
		{[]string{"-drain-rate", "1", "-drain-grace", "0"}, "-drain-grace"},
		{[]string{"-node-remove-rate", "1", "-drain-grace", "0"}, "-drain-grace"},
		{[]string{"-drain-grace", "-1ms"}, "-drain-grace"},
		{[]string{"-drain-for", "-1ms"}, "-drain-for"},
		{[]string{"-not-ready-rate", "-2"}, "-not-ready-rate"},
		{[]string{"-not-ready-rate", "1", "-not-ready-for", "0"}, "-not-ready-for"},
		{[]string{"-zone-move-rate", "Inf"}, "-zone-move-rate"},
		{[]string{"-zone-outage-for", "1s"}, "-zone-outage-for"},
		{[]string{"-zone-outage-every", "1s"}, "-zone-outage-for"},
		{[]string{"-zone-outage-every", "1s", "-zone-outage-for", "1s"}, "-zone-outage-for"},
		{[]string{"-zone-outage-every", "1s", "-zone-outage-for", "100ms", "-zones", "1"}, "-zone-outage-every"},
		{[]string{"-zone-outage-every", "-1s"}, "-zone-outage-every"},
		{[]string{"-bind-latency", "-1ms"}, "-bind-latency"},
		{[]string{"-bind-latency", "5s"}, "-bind-latency"},
		{[]string{"-informer-jitter", "-1ms"}, "-informer-jitter"},
		{[]string{"-informer-jitter", "6s"}, "-informer-jitter"},
		{[]string{"-drop-for", "10ms"}, "-drop-for"},
		{[]string{"-drop-every", "1s"}, "-drop-for"},
		{[]string{"-drop-every", "1s", "-drop-for", "2s"}, "-drop-for"},
		{[]string{"-drop-every", "-1s"}, "-drop-every"},
		{[]string{"-readers", "-1"}, "-readers"},
		{[]string{"-readers", "1025"}, "-readers"},
		{[]string{"-readers", "1", "-deterministic"}, "-readers"},
		{[]string{"-read-nodes", "0"}, "-read-nodes"},
		{[]string{"-full-snapshot-every", "-1s"}, "-full-snapshot-every"},
		{[]string{"-full-snapshot-every", "1s", "-deterministic"}, "-full-snapshot-every"},
		{[]string{"-assume-ttl", "-1s"}, "-assume-ttl"},
		{[]string{"-assume-ttl", "1s", "-deterministic"}, "-assume-ttl"},
		{[]string{"-expiry-pods", "10"}, "-expiry-pods"},
		{[]string{"-expiry-pods", "-1"}, "-expiry-pods"},
		{[]string{"-expiry-pods", "2000000", "-assume-ttl", "1s"}, "-expiry-pods"},
		{[]string{"-expiry-at", "1s"}, "-expiry-at"},
		{[]string{"-expiry-pods", "10", "-assume-ttl", "1s", "-expiry-at", "5s"}, "-expiry-at"},
		{[]string{"-deterministic", "-audit-every", "6s"}, "-audit-every"},
		{[]string{"-deterministic", "-audit-every", "100us"}, "-audit-every"}, // 50,000 audits
		{[]string{"-no-such-flag"}, "no-such-flag"},
		{[]string{"stray"}, "stray"},
		{[]string{"-json", filepath.Join(t.TempDir(), "missing", "r.json")}, "-json"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := realMain(context.Background(), tc.args, &stdout, &stderr, false, hooks{
				beforeAudit: func(*schedcache.Cache, *Truth) { t.Error("the run started") },
			})
			require.Equal(t, exitUsage, code, "stderr: %s", stderr.String())
			require.Contains(t, stderr.String(), tc.want)
			require.Empty(t, stdout.String())
		})
	}
}

// The boundaries themselves are accepted.
func TestValidationBoundaries(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-fail-rate", "0"}, {"-fail-rate", "1"},
		{"-pods-per-node", "0"}, {"-pods-per-node", "110"},
		{"-nodes", "1", "-sample", "1"}, {"-sample", "5000"}, {"-nodes", "10"},
		{"-shards", "0"}, {"-shards", "1024"}, {"-schedulers", "1024"},
		{"-confirm-delay", "0"}, {"-confirm-delay", "4999ms"},
		{"-duration", "24h"}, {"-nodes", "200000", "-pods-per-node", "30"},
		{"-deterministic", "-decision-time", "1s", "-duration", "1s", "-confirm-delay", "0"},
		{"-deterministic", "-audit-every", "5s"}, {"-deterministic", "-audit-every", "500us"}, {"-audit-every", "1s"},
		{"-drain-rate", "1", "-drain-grace", "1ns"}, {"-zone-outage-every", "1s", "-zone-outage-for", "999ms"},
		{"-drop-every", "1s", "-drop-for", "999ms"}, {"-readers", "1024"}, {"-bind-latency", "4999ms"},
		{"-expiry-pods", "1000000", "-assume-ttl", "1s", "-expiry-at", "4999ms"}, {"-deterministic", "-informer-jitter", "1s"},
	} {
		_, err := parseFlags(args, &bytes.Buffer{})
		require.NoError(t, err, "%v", args)
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, realMain(context.Background(), []string{"-h"}, &stdout, &stderr, false, hooks{}))
	require.Contains(t, stderr.String(), "-deterministic")
	require.Empty(t, stdout.String())
	var ue *UsageError
	_, err := parseFlags([]string{"-shards", "-2"}, &bytes.Buffer{})
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "shards", ue.Flag)
	require.True(t, errors.Is(err, ErrUsage))
}

// A cluster whose initial pods over-fill its nodes is refused before the
// scheduling phase, with exit code 2.
func TestOverFullClusterRefused(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := realMain(context.Background(), []string{"-nodes", "20", "-pods-per-node", "110", "-duration", "100ms"}, &stdout, &stderr, false, hooks{
		beforeAudit: func(*schedcache.Cache, *Truth) { t.Error("the run started") },
	})
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr.String(), "-pods-per-node")
	require.Contains(t, stderr.String(), "over-fill")
}

// A few over-full nodes (the generator's tail at 50,000 nodes) are a
// warning; more than 1% of the nodes is a refusal.
func TestRefuseOverfull(t *testing.T) {
	require.False(t, refuseOverfull(0, 10))
	require.False(t, refuseOverfull(2, 50000))
	require.False(t, refuseOverfull(500, 50000))
	require.True(t, refuseOverfull(501, 50000))
	require.True(t, refuseOverfull(1, 1))
	require.True(t, refuseOverfull(1, 99))
	require.False(t, refuseOverfull(1, 100))
}

func detArgs(seed string) []string {
	return []string{"-deterministic", "-nodes", "60", "-pods-per-node", "10", "-duration", "150ms",
		"-confirm-delay", "2ms", "-seed", seed, "-fail-rate", "0.05", "-sample", "10", "-json", "-"}
}

func runJSON(t *testing.T, args []string, h hooks) (int, *JSONReport, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := realMain(context.Background(), args, &stdout, &stderr, false, h)
	var rep JSONReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	return code, &rep, stderr.String()
}

// One seed reproduces a deterministic run event for event: two runs give
// the same digest and counts; another seed gives another digest.
func TestDeterministicDigest(t *testing.T) {
	code1, a, _ := runJSON(t, detArgs("7"), hooks{})
	code2, b, _ := runJSON(t, detArgs("7"), hooks{})
	code3, c, _ := runJSON(t, detArgs("8"), hooks{})
	code4, d, _ := runJSON(t, append(detArgs("7"), "-shards", "3"), hooks{})
	require.Equal(t, exitOK, code4)
	require.Equal(t, a.Digest, d.Digest, "the shard count does not change the run")
	require.Equal(t, exitOK, code1)
	require.Equal(t, exitOK, code2)
	require.Equal(t, exitOK, code3)
	require.Equal(t, "deterministic", a.Mode)
	require.True(t, strings.HasPrefix(a.Digest, "sha256:"), a.Digest)
	require.Equal(t, a.Digest, b.Digest)
	require.Equal(t, a.Counts, b.Counts)
	require.NotEqual(t, a.Digest, c.Digest)
	// 4 schedulers x 150 ms / 250 µs = 2,400 decisions.
	require.Equal(t, int64(2400), a.Counts.Scheduled+a.Counts.FailedBindings+a.Counts.Unschedulable)
	require.Positive(t, a.Counts.FailedBindings)
	require.Equal(t, a.Counts.Scheduled, a.Counts.Adds)
	require.True(t, a.Audit.OK)
	require.True(t, a.Consistent)
}

// The JSON report carries scheduler_perf-like data items and the run's
// environment.
func TestJSONReport(t *testing.T) {
	args := []string{"-deterministic", "-nodes", "40", "-pods-per-node", "5", "-duration", "2500ms",
		"-decision-time", "5ms", "-schedulers", "1", "-confirm-delay", "1ms", "-sample", "5", "-json", "-"}
	code, rep, _ := runJSON(t, args, hooks{})
	require.Equal(t, exitOK, code)
	require.Equal(t, "v1", rep.Version)
	require.Equal(t, 40, rep.Config.Nodes)
	require.Positive(t, rep.Environment.GOMAXPROCS)
	require.NotEmpty(t, rep.Environment.GoVersion)
	require.Positive(t, rep.Memory.HeapInUseBytes)
	tp := rep.DataItems[0]
	require.Equal(t, "SchedulingThroughput", tp.Labels["Metric"])
	require.Equal(t, "pods/s", tp.Unit)
	require.Equal(t, "2", tp.Labels["Windows"], "2 full 1 s windows in 2.5 s")
	// One scheduler deciding every 5 ms: 200 decisions per second, a few
	// of which fail to bind (1%).
	for _, k := range []string{"Average", "Perc50", "Perc90", "Perc95", "Perc99"} {
		require.InDelta(t, 198, tp.Data[k], 8, k)
	}
	metrics := map[string]bool{}
	for _, d := range rep.DataItems {
		metrics[d.Labels["Metric"]] = true
	}
	require.True(t, metrics["SchedulingAttemptDuration"] && metrics["AssumePodDuration"] && metrics["SnapshotReadDuration"], "%v", metrics)

	path := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, realMain(context.Background(), append(args[:len(args)-2], "-json", path), &stdout, &stderr, false, hooks{}))
	require.Contains(t, stdout.String(), "consistent: true")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var fromFile JSONReport
	require.NoError(t, json.Unmarshal(data, &fromFile))
	require.Equal(t, rep.Digest, fromFile.Digest)
}

// A pod removed from the cache behind the simulation's back, or a ground
// truth that says otherwise than the cache, is reported by the audit with
// exit code 3.
func TestAuditDetectsDivergence(t *testing.T) {
	logger := klog.Background()
	cases := map[string]func(t *testing.T, c *schedcache.Cache, truth *Truth){
		"pod removed from the cache": func(t *testing.T, c *schedcache.Cache, truth *Truth) {
			var victim podRecord
			truth.pods.Range(func(_ string, r podRecord) bool { victim = r; return !r.Bound })
			require.NoError(t, c.RemovePod(logger, victim.Pod))
		},
		"truth moved a pod": func(t *testing.T, c *schedcache.Cache, truth *Truth) {
			var victim podRecord
			truth.pods.Range(func(_ string, r podRecord) bool { victim = r; return !r.Bound })
			other := "node-00001"
			if victim.Node == other {
				other = "node-00002"
			}
			truth.Bind(victim.Pod, other)
		},
		"truth forgot a pod": func(t *testing.T, c *schedcache.Cache, truth *Truth) {
			var victim podRecord
			truth.pods.Range(func(_ string, r podRecord) bool { victim = r; return !r.Bound })
			truth.Delete(victim.Pod)
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			code, rep, stderr := runJSON(t, detArgs("7"), hooks{beforeAudit: func(c *schedcache.Cache, truth *Truth) { plant(t, c, truth) }})
			require.Equal(t, exitDivergence, code)
			require.Contains(t, stderr, "diverges")
			require.False(t, rep.Audit.OK)
			require.False(t, rep.Consistent)
			require.GreaterOrEqual(t, rep.Audit.Divergences, 2, "the pod and its node's totals: %v", rep.Audit.Examples)
			require.NotEmpty(t, rep.Audit.Examples)
		})
	}
}

// A run that schedules nothing says so.
func TestWarnsWhenNothingScheduled(t *testing.T) {
	cfg := smallConfig()
	cfg.Deterministic, cfg.FailRate, cfg.Duration, cfg.Sample = true, 1, 20*time.Millisecond, 10
	rep, err := run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.Zero(t, rep.Scheduled)
	require.Len(t, rep.Warnings, 1)
	require.Contains(t, rep.Warnings[0], "no pod was scheduled")
	var out bytes.Buffer
	rep.Print(&out)
	require.Contains(t, out.String(), "warning:   no pod was scheduled")
	cfg.FailRate = 0
	rep, err = run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.Positive(t, rep.Scheduled)
	require.Empty(t, rep.Warnings)
}

// Audits during a deterministic run hold too, with bindings in flight
// (assumed in the cache, not yet delivered), and do not change the run; a
// divergence planted mid-run is caught by the next audit.
func TestMidRunAudit(t *testing.T) {
	_, plain, _ := runJSON(t, detArgs("7"), hooks{})
	calls, inFlight := 0, 0
	code, rep, _ := runJSON(t, append(detArgs("7"), "-audit-every", "10ms"), hooks{beforeAudit: func(c *schedcache.Cache, _ *Truth) {
		calls++
		c.Snapshot().RangePods(func(_ string, e snapshot.PodEntry) bool {
			if e.Assumed {
				inFlight++
			}
			return true
		})
	}})
	require.Equal(t, exitOK, code)
	require.NotNil(t, rep.MidAudits)
	require.Equal(t, 14, rep.MidAudits.Count, "10, 20, ... 140 ms of a 150 ms run")
	require.Zero(t, rep.MidAudits.Failed)
	require.Equal(t, 15, calls, "14 during the run and one at the end")
	require.Positive(t, inFlight, "the audits saw assumed pods")
	require.Equal(t, plain.Digest, rep.Digest, "audits do not change the run")

	calls = 0
	code, rep, stderr := runJSON(t, append(detArgs("7"), "-audit-every", "10ms"), hooks{beforeAudit: func(c *schedcache.Cache, truth *Truth) {
		calls++
		if calls == 3 {
			var victim podRecord
			truth.pods.Range(func(_ string, r podRecord) bool { victim = r; return !r.Bound })
			truth.Delete(victim.Pod)
		}
	}})
	require.Equal(t, exitDivergence, code, stderr)
	require.NotNil(t, rep.MidAudits.FirstFail)
	require.InDelta(t, 0.030, rep.MidAudits.FirstFailAt, 1e-9)
	require.GreaterOrEqual(t, rep.MidAudits.FirstFail.Divergences, 2)
	require.False(t, rep.Consistent)
}

// Progress lines go to stderr on a terminal only.
func TestProgressOnlyOnTerminal(t *testing.T) {
	args := []string{"-deterministic", "-nodes", "30", "-pods-per-node", "5", "-duration", "20ms", "-sample", "5"}
	for _, tty := range []bool{false, true} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, exitOK, realMain(context.Background(), args, &stdout, &stderr, tty, hooks{}))
		if tty {
			require.Contains(t, stderr.String(), "building cluster")
			require.Contains(t, stderr.String(), "auditing")
		} else {
			require.Empty(t, stderr.String())
		}
		require.Contains(t, stdout.String(), "consistent: true")
	}
}
