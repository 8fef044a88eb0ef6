package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

// phaseHead is the first three lines of the test scenarios: the cases'
// lines start at line 4.
const phaseHead = "cluster: {seed: 1, allocatable: {cpu: \"4\", memory: 32Gi, pods: 110}}\nphases:\n- createNodes: {count: 10}\n"

// A phases scenario decodes into its plan: every op, its fields and
// defaults, the first phase's nodes, deterministic mode, kept pods.
func TestPhasesDecode(t *testing.T) {
	body := phaseHead + `- name: init
  createPods:
    count: 20
    template:
      plain: true
      cpu: 100m
      memory: 500Mi
      labels: {color: green}
      priority: 7
      nodeAffinity:
      - {key: topology.kubernetes.io/zone, operator: In, values: [zone-a, zone-b]}
      podAntiAffinity:
      - {labels: {color: green}, topologyKey: kubernetes.io/hostname, namespaces: [a, b]}
      podAffinity:
      - {labels: {app: x}, topologyKey: topology.kubernetes.io/zone}
      topologySpread:
      - {maxSkew: 5, topologyKey: topology.kubernetes.io/zone, labels: {color: green}}
- barrier:
- barrier: {namespaces: [default]}
- sleep: {duration: 2s}
- deletePods: {namespace: default, count: 5}
- deletePods: {namespace: default, all: true, rate: 100}
- churn: {podUpdateRate: 10, drainRate: 1, duration: 1s}
- churn: {nodeAddRate: 1, skipWait: true}
- name: window
  startCollecting: {}
  thresholds: {maxP99: 1s}
- createPods: {count: 6, namespace: gangs, template: {gangSize: 3}}
- stopCollecting:
- name: measure
  createPods: {count: 10, namespace: m, collectMetrics: true}
  thresholds: {minThroughput: 100, maxUnschedulable: 0}
thresholds: {minScheduled: 1, maxP99: 5s}
`
	cfg, err := parseFlags([]string{"-scenario", writeScenario(t, body)}, io.Discard)
	require.NoError(t, err)
	require.True(t, cfg.Deterministic, "phases run in deterministic mode")
	require.True(t, cfg.KeepPods)
	require.Equal(t, 10, cfg.Nodes)
	require.Zero(t, cfg.PodsPerNode)
	require.Equal(t, 10, cfg.Sample, "the default sample is clamped to the first phase's nodes")
	plan := cfg.Phases
	require.NotNil(t, plan)
	var ops, names []string
	for _, p := range plan.phases {
		ops, names = append(ops, p.op), append(names, p.name)
	}
	require.Equal(t, []string{"createNodes", "createPods", "barrier", "barrier", "sleep", "deletePods", "deletePods", "churn", "churn",
		"startCollecting", "createPods", "stopCollecting", "createPods"}, ops)
	require.Equal(t, "createNodes-1", names[0], "a phase without a name is named by its op and position")
	require.Equal(t, "init", names[1])
	ph := plan.phases
	require.Equal(t, 20, ph[1].count)
	require.Equal(t, "default", ph[1].ns)
	tm := ph[1].tmpl
	require.NotNil(t, tm)
	require.Equal(t, map[string]string{"color": "green"}, tm.labels)
	require.Equal(t, int32(7), *tm.priority)
	require.Equal(t, v1.NodeSelectorOpIn, tm.affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Operator)
	require.Equal(t, []string{"a", "b"}, tm.affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].Namespaces)
	require.Equal(t, "topology.kubernetes.io/zone", tm.affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey)
	require.Equal(t, int32(5), tm.spread[0].MaxSkew)
	require.Equal(t, v1.DoNotSchedule, tm.spread[0].WhenUnsatisfiable, "the default")
	require.Nil(t, ph[2].nss)
	require.Equal(t, []string{"default"}, ph[3].nss)
	require.Equal(t, 2*time.Second, ph[4].dur)
	require.Equal(t, 5, ph[5].count)
	require.Equal(t, -1, ph[6].count)
	require.Equal(t, 100.0, ph[6].rate)
	require.Equal(t, []churnRate{{actPodUpdate, 10}, {actDrain, 1}}, ph[7].churn)
	require.True(t, plan.evict, "a drain rate makes the informer index pods by node")
	require.True(t, ph[8].skipWait)
	require.Zero(t, ph[8].dur, "churn until the run ends")
	require.Equal(t, 3, ph[10].tmpl.gang)
	// Thresholds: the workload's, with a phase's own replacing them.
	require.Equal(t, []limit{{metric: "minScheduled", value: 1}, {metric: "maxP99", value: float64(time.Second), dur: true}}, ph[9].limits)
	require.Equal(t, []limit{{metric: "minThroughput", value: 100}, {metric: "minScheduled", value: 1}, {metric: "maxUnschedulable", value: 0},
		{metric: "maxP99", value: float64(5 * time.Second), dur: true}}, ph[12].limits)
	require.True(t, ph[12].collect)
	require.Nil(t, ph[1].limits, "a phase that is not measured has none")

	// -scale sizes the first phase's nodes (and, in the run, the counts).
	cfg, err = parseFlags([]string{"-scenario", writeScenario(t, body), "-scale", "3"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 30, cfg.Nodes)
	require.Equal(t, 3, scaled(6, 0.5, 3), "gangs stay whole")
	require.Equal(t, 4, scaled(6, 0.5, 2), "rounded to whole gangs")
	require.Equal(t, 1, scaled(10, 0.01, 1), "at least one")
}

