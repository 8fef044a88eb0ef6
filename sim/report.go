package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/schedcache/schedcache/internal/hist"
)

// Latency is a plain value summarising a histogram.
type Latency struct{ P50, P90, P95, P99, P999, Max time.Duration }

func summarise(h *hist.Histogram) Latency {
	return Latency{h.Quantile(0.5), h.Quantile(0.9), h.Quantile(0.95), h.Quantile(0.99), h.Quantile(0.999), h.Max()}
}

// Report is a plain value owned by the caller of run, written only by
// the run that returns it: what a simulation did.
type Report struct {
	Config                               Config
	Shards                               int
	InitialPods                          int
	LoadTime                             time.Duration
	LoadRate                             float64
	Elapsed                              time.Duration // scheduling phase (virtual in deterministic mode)
	Wall                                 time.Duration // wall time of the scheduling phase
	Scheduled, Forgotten, FailedBindings int64
	Conflicts, Unschedulable             int64
	Events, Adds, Removes, NodeUpdates   int64
	PodsPerSec, EventsPerSec             float64
	Windows                              []float64 // pods/s in each full 1 s window (a run shorter than 1 s: one partial window, the whole run)
	Assume, Read, Attempt                Latency
	FinalPods, FinalNodes, ExpectedPods  int
	AsyncErrors                          int64
	HeapInUse, HeapAlloc                 uint64   // after a GC, cache still loaded
	LoadHeapAlloc                        uint64   // after a GC, right after the load
	OverfullAtStart                      int      // nodes whose initial pods exceed their allocatable
	Warnings                             []string // what the run noticed without failing
	Digest                               string   // deterministic mode only
	Audit                                AuditResult
	MidAudits                            MidAudits
	Consistent                           bool
	// Open-loop runs: pods arrived, the queueing delay (arrival to
	// assume), the pending queue at the end and its largest sampled length.
	Arrived                  int64
	QueueDelay               Latency
	PendingAtEnd, MaxPending int
	// Stopped says why the run ended: "duration", "pods" (the pod count
	// was reached), "stalled" (no pod scheduled for stallLimit) or
	// "interrupted" (its context was cancelled: a real-time run reports
	// what it did until then); also "queue-full", "phases" (the last
	// phase ended) and "trace" (the trace used up, its pods settled).
	Stopped string
	Series  []SeriesRow // one row per 1 s window (-csv)
	// Churn, bindings, the informer, readers.
	RefusedBindings int64 // bindings the API server refused (node removed or draining)
	ExpectedNodes   int
	Informer        InformerCounts
	Churn           ChurnCounts
	ReaderLatency   Latency // W1 readers: take a snapshot and read ReadNodes nodes
	Reads           int64
	FullSnapshot    Latency // W6: UpdateSnapshot into an empty snapshot
	FullSnapshots   int64
	RSS, PeakRSS    uint64 // resident set at the end and its peak (VmRSS, VmHWM; 0 where unknown)
	// The live heap after a GC of the generated objects alone, then what
	// loading the ground truth added, then what loading the cache (and its
	// first published snapshot) added: the cache's own memory, the pod and
	// node objects it shares with the informer not counted.
	ObjectsHeap, TruthHeap, CacheHeap uint64
	// Picker labels the node choice; Rejections are its per-plugin
	// rejection counts, in the picker's order (nil when it counts none).
	Picker     string
	Rejections []PluginCount
	// PickerCounters are the node pickers' own counters, summed
	// (pickercounters.go; nil when the picker counts nothing).
	PickerCounters []PickerCounter
	// AttemptErrors: the attempts the picker failed with an error
	// wrapping ErrAttempt (picker.go); nil when none did.
	AttemptErrors *AttemptErrors
	// BindingCycle: what the picker's binding cycle did (bindcycle.go;
	// nil: the cache calls stood in for it).
	BindingCycle *BindingCycleCounts
	// PodGroups: the pod groups, when the picker schedules them
	// (podgroups.go; nil otherwise).
	PodGroups *PodGroupCounts
	// Phases: what each phase of a phases scenario did (phasereport.go).
	Phases []PhaseResult
	// Explanations are the attempts explained (-explain, -explain-rate;
	// explain.go), in attempt order; ExplanationsDropped those chosen over
	// the cap; ExplainNote what the picker could not explain.
	Explanations        []Explanation
	ExplanationsDropped int64
	ExplainNote         string
	// Lifecycle: what the pod lifecycle did (lifecycle.go; nil: off).
	Lifecycle *LifecycleReport
}

