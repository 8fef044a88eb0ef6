package sim

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// PhaseResult is a plain value owned by the Report holding it: what one
// phase of a phases run did (docs/loadgen.md, "Multi-phase workloads").
// Times are run time (virtual in deterministic mode); Wall is the phase's
// wall-clock time.
type PhaseResult struct {
	Name, Op, Namespace string
	Measured, Finished  bool
	Start, End, Wall    time.Duration
	Created, Deleted    int64 // pods
	Nodes               int64 // nodes created
	Scheduled           int64
	Unschedulable       int64 // pods found unschedulable (each once; a later attempt may bind it)
	Failed              int64 // pods whose bindings failed bindRetryLimit times
	FailedBindings      int64
	GangsFailed         int64
	ChurnActions        int64
	Preemptions         int64 // pods that preempted others
	Victims             int64 // pods they deleted
	// Completed pods ran for their duration and completed (lifecycle.go),
	// CompletedFailed of them Failed.
	Completed, CompletedFailed int64
	Ungated                    int64 // pods whose scheduling gates an ungatePods phase removed
	// Measured phases: pods scheduled per second over the phase (run
	// time, at least one decision time) and over its wall-clock time, per
	// 1 s window, and the latencies of the pods scheduled in it.
	PodsPerSec, WallPodsPerSec float64
	Windows                    []float64
	// CPU and GCs: the process's CPU time (user and system, every
	// goroutine: the cache, the simulated API server and informer, the
	// scheduler) and the GC cycles completed over the phase's wall-clock
	// span; PodsPerCPUSecond is Scheduled over CPU (0 where CPU time is
	// unknown).
	CPU              time.Duration
	GCs              uint64
	PodsPerCPUSecond float64
	Latency          Latency // creation to binding (run time)
	Attempt          Latency // pick, assume and bind (wall clock)
	Thresholds       []ThresholdResult
}

// ThresholdResult is a plain value: one threshold of a measured phase and
// what the phase measured.
type ThresholdResult struct {
	Metric string  `json:"metric"`
	Limit  float64 `json:"limit"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"` // pods/s, pods or ms
	OK     bool    `json:"ok"`
}

// results turns the phases' stats into the report's results and checks
// their thresholds.
func (pr *phaseRun) results() []PhaseResult {
	return phaseResults(pr.plan, pr.stats, pr.d.cfg.DecisionTime)
}

// phaseResults turns the stats of plan's phases into the report's results
// and checks their thresholds; a measured phase's throughput is over its
// span, minSpan at least (both engines: run time, virtual or wall-clock).
func phaseResults(plan *phasePlan, stats []phaseStat, minSpan time.Duration) []PhaseResult {
	out := make([]PhaseResult, len(stats))
	for i := range stats {
		st, p := &stats[i], &plan.phases[i]
		r := PhaseResult{Name: p.name, Op: p.op, Measured: p.collect, Finished: st.ended && !st.cut,
			Start: st.start, End: st.end, Wall: st.wallEnd.Sub(st.wallStart),
			Created: st.created, Deleted: st.deleted, Nodes: st.nodes, Scheduled: st.scheduled, Unschedulable: st.unschedulable,
			Failed: st.failed, FailedBindings: st.failedBindings, GangsFailed: st.gangsFailed, ChurnActions: st.churn,
			Preemptions: st.preemptions, Victims: st.victims, Completed: st.completed, CompletedFailed: st.completedFailed, Ungated: st.ungated}
		if p.op == opCreatePods || p.op == opDeletePods || p.op == opUngatePods {
			r.Namespace = p.ns
		}
		if st.started && st.ended {
			r.CPU, r.GCs = st.procEnd.cpu-st.procStart.cpu, st.procEnd.gcs-st.procStart.gcs
			if r.CPU > 0 {
				r.PodsPerCPUSecond = float64(st.scheduled) / r.CPU.Seconds()
			}
		}
		if !st.started {
			r.Wall = 0
		}
		if p.collect {
			span := max(st.end-st.start, minSpan)
			r.PodsPerSec = float64(st.scheduled) / span.Seconds()
			if r.Wall > 0 {
				r.WallPodsPerSec = float64(st.scheduled) / r.Wall.Seconds()
			}
			r.Windows = windowsOf(st.win, st.end-st.start, time.Second)
			if st.e2e != nil {
				r.Latency, r.Attempt = summarise(st.e2e), summarise(st.attempt)
			}
			r.Thresholds = checkLimits(p.limits, &r)
		}
		out[i] = r
	}
	return out
}

