package sim

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/workload"
)

// Arrivals from a trace (docs/loadgen.md, "Arrivals from a trace"):
// -arrivals-from FILE (a scenario's arrivals.from) replays a job stream,
// one pod per row of a CSV file (a header row naming the columns) or a
// JSON Lines file, gzip or not (told by the first bytes): submit (an
// offset from the run's start: "12.5s" or seconds as a number), cpu and
// memory (quantities), and optionally duration (the pod's run time,
// lifecycle.go), template (a podMix template's name), namespace and
// priority. Rows may come in any order: they arrive sorted by submit time
// (ties in file order), at that time divided by -arrivals-speed.

// Limits of a trace.
const (
	maxTraceRows  = 5_000_000
	maxTraceSpeed = 1e6
)

// TraceConfig is a plain value, shared and never changed once loaded:
// the trace of the arrivals.
type TraceConfig struct {
	// From is the trace file ("" none).
	From string
	// Speed divides the submit times (0 or 1: as written).
	Speed float64
	// Templates are podMix's template names, by index ("" unnamed).
	Templates []string
	// rows are the loaded arrivals, sorted by submit time.
	rows []TraceArrival
}

// TraceArrival is one pod of the trace, a plain value.
type TraceArrival struct {
	Submit    time.Duration
	Duration  time.Duration // 0: the template's or -pod-duration's lifecycle
	CPUMilli  int64
	Memory    int64
	Template  int // podMix index; -1: none
	Namespace string
	Priority  *int32
	Line      int // in the file
}

// TraceError is an immutable value naming the trace file, the line and
// the column at fault; it wraps ErrUsage. It reads "FILE:LINE: COLUMN:
// MSG" (without the column when the fault is the row's).
type TraceError struct {
	File   string
	Line   int
	Column string
	Msg    string
}

func (e *TraceError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Column == "" {
		return fmt.Sprintf("-arrivals-from %s: %s", where, e.Msg)
	}
	return fmt.Sprintf("-arrivals-from %s: %s: %s", where, e.Column, e.Msg)
}
func (e *TraceError) Unwrap() error { return ErrUsage }

func arrivalFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.Trace.From, "arrivals-from", cfg.Trace.From, "replay pod arrivals from a trace: CSV with a header row, or JSON Lines (gzip detected): submit, cpu, memory, and optional duration, template, namespace, priority")
	fs.Float64Var(&cfg.Trace.Speed, "arrivals-speed", cfg.Trace.Speed, "with -arrivals-from: submit times are divided by this (2: twice as fast; default 1)")
}

// speed is the factor the submit times are divided by.
func (t *TraceConfig) speed() float64 {
	if t.Speed == 0 {
		return 1
	}
	return t.Speed
}

// validateTrace checks the trace fields of an arrival "trace" run.
func (c *Config) validateTrace() error {
	switch {
	case c.Trace.From == "":
		return bad("arrival", "trace needs -arrivals-from")
	case math.IsNaN(c.Trace.Speed) || c.Trace.Speed < 0 || c.Trace.Speed > maxTraceSpeed:
		return bad("arrivals-speed", "must be a positive factor up to %g, got %v", float64(maxTraceSpeed), c.Trace.Speed)
	case c.Rate != 0:
		return bad("rate", "only with -arrival poisson")
	case c.BurstSize != 0 || c.BurstInterval != 0:
		return bad("burst-size", "-burst-size and -burst-interval only with -arrival burst")
	}
	return nil
}

// traceFlags makes the run replay -arrivals-from (or a scenario's
// arrivals.from): the arrival mode becomes "trace" and the trace is
// loaded.
func (c *Config) traceFlags(set map[string]bool) error {
	if set["arrivals-speed"] && c.Trace.From == "" {
		return bad("arrivals-speed", "needs -arrivals-from")
	}
	if set["arrivals-speed"] && !(c.Trace.Speed > 0) {
		return bad("arrivals-speed", "must be a positive factor up to %g, got %v", float64(maxTraceSpeed), c.Trace.Speed)
	}
	if c.Trace.From == "" {
		return nil
	}
	if set["arrivals-from"] {
		if set["arrival"] && c.Arrival != arrTrace {
			return bad("arrival", "not with -arrivals-from (the trace is the arrivals)")
		}
		c.Arrival, c.Rate, c.BurstSize, c.BurstInterval = arrTrace, 0, 0, 0
	}
	if c.Arrival != arrTrace {
		return nil
	}
	rows, err := loadTrace(c.Trace.From, c.Trace.Templates)
	if err != nil {
		return err
	}
	c.Trace.rows = rows
	return nil
}

