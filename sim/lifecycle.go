package sim

import (
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/schedcache/schedcache/internal/hist"
	"github.com/schedcache/schedcache/workload"
)

// Pod lifecycle (docs/loadgen.md, "Pod lifecycle"): a pod the simulator
// binds runs for a duration once its binding is delivered (virtual time in
// deterministic mode, wall time in real time), then completes: the
// simulated API server sets its phase to Succeeded or Failed and deletes
// it, and the informer delivers both to the cache, which frees the node.
// Each pod's duration and outcome follow from the seed and the pod's UID
// alone, so a deterministic run keeps its digest.

// Pod annotations the lifecycle reads.
const (
	// annTemplate is the index of the podMix template a pod came from.
	annTemplate = "sim.schedcache.io/template"
	// annRunFor is a pod's own run time in nanoseconds (a trace's
	// duration column).
	annRunFor = "sim.schedcache.io/run-for"
	// annPhase is the index of the phase whose createPods template a pod
	// came from (phases.go), when the template has runFor or failRate.
	annPhase = "sim.schedcache.io/phase"
	// annTrace marks a pod of -arrivals-from's trace (arrivals.go).
	annTrace = "sim.schedcache.io/trace"
)

// maxRunFor bounds a pod's run time.
const maxRunFor = maxDuration

type lifeKind uint8

const (
	lifeNone    lifeKind = iota
	lifeFixed            // A
	lifeUniform          // uniform in [A, B]
	lifeExp              // exponential with mean A
)

// LifeSpec is a plain value: how long a pod runs and how often it fails.
type LifeSpec struct {
	Kind lifeKind
	A, B time.Duration
	// FailRate is the probability a pod completes Failed; FailSet says
	// it was given (a template's then overrides the default's).
	FailRate float64
	FailSet  bool
}

// On says whether pods of the spec run for a duration.
func (s LifeSpec) On() bool { return s.Kind != lifeNone }

// String writes the spec as -pod-duration takes it.
func (s LifeSpec) String() string {
	switch s.Kind {
	case lifeFixed:
		return s.A.String()
	case lifeUniform:
		return s.A.String() + ".." + s.B.String()
	case lifeExp:
		return "exp:" + s.A.String()
	}
	return ""
}

// draw returns a run time of the spec (at least 1 ns).
func (s LifeSpec) draw(r *rand.Rand) time.Duration {
	var d time.Duration
	switch s.Kind {
	case lifeFixed:
		d = s.A
	case lifeUniform:
		d = s.A + time.Duration(r.Int64N(int64(s.B-s.A)+1))
	case lifeExp:
		d = time.Duration(min(r.ExpFloat64()*float64(s.A), float64(maxRunFor)))
	}
	return max(d, 1)
}

// LifeConfig is a plain value, shared and never changed once set: the
// run's pod lifecycle.
type LifeConfig struct {
	// Default applies to every pod the simulator makes: -pod-duration,
	// -pod-fail-rate (scenario workload.runFor, workload.podFailRate).
	Default LifeSpec
	// Mix[i] is podMix[i]'s runFor and failRate (nil: the default's).
	Mix []LifeSpec
	// Phase[i] is the runFor and failRate of phase i's createPods
	// template (a zero spec: the default's).
	Phase []LifeSpec
}

// on says whether any pod may have a lifecycle.
func (l *LifeConfig) on() bool {
	if l.Default.On() {
		return true
	}
	for _, s := range l.Mix {
		if s.On() {
			return true
		}
	}
	for _, s := range l.Phase {
		if s.On() {
			return true
		}
	}
	return false
}

// spec returns the spec of podMix template i (-1: none), merged with the
// default.
func (l *LifeConfig) spec(i int) LifeSpec {
	if i >= 0 && i < len(l.Mix) {
		return l.merged(l.Mix[i])
	}
	return l.Default
}

// merged is t over the default: t's run time when it has one, its fail
// rate when given.
func (l *LifeConfig) merged(t LifeSpec) LifeSpec {
	s := l.Default
	if t.On() {
		s.Kind, s.A, s.B = t.Kind, t.A, t.B
	}
	if t.FailSet {
		s.FailRate, s.FailSet = t.FailRate, true
	}
	return s
}