// readRSS reads the resident set size and its peak from /proc (Linux).
func readRSS() (rss, peak uint64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss = v << 10
		case "VmHWM:":
			peak = v << 10
		}
	}
	return rss, peak
}

// MidAudits is a plain value: the audits made during a deterministic run
// (-audit-every).
type MidAudits struct {
	Count       int          `json:"count"`
	Failed      int          `json:"failed"`
	FirstFailAt float64      `json:"first_failure_virtual_seconds,omitempty"`
	FirstFail   *AuditResult `json:"first_failure,omitempty"`
	// MaxPauseMs is the longest a real-time audit paused the run.
	MaxPauseMs float64 `json:"max_pause_ms,omitempty"`
}

// windowsOf turns per-window counts into rates over the full windows: the
// last window counts only if it is whole. Every full window of the run
// counts, the trailing ones with no pod scheduled (beyond counts) as 0.
// A run shorter than one window has one, partial: the whole run (its
// rate is the overall rate), so that a short run's throughput is not 0.
func windowsOf(counts []int64, elapsed, width time.Duration) []float64 {
	full := int(elapsed / width)
	if full == 0 && elapsed > 0 {
		var n int64
		for _, c := range counts {
			n += c
		}
		return []float64{float64(n) / elapsed.Seconds()}
	}
	out := make([]float64, 0, full)
	for i := 0; i < full; i++ {
		var n int64
		if i < len(counts) {
			n = counts[i]
		}
		out = append(out, float64(n)/width.Seconds())
	}
	return out
}

// percentile is the nearest-rank percentile of sorted xs (0 if empty).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// DataItem is a plain value: a scheduler_perf-style data item.
type DataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels"`
}

// JSONReport is a plain value built by Report.JSON: the machine-readable
// report (docs/loadgen.md).
type JSONReport struct {
	Version     string      `json:"version"`
	Mode        string      `json:"mode"`
	Config      JSONConfig  `json:"config"`
	Environment Environment `json:"environment"`
	DataItems   []DataItem  `json:"dataItems"`
	Counts      Counts      `json:"counts"`
	Memory      Memory      `json:"memory"`
	Timing      Timing      `json:"timing"`
	Digest      string      `json:"digest,omitempty"`
	Warnings    []string    `json:"warnings,omitempty"`
	Audit       AuditResult `json:"audit"`
	MidAudits   *MidAudits  `json:"mid_run_audits,omitempty"`
	Consistent  bool        `json:"consistent"`
	// Scenario, Arrivals and Stopped came with scenarios and open loops.
	Scenario string       `json:"scenario,omitempty"`
	Arrivals JSONArrivals `json:"arrivals"`
	Stopped  string       `json:"stopped"`
	// Churn and Informer say what the API server changed and how the
	// informer delivered it.
	Churn    ChurnCounts    `json:"churn"`
	Informer InformerCounts `json:"informer"`
	Picker   string         `json:"picker,omitempty"`
	// PickerCounters: the node pickers' own counters (pickercounters.go).
	PickerCounters []PickerCounter `json:"picker_counters,omitempty"`
	// AttemptErrors: attempts the picker failed (ErrAttempt); absent
	// when none did.
	AttemptErrors *AttemptErrors `json:"attempt_errors,omitempty"`
	// BindingCycle: the picker's binding cycle (bindcycle.go); absent
	// when the cache calls stood in for it.
	BindingCycle *BindingCycleCounts `json:"binding_cycle,omitempty"`
	// PodGroups: the pod groups the picker scheduled (podgroups.go).
	PodGroups *PodGroupCounts `json:"pod_groups,omitempty"`
	// Phases and ThresholdsOK: a phases scenario's (phasereport.go).
	Phases       []JSONPhase `json:"phases,omitempty"`
	ThresholdsOK *bool       `json:"thresholds_ok,omitempty"`
	// Explanations: with -explain or -explain-rate (explain.go).
	Explanations        []Explanation `json:"explanations,omitempty"`
	ExplanationsDropped int64         `json:"explanations_dropped,omitempty"`
	// Lifecycle: with -pod-duration, runFor or -arrivals-from (lifecycle.go).
	Lifecycle *JSONLifecycle `json:"lifecycle,omitempty"`
}