// Every bad phase field is refused with exit code 2, naming the file, the
// line and the field.
func TestPhasesRejects(t *testing.T) {
	cases := []struct{ name, lines, want string }{
		{"no op", "- name: x\n", "s.yaml:4: phases[1]: no op: give one of createNodes, createPods"},
		{"two ops", "- barrier: {}\n  sleep: {duration: 1s}\n", "s.yaml:5: phases[1].sleep: one op per phase, got barrier and sleep"},
		{"unknown op", "- wait: {}\n", `s.yaml:4: phases[1].wait: unknown field "wait" (known: barrier, churn, createNodes`},
		{"unknown field", "- createPods: {count: 1, colour: red}\n", `s.yaml:4: phases[1].createPods.colour: unknown field "colour"`},
		{"unknown template field", "- createPods:\n    count: 1\n    template: {affinity: {}}\n", `s.yaml:6: phases[1].createPods.template.affinity: unknown field "affinity"`},
		{"count missing", "- createPods: {namespace: a}\n", "s.yaml:4: phases[1].createPods: missing count: the number of pods"},
		{"count zero", "- createPods:\n    count: 0\n", "s.yaml:5: phases[1].createPods.count: must be 1 to 6000000, got 0"},
		{"count not an integer", "- createPods: {count: many}\n", `s.yaml:4: phases[1].createPods.count: want an integer, got "many"`},
		{"bad namespace", "- createPods:\n    count: 1\n    namespace: Bad_NS\n", `s.yaml:6: phases[1].createPods.namespace: "Bad_NS"`},
		{"measured and skipWait", "- createPods:\n    count: 1\n    collectMetrics: true\n    skipWait: true\n", "s.yaml:7: phases[1].createPods.skipWait: not with collectMetrics"},
		{"template cpu", "- createPods:\n    count: 1\n    template:\n      cpu: lots\n", `s.yaml:7: phases[1].createPods.template.cpu.min: not a quantity`},
		{"template label", "- createPods:\n    count: 1\n    template:\n      labels: {\"bad key\": x}\n", `s.yaml:7: phases[1].createPods.template.labels: key "bad key"`},
		{"affinity operator", "- createPods:\n    count: 1\n    template:\n      nodeAffinity:\n      - {key: a, operator: Near, values: [x]}\n", `s.yaml:8: phases[1].createPods.template.nodeAffinity[0].operator: must be In, NotIn, Exists, DoesNotExist, Gt or Lt, got "Near"`},
		{"affinity values", "- createPods:\n    count: 1\n    template:\n      nodeAffinity:\n      - {key: a, operator: In}\n", "s.yaml:8: phases[1].createPods.template.nodeAffinity[0].values: operator In needs at least one value"},
		{"affinity Gt", "- createPods:\n    count: 1\n    template:\n      nodeAffinity:\n      - {key: a, operator: Gt, values: [x]}\n", `phases[1].createPods.template.nodeAffinity[0].values[0]: operator Gt needs an integer, got "x"`},
		{"anti-affinity labels", "- createPods:\n    count: 1\n    template:\n      podAntiAffinity:\n      - {topologyKey: kubernetes.io/hostname}\n", "phases[1].createPods.template.podAntiAffinity[0].labels: empty"},
		{"anti-affinity key", "- createPods:\n    count: 1\n    template:\n      podAntiAffinity:\n      - {labels: {a: b}}\n", "phases[1].createPods.template.podAntiAffinity[0].topologyKey: missing"},
		{"anti-affinity namespace", "- createPods:\n    count: 1\n    template:\n      podAntiAffinity:\n      - {labels: {a: b}, topologyKey: k, namespaces: [Nope!]}\n", `phases[1].createPods.template.podAntiAffinity[0].namespaces[0]: "Nope!"`},
		{"spread skew", "- createPods:\n    count: 1\n    template:\n      topologySpread:\n      - {maxSkew: 0, topologyKey: k, labels: {a: b}}\n", "s.yaml:8: phases[1].createPods.template.topologySpread[0].maxSkew: must be at least 1, got 0"},
		{"spread action", "- createPods:\n    count: 1\n    template:\n      topologySpread:\n      - {topologyKey: k, whenUnsatisfiable: Maybe, labels: {a: b}}\n", `topologySpread[0].whenUnsatisfiable: must be DoNotSchedule or ScheduleAnyway, got "Maybe"`},
		{"priority type", "- createPods:\n    count: 1\n    template: {priority: high}\n", `s.yaml:6: phases[1].createPods.template.priority: want an integer, got "high"`},
		{"gang size", "- createPods:\n    count: 1\n    template: {gangSize: 0}\n", "s.yaml:6: phases[1].createPods.template.gangSize: must be 1 to 100000, got 0"},
		{"template runFor", "- createPods:\n    count: 1\n    template:\n      runFor: {fixed: soon}\n", `s.yaml:7: phases[1].createPods.template.runFor.fixed: not a duration (like 30s): "soon"`},
		{"template runFor two", "- createPods:\n    count: 1\n    template:\n      runFor: {fixed: 1s, min: 1s}\n", "s.yaml:7: phases[1].createPods.template.runFor: give one of fixed, min and max, or exponential"},
		{"template runFor order", "- createPods:\n    count: 1\n    template:\n      runFor: {min: 5s, max: 1s}\n", "s.yaml:7: phases[1].createPods.template.runFor: min 5s is more than max 1s"},
		{"template failRate", "- createPods:\n    count: 1\n    template:\n      failRate: 2\n", "s.yaml:7: phases[1].createPods.template.failRate: must be a fraction in [0, 1], got 2"},
		{"partial gang", "- createPods:\n    count: 4\n    template: {gangSize: 3}\n", "s.yaml:5: phases[1].createPods.count: 4 pods are not whole gangs of 3"},
		{"sleep without duration", "- sleep: {}\n", "s.yaml:4: phases[1].sleep: missing duration"},
		{"sleep bad duration", "- sleep: {duration: soon}\n", `s.yaml:4: phases[1].sleep.duration: not a duration (like 5s, 250ms): "soon"`},
		{"sleep negative", "- sleep:\n    duration: -1s\n", "s.yaml:5: phases[1].sleep.duration: must be positive"},
		{"delete without namespace", "- deletePods: {count: 1}\n", "s.yaml:4: phases[1].deletePods: missing namespace"},
		{"delete without count", "- deletePods: {namespace: a}\n", "s.yaml:4: phases[1].deletePods: missing count (or all: true)"},
		{"delete count and all", "- deletePods: {namespace: a, count: 1, all: true}\n", "phases[1].deletePods.all: give count or all, not both"},
		{"delete rate", "- deletePods: {namespace: a, all: true, rate: 0}\n", "phases[1].deletePods.rate: must be a rate in (0, 10000000] pods/s, got 0"},
		{"churn without rate", "- churn: {duration: 1s}\n", "s.yaml:4: phases[1].churn: no rate"},
		{"churn negative rate", "- churn: {podUpdateRate: -1, duration: 1s}\n", "phases[1].churn.podUpdateRate: must be a rate in [0, 1000000]"},
		{"churn without duration", "- churn: {podUpdateRate: 1}\n", "s.yaml:4: phases[1].churn: missing duration"},
		{"barrier namespace", "- barrier: {namespaces: [\"\"]}\n", "phases[1].barrier.namespaces[0]: empty"},
		{"start twice", "- startCollecting: {}\n- startCollecting: {}\n", "s.yaml:5: phases[2].startCollecting: phases[1] is collecting already"},
		{"stop without start", "- stopCollecting: {}\n", "s.yaml:4: phases[1].stopCollecting: no startCollecting before it"},
		{"measured inside a span", "- startCollecting: {}\n- createPods: {count: 1, collectMetrics: true}\n", "s.yaml:5: phases[2].createPods.collectMetrics: phases[1] is collecting already"},
		{"thresholds on a phase not measured", "- sleep: {duration: 1s}\n  thresholds: {minThroughput: 1}\n", "s.yaml:5: phases[1].thresholds: only on a measured phase"},
		{"empty thresholds", "- createPods: {count: 1, collectMetrics: true}\n  thresholds: {}\n", "s.yaml:5: phases[1].thresholds: empty"},
		{"threshold unknown", "- createPods: {count: 1, collectMetrics: true}\n  thresholds: {p99: 1s}\n", `s.yaml:5: phases[1].thresholds.p99: unknown field "p99"`},
		{"threshold duration", "- createPods: {count: 1, collectMetrics: true}\n  thresholds:\n    maxP99: fast\n", `s.yaml:6: phases[1].thresholds.maxP99: not a duration (like 50ms, 2s): "fast"`},
		{"threshold negative", "- createPods: {count: 1, collectMetrics: true}\n  thresholds:\n    minThroughput: -5\n", "s.yaml:6: phases[1].thresholds.minThroughput: must be 0 to 10000000 pods/s, got -5"},
		{"threshold NaN", "- createPods: {count: 1, collectMetrics: true}\n  thresholds:\n    minThroughput: .nan\n", `s.yaml:6: phases[1].thresholds.minThroughput: want a finite number, got ".nan"`},
		{"duplicate name", "- name: a\n  barrier: {}\n- name: a\n  barrier: {}\n", `s.yaml:6: phases[2].name: "a" names phases[1] already`},
		{"bad name", "- name: \"no spaces\"\n  barrier: {}\n", `s.yaml:4: phases[1].name: "no spaces"`},
		{"node label", "- createNodes:\n    count: 1\n    labels:\n    - {key: a, value: b, fraction: 2}\n", "s.yaml:7: phases[1].createNodes.labels[0].fraction: must be a fraction in [0, 1], got 2"},
		{"node count", "- createNodes: {count: 300000}\n", "phases[1].createNodes.count: at most 200000 nodes, got 300000"},
		{"workload thresholds", "thresholds: {maxP50: 0s}\n", "s.yaml:4: thresholds.maxP50: must be positive"},
		{"workload thresholds unused", "- sleep: {duration: 1s}\nthresholds: {maxP50: 1s}\n", "s.yaml:5: thresholds: no measured phase to apply them to"},
		{"podDefault plain", "- createPods: {count: 1, template: {podDefault: true, plain: true}}\n", "phases[1].createPods.template.plain: podDefault is the whole pod: drop plain"},
		{"podDefault containers", "- createPods: {count: 1, template: {podDefault: true, containers: 2}}\n", "phases[1].createPods.template.containers: podDefault is the whole pod (one container): drop containers"},
		{"podDefault nodeSelector", "- createPods: {count: 1, template: {podDefault: true, nodeSelector: {a: b}}}\n", "phases[1].createPods.template.nodeSelector: podDefault has none: use nodeAffinity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeScenario(t, phaseHead+tc.lines)
			var stderr bytes.Buffer
			code := realMain(context.Background(), []string{"-scenario", p}, io.Discard, &stderr, false, hooks{})
			require.Equal(t, exitUsage, code, stderr.String())
			_, err := parseFlags([]string{"-scenario", p}, io.Discard)
			require.ErrorIs(t, err, ErrUsage)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, strings.HasPrefix(err.Error(), p+":"), "%v does not start with the file", err)
		})
	}
	// Scenario-wide faults.
	for _, tc := range []struct{ name, body, want string }{
		{"first phase", "phases:\n- barrier: {}\n", "s.yaml:2: phases[0]: the first phase must be createNodes"},
		{"cluster nodes", "cluster: {nodes: 5}\nphases:\n- createNodes: {count: 1}\n", "s.yaml:1: cluster.nodes: not with phases: the nodes come from createNodes phases"},
		{"run pods", "run: {pods: 5}\nphases:\n- createNodes: {count: 1}\n", "s.yaml:1: run.pods: not with phases"},
		{"keep pods", "workload: {keepPods: false}\nphases:\n- createNodes: {count: 1}\n", "s.yaml:1: workload.keepPods: not with phases"},
		{"arrivals", "arrivals: {mode: poisson, rate: 5}\nphases:\n- createNodes: {count: 1}\n", "s.yaml:1: arrivals: not with phases"},
		{"thresholds without phases", "run: {duration: 1s}\nthresholds: {minThroughput: 1}\n", "s.yaml:2: thresholds: only with phases"},
		{"phases empty list", "phases: []\n", "run: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags([]string{"-scenario", writeScenario(t, tc.body)}, io.Discard)
			require.ErrorIs(t, err, ErrUsage)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// The flags that size or feed a generated run, real time, and -scale
	// without phases.
	good := writeScenario(t, phaseHead)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-nodes", "5"}, "-nodes: not with a phases scenario"},
		{[]string{"-pods", "5"}, "-pods: not with a phases scenario"},
		{[]string{"-arrival", "poisson", "-rate", "5"}, "-arrival: not with a phases scenario"},
		{[]string{"-keep-pods=false"}, "-keep-pods: not with a phases scenario"},
		{[]string{"-scale", "0"}, "-scale: must be in (0, 100], got 0"},
		{[]string{"-scale", "NaN"}, "-scale: must be in (0, 100]"},
		{[]string{"-scale", "1000"}, "-scale: must be in (0, 100]"},
		{[]string{"-scale", "30000"}, "-scale: must be in (0, 100]"},
	} {
		_, err := parseFlags(append([]string{"-scenario", good}, tc.args...), io.Discard)
		require.ErrorIs(t, err, ErrUsage, tc.args)
		require.ErrorContains(t, err, tc.want, tc.args)
	}
	// Real time runs phases, but not gangs or preemption.
	_, err := parseFlags([]string{"-scenario", good, "-deterministic=false"}, io.Discard)
	require.NoError(t, err)
	for _, tc := range []struct{ tmpl, want string }{
		{"gangSize: 2", "-deterministic: phase g: gangs (template.gangSize) run in deterministic mode only: drop -deterministic=false"},
		{"priority: 10", "-deterministic: phase g: priorities and preemption (template.priority) run in deterministic mode only: drop -deterministic=false"},
	} {
		sc := writeScenario(t, phaseHead+"- name: g\n  createPods: {count: 4, template: {plain: true, cpu: 100m, memory: 100Mi, "+tc.tmpl+"}}\n")
		_, err := parseFlags([]string{"-scenario", sc, "-deterministic=false"}, io.Discard)
		require.ErrorIs(t, err, ErrUsage, tc.tmpl)
		require.ErrorContains(t, err, tc.want)
		_, err = parseFlags([]string{"-scenario", sc}, io.Discard)
		require.NoError(t, err, "deterministic mode runs %s", tc.tmpl)
	}
	_, err = parseFlags([]string{"-scale", "0.5"}, io.Discard)
	require.ErrorContains(t, err, "-scale: only with a phases scenario")
	big := writeScenario(t, "phases:\n- createNodes: {count: 500}\n- createPods: {count: 1000000}\n")
	_, err = parseFlags([]string{"-scenario", big, "-scale", "30"}, io.Discard)
	require.ErrorContains(t, err, "-scale: 30 makes 30015000 pods and nodes in all, more than the 6000000 this tool holds")
	_, err = parseFlags([]string{"-scenario", big, "-scale", "500"}, io.Discard)
	require.ErrorContains(t, err, "-scale: must be in (0, 100]")
}