// checkLimits checks r's figures against limits; a phase that did not
// finish fails a "finished" check besides.
func checkLimits(limits []limit, r *PhaseResult) []ThresholdResult {
	var out []ThresholdResult
	for _, l := range limits {
		t := ThresholdResult{Metric: l.metric, Limit: l.value}
		switch l.metric {
		case "minThroughput":
			t.Value, t.Unit = r.PodsPerSec, "pods/s"
		case "minScheduled":
			t.Value, t.Unit = float64(r.Scheduled), "pods"
		case "maxUnschedulable":
			t.Value, t.Unit = float64(r.Unschedulable+r.Failed), "pods"
		default:
			lat := map[string]time.Duration{"maxP50": r.Latency.P50, "maxP90": r.Latency.P90, "maxP95": r.Latency.P95,
				"maxP99": r.Latency.P99, "maxAttemptP99": r.Attempt.P99}[l.metric]
			t.Value, t.Limit, t.Unit = ms(lat), ms(time.Duration(l.value)), "ms"
		}
		if strings.HasPrefix(l.metric, "min") {
			t.OK = t.Value >= t.Limit
		} else {
			t.OK = t.Value <= t.Limit
		}
		out = append(out, t)
	}
	if len(out) > 0 && !r.Finished {
		out = append(out, ThresholdResult{Metric: "finished", Limit: 1, Value: 0, Unit: "phase", OK: false})
	}
	return out
}

// thresholdsChecked returns the thresholds checked and those violated.
func (r *Report) thresholdsChecked() (checked, violated int) {
	for _, p := range r.Phases {
		for _, t := range p.Thresholds {
			checked++
			if !t.OK {
				violated++
			}
		}
	}
	return checked, violated
}

// violations lists the violated thresholds, one phrase each.
func (r *Report) violations() []string {
	var out []string
	for _, p := range r.Phases {
		for _, t := range p.Thresholds {
			if !t.OK {
				out = append(out, fmt.Sprintf("phase %s: %s", p.Name, t.phrase()))
			}
		}
	}
	return out
}

// phrase is "minThroughput 1000 pods/s: got 812" or "finished: no".
func (t ThresholdResult) phrase() string {
	if t.Metric == "finished" {
		return "the phase did not finish"
	}
	op := "<="
	if strings.HasPrefix(t.Metric, "min") {
		op = ">="
	}
	return fmt.Sprintf("%s %s %s %s: got %s", t.Metric, op, num(t.Limit), t.Unit, num(t.Value))
}