// parseLifeSpec parses -pod-duration: "30s" (fixed), "10s..60s" (uniform)
// or "exp:30s" (exponential with that mean); "" or "0": none.
func parseLifeSpec(v string) (LifeSpec, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "0" {
		return LifeSpec{}, nil
	}
	one := func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		switch {
		case err != nil:
			return 0, fmt.Errorf("not a duration (like 30s): %q", s)
		case d <= 0:
			return 0, fmt.Errorf("must be positive, got %v", d)
		case d > maxRunFor:
			return 0, fmt.Errorf("at most %v, got %v", maxRunFor, d)
		}
		return d, nil
	}
	if m, ok := strings.CutPrefix(v, "exp:"); ok {
		d, err := one(m)
		return LifeSpec{Kind: lifeExp, A: d}, err
	}
	if lo, hi, ok := strings.Cut(v, ".."); ok {
		a, err := one(lo)
		if err != nil {
			return LifeSpec{}, err
		}
		b, err := one(hi)
		if err != nil {
			return LifeSpec{}, err
		}
		if a > b {
			return LifeSpec{}, fmt.Errorf("min %v is more than max %v", a, b)
		}
		return LifeSpec{Kind: lifeUniform, A: a, B: b}, nil
	}
	d, err := one(v)
	return LifeSpec{Kind: lifeFixed, A: d}, err
}

// lifeSpecFlag is -pod-duration's flag.Value.
type lifeSpecFlag struct{ s *LifeSpec }

func (f lifeSpecFlag) String() string {
	if f.s == nil {
		return ""
	}
	return f.s.String()
}

func (f lifeSpecFlag) Set(v string) error {
	s, err := parseLifeSpec(v)
	if err != nil {
		return err
	}
	f.s.Kind, f.s.A, f.s.B = s.Kind, s.A, s.B
	return nil
}

// failRateFlag is -pod-fail-rate's flag.Value: it marks the rate given.
type failRateFlag struct{ s *LifeSpec }

func (f failRateFlag) String() string {
	if f.s == nil {
		return "0"
	}
	return strconv.FormatFloat(f.s.FailRate, 'g', -1, 64)
}

func (f failRateFlag) Set(v string) error {
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("not a number: %q", v)
	}
	f.s.FailRate, f.s.FailSet = x, true
	return nil
}

func lifecycleFlags(fs *flag.FlagSet, cfg *Config) {
	fs.Var(lifeSpecFlag{&cfg.Life.Default}, "pod-duration", "pod lifecycle: a bound pod runs this long, then completes and is deleted: 30s (fixed), 10s..60s (uniform) or exp:30s (exponential, that mean); default none")
	fs.Var(failRateFlag{&cfg.Life.Default}, "pod-fail-rate", "pod lifecycle: fraction of completing pods that end Failed (else Succeeded), in [0, 1]")
}

// validateLifecycle checks the lifecycle fields.
func (c *Config) validateLifecycle() error {
	for i, s := range append([]LifeSpec{c.Life.Default}, c.Life.Mix...) {
		name := "pod-fail-rate"
		if i > 0 {
			name = fmt.Sprintf("podMix[%d].failRate", i-1)
		}
		if math.IsNaN(s.FailRate) || s.FailRate < 0 || s.FailRate > 1 {
			return bad(name, "must be a fraction in [0, 1], got %v", s.FailRate)
		}
	}
	return nil
}

// LifecycleCounts is a plain value, owned by whoever holds it: what the
// pod lifecycle did.
type LifecycleCounts struct {
	Started   int64 `json:"started"`   // bound pods that began to run for a duration
	Completed int64 `json:"completed"` // of them, completed (Succeeded + Failed)
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	// Gone were deleted before they completed (churn, eviction).
	Gone int64 `json:"gone"`
	// Running at the end of the run.
	Running int64 `json:"running_at_end"`
}

// LifecycleReport is a plain value: the counts and the time from a
// pod's submission (its arrival, its creation in the closed loop) to
// its completion.
type LifecycleReport struct {
	LifecycleCounts
	SubmitToCompletionMean time.Duration
	SubmitToCompletion     Latency
}