// phaseRunBody is the test workload of the brief: 50 nodes; 100 pods,
// barrier, 50 of them deleted, 100 more measured (a pod whose binding
// failed backs off 1 to 2 s, hence the loose thresholds).
const phaseRunBody = `cluster: {seed: 5, zones: 3, allocatable: {cpu: "4", memory: 32Gi, pods: 110}, images: {perNode: 0, poolSize: 0}}
workload: {schedulers: 3, sample: 20, bindingFailureRate: 0.05, confirmDelay: 2ms}
phases:
- createNodes: {count: 50}
- name: init
  createPods:
    count: 100
    namespace: init
    skipWait: true
    template: {plain: true, containers: 1, cpu: 100m, memory: 500Mi}
- barrier: {}
- deletePods: {namespace: init, count: 50}
- name: measure
  createPods:
    count: 100
    namespace: measure
    collectMetrics: true
    template: {plain: true, containers: 1, cpu: 100m, memory: 500Mi}
  thresholds: {minThroughput: 20, maxUnschedulable: 0, maxP99: 3s}
`

func phaseByName(t *testing.T, r *JSONReport, name string) JSONPhase {
	t.Helper()
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no phase %q in %+v", name, r.Phases)
	return JSONPhase{}
}

// A small multi-phase run: each phase's counts, the measured phase's
// figures, a consistent cache, and one digest for two runs and for other
// shard counts and parallelism.
func TestPhasesRun(t *testing.T) {
	p := writeScenario(t, phaseRunBody)
	code, a, stderr := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, a.Consistent)
	require.Equal(t, "phases", a.Stopped)
	require.Equal(t, 1.0, a.Config.Scale, "a phases run records its scale, 1 included")
	require.Len(t, a.Phases, 5)
	init, barrier, del, m := a.Phases[1], a.Phases[2], a.Phases[3], phaseByName(t, a, "measure")
	require.Equal(t, int64(50), a.Phases[0].Nodes)
	require.Equal(t, int64(100), init.Pods)
	require.True(t, init.Finished)
	require.Zero(t, init.EndSeconds-init.StartSeconds, "skipWait: the next phase starts at once")
	require.Equal(t, int64(100), barrier.Scheduled, "the barrier waits for the pods the init phase created")
	require.Equal(t, int64(50), del.Deleted)
	require.Equal(t, "measure", m.Namespace)
	require.True(t, m.Measured)
	require.Equal(t, int64(100), m.Pods)
	require.Equal(t, int64(100), m.Scheduled)
	require.Zero(t, m.Unschedulable)
	require.Greater(t, m.EndSeconds, m.StartSeconds)
	require.Equal(t, m.StartSeconds, del.EndSeconds)
	require.NotNil(t, m.Throughput)
	// 3 schedulers deciding every 250 µs schedule most pods within
	// milliseconds; the phase lasts until the backoff (1 to 2 s) of its
	// last failed binding is over.
	require.Greater(t, m.EndSeconds-m.StartSeconds, 1.0)
	require.Less(t, m.Latency.P50, 50.0)
	require.Positive(t, m.Latency.P50)
	require.LessOrEqual(t, m.Latency.P50, m.Latency.P99)
	require.LessOrEqual(t, m.Latency.P99, 1000*(m.EndSeconds-m.StartSeconds)+0.5, "no pod waits longer than the phase")
	require.Len(t, m.Thresholds, 3)
	for _, th := range m.Thresholds {
		require.True(t, th.OK, "%+v", th)
	}
	require.True(t, *a.ThresholdsOK)
	require.Equal(t, 150, a.Counts.FinalPods, "100 + 100 - 50 pods bound")
	require.Positive(t, a.Counts.FailedBindings, "failed bindings are retried")
	var items []string
	for _, it := range a.DataItems {
		if it.Labels["Phase"] == "measure" {
			items = append(items, it.Labels["Metric"])
		}
	}
	require.Equal(t, []string{"SchedulingThroughput", "SchedulingLatency"}, items)

	_, b, _ := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{})
	_, c, _ := runJSON(t, []string{"-scenario", p, "-json", "-", "-shards", "1"}, hooks{})
	_, d, _ := runJSON(t, []string{"-scenario", p, "-json", "-", "-shards", "5"}, hooks{})
	for _, r := range []*JSONReport{b, c, d} {
		require.Equal(t, a.Digest, r.Digest)
		require.Equal(t, a.Counts, r.Counts)
		for i := range a.Phases {
			x, y := a.Phases[i], r.Phases[i]
			require.Equal(t, x.Scheduled, y.Scheduled)
			require.Equal(t, x.StartSeconds, y.StartSeconds)
			require.Equal(t, x.EndSeconds, y.EndSeconds)
			require.Equal(t, x.Latency, y.Latency, "virtual latencies are part of the run")
		}
	}
	_, e, _ := runJSON(t, []string{"-scenario", p, "-json", "-", "-seed", "6"}, hooks{})
	require.NotEqual(t, a.Digest, e.Digest)

	var out bytes.Buffer
	require.Equal(t, exitOK, realMain(context.Background(), []string{"-scenario", p}, &out, io.Discard, false, hooks{}))
	for _, want := range []string{"phases:    5 phases (1 measured); thresholds: 3 checked, 0 violated",
		"5 createPods      measure [measured]:", "throughput ", "scheduling latency (creation to binding virtual)",
		"threshold minThroughput >= 20 pods/s: got ", "50 deleted from init"} {
		require.Contains(t, out.String(), want)
	}
}