// loadTrace reads and checks the trace file at path; templates are the
// podMix names a row's template may give.
func loadTrace(path string, templates []string) ([]TraceArrival, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, bad("arrivals-from", "%v", err)
	}
	defer f.Close()
	r, err := openTrace(f)
	if err != nil {
		return nil, &TraceError{File: path, Msg: err.Error()}
	}
	return parseTrace(path, r, templates)
}

// parseTrace parses a trace read from r (name in errors): JSON Lines
// when its first non-blank byte is '{', else CSV.
func parseTrace(name string, r io.Reader, templates []string) ([]TraceArrival, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	first := byte(0)
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if len(b) < n {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, &TraceError{File: name, Msg: "read: " + err.Error()}
			}
			break
		}
		if c := b[n-1]; c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			first = c
			break
		}
		if n >= 4096 {
			break
		}
	}
	p := traceParser{name: name, templates: templates}
	var err error
	if first == '{' {
		err = p.jsonl(br)
	} else {
		err = p.csv(br)
	}
	if err != nil {
		return nil, err
	}
	if len(p.rows) == 0 {
		return nil, &TraceError{File: name, Msg: "no arrivals: the trace has no row"}
	}
	sort.SliceStable(p.rows, func(i, j int) bool { return p.rows[i].Submit < p.rows[j].Submit })
	return p.rows, nil
}

// traceParser is one parse, owned by its caller.
type traceParser struct {
	name      string
	templates []string
	rows      []TraceArrival
}

func (p *traceParser) fail(line int, col, format string, args ...any) error {
	return &TraceError{File: p.name, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// traceColumns are the columns (and JSON fields) a trace may give.
var traceColumns = []string{"submit", "duration", "cpu", "memory", "template", "namespace", "priority"}

// row checks one row's values (a column absent: not in vals) and adds it.
func (p *traceParser) row(line int, vals map[string]string) error {
	if len(p.rows) >= maxTraceRows {
		return p.fail(line, "", "more than %d rows", maxTraceRows)
	}
	a := TraceArrival{Template: -1, Line: line}
	for _, col := range []string{"submit", "cpu", "memory"} {
		if strings.TrimSpace(vals[col]) == "" {
			return p.fail(line, col, "missing")
		}
	}
	var err error
	if a.Submit, err = traceDuration(vals["submit"]); err != nil {
		return p.fail(line, "submit", "%v", err)
	}
	if v := strings.TrimSpace(vals["duration"]); v != "" {
		if a.Duration, err = traceDuration(v); err != nil {
			return p.fail(line, "duration", "%v", err)
		}
		if a.Duration == 0 {
			return p.fail(line, "duration", "must be positive (leave it empty for none)")
		}
	}
	for _, q := range []struct {
		col   string
		milli bool
		dst   *int64
	}{{"cpu", true, &a.CPUMilli}, {"memory", false, &a.Memory}} {
		v := strings.TrimSpace(vals[q.col])
		qty, err := resource.ParseQuantity(v)
		if err != nil {
			return p.fail(line, q.col, "not a quantity (like 500m, 2, 512Mi): %q", v)
		}
		if qty.Sign() < 0 {
			return p.fail(line, q.col, "must not be negative, got %s", v)
		}
		n := qty.Value()
		if q.milli {
			n = qty.MilliValue()
		}
		if n > nodeinfo.MaxPodQuantity {
			return p.fail(line, q.col, "too large: more than the cache holds per pod (%d)", nodeinfo.MaxPodQuantity)
		}
		*q.dst = n
	}
	if v := strings.TrimSpace(vals["template"]); v != "" {
		for i, t := range p.templates {
			if t == v {
				a.Template = i
			}
		}
		if a.Template < 0 {
			if len(p.templates) == 0 {
				return p.fail(line, "template", "%q: the run has no podMix template", v)
			}
			return p.fail(line, "template", "%q is no podMix template's name (have: %s)", v, strings.Join(named(p.templates), ", "))
		}
	}
	if v := strings.TrimSpace(vals["namespace"]); v != "" {
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			return p.fail(line, "namespace", "%q: %s", v, errs[0])
		}
		a.Namespace = v
	}
	if v := strings.TrimSpace(vals["priority"]); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return p.fail(line, "priority", "not a 32-bit integer: %q", v)
		}
		pr := int32(n)
		a.Priority = &pr
	}
	p.rows = append(p.rows, a)
	return nil
}

func named(ts []string) []string {
	var out []string
	for _, t := range ts {
		if t != "" {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return []string{"none named"}
	}
	return out
}

// traceDuration parses a time: a duration ("12.5s", "2m") or seconds as
// a number ("12.5"); it must be finite, not negative and within the
// longest run.
func traceDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	var d time.Duration
	if x, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("not a finite time: %q", v)
		}
		if x < 0 {
			return 0, fmt.Errorf("must not be negative, got %s", v)
		}
		if x > maxDuration.Seconds() {
			return 0, fmt.Errorf("at most %v, got %s s", maxDuration, v)
		}
		d = time.Duration(x * float64(time.Second))
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("not a time (like 12.5s, or seconds: 12.5): %q", v)
		}
		if d < 0 {
			return 0, fmt.Errorf("must not be negative, got %s", v)
		}
		if d > maxDuration {
			return 0, fmt.Errorf("at most %v, got %s", maxDuration, v)
		}
	}
	return d, nil
}