// JSONLifecycle is the JSON report's lifecycle section (seconds).
type JSONLifecycle struct {
	LifecycleCounts
	MeanS float64 `json:"submit_to_completion_mean_s"`
	P50S  float64 `json:"submit_to_completion_p50_s"`
	P99S  float64 `json:"submit_to_completion_p99_s"`
	MaxS  float64 `json:"submit_to_completion_max_s"`
}

func (l *LifecycleReport) json() *JSONLifecycle {
	if l == nil {
		return nil
	}
	return &JSONLifecycle{LifecycleCounts: l.LifecycleCounts, MeanS: l.SubmitToCompletionMean.Seconds(),
		P50S: l.SubmitToCompletion.P50.Seconds(), P99S: l.SubmitToCompletion.P99.Seconds(), MaxS: l.SubmitToCompletion.Max.Seconds()}
}

// lifecycle is the API server's side of the pod lifecycle.
//
// Contract: submits is safe for concurrent use (the schedulers record
// submissions); every other field is owned by the apiServer's owner.
type lifecycle struct {
	cfg     LifeConfig                          // immutable
	seed    int64                               // immutable
	submits *xsync.MapOf[string, time.Duration] // concurrent: pod UID -> submission (run time)
	running map[string]bool                     // owned: pods whose completion is queued
	counts  LifecycleCounts                     // owned
	h       *hist.Histogram                     // owned: submission to completion
	trace   *traceTally                         // concurrent; nil: not a trace run
}

// newLifecycle returns the run's lifecycle, nil when no pod has one.
func newLifecycle(cfg Config) *lifecycle {
	if !cfg.Life.on() && cfg.Arrival != arrTrace {
		return nil
	}
	l := &lifecycle{cfg: cfg.Life, seed: cfg.Seed, submits: xsync.NewMapOf[string, time.Duration](),
		running: map[string]bool{}, h: hist.New()}
	if cfg.Arrival == arrTrace {
		l.trace = &traceTally{rows: int64(len(cfg.Trace.rows))}
	}
	return l
}

// decided counts a traced pod's scheduling outcome toward the trace's
// end: it is settled unless it was bound and has a lifecycle (its
// completion settles it). Safe for concurrent use; a no-op on nil and
// for pods not of the trace.
func (l *lifecycle) decided(p *v1.Pod, bound bool) {
	if l == nil || l.trace == nil {
		return
	}
	if _, ok := p.Annotations[annTrace]; !ok {
		return
	}
	if bound {
		if _, _, ok := l.of(p); ok {
			return
		}
	}
	l.trace.settled.Add(1)
}

// traceOver says whether a trace run's trace is used up and its pods
// settled (false on nil and without a trace).
func (l *lifecycle) traceOver() bool { return l != nil && l.trace.over() }

// traceTally is the trace run's tally (nil: none).
func (l *lifecycle) traceTally() *traceTally {
	if l == nil {
		return nil
	}
	return l.trace
}

// ended counts a traced pod's lifecycle over (completed or gone).
func (l *lifecycle) ended(p *v1.Pod) {
	if l.trace == nil {
		return
	}
	if _, ok := p.Annotations[annTrace]; ok {
		l.trace.settled.Add(1)
	}
}

// submitted records when pod was submitted (run time); safe for
// concurrent use; a no-op on nil.
func (l *lifecycle) submitted(p *v1.Pod, at time.Duration) {
	if l == nil {
		return
	}
	l.submits.Store(string(p.UID), at)
}

// of returns pod p's run time and outcome, or false when it has none.
func (l *lifecycle) of(p *v1.Pod) (time.Duration, bool, bool) {
	tmpl := -1
	if v, ok := p.Annotations[annTemplate]; ok {
		if i, err := strconv.Atoi(v); err == nil {
			tmpl = i
		}
	}
	s := l.cfg.spec(tmpl)
	if v, ok := p.Annotations[annPhase]; ok {
		if i, err := strconv.Atoi(v); err == nil && i >= 0 && i < len(l.cfg.Phase) {
			s = l.cfg.merged(l.cfg.Phase[i])
		}
	}
	var own time.Duration
	if v, ok := p.Annotations[annRunFor]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			own = time.Duration(n)
		}
	}
	if own == 0 && !s.On() {
		return 0, false, false
	}
	h := fnv.New64a()
	h.Write([]byte(p.UID))
	r := rand.New(rand.NewPCG(uint64(l.seed), h.Sum64()))
	d := own
	if d == 0 {
		d = s.draw(r)
	}
	failed := s.FailRate > 0 && r.Float64() < s.FailRate
	return d, failed, true
}