// A violated threshold fails the run with exit code 4 after its report;
// the JSON report lists it. A threshold that holds exits 0.
func TestPhasesThresholds(t *testing.T) {
	pass := writeScenario(t, phaseRunBody)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, Main(context.Background(), []string{"-scenario", pass}, &stdout, &stderr, false), stderr.String())
	fail := writeScenario(t, strings.Replace(phaseRunBody, "minThroughput: 20,", "minThroughput: 50000, minScheduled: 101,", 1))
	stdout.Reset()
	stderr.Reset()
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	require.Equal(t, 4, Main(context.Background(), []string{"-scenario", fail, "-json", jsonPath}, &stdout, &stderr, false))
	require.Contains(t, stderr.String(), "loadgen: 2 thresholds violated: phase measure: minThroughput >= 50000 pods/s: got ")
	require.Contains(t, stderr.String(), "phase measure: minScheduled >= 101 pods: got 100")
	require.Contains(t, stdout.String(), "thresholds: 4 checked, 2 violated")
	require.Contains(t, stdout.String(), "VIOLATED")
	r := readJSONReport(t, jsonPath)
	require.False(t, *r.ThresholdsOK)
	m := phaseByName(t, r, "measure")
	got := map[string]bool{}
	for _, th := range m.Thresholds {
		got[th.Metric] = th.OK
	}
	require.Equal(t, map[string]bool{"minThroughput": false, "minScheduled": false, "maxUnschedulable": true, "maxP99": true}, got)

	// A run cut short by -duration fails its thresholds: the phase did
	// not finish.
	stderr.Reset()
	require.Equal(t, 4, Main(context.Background(), []string{"-scenario", pass, "-duration", "5ms"}, io.Discard, &stderr, false))
	require.Contains(t, stderr.String(), "phase measure: the phase did not finish")

	// An interrupted run reports its phases as they were, unfinished, and
	// exits 0 (cmd/loadgen then exits 128 + the signal): the thresholds
	// of an interrupted run fail nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stdout.Reset()
	stderr.Reset()
	require.Equal(t, 0, Main(ctx, []string{"-scenario", fail, "-json", "-"}, &stdout, &stderr, false), stderr.String())
	var ir JSONReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &ir))
	require.Equal(t, "interrupted", ir.Stopped)
	require.False(t, phaseByName(t, &ir, "measure").Finished)
	require.NotContains(t, stderr.String(), "thresholds violated")
}