// JSONArrivals is a plain value: how pods arrived and queued. Open-loop
// runs only fill the counts; queueing delay is a data item.
type JSONArrivals struct {
	Mode          string  `json:"mode"`
	Rate          float64 `json:"rate,omitempty"`
	BurstSize     int     `json:"burst_size,omitempty"`
	BurstInterval float64 `json:"burst_interval_seconds,omitempty"`
	Arrived       int64   `json:"arrived"`
	PendingAtEnd  int     `json:"pending_at_end"`
	MaxPending    int     `json:"max_pending"`
}

// JSONConfig is a plain value: Config as it appears in the report.
type JSONConfig struct {
	Nodes          int     `json:"nodes"`
	PodsPerNode    int     `json:"pods_per_node"`
	Seed           int64   `json:"seed"`
	DurationSec    float64 `json:"duration_seconds"`
	Schedulers     int     `json:"schedulers"`
	Sample         int     `json:"sample"`
	ConfirmDelayMs float64 `json:"confirm_delay_ms"`
	FailRate       float64 `json:"fail_rate"`
	Shards         int     `json:"shards"`
	Deterministic  bool    `json:"deterministic"`
	DecisionTimeUs float64 `json:"decision_time_us,omitempty"`
	AuditEveryMs   float64 `json:"audit_every_ms,omitempty"`
	InitialPods    int     `json:"initial_pods,omitempty"`
	Zones          int     `json:"zones,omitempty"`
	Pods           int64   `json:"pods,omitempty"`
	KeepPods       bool    `json:"keep_pods,omitempty"`
	// ClusterFrom: the manifests the cluster was loaded from (-cluster-from).
	ClusterFrom []string `json:"cluster_from,omitempty"`
	// Scale: a phases scenario's -scale (with phases only, 1 included).
	Scale float64 `json:"scale,omitempty"`
}

// Environment is a plain value: where the run happened.
type Environment struct {
	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	NumCPU     int    `json:"num_cpu"`
}

// Counts is a plain value: the event counts.
type Counts struct {
	InitialPods     int   `json:"initial_pods"`
	Scheduled       int64 `json:"scheduled"`
	Forgotten       int64 `json:"forgotten"`
	FailedBindings  int64 `json:"failed_bindings"`
	Conflicts       int64 `json:"conflicts"`
	Unschedulable   int64 `json:"unschedulable"`
	Events          int64 `json:"informer_events"`
	Adds            int64 `json:"adds"`
	Removes         int64 `json:"removes"`
	NodeUpdates     int64 `json:"node_updates"`
	FinalPods       int   `json:"final_pods"`
	FinalNodes      int   `json:"final_nodes"`
	ExpectedPods    int   `json:"expected_pods"`
	AsyncErrors     int64 `json:"async_errors"`
	OverfullNodes   int   `json:"overfull_nodes_at_start"`
	RefusedBindings int64 `json:"refused_bindings"`
	ExpectedNodes   int   `json:"expected_nodes"`
	Reads           int64 `json:"reads,omitempty"`
	FullSnapshots   int64 `json:"full_snapshots,omitempty"`
}