// report returns the lifecycle's report, nil when it is off.
func (l *lifecycle) report() *LifecycleReport {
	if l == nil {
		return nil
	}
	c := l.counts
	c.Running = int64(len(l.running))
	return &LifecycleReport{LifecycleCounts: c, SubmitToCompletionMean: l.h.Mean(), SubmitToCompletion: summarise(l.h)}
}

// startLife is called as pod p's binding is delivered at now: a pod with
// a lifecycle gets its completion queued. It says whether p has one (its
// confirmation then deletes no old pod: it leaves on its own).
func (a *apiServer) startLife(now time.Duration, p *v1.Pod) bool {
	l := a.life
	if l == nil {
		return false
	}
	d, failed, ok := l.of(p)
	if !ok {
		return false
	}
	uid := string(p.UID)
	if l.running[uid] {
		return true
	}
	l.running[uid] = true
	l.counts.Started++
	a.push(action{at: now + d, kind: actComplete, pod: p, failed: failed})
	return true
}

// complete (actComplete) ends pod x.pod: its phase becomes Succeeded or
// Failed, then it is deleted. A pod deleted meanwhile (churn, eviction)
// is counted gone.
func (a *apiServer) complete(now time.Duration, x action) {
	l := a.life
	uid := string(x.pod.UID)
	delete(l.running, uid)
	r, ok := a.truth.pods.Load(uid)
	l.ended(x.pod)
	if !ok || !r.Bound {
		l.counts.Gone++
		l.submits.Delete(uid)
		return
	}
	np := *r.Pod
	np.Status.Phase = v1.PodSucceeded
	if x.failed {
		np.Status.Phase = v1.PodFailed
		l.counts.Failed++
	} else {
		l.counts.Succeeded++
	}
	l.counts.Completed++
	np.ResourceVersion = a.nextRV()
	a.truth.update(&np)
	a.inf.emitPod(now, &np, false)
	a.noted(now, "api-complete", np.Name, string(np.Status.Phase))
	a.gone[uid] = true // out of the live pods: churn picks it no more
	if a.onComplete != nil {
		a.onComplete(now, &np, x.failed)
	}
	a.deletePod(now, &np)
	if at, ok := l.submits.LoadAndDelete(uid); ok {
		l.h.Record(now - at)
	}
}

// printLifecycle writes the text report's lifecycle line.
func (r *Report) printLifecycle(w io.Writer) {
	l := r.Lifecycle
	if l == nil {
		return
	}
	fmt.Fprintf(w, "lifecycle: %d pods ran, %d completed (%d succeeded, %d failed), %d deleted first, %d running at the end; submit to completion mean %v p50 %v p99 %v\n",
		l.Started, l.Completed, l.Succeeded, l.Failed, l.Gone, l.Running,
		l.SubmitToCompletionMean.Round(time.Millisecond), l.SubmitToCompletion.P50.Round(time.Millisecond), l.SubmitToCompletion.P99.Round(time.Millisecond))
}

// ScenarioRunFor is a pod's run time in a scenario: fixed, uniform in
// [min, max], or exponential with a mean.
type ScenarioRunFor struct {
	Fixed       *string              `json:"fixed"`
	Min         *string              `json:"min"`
	Max         *string              `json:"max"`
	Exponential *ScenarioExponential `json:"exponential"`
}

// ScenarioExponential is an exponential distribution by its mean.
type ScenarioExponential struct {
	Mean *string `json:"mean"`
}