// num formats a figure: an integer when it is one, else 3 significant
// decimals.
func num(x float64) string {
	if x == float64(int64(x)) {
		return strconv.FormatInt(int64(x), 10)
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

// us rounds d to the microsecond for the text report (the histogram's
// buckets give more digits than they hold).
func us(d time.Duration) time.Duration {
	if d >= time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(10 * time.Nanosecond)
}

// JSONPhase is a plain value: a phase in the JSON report.
type JSONPhase struct {
	Name           string            `json:"name"`
	Op             string            `json:"op"`
	Namespace      string            `json:"namespace,omitempty"`
	Measured       bool              `json:"measured"`
	Finished       bool              `json:"finished"`
	StartSeconds   float64           `json:"start_seconds"`
	EndSeconds     float64           `json:"end_seconds"`
	WallSeconds    float64           `json:"wall_seconds"`
	CPUSeconds     float64           `json:"cpu_seconds"`
	GCs            uint64            `json:"gcs"`
	PodsPerCPUSec  float64           `json:"pods_per_cpu_second,omitempty"`
	Pods           int64             `json:"pods"`
	Deleted        int64             `json:"deleted,omitempty"`
	Nodes          int64             `json:"nodes,omitempty"`
	Scheduled      int64             `json:"scheduled"`
	Unschedulable  int64             `json:"unschedulable"`
	Failed         int64             `json:"failed,omitempty"`
	FailedBindings int64             `json:"failed_bindings,omitempty"`
	GangsFailed    int64             `json:"gangs_failed,omitempty"`
	ChurnActions   int64             `json:"churn_actions,omitempty"`
	Preemptions    int64             `json:"preemptions,omitempty"`
	Victims        int64             `json:"preemption_victims,omitempty"`
	Completed      int64             `json:"completed,omitempty"`
	CompletedFail  int64             `json:"completed_failed,omitempty"`
	Ungated        int64             `json:"ungated,omitempty"`
	Throughput     *JSONThroughput   `json:"throughput,omitempty"`
	Latency        *JSONLatency      `json:"scheduling_latency_ms,omitempty"`
	Attempt        *JSONLatency      `json:"attempt_latency_ms,omitempty"`
	Thresholds     []ThresholdResult `json:"thresholds,omitempty"`
}

// JSONThroughput is a plain value: a measured phase's throughput.
type JSONThroughput struct {
	PodsPerSec     float64 `json:"pods_per_second"`
	WallPodsPerSec float64 `json:"wall_pods_per_second"`
	Windows        int     `json:"windows"`
	Average        float64 `json:"average"`
	Perc50         float64 `json:"perc50"`
	Perc90         float64 `json:"perc90"`
	Perc99         float64 `json:"perc99"`
}

// JSONLatency is a plain value: latency percentiles in milliseconds.
type JSONLatency struct {
	P50 float64 `json:"perc50"`
	P90 float64 `json:"perc90"`
	P95 float64 `json:"perc95"`
	P99 float64 `json:"perc99"`
	Max float64 `json:"max"`
}

func jsonLatency(l Latency) *JSONLatency {
	return &JSONLatency{ms(l.P50), ms(l.P90), ms(l.P95), ms(l.P99), ms(l.Max)}
}

// windowStats are the average and percentiles of per-window rates.
func windowStats(ws []float64) (avg, p50, p90, p99 float64) {
	sorted := append([]float64(nil), ws...)
	sort.Float64s(sorted)
	for _, x := range sorted {
		avg += x
	}
	if len(sorted) > 0 {
		avg /= float64(len(sorted))
	}
	return avg, percentile(sorted, 50), percentile(sorted, 90), percentile(sorted, 99)
}

// phasesJSON is the report's phases for the JSON report (nil: none).
func (r *Report) phasesJSON() []JSONPhase {
	if len(r.Phases) == 0 {
		return nil
	}
	out := make([]JSONPhase, len(r.Phases))
	for i, p := range r.Phases {
		j := JSONPhase{Name: p.Name, Op: p.Op, Namespace: p.Namespace, Measured: p.Measured, Finished: p.Finished,
			StartSeconds: p.Start.Seconds(), EndSeconds: p.End.Seconds(), WallSeconds: p.Wall.Seconds(),
			CPUSeconds: p.CPU.Seconds(), GCs: p.GCs, PodsPerCPUSec: p.PodsPerCPUSecond,
			Pods: p.Created, Deleted: p.Deleted, Nodes: p.Nodes, Scheduled: p.Scheduled, Unschedulable: p.Unschedulable,
			Failed: p.Failed, FailedBindings: p.FailedBindings, GangsFailed: p.GangsFailed, ChurnActions: p.ChurnActions,
			Preemptions: p.Preemptions, Victims: p.Victims, Completed: p.Completed, CompletedFail: p.CompletedFailed, Ungated: p.Ungated, Thresholds: p.Thresholds}
		if p.Measured {
			avg, p50, p90, p99 := windowStats(p.Windows)
			j.Throughput = &JSONThroughput{p.PodsPerSec, p.WallPodsPerSec, len(p.Windows), avg, p50, p90, p99}
			j.Latency, j.Attempt = jsonLatency(p.Latency), jsonLatency(p.Attempt)
		}
		out[i] = j
	}
	return out
}

// thresholdsOK is the JSON report's thresholds_ok: nil without thresholds.
func (r *Report) thresholdsOK() *bool {
	checked, violated := r.thresholdsChecked()
	if checked == 0 {
		return nil
	}
	ok := violated == 0
	return &ok
}

// phaseItems are scheduler_perf-style data items of the measured phases:
// SchedulingThroughput (per 1 s window) and SchedulingLatency (creation to
// binding), labelled with the phase.
func (r *Report) phaseItems() []DataItem {
	var items []DataItem
	for _, p := range r.Phases {
		if !p.Measured {
			continue
		}
		avg, p50, p90, p99 := windowStats(p.Windows)
		items = append(items, DataItem{
			Data: map[string]float64{"Average": avg, "Perc50": p50, "Perc90": p90, "Perc99": p99, "Overall": p.PodsPerSec},
			Unit: "pods/s", Labels: map[string]string{"Metric": "SchedulingThroughput", "Phase": p.Name, "Windows": fmt.Sprint(len(p.Windows))},
		})
		it := latencyItem("SchedulingLatency", p.Latency)
		it.Labels["Phase"] = p.Name
		items = append(items, it)
	}
	return items
}

// printPhases writes the phases section of the text report.
func (r *Report) printPhases(w io.Writer) {
	if len(r.Phases) == 0 {
		return
	}
	measured := 0
	for _, p := range r.Phases {
		if p.Measured {
			measured++
		}
	}
	checked, violated := r.thresholdsChecked()
	fmt.Fprintf(w, "phases:    %d phases (%d measured)", len(r.Phases), measured)
	if checked > 0 {
		fmt.Fprintf(w, "; thresholds: %d checked, %d violated", checked, violated)
	}
	fmt.Fprintln(w)
	virt := ""
	if r.Config.Deterministic {
		virt = " virtual"
	}
	for i, p := range r.Phases {
		tag := ""
		if p.Measured {
			tag = " [measured]"
		}
		if !p.Finished {
			tag += " [not finished]"
		}
		fmt.Fprintf(w, "  %d %-15s %s%s: %.3fs-%.3fs%s (wall %v)", i+1, p.Op, p.Name, tag, p.Start.Seconds(), p.End.Seconds(), virt, p.Wall.Round(time.Microsecond))
		var parts []string
		if p.Nodes > 0 {
			parts = append(parts, fmt.Sprintf("%d nodes", p.Nodes))
		}
		if p.Created > 0 {
			parts = append(parts, fmt.Sprintf("%d pods created in %s", p.Created, p.Namespace))
		}
		if p.Deleted > 0 {
			parts = append(parts, fmt.Sprintf("%d deleted from %s", p.Deleted, p.Namespace))
		}
		if p.Scheduled > 0 || p.Unschedulable > 0 || p.Measured {
			parts = append(parts, fmt.Sprintf("%d scheduled, %d unschedulable", p.Scheduled, p.Unschedulable))
		}
		for _, c := range []struct {
			n    int64
			what string
		}{{p.Failed, "failed"}, {p.FailedBindings, "failed bindings"}, {p.GangsFailed, "gangs failed"}, {p.ChurnActions, "churn actions"},
			{p.Preemptions, "preemptions"}, {p.Victims, "pods preempted"}, {p.Completed, "completed"}, {p.CompletedFailed, "completed Failed"}, {p.Ungated, "ungated"}} {
			if c.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, ": %s", strings.Join(parts, ", "))
		}
		fmt.Fprintln(w)
		if !p.Measured {
			continue
		}
		avg, p50, p90, p99 := windowStats(p.Windows)
		fmt.Fprintf(w, "      throughput %.0f pods/s%s (wall %.0f pods/s); per 1 s window avg %.0f p50 %.0f p90 %.0f p99 %.0f (%d windows)\n",
			p.PodsPerSec, virt, p.WallPodsPerSec, avg, p50, p90, p99, len(p.Windows))
		if p.CPU > 0 {
			fmt.Fprintf(w, "      process: %.0f pods per CPU second (CPU %v over wall %v), %d GCs\n",
				p.PodsPerCPUSecond, p.CPU.Round(time.Millisecond), p.Wall.Round(time.Millisecond), p.GCs)
		}
		fmt.Fprintf(w, "      scheduling latency (creation to binding%s): p50 %v  p90 %v  p95 %v  p99 %v  max %v\n",
			virt, us(p.Latency.P50), us(p.Latency.P90), us(p.Latency.P95), us(p.Latency.P99), us(p.Latency.Max))
		fmt.Fprintf(w, "      attempt latency (wall):  p50 %v  p90 %v  p95 %v  p99 %v  max %v\n",
			us(p.Attempt.P50), us(p.Attempt.P90), us(p.Attempt.P95), us(p.Attempt.P99), us(p.Attempt.Max))
		for _, t := range p.Thresholds {
			verdict := "ok"
			if !t.OK {
				verdict = "VIOLATED"
			}
			fmt.Fprintf(w, "      threshold %s: %s\n", t.phrase(), verdict)
		}
	}
}