// csv parses a CSV trace: a header row naming the columns, then one row
// per pod; '#' starts a comment line.
func (p *traceParser) csv(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.ReuseRecord = true
	head, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return p.fail(0, "", "no arrivals: the trace is empty")
	}
	if err != nil {
		return p.csvError(err)
	}
	hline, _ := cr.FieldPos(0)
	cols := make([]string, len(head))
	seen := map[string]bool{}
	for i, h := range head {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if !isTraceColumn(h) {
			return p.fail(hline, fmt.Sprintf("column %d", i+1), "unknown column %q (have: %s)", head[i], strings.Join(traceColumns, ", "))
		}
		if seen[h] {
			return p.fail(hline, fmt.Sprintf("column %d", i+1), "column %q given twice", h)
		}
		seen[h] = true
		cols[i] = h
	}
	for _, need := range []string{"submit", "cpu", "memory"} {
		if !seen[need] {
			return p.fail(hline, "", "the header names no %q column (need submit, cpu, memory)", need)
		}
	}
	vals := map[string]string{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return p.csvError(err)
		}
		line, _ := cr.FieldPos(0)
		clear(vals)
		for i, v := range rec {
			vals[cols[i]] = v
		}
		if err := p.row(line, vals); err != nil {
			return err
		}
	}
}

func (p *traceParser) csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			return p.fail(pe.Line, "", "the row's field count differs from the header's")
		}
		return p.fail(pe.Line, fmt.Sprintf("character %d", pe.Column), "%s", pe.Err.Error())
	}
	return p.fail(0, "", "read: %v", err)
}

func isTraceColumn(c string) bool {
	for _, k := range traceColumns {
		if k == c {
			return true
		}
	}
	return false
}

// jsonl parses a JSON Lines trace: one object per line (blank lines
// skipped); a field is a string or a number.
func (p *traceParser) jsonl(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	vals := map[string]string{}
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			return p.fail(line, "", "not a JSON object: %v", err)
		}
		clear(vals)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !isTraceColumn(k) {
				return p.fail(line, k, "unknown field (have: %s)", strings.Join(traceColumns, ", "))
			}
			raw := bytes.TrimSpace(obj[k])
			switch {
			case len(raw) > 0 && raw[0] == '"':
				var s string
				if err := json.Unmarshal(raw, &s); err != nil {
					return p.fail(line, k, "%v", err)
				}
				vals[k] = s
			case len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')):
				vals[k] = string(raw)
			case string(raw) == "null":
			default:
				return p.fail(line, k, "want a string or a number, got %s", raw)
			}
		}
		if err := p.row(line, vals); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return p.fail(0, "", "a line longer than 1 MiB")
		}
		return p.fail(0, "", "read: %v", err)
	}
	return nil
}

// traceTally counts a trace run's pods toward its end: the run stops
// once every row has arrived and every traced pod is settled (found
// unschedulable, its binding failed, bound without a lifecycle, or its
// lifecycle over: completed or deleted first).
//
// Contract: safe for concurrent use (the arrivals, the schedulers and the
// API server count).
type traceTally struct {
	rows    int64        // immutable: the trace's rows
	arrived atomic.Int64 // atomic
	settled atomic.Int64 // atomic
}

// over says whether the trace is used up and its pods settled; false on
// nil.
func (t *traceTally) over() bool {
	return t != nil && t.arrived.Load() >= t.rows && t.settled.Load() >= t.rows
}

// traceFeed makes the trace's pods, owned by the goroutine that feeds the
// arrivals (the event loop, or the real-time arrivals goroutine).
type traceFeed struct {
	rows  []TraceArrival      // immutable
	speed float64             // immutable
	base  *workload.Cluster   // immutable: the run's cluster, for rows without a template
	tmpl  []*workload.Cluster // immutable: one per podMix template
	next  int                 // owned: the next row to arrive
}

func newTraceFeed(cfg Config, cl *workload.Cluster) *traceFeed {
	f := &traceFeed{rows: cfg.Trace.rows, speed: cfg.Trace.speed(), base: cl}
	if cfg.Shape != nil {
		for _, t := range cfg.Shape.PodMix {
			t.Weight = 1
			f.tmpl = append(f.tmpl, &workload.Cluster{Spec: workload.ClusterSpec{Shape: &workload.Shape{PodMix: []workload.PodTemplate{t}}}})
		}
	}
	return f
}