// lifeSpec checks a scenario's runFor (at field) into a spec.
func (sc *Scenario) lifeSpec(field string, r *ScenarioRunFor) (LifeSpec, error) {
	one := func(f string, s *string) (time.Duration, error) {
		if s == nil {
			return 0, sc.errorAt(field+"."+f, "missing")
		}
		d, err := time.ParseDuration(*s)
		switch {
		case err != nil:
			return 0, sc.errorAt(field+"."+f, "not a duration (like 30s): %q", *s)
		case d <= 0:
			return 0, sc.errorAt(field+"."+f, "must be positive, got %v", d)
		case d > maxRunFor:
			return 0, sc.errorAt(field+"."+f, "at most %v, got %v", maxRunFor, d)
		}
		return d, nil
	}
	n := 0
	for _, set := range []bool{r.Fixed != nil, r.Min != nil || r.Max != nil, r.Exponential != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return LifeSpec{}, sc.errorAt(field, "give one of fixed, min and max, or exponential")
	}
	switch {
	case r.Fixed != nil:
		d, err := one("fixed", r.Fixed)
		return LifeSpec{Kind: lifeFixed, A: d}, err
	case r.Exponential != nil:
		d, err := one("exponential.mean", r.Exponential.Mean)
		return LifeSpec{Kind: lifeExp, A: d}, err
	}
	a, err := one("min", r.Min)
	if err != nil {
		return LifeSpec{}, err
	}
	b, err := one("max", r.Max)
	if err != nil {
		return LifeSpec{}, err
	}
	if a > b {
		return LifeSpec{}, sc.errorAt(field, "min %v is more than max %v", a, b)
	}
	return LifeSpec{Kind: lifeUniform, A: a, B: b}, nil
}

// applyLife writes the scenario's lifecycle fields (workload.runFor,
// workload.podFailRate, podMix[i].runFor and .failRate) and podMix's
// names over cfg; cfg.Shape is the scenario's, not yet shared.
func (sc *Scenario) applyLife(cfg *Config) error {
	rate := sc.failRate
	if w := sc.Workload; w != nil {
		if w.RunFor != nil {
			s, err := sc.lifeSpec("workload.runFor", w.RunFor)
			if err != nil {
				return err
			}
			cfg.Life.Default.Kind, cfg.Life.Default.A, cfg.Life.Default.B = s.Kind, s.A, s.B
		}
		if err := rate("workload.podFailRate", w.PodFailRate, &cfg.Life.Default); err != nil {
			return err
		}
	}
	cfg.Life.Mix, cfg.Trace.Templates = nil, nil
	seen := map[string]int{}
	for i, t := range sc.PodMix {
		f := fmt.Sprintf("podMix[%d]", i)
		if t.Name != "" {
			if errs := validation.IsDNS1123Label(t.Name); len(errs) > 0 {
				return sc.errorAt(f+".name", "%q: %s", t.Name, errs[0])
			}
			if j, ok := seen[t.Name]; ok {
				return sc.errorAt(f+".name", "%q is podMix[%d]'s name too", t.Name, j)
			}
			seen[t.Name] = i
		}
		cfg.Trace.Templates = append(cfg.Trace.Templates, t.Name)
		var s LifeSpec
		if t.RunFor != nil {
			var err error
			if s, err = sc.lifeSpec(f+".runFor", t.RunFor); err != nil {
				return err
			}
		}
		if err := rate(f+".failRate", t.FailRate, &s); err != nil {
			return err
		}
		cfg.Life.Mix = append(cfg.Life.Mix, s)
	}
	annotateMix(cfg.Shape, cfg.Life.Mix)
	return nil
}

// annotateMix marks the pod mix's templates that have a lifecycle (mix)
// with their index, which lifecycle.of reads; shape is not yet shared.
func annotateMix(shape *workload.Shape, mix []LifeSpec) {
	if shape == nil {
		return
	}
	for i, s := range mix {
		if (s.On() || s.FailSet) && i < len(shape.PodMix) {
			shape.PodMix[i].Annotations = map[string]string{annTemplate: strconv.Itoa(i)}
		}
	}
}

// failRate checks a scenario's fail rate v (at field) into s.
func (sc *Scenario) failRate(field string, v *float64, s *LifeSpec) error {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || *v < 0 || *v > 1 {
		return sc.errorAt(field, "must be a fraction in [0, 1], got %v", *v)
	}
	s.FailRate, s.FailSet = *v, true
	return nil
}