// Sweeps rank a violated threshold above success, below a divergence.
func TestWorseExitThresholds(t *testing.T) {
	require.Equal(t, exitThresholds, worseExit(exitOK, exitThresholds))
	require.Equal(t, exitThresholds, worseExit(exitThresholds, exitOK))
	require.Equal(t, exitDivergence, worseExit(exitThresholds, exitDivergence))
	require.Equal(t, exitFailed, worseExit(exitFailed, exitThresholds))
}

func readJSONReport(t *testing.T, path string) *JSONReport {
	t.Helper()
	var r JSONReport
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &r))
	return &r
}

// Every perf-* preset runs at a small scale, both ways its measured pods
// can end: scheduled (all), or, for the constraints the built-in picker
// does not evaluate, scheduled as if they were not there.
func TestPhasePresets(t *testing.T) {
	for _, name := range []string{"perf-scheduling-basic", "perf-pod-anti-affinity", "perf-node-affinity", "perf-topology-spreading", "perf-preemption-basic", "perf-gang"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := parseFlags([]string{"-preset", name}, io.Discard)
			require.NoError(t, err)
			require.Equal(t, 5000, cfg.Nodes, "the presets are at 5,000 nodes")
			code, r, stderr := runJSON(t, []string{"-preset", name, "-scale", "0.01", "-json", "-"}, hooks{})
			require.Equal(t, exitOK, code, stderr)
			require.True(t, r.Consistent)
			require.Equal(t, 50, r.Config.Nodes)
			require.Equal(t, 0.01, r.Config.Scale, "-scale is in the report's config")
			m := phaseByName(t, r, "measure")
			require.True(t, m.Measured)
			require.True(t, m.Finished)
			require.Equal(t, m.Pods, m.Scheduled, "%+v", m)
			if name == "perf-preemption-basic" {
				require.Positive(t, m.Preemptions, "high-priority pods preempt")
				require.Positive(t, m.Victims)
			}
		})
	}
}

