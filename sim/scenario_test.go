package sim

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/workload"
)

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

const goodScenario = `
cluster: {nodes: 60, podsPerNode: 10, seed: 3}
workload: {schedulers: 2, sample: 20, bindingFailureRate: 0.01, confirmDelay: 1ms}
run: {duration: 300ms}
arrivals: {mode: closed}
`

// Every bad scenario file is refused before any work, with exit code 2
// and a message naming the field.
func TestScenarioRejects(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"unknown top-level field", goodScenario + "extra: 1\n", `unknown field "extra"`},
		{"unknown nested field", "cluster: {nodes: 60, podz: 3}\nrun: {duration: 1s}\n", `unknown field "podz"`},
		{"run missing", "cluster: {nodes: 60}\n", "run: missing"},
		{"duration and pods missing", "cluster: {nodes: 60}\nrun: {}\n", "run.duration: the run needs a length"},
		{"negative duration", "run: {duration: -1s}\n", "run.duration: must not be negative"},
		{"bad duration", "run: {duration: soon}\n", "run.duration: not a duration"},
		{"negative pods", "run: {pods: -5}\n", "run.pods: must not be negative"},
		{"zero nodes", "cluster: {nodes: 0}\nrun: {duration: 1s}\n", "cluster.nodes: must be at least 1"},
		{"both pod counts", "cluster: {nodes: 60, podsPerNode: 3, initialPods: 10}\nrun: {duration: 1s}\n", "cluster: give podsPerNode or initialPods"},
		{"too many initial pods", "cluster: {nodes: 2, initialPods: 1000}\nrun: {duration: 1s}\n", "cluster.initialPods: 1000 pods exceed"},
		{"negative rate", "run: {duration: 1s}\narrivals: {mode: poisson, rate: -3}\n", "arrivals.rate: must be a positive rate"},
		{"poisson without rate", "run: {duration: 1s}\narrivals: {mode: poisson}\n", "arrivals.rate: must be a positive rate"},
		{"rate with closed loop", "run: {duration: 1s}\narrivals: {mode: closed, rate: 5}\n", "arrivals.rate: only with -arrival poisson"},
		{"burst without size", "run: {duration: 1s}\narrivals: {mode: burst, burstInterval: 100ms}\n", "arrivals.burstSize: must be at least 1"},
		{"negative burst interval", "run: {duration: 1s}\narrivals: {mode: burst, burstSize: 5, burstInterval: -1s}\n", "arrivals.burstInterval: must be positive"},
		{"unknown mode", "run: {duration: 1s}\narrivals: {mode: trickle}\n", `arrivals.mode: must be closed, poisson or burst, got "trickle"`},
		{"mode missing", "run: {duration: 1s}\narrivals: {rate: 5}\n", "arrivals.mode: missing"},
		{"fail rate above 1", "run: {duration: 1s}\nworkload: {bindingFailureRate: 1.5}\n", "workload.bindingFailureRate: must be a fraction"},
		{"negative zones", "run: {duration: 1s}\ncluster: {zones: -1}\n", "cluster.zones"},
		{"wrong type", "run: {duration: 1s}\ncluster: {nodes: many}\n", "nodes"},
		{"not yaml", "run: [1, 2\n", "s.yaml:1: not valid YAML"},
		{"negative pod update rate", "run: {duration: 1s}\nchurn: {podUpdateRate: -1}\n", "churn.podUpdateRate: must be a rate"},
		{"negative pod delete rate", "run: {duration: 1s}\nchurn: {podDeleteRate: -1}\n", "churn.podDeleteRate: must be a rate"},
		{"huge node add rate", "run: {duration: 1s}\nchurn: {nodeAddRate: 1e9}\n", "churn.nodeAddRate: must be a rate"},
		{"negative node remove rate", "run: {duration: 1s}\nchurn: {nodeRemoveRate: -3}\n", "churn.nodeRemoveRate: must be a rate"},
		{"drain without grace", "run: {duration: 1s}\nchurn: {drainRate: 1, drainGrace: 0s}\n", "churn.drainGrace: must be positive"},
		{"bad drain grace", "run: {duration: 1s}\nchurn: {drainGrace: later}\n", "churn.drainGrace: not a duration"},
		{"negative drain for", "run: {duration: 1s}\nchurn: {drainFor: -1s}\n", "churn.drainFor: must not be negative"},
		{"not ready without duration", "run: {duration: 1s}\nchurn: {notReadyRate: 2, notReadyFor: 0s}\n", "churn.notReadyFor: must be positive"},
		{"negative zone move rate", "run: {duration: 1s}\nchurn: {zoneMoveRate: -1}\n", "churn.zoneMoveRate"},
		{"outage longer than its period", "run: {duration: 1s}\nchurn: {zoneOutageEvery: 1s, zoneOutageFor: 2s}\n", "churn.zoneOutageFor: 2s must be shorter"},
		{"outage for without every", "run: {duration: 1s}\nchurn: {zoneOutageFor: 2s}\n", "churn.zoneOutageFor: needs -zone-outage-every"},
		{"negative bind latency", "run: {duration: 1s}\nworkload: {bindLatency: -1ms}\n", "workload.bindLatency: must not be negative"},
		{"negative jitter", "run: {duration: 1s}\ninformer: {jitter: -1ms}\n", "informer.jitter: must not be negative"},
		{"drop for without every", "run: {duration: 1s}\ninformer: {dropFor: 10ms}\n", "informer.dropFor: needs -drop-every"},
		{"drop window too long", "run: {duration: 1s}\ninformer: {dropEvery: 100ms, dropFor: 100ms}\n", "informer.dropFor: 100ms must be shorter"},
		{"unknown informer field", "run: {duration: 1s}\ninformer: {relist: true}\n", `unknown field "relist"`},
		{"negative readers", "run: {duration: 1s}\nreaders: {count: -1}\n", "readers.count"},
		{"zero read nodes", "run: {duration: 1s}\nreaders: {count: 1, nodes: 0}\n", "readers.nodes"},
		{"bad full snapshot period", "run: {duration: 1s}\nreaders: {fullSnapshotEvery: often}\n", "readers.fullSnapshotEvery: not a duration"},
		{"expiry without ttl", "run: {duration: 1s}\nexpiry: {pods: 10}\n", "expiry.pods: needs -assume-ttl"},
		{"expiry after the run", "run: {duration: 1s}\nexpiry: {pods: 10, ttl: 1s, at: 2s}\n", "expiry.at: 2s is not within the run"},
		{"negative audit period", "run: {duration: 1s, auditEvery: -1s}\n", "run.auditEvery: must not be negative"},
		{"allocatable cpu not a quantity", "run: {duration: 1s}\ncluster: {allocatable: {cpu: lots}}\n", `cluster.allocatable.cpu: not a quantity`},
		{"allocatable cpu zero", "run: {duration: 1s}\ncluster: {allocatable: {cpu: 0}}\n", `cluster.allocatable.cpu: must be positive`},
		{"allocatable memory negative", "run: {duration: 1s}\ncluster: {allocatable: {memory: -1Gi}}\n", `cluster.allocatable.memory: must be positive`},
		{"allocatable memory huge", "run: {duration: 1s}\ncluster: {allocatable: {memory: 1Ei}}\n", `cluster.allocatable.memory: at most`},
		{"allocatable cpu huge", "run: {duration: 1s}\ncluster: {allocatable: {cpu: 1P}}\n", `cluster.allocatable.cpu: at most`},
		{"allocatable pods zero", "run: {duration: 1s}\ncluster: {allocatable: {pods: 0}}\n", `cluster.allocatable.pods: must be 1 to 65536`},
		{"allocatable pods too many", "run: {duration: 1s}\ncluster: {allocatable: {pods: 70000}}\n", `cluster.allocatable.pods: must be 1 to 65536`},
		{"pods per node over allocatable pods", "run: {duration: 1s}\ncluster: {nodes: 10, podsPerNode: 20, allocatable: {pods: 10}}\n", `cluster.podsPerNode: 20 exceeds the node pod capacity (10)`},
		{"initial pods over allocatable pods", "run: {duration: 1s}\ncluster: {nodes: 10, initialPods: 200, allocatable: {pods: 10}}\n", `cluster.initialPods: 200 pods exceed the pod capacity of 10 nodes (10 each)`},
		{"unknown allocatable field", "run: {duration: 1s}\ncluster: {allocatable: {gpu: 1}}\n", `unknown field "gpu"`},
		{"image pool too large", "run: {duration: 1s}\ncluster: {images: {poolSize: 201}}\n", `cluster.images.poolSize: must be 0 to 200`},
		{"images per node over pool", "run: {duration: 1s}\ncluster: {images: {perNode: 5, poolSize: 3}}\n", `cluster.images.perNode: must be 0 to poolSize (3)`},
		{"negative images per node", "run: {duration: 1s}\ncluster: {images: {perNode: -1}}\n", `cluster.images.perNode`},
		{"taint effect", "run: {duration: 1s}\ncluster: {taints: [{key: a, effect: Never, fraction: 0.1}]}\n", `cluster.taints[0].effect: must be NoSchedule, PreferNoSchedule or NoExecute`},
		{"taint fraction", "run: {duration: 1s}\ncluster: {taints: [{key: a, effect: NoSchedule, fraction: 1.5}]}\n", `cluster.taints[0].fraction: must be a fraction`},
		{"taint key", "run: {duration: 1s}\ncluster: {taints: [{key: 'bad key', effect: NoSchedule, fraction: 0.5}]}\n", `cluster.taints[0]: key "bad key"`},
		{"label fraction", "run: {duration: 1s}\ncluster: {labels: [{key: a, value: b, fraction: -0.1}]}\n", `cluster.labels[0].fraction: must be a fraction`},
		{"label value", "run: {duration: 1s}\ncluster: {labels: [{key: a, value: 'no spaces', fraction: 0.1}]}\n", `cluster.labels[0]: value "no spaces"`},
		{"unschedulable fraction", "run: {duration: 1s}\ncluster: {unschedulable: 2}\n", `cluster.unschedulable: must be a fraction`},
		{"pod mix weight", "run: {duration: 1s}\npodMix: [{weight: 0}]\n", `podMix[0].weight: must be 1 to 1000000`},
		{"pod mix containers", "run: {duration: 1s}\npodMix: [{containers: 4}]\n", `podMix[0].containers: need 1 <= min <= max <= 3`},
		{"pod mix cpu", "run: {duration: 1s}\npodMix: [{cpu: {min: 2, max: 1}}]\n", `podMix[0].cpu: min 2 is more than max 1`},
		{"pod mix cpu zero", "run: {duration: 1s}\npodMix: [{cpu: 0}]\n", `podMix[0].cpu.max: must be positive`},
		{"pod mix memory", "run: {duration: 1s}\npodMix: [{memory: lots}]\n", `podMix[0].memory.min: not a quantity`},
		{"pod mix memory huge", "run: {duration: 1s}\npodMix: [{memory: 100Ti}]\n", `podMix[0].memory.max: too large`},
		{"pod mix range field", "run: {duration: 1s}\npodMix: [{cpu: {low: 1}}]\n", `unknown field "low"`},
		{"toleration operator", "run: {duration: 1s}\npodMix: [{tolerations: [{key: a, operator: Maybe}]}]\n", `podMix[0].tolerations[0].operator: must be Equal or Exists`},
		{"toleration exists with value", "run: {duration: 1s}\npodMix: [{tolerations: [{key: a, operator: Exists, value: b}]}]\n", `podMix[0].tolerations[0].value: must be empty with operator Exists`},
		{"toleration empty key", "run: {duration: 1s}\npodMix: [{tolerations: [{value: b}]}]\n", `podMix[0].tolerations[0].key: an empty key`},
		{"toleration effect", "run: {duration: 1s}\npodMix: [{tolerations: [{key: a, effect: Soon}]}]\n", `podMix[0].tolerations[0].effect`},
		{"node selector", "run: {duration: 1s}\npodMix: [{nodeSelector: {'a b': c}}]\n", `podMix[0].nodeSelector: key "a b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeScenario(t, tc.body)
			_, err := parseFlags([]string{"-scenario", p}, io.Discard)
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrUsage), "%v", err)
			require.Contains(t, err.Error(), tc.want)
			var stderr strings.Builder
			code := realMain(context.Background(), []string{"-scenario", p}, io.Discard, &stderr, false, hooks{})
			require.Equal(t, exitUsage, code)
			require.Contains(t, stderr.String(), tc.want)
		})
	}
	_, err := parseFlags([]string{"-scenario", filepath.Join(t.TempDir(), "none.yaml")}, io.Discard)
	require.ErrorIs(t, err, ErrUsage)
	_, err = parseFlags([]string{"-preset", "nope"}, io.Discard)
	require.ErrorIs(t, err, ErrUsage)
	require.Contains(t, err.Error(), "unknown preset")
	_, err = parseFlags([]string{"-preset", "w3", "-scenario", writeScenario(t, goodScenario)}, io.Discard)
	require.ErrorIs(t, err, ErrUsage)
}

// A scenario sets the configuration; flags given explicitly override it.
func TestScenarioAndFlags(t *testing.T) {
	p := writeScenario(t, goodScenario)
	cfg, err := parseFlags([]string{"-scenario", p}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 60, cfg.Nodes)
	require.Equal(t, 10, cfg.PodsPerNode)
	require.Equal(t, int64(3), cfg.Seed)
	require.Equal(t, 20, cfg.Sample)
	require.Equal(t, 300*time.Millisecond, cfg.Duration)
	require.Equal(t, arrClosed, cfg.Arrival)

	cfg, err = parseFlags([]string{"-scenario", p, "-seed", "9", "-schedulers", "3", "-arrival", "poisson", "-rate", "100"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, int64(9), cfg.Seed)
	require.Equal(t, 3, cfg.Schedulers)
	require.Equal(t, 60, cfg.Nodes, "the file's value stays where no flag is given")
	require.Equal(t, arrPoisson, cfg.Arrival)

	// A flag fixing the file is not enough: the file itself is validated.
	bad := writeScenario(t, "cluster: {nodes: 0}\nrun: {duration: 1s}\n")
	_, err = parseFlags([]string{"-scenario", bad, "-nodes", "5"}, io.Discard)
	require.ErrorIs(t, err, ErrUsage)
	// A flag breaking a good file is refused by its name.
	_, err = parseFlags([]string{"-scenario", p, "-rate", "5"}, io.Discard)
	require.ErrorContains(t, err, "-rate: only with -arrival poisson")
}

// Every preset loads and validates, and -list-presets names them all.
func TestPresetsValidate(t *testing.T) {
	names := presetNames()
	require.Subset(t, names, []string{"standard", "scheduling-basic-5000", "w3", "open-poisson"})
	for _, n := range names {
		cfg, err := parseFlags([]string{"-preset", n}, io.Discard)
		require.NoError(t, err, n)
		require.NoError(t, cfg.Validate(), n)
		require.Equal(t, "preset "+n, cfg.Scenario)
	}
	std, err := parseFlags([]string{"-preset", "standard"}, io.Discard)
	require.NoError(t, err)
	def := defaultConfig()
	def.Scenario = std.Scenario
	def.origins = std.origins // where the settings came from, for errors
	require.Equal(t, def, std, "the standard preset is the default run")
	sb, err := parseFlags([]string{"-preset", "scheduling-basic-5000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 5000, sb.Nodes)
	require.Equal(t, 1000, sb.InitialPods)
	require.Zero(t, sb.PodsPerNode, "the total replaces the default per-node count")
	require.Equal(t, int64(10000), sb.Pods)
	require.Zero(t, sb.Duration)
	// scheduler_perf's node-default.yaml and pod-default.yaml.
	require.NotNil(t, sb.Shape)
	require.Equal(t, workload.Shape{CPUMilli: 4000, MemoryBytes: 32 << 30, MaxPods: 110, Images: &workload.ImageShape{},
		PodMix: []workload.PodTemplate{{Weight: 1, Plain: true, Containers: workload.Range{Min: 1, Max: 1},
			CPUMilli: workload.Range{Min: 100, Max: 100}, MemoryBytes: workload.Range{Min: 500 << 20, Max: 500 << 20}}}}, *sb.Shape)
	require.Equal(t, 1, sb.Zones)
	op, err := parseFlags([]string{"-preset", "open-poisson"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, arrPoisson, op.Arrival)
	require.Equal(t, 20000.0, op.Rate)

	var out strings.Builder
	require.Equal(t, exitOK, realMain(context.Background(), []string{"-list-presets"}, &out, io.Discard, false, hooks{}))
	for _, n := range names {
		require.Contains(t, out.String(), n)
	}
	require.NotContains(t, out.String(), "invalid")
}

// initialPods spreads a total over the nodes; zones relabel the nodes.
func TestInitialPodsAndZones(t *testing.T) {
	cfg := smallConfig()
	cfg.InitialPods, cfg.Zones = 100, 4
	cl := buildCluster(cfg)
	require.Len(t, cl.Pods, 100)
	perNode := map[string]int{}
	for _, p := range cl.Pods {
		perNode[p.Spec.NodeName]++
	}
	for n, k := range perNode {
		require.LessOrEqual(t, k, 2, n)
	}
	zones := map[string]int{}
	for _, n := range cl.Nodes {
		zones[n.Labels[v1.LabelTopologyZone]]++
	}
	require.Equal(t, map[string]int{"zone-0": 15, "zone-1": 15, "zone-2": 15, "zone-3": 15}, zones)
}

// A pod-count run stops once that many pods are scheduled, in both modes.
func TestPodCountStop(t *testing.T) {
	for _, det := range []bool{true, false} {
		cfg := smallConfig()
		cfg.Duration, cfg.Pods, cfg.Deterministic, cfg.InitialPods, cfg.KeepPods = 0, 300, det, 100, det
		require.NoError(t, cfg.Validate())
		rep, err := run(context.Background(), cfg, nil, hooks{})
		require.NoError(t, err)
		require.Equal(t, "pods", rep.Stopped)
		require.True(t, rep.Consistent, "%+v", rep.Audit)
		require.Equal(t, 100, rep.InitialPods)
		if det {
			require.Equal(t, int64(300), rep.Scheduled, "the deterministic run stops at the count exactly")
			require.Equal(t, 100+300, rep.FinalPods, "-keep-pods: no pod deleted")
			require.Zero(t, rep.Removes)
			// 2 schedulers, 250µs a decision, 1% failures: about 38 ms.
			require.Less(t, rep.Elapsed, time.Second)
		} else {
			require.GreaterOrEqual(t, rep.Scheduled, int64(300))
			require.LessOrEqual(t, rep.Scheduled, int64(300+cfg.Schedulers))
		}
	}
}

func poissonConfig(seed int64) Config {
	cfg := smallConfig()
	cfg.Seed, cfg.Deterministic, cfg.Arrival, cfg.Rate = seed, true, arrPoisson, 5000
	cfg.Duration = 400 * time.Millisecond
	return cfg
}

// Poisson arrivals in virtual time: the same seed gives the same digest,
// another seed another; the queue is drained by the schedulers.
func TestPoissonDeterministic(t *testing.T) {
	a, err := run(context.Background(), poissonConfig(1), nil, hooks{})
	require.NoError(t, err)
	b, err := run(context.Background(), poissonConfig(1), nil, hooks{})
	require.NoError(t, err)
	c, err := run(context.Background(), poissonConfig(2), nil, hooks{})
	require.NoError(t, err)
	require.Equal(t, a.Digest, b.Digest)
	require.NotEqual(t, a.Digest, c.Digest)
	require.True(t, a.Consistent)
	// About 2,000 arrivals in 0.4 s at 5,000/s (4 sigma is ±180).
	require.InDelta(t, 2000, a.Arrived, 200)
	require.Equal(t, a.Arrived, a.Scheduled+a.FailedBindings+a.Unschedulable+int64(a.PendingAtEnd))
	// 2 schedulers of 4,000 decisions/s keep up with 5,000/s: the queue
	// stays short and most pods wait less than one decision time.
	require.Less(t, a.PendingAtEnd, 20)
	require.Less(t, a.QueueDelay.P50, 2*cfgDecision(a))
	require.Positive(t, a.QueueDelay.Max)

	// Bursts: 100 pods every 100 ms wait up to 100/2 decisions.
	cfg := poissonConfig(1)
	cfg.Arrival, cfg.Rate, cfg.BurstSize, cfg.BurstInterval = arrBurst, 0, 100, 100*time.Millisecond
	require.NoError(t, cfg.Validate())
	d, err := run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.Equal(t, int64(400), d.Arrived)
	require.True(t, d.Consistent)
	require.Greater(t, d.QueueDelay.Max, 10*time.Millisecond)
	require.LessOrEqual(t, d.QueueDelay.Max, 13*time.Millisecond)
}

func cfgDecision(r *Report) time.Duration { return r.Config.DecisionTime }

// Open loop in real time: the arrivals goroutine stops with the run (goleak
// in TestMain) and the audit holds.
func TestPoissonRealtime(t *testing.T) {
	cfg := poissonConfig(1)
	cfg.Deterministic = false
	rep, err := run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.True(t, rep.Consistent, "%+v", rep.Audit)
	require.Positive(t, rep.Arrived)
	require.Positive(t, rep.Scheduled)
	require.LessOrEqual(t, rep.Scheduled+rep.FailedBindings+rep.Conflicts+rep.Unschedulable+int64(rep.PendingAtEnd), rep.Arrived)
	require.Positive(t, rep.QueueDelay.Max)
}

// -csv writes the header and one row per 1 s window.
func TestCSV(t *testing.T) {
	p := filepath.Join(t.TempDir(), "series.csv")
	args := []string{"-deterministic", "-nodes", "60", "-pods-per-node", "10", "-schedulers", "2", "-decision-time", "1ms",
		"-duration", "3s", "-arrival", "poisson", "-rate", "1000", "-csv", p}
	require.Equal(t, exitOK, realMain(context.Background(), args, io.Discard, io.Discard, false, hooks{}))
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.Len(t, lines, 4)
	require.Equal(t, csvHeader, lines[0])
	require.Equal(t, "time_s,scheduled,pods_per_s,pending,informer_events,attempt_p50_ms,attempt_p99_ms", lines[0])
	for i, l := range lines[1:] {
		cols := strings.Split(l, ",")
		require.Len(t, cols, 7, l)
		require.Equal(t, []string{"1.000", "2.000", "3.000"}[i], cols[0])
		require.NotEqual(t, "0.0", cols[2], "about 1,000 pods/s are scheduled: %s", l)
		require.NotEqual(t, "0", cols[4], "informer events: %s", l)
	}
}

// A pod-count run on a full cluster ends when nothing was scheduled for
// stallLimit, with a warning, instead of running for a day.
func TestPodCountStalls(t *testing.T) {
	cfg := smallConfig()
	cfg.Nodes, cfg.PodsPerNode, cfg.Sample, cfg.Deterministic = 1, 0, 1, true
	cfg.Duration, cfg.Pods, cfg.KeepPods, cfg.DecisionTime = 0, 1000, true, time.Millisecond
	require.NoError(t, cfg.Validate())
	rep, err := run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.Equal(t, "stalled", rep.Stopped)
	require.Less(t, rep.Scheduled, int64(1000))
	require.Less(t, rep.Elapsed, time.Minute)
	require.NotEmpty(t, rep.Warnings)
	require.True(t, rep.Consistent)
}

// A scenario's errors name the file, the line and the field path (issue
// 28: they were `json: unknown field "colour"` and `unsupported value:
// NaN`, with no file, line or field).
func TestScenarioErrorLines(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"unknown field in a list", "run:\n  duration: 1s\npodMix:\n- plain: true\n  colour: red\n",
			`s.yaml:5: podMix[0].colour: unknown field "colour" (known: containers, cpu, failRate, memory, name, nodeSelector, plain, runFor, tolerations, weight)`},
		{"NaN", "run:\n  duration: 1s\nworkload:\n  bindingFailureRate: .nan\n", `s.yaml:4: workload.bindingFailureRate: want a finite number, got ".nan"`},
		{"infinity", "run:\n  duration: 1s\nchurn:\n  podUpdateRate: .inf\n", `s.yaml:4: churn.podUpdateRate: want a finite number, got ".inf"`},
		{"field case", "cluster:\n  Nodes: 3\nrun:\n  duration: 1s\n", `s.yaml:2: cluster.Nodes: unknown field "Nodes" (did you mean nodes?)`},
		{"given twice", "cluster:\n  nodes: 10\n  nodes: 3\nrun:\n  duration: 1s\n", "s.yaml:3: cluster.nodes: given twice (first at line 2)"},
		{"not an integer", "run:\n  duration: 1s\ncluster:\n  nodes: many\n", `s.yaml:4: cluster.nodes: want an integer, got "many"`},
		{"not a list", "run:\n  duration: 1s\ncluster:\n  labels: {a: b}\n", "s.yaml:4: cluster.labels: want a list, got a mapping"},
		{"not a bool", "run:\n  duration: 1s\nworkload:\n  keepPods: maybe\n", `s.yaml:4: workload.keepPods: want true or false, got "maybe"`},
		{"range field", "run:\n  duration: 1s\npodMix:\n- cpu: {low: 1}\n", `s.yaml:4: podMix[0].cpu.low: unknown field "low" (known: max, min)`},
		{"syntax", "run:\n  duration: 1s\ncluster: [1, 2\n", "s.yaml:3: not valid YAML: did not find expected ',' or ']'"},
		{"invalid value", "cluster:\n  seed: 4\n  nodes: 0\nrun:\n  duration: 1s\n", "s.yaml:3: cluster.nodes: must be at least 1, got 0"},
		{"bad duration", "cluster:\n  nodes: 5\nrun:\n  duration: soon\n", `s.yaml:4: run.duration: not a duration (like 5s, 250us): "soon"`},
		{"shape field", "run:\n  duration: 1s\ncluster:\n  taints:\n  - key: a\n    effect: Never\n    fraction: 0.1\n", `s.yaml:6: cluster.taints[0].effect: must be NoSchedule`},
		{"merged mapping", "run:\n  duration: 1s\nworkload: &w\n  schedulers: 2\nreaders:\n  <<: *w\n", `s.yaml:4: readers.schedulers: unknown field "schedulers"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeScenario(t, tc.body)
			_, err := parseFlags([]string{"-scenario", p}, io.Discard)
			require.ErrorIs(t, err, ErrUsage)
			var se *ScenarioError
			require.ErrorAs(t, err, &se)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, strings.HasPrefix(err.Error(), p+":"), "%v does not start with the file", err)
		})
	}
	// Integers written as floats and YAML 1.1 booleans are taken as the
	// decoder takes them.
	cfg, err := parseFlags([]string{"-scenario", writeScenario(t, "cluster: {nodes: 1e2}\nworkload: {keepPods: yes}\nrun: {duration: 1s}\n")}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 100, cfg.Nodes)
	require.True(t, cfg.KeepPods)
}