// at is when row i arrives (run time).
func (f *traceFeed) at(i int) time.Duration {
	if f.speed == 1 {
		return f.rows[i].Submit
	}
	return time.Duration(float64(f.rows[i].Submit) / f.speed)
}

// done says whether every row has arrived.
func (f *traceFeed) done() bool { return f.next >= len(f.rows) }

// pod makes row i's pod: the template's (or the run's standard) pod with
// one container requesting the row's cpu and memory.
func (f *traceFeed) pod(r *rand.Rand, i int) *v1.Pod {
	row := f.rows[i]
	cl := f.base
	if row.Template >= 0 && row.Template < len(f.tmpl) {
		cl = f.tmpl[row.Template]
	}
	p := cl.NewPod(r, fmt.Sprintf("trace-%d", i), "")
	s := &p.Spec
	c := s.Containers[0]
	c.Resources = v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(row.CPUMilli, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(row.Memory, resource.BinarySI),
	}}
	s.Containers = []v1.Container{c}
	s.InitContainers, s.Overhead = nil, nil
	p.Status.QOSClass = v1.PodQOSBurstable
	ann := make(map[string]string, len(p.Annotations)+2)
	maps.Copy(ann, p.Annotations)
	if row.Template >= 0 {
		ann[annTemplate] = strconv.Itoa(row.Template)
	}
	if row.Duration > 0 {
		ann[annRunFor] = strconv.FormatInt(int64(row.Duration), 10)
	}
	ann[annTrace] = ""
	p.Annotations = ann
	if row.Namespace != "" {
		p.Namespace = row.Namespace
	}
	if row.Priority != nil {
		pr := *row.Priority
		s.Priority = &pr
	}
	return p
}

// arriveTrace (evArrive of a trace run) puts the rows due by ev.at in the
// pending queue and queues the next row's arrival.
func (d *detRun) arriveTrace(ev event) {
	if d.feed == nil {
		d.feed = newTraceFeed(d.cfg, d.e.cl)
	}
	f := d.feed
	for !f.done() && f.at(f.next) <= ev.at {
		at := f.at(f.next)
		pod := f.pod(d.r, f.next)
		f.next++
		d.arrived++
		d.api.life.trace.arrived.Add(1)
		d.queue = append(d.queue, arrival{pod: pod, at: at})
		traceEvent(d.digest, ev.at, "arrive", pod.Name, "")
	}
	d.afterArrivals(ev.at, "the trace outruns the schedulers")
	if !f.done() {
		d.push(event{at: f.at(f.next), kind: evArrive})
	}
}

// traceArrivals is the real-time arrivals goroutine of a trace run: it
// feeds the pending queue at each row's time after the start.
func (rt *realtimeRun) traceArrivals() {
	f := newTraceFeed(rt.cfg, rt.e.cl)
	r := rand.New(rand.NewPCG(uint64(rt.cfg.Seed), 9))
	for !f.done() {
		next := f.at(f.next)
		if d := time.Until(rt.t0.Add(next)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-rt.done:
				t.Stop()
				return
			case <-t.C:
			}
		}
		pod := f.pod(r, f.next)
		f.next++
		select {
		case rt.arr <- arrival{pod: pod, at: next}:
			rt.arrived++
			rt.api.life.trace.arrived.Add(1)
		case <-rt.done:
			return
		}
	}
}

// applyTrace writes a scenario's arrivals.from and arrivals.speed over
// cfg (the trace is loaded by parseFlags, after the flags).
func (sc *Scenario) applyTrace(cfg *Config) error {
	a := sc.Arrivals
	if a.From == nil {
		if a.Speed != nil {
			return sc.errorAt("arrivals.speed", "needs arrivals.from")
		}
		return nil
	}
	if a.Mode != "" && a.Mode != arrTrace {
		return sc.errorAt("arrivals.mode", "%q not with arrivals.from (the trace is the arrivals; leave mode out or give trace)", a.Mode)
	}
	p := *a.From
	if strings.TrimSpace(p) == "" {
		return sc.errorAt("arrivals.from", "an empty path")
	}
	if !filepath.IsAbs(p) && !strings.HasPrefix(sc.source, "preset ") {
		p = filepath.Join(filepath.Dir(sc.source), p)
	}
	cfg.Arrival, cfg.Trace.From = arrTrace, p
	if a.Speed != nil {
		if math.IsNaN(*a.Speed) || *a.Speed <= 0 || *a.Speed > maxTraceSpeed {
			return sc.errorAt("arrivals.speed", "must be a positive factor up to %g, got %v", float64(maxTraceSpeed), *a.Speed)
		}
		cfg.Trace.Speed = *a.Speed
	}
	return nil
}