// Memory is a plain value: the heap after a GC.
type Memory struct {
	HeapInUseBytes     uint64 `json:"heap_inuse_bytes_after_gc"`
	HeapAllocBytes     uint64 `json:"heap_alloc_bytes_after_gc"`
	LoadHeapAllocBytes uint64 `json:"load_heap_alloc_bytes_after_gc"`
	RSSBytes           uint64 `json:"rss_bytes,omitempty"`
	PeakRSSBytes       uint64 `json:"peak_rss_bytes,omitempty"`
	ObjectsBytes       uint64 `json:"objects_heap_bytes"` // the generated cluster's objects
	TruthBytes         uint64 `json:"truth_heap_bytes"`   // added by the ground truth's store
	CacheBytes         uint64 `json:"cache_heap_bytes"`   // added by loading the cache
}

// Timing is a plain value: the phases' durations.
type Timing struct {
	LoadSeconds       float64 `json:"load_seconds"`
	LoadEventsPerSec  float64 `json:"load_events_per_second"`
	RunSeconds        float64 `json:"run_seconds"`
	RunWallSeconds    float64 `json:"run_wall_seconds"`
	EventsPerSec      float64 `json:"informer_events_per_second"`
	PodsPerSecOverall float64 `json:"pods_per_second_overall"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func latencyItem(metric string, l Latency) DataItem {
	return DataItem{
		Data: map[string]float64{"Perc50": ms(l.P50), "Perc90": ms(l.P90), "Perc95": ms(l.P95),
			"Perc99": ms(l.P99), "Perc999": ms(l.P999), "Max": ms(l.Max)},
		Unit:   "ms",
		Labels: map[string]string{"Metric": metric},
	}
}

// JSON builds the machine-readable report.
func (r *Report) JSON() *JSONReport {
	c := r.Config
	mode := "realtime"
	if c.Deterministic {
		mode = "deterministic"
	}
	sorted := append([]float64(nil), r.Windows...)
	sort.Float64s(sorted)
	avg := 0.0
	for _, x := range sorted {
		avg += x
	}
	if len(sorted) > 0 {
		avg /= float64(len(sorted))
	}
	tp := DataItem{
		Data: map[string]float64{"Average": avg, "Perc50": percentile(sorted, 50), "Perc90": percentile(sorted, 90),
			"Perc95": percentile(sorted, 95), "Perc99": percentile(sorted, 99)},
		Unit:   "pods/s",
		Labels: map[string]string{"Metric": "SchedulingThroughput", "Windows": fmt.Sprint(len(sorted))},
	}
	if r.shortRun() {
		// One partial window: the whole run.
		tp.Labels["WindowSeconds"] = strconv.FormatFloat(r.Elapsed.Seconds(), 'f', 3, 64)
	}
	jc := JSONConfig{c.Nodes, c.PodsPerNode, c.Seed, c.Duration.Seconds(), c.Schedulers, c.Sample,
		ms(c.ConfirmDelay), c.FailRate, r.Shards, c.Deterministic, 0, 0, c.InitialPods, c.Zones, c.Pods, c.KeepPods, c.ClusterFrom, 0}
	if c.Phases != nil {
		jc.Scale = c.Scale
		if jc.Scale == 0 {
			jc.Scale = 1
		}
	}
	if c.Deterministic {
		jc.DecisionTimeUs = float64(c.DecisionTime) / 1e3
		jc.AuditEveryMs = ms(c.AuditEvery)
	}
	items := []DataItem{tp,
		latencyItem("SchedulingAttemptDuration", r.Attempt),
		latencyItem("AssumePodDuration", r.Assume),
		r.readItem(),
	}
	if c.openLoop() {
		items = append(items, latencyItem("QueueingDelay", r.QueueDelay))
	}
	if c.Readers > 0 {
		items = append(items, latencyItem("ReaderSnapshotRead", r.ReaderLatency))
	}
	if c.FullSnapshotEvery > 0 {
		items = append(items, latencyItem("FirstFullSnapshot", r.FullSnapshot))
	}
	if it, ok := r.rejectionsItem(); ok {
		items = append(items, it)
	}
	items = append(items, r.phaseItems()...)
	return &JSONReport{
		Scenario:       c.Scenario,
		Arrivals:       JSONArrivals{c.Arrival, c.Rate, c.BurstSize, c.BurstInterval.Seconds(), r.Arrived, r.PendingAtEnd, r.MaxPending},
		Stopped:        r.Stopped,
		Picker:         r.Picker,
		AttemptErrors:  r.AttemptErrors,
		BindingCycle:   r.BindingCycle,
		PodGroups:      r.PodGroups,
		PickerCounters: r.PickerCounters,
		Version:        "v1",
		Mode:           mode,
		Config:         jc,
		Environment:    Environment{runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU()},
		DataItems:      items,
		Counts: Counts{r.InitialPods, r.Scheduled, r.Forgotten, r.FailedBindings, r.Conflicts, r.Unschedulable,
			r.Events, r.Adds, r.Removes, r.NodeUpdates, r.FinalPods, r.FinalNodes, r.ExpectedPods, r.AsyncErrors, r.OverfullAtStart,
			r.RefusedBindings, r.ExpectedNodes, r.Reads, r.FullSnapshots},
		Memory:     Memory{r.HeapInUse, r.HeapAlloc, r.LoadHeapAlloc, r.RSS, r.PeakRSS, r.ObjectsHeap, r.TruthHeap, r.CacheHeap},
		Churn:      r.Churn,
		Informer:   r.Informer,
		Timing:     Timing{r.LoadTime.Seconds(), r.LoadRate, r.Elapsed.Seconds(), r.Wall.Seconds(), r.EventsPerSec, r.PodsPerSec},
		Digest:     r.Digest,
		Warnings:   r.Warnings,
		Audit:      r.Audit,
		MidAudits:  midAudits(r),
		Consistent: r.Consistent,

		Phases:       r.phasesJSON(),
		ThresholdsOK: r.thresholdsOK(),

		Explanations:        r.Explanations,
		ExplanationsDropped: r.ExplanationsDropped,
		Lifecycle:           r.Lifecycle.json(),
	}
}

// pluginPicker says whether the run's picker is not the built-in
// least-allocated one (a real-plugin picker through MainWith): what the
// least-allocated picker's report calls the snapshot read (taking a
// snapshot and reading -sample nodes) is then the pick, timed as a whole.
func (r *Report) pluginPicker() bool {
	return r.Picker != "" && r.Picker != LeastAllocated{}.Name()
}

// readItem is the data item of the snapshot read, or of the pick with a
// plugin picker (PickDuration, labelled with the picker).
func (r *Report) readItem() DataItem {
	if !r.pluginPicker() {
		return latencyItem("SnapshotReadDuration", r.Read)
	}
	it := latencyItem("PickDuration", r.Read)
	it.Labels["Picker"] = r.Picker
	return it
}

// shortRun says whether the run was shorter than one 1 s window: its
// throughput has one partial window, the whole run.
func (r *Report) shortRun() bool { return r.Elapsed > 0 && r.Elapsed < time.Second }

func midAudits(r *Report) *MidAudits {
	if r.MidAudits.Count == 0 {
		return nil
	}
	m := r.MidAudits
	return &m
}

// WriteJSON writes the JSON report, indented.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.JSON())
}

// Print writes the report in a fixed, greppable layout.
func (r *Report) Print(w io.Writer) {
	mode := ""
	if r.Config.Deterministic {
		mode = ", deterministic (virtual time)"
	}
	fmt.Fprintf(w, "schedcache loadgen: %d nodes, %d pods at start, seed %d, GOMAXPROCS=%d, %d schedulers, %d shards, %s/%s%s\n",
		r.Config.Nodes, r.InitialPods, r.Config.Seed, runtime.GOMAXPROCS(0), r.Config.Schedulers, r.Shards, runtime.GOOS, runtime.GOARCH, mode)
	fmt.Fprintf(w, "load:      %d nodes + %d pods in %v (%.0f events/s)\n", r.Config.Nodes, r.InitialPods, r.LoadTime.Round(time.Millisecond), r.LoadRate)
	fmt.Fprintf(w, "run:       %v (wall %v), stopped by %s", r.Elapsed.Round(time.Millisecond), r.Wall.Round(time.Millisecond), r.Stopped)
	if r.Config.Scenario != "" {
		fmt.Fprintf(w, "; scenario %s", r.Config.Scenario)
	}
	if len(r.Config.ClusterFrom) > 0 {
		fmt.Fprintf(w, "; cluster from %s", strings.Join(r.Config.ClusterFrom, ","))
	}
	fmt.Fprintln(w)
	switch r.Config.Arrival {
	case arrPoisson:
		fmt.Fprintf(w, "arrivals:  poisson %.0f pods/s: %d arrived, %d pending at the end (max %d)\n", r.Config.Rate, r.Arrived, r.PendingAtEnd, r.MaxPending)
	case arrBurst:
		fmt.Fprintf(w, "arrivals:  bursts of %d every %v: %d arrived, %d pending at the end (max %d)\n", r.Config.BurstSize, r.Config.BurstInterval, r.Arrived, r.PendingAtEnd, r.MaxPending)
	case arrTrace:
		fmt.Fprintf(w, "arrivals:  trace %s (%d rows, speed %g): %d arrived, %d pending at the end (max %d)\n", r.Config.Trace.From, len(r.Config.Trace.rows), r.Config.Trace.speed(), r.Arrived, r.PendingAtEnd, r.MaxPending)
	}
	j := r.JSON()
	tp := j.DataItems[0].Data
	perWindow := "no window"
	switch {
	case r.shortRun():
		perWindow = fmt.Sprintf("run shorter than 1 s: one partial window of %v", r.Elapsed.Round(time.Millisecond))
	case len(r.Windows) > 0:
		perWindow = fmt.Sprintf("per 1 s window avg %.0f p50 %.0f p90 %.0f p99 %.0f", tp["Average"], tp["Perc50"], tp["Perc90"], tp["Perc99"])
	}
	fmt.Fprintf(w, "scheduled: %d pods (%.0f pods/s; %s); forgotten %d (failed bindings %d, conflicts %d); unschedulable decisions %d\n",
		r.Scheduled, r.PodsPerSec, perWindow, r.Forgotten, r.FailedBindings, r.Conflicts, r.Unschedulable)
	r.printPicker(w)
	r.printBindingCycle(w)
	r.printPodGroups(w)
	r.printCounters(w)
	r.printPhases(w)
	r.printExplanations(w)
	r.printLifecycle(w)
	fmt.Fprintf(w, "events:    %d informer events (%.0f events/s): %d adds, %d removes, %d node updates\n",
		r.Events, r.EventsPerSec, r.Adds, r.Removes, r.NodeUpdates)
	fmt.Fprintf(w, "assume latency:        p50 %v  p99 %v  p99.9 %v  max %v\n", r.Assume.P50, r.Assume.P99, r.Assume.P999, r.Assume.Max)
	if r.pluginPicker() {
		fmt.Fprintf(w, "pick latency:          p50 %v  p99 %v  p99.9 %v  max %v  (snapshot + the %s picker's Pick)\n", r.Read.P50, r.Read.P99, r.Read.P999, r.Read.Max, r.Picker)
	} else {
		fmt.Fprintf(w, "snapshot read latency: p50 %v  p99 %v  p99.9 %v  max %v  (take + read %d nodes)\n", r.Read.P50, r.Read.P99, r.Read.P999, r.Read.Max, r.Config.Sample)
	}
	fmt.Fprintf(w, "attempt latency:       p50 %v  p99 %v  p99.9 %v  max %v  (snapshot, pick, assume, bind)\n", r.Attempt.P50, r.Attempt.P99, r.Attempt.P999, r.Attempt.Max)
	if r.Config.openLoop() {
		fmt.Fprintf(w, "queueing delay:        p50 %v  p99 %v  p99.9 %v  max %v  (arrival to assume%s)\n", r.QueueDelay.P50, r.QueueDelay.P99, r.QueueDelay.P999, r.QueueDelay.Max, map[bool]string{true: ", virtual"}[r.Config.Deterministic])
	}
	if r.Config.Readers > 0 {
		fmt.Fprintf(w, "readers:               p50 %v  p99 %v  p99.9 %v  max %v  (%d readers, %d reads of %d nodes)\n", r.ReaderLatency.P50, r.ReaderLatency.P99, r.ReaderLatency.P999, r.ReaderLatency.Max, r.Config.Readers, r.Reads, r.Config.ReadNodes)
	}
	if r.Config.FullSnapshotEvery > 0 {
		fmt.Fprintf(w, "first full snapshot:   p50 %v  p99 %v  max %v  (%d taken)\n", r.FullSnapshot.P50, r.FullSnapshot.P99, r.FullSnapshot.Max, r.FullSnapshots)
	}
	ch, in := r.Churn, r.Informer
	fmt.Fprintf(w, "churn:     %d pod updates, %d pod deletes (+%d per confirmation), %d nodes added, %d removed, %d drains (%d evictions), %d NotReady, %d zone outages, %d zone moves, %d expiry pods; %d refused bindings\n",
		ch.PodUpdates, ch.PodDeletes, ch.ConfirmDeletes, ch.NodeAdds, ch.NodeRemoves, ch.Drains, ch.Evictions, ch.NotReady, ch.ZoneOutages, ch.ZoneMoves, ch.ExpiryAssumed, r.RefusedBindings)
	fmt.Fprintf(w, "informer:  pods %d adds %d updates %d deletes; nodes %d adds %d updates %d deletes; %d dropped, %d relists, %d tombstones\n",
		in.PodAdds, in.PodUpdates, in.PodDeletes, in.NodeAdds, in.NodeUpdates, in.NodeDeletes, in.Dropped, in.Relists, in.Tombstones)
	fmt.Fprintf(w, "memory:    after GC: heap in use %.1f MiB, live %.1f MiB (%.1f MiB after the load); RSS %.1f MiB, peak %.1f MiB\n",
		float64(r.HeapInUse)/(1<<20), float64(r.HeapAlloc)/(1<<20), float64(r.LoadHeapAlloc)/(1<<20), float64(r.RSS)/(1<<20), float64(r.PeakRSS)/(1<<20))
	fmt.Fprintf(w, "           at the load: objects %.1f MiB, + ground truth %.1f MiB, + cache %.1f MiB\n",
		float64(r.ObjectsHeap)/(1<<20), float64(r.TruthHeap)/(1<<20), float64(r.CacheHeap)/(1<<20))
	if r.Digest != "" {
		fmt.Fprintf(w, "digest:    %s\n", r.Digest)
	}
	for _, m := range r.Warnings {
		fmt.Fprintf(w, "warning:   %s\n", m)
	}
	fmt.Fprintf(w, "audit:     %d API-server pods, %d cache pods, %d nodes checked; %d divergences\n",
		r.Audit.PodsChecked, r.Audit.CachePods, r.Audit.NodesChecked, r.Audit.Divergences)
	if m := r.MidAudits; m.Count > 0 {
		fmt.Fprintf(w, "mid-run:   %d audits, %d with divergences; longest pause %.1f ms\n", m.Count, m.Failed, m.MaxPauseMs)
		if m.FirstFail != nil {
			fmt.Fprintf(w, "  first at %.3fs virtual: %d divergences\n", m.FirstFailAt, m.FirstFail.Divergences)
			for _, e := range m.FirstFail.Examples {
				fmt.Fprintf(w, "  divergence: %s\n", e)
			}
		}
	}
	for _, e := range r.Audit.Examples {
		fmt.Fprintf(w, "  divergence: %s\n", e)
	}
	fmt.Fprintf(w, "final:     %d pods, %d nodes in the cache; expected %d pods, %d nodes; async errors %d; consistent: %v\n",
		r.FinalPods, r.FinalNodes, r.ExpectedPods, r.ExpectedNodes, r.AsyncErrors, r.Consistent)
}