// A gang is placed all or none: gangs of 3 pods of 3 CPUs on 4 nodes of 4
// CPUs place one gang (3 nodes) and fail the next, whose assumed members
// are forgotten; the cache ends as the API server.
func TestPhasesGang(t *testing.T) {
	p := writeScenario(t, `cluster: {seed: 2, allocatable: {cpu: "4", memory: 32Gi, pods: 110}}
workload: {schedulers: 2, sample: 4, bindingFailureRate: 0}
phases:
- createNodes: {count: 4}
- name: measure
  createPods:
    count: 6
    collectMetrics: true
    template: {plain: true, containers: 1, cpu: "3", memory: 1Gi, gangSize: 3}
`)
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, r.Consistent)
	m := phaseByName(t, r, "measure")
	require.Equal(t, int64(3), m.Scheduled)
	require.Equal(t, int64(3), m.Unschedulable)
	require.Equal(t, int64(1), m.GangsFailed)
	require.Equal(t, 3, r.Counts.FinalPods)
	require.Equal(t, 6, r.Audit.PodsChecked, "the failed gang's pods stay pending")
}

// Sleep, churn (waited for and in the background), rate-limited
// deletions and a start/stop span run in order on one cache, which ends
// consistent; the span measures what was scheduled inside it; -record's
// trace of the run replays.
func TestPhasesChurnAndSpans(t *testing.T) {
	p := writeScenario(t, `cluster: {seed: 4, zones: 2, allocatable: {cpu: "8", memory: 32Gi, pods: 110}}
workload: {schedulers: 2, sample: 20, bindingFailureRate: 0.02, confirmDelay: 1ms}
phases:
- createNodes: {count: 20}
- createNodes: {count: 10, labels: [{key: pool, value: late, fraction: 1}]}
- createPods: {count: 200, namespace: a, template: {plain: true, cpu: 100m, memory: 100Mi}}
- churn: {podUpdateRate: 500, drainRate: 5, notReadyRate: 5, nodeAddRate: 5, duration: 500ms}
- churn: {podDeleteRate: 100, skipWait: true}
- name: span
  startCollecting: {}
- createPods: {count: 50, namespace: b, template: {plain: true, cpu: 100m, memory: 100Mi, nodeSelector: {pool: late}}}
- sleep: {duration: 300ms}
- deletePods: {namespace: a, all: true, rate: 1000}
- stopCollecting: {}
- barrier: {}
`)
	tr := filepath.Join(t.TempDir(), "t.jsonl")
	code, r, stderr := runJSON(t, []string{"-scenario", p, "-json", "-", "-record", tr, "-audit-every", "0"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, r.Consistent, "%+v", r.Audit)
	require.Equal(t, int64(10), r.Phases[1].Nodes)
	churn := r.Phases[3]
	require.Positive(t, churn.ChurnActions)
	require.InDelta(t, 0.5, churn.EndSeconds-churn.StartSeconds, 0.001)
	span := phaseByName(t, r, "span")
	require.True(t, span.Measured)
	require.Equal(t, int64(50), span.Scheduled+span.Unschedulable, "the span counts the pods settled inside it")
	require.GreaterOrEqual(t, span.Scheduled, int64(45), "a few may miss the 10 late nodes by sampling")
	require.Greater(t, span.EndSeconds-span.StartSeconds, 0.3, "the span holds the sleep and more")
	require.Equal(t, span.EndSeconds, r.Phases[9].StartSeconds, "stopCollecting ends the span")
	del := r.Phases[8]
	require.Positive(t, del.Deleted)
	require.Greater(t, del.EndSeconds, del.StartSeconds, "deletions at 1000/s take time")
	require.Positive(t, r.Churn.PodDeletes, "background churn deleted pods")
	var out bytes.Buffer
	require.Equal(t, exitOK, realMain(context.Background(), []string{"-replay", tr}, &out, io.Discard, false, hooks{}), out.String())

	// Cut by -duration inside the span (its failed bindings back off a
	// second or two before the churn starts): the span and the phase
	// running end at the run's end, unfinished; the phases before are
	// finished.
	require.Less(t, span.StartSeconds, 2.7)
	code, r, stderr = runJSON(t, []string{"-scenario", p, "-json", "-", "-duration", "2700ms"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "duration", r.Stopped)
	require.True(t, r.Phases[3].Finished)
	span = phaseByName(t, r, "span")
	require.False(t, span.Finished)
	require.Equal(t, 2.7, span.EndSeconds)
	require.Contains(t, strings.Join(r.Warnings, "\n"), "phase span did not finish: the run reached run.duration (-duration)")
}
