package sim

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/schedcache/schedcache/workload"
)

// Multi-phase workloads (docs/loadgen.md, "Multi-phase workloads"): a
// scenario's phases list runs one op after another on one cache, as
// scheduler_perf's workloadTemplate does, and measures the phases that
// collect metrics. This file holds the scenario fields and the plan they
// are checked into; phaserun.go runs a plan in the deterministic engine,
// phasereport.go reports it and checks its thresholds.

// ScenarioPhase is one step of a phases scenario: exactly one op, with
// an optional name and, on a measured step, thresholds.
type ScenarioPhase struct {
	Name            string                `json:"name"`
	CreateNodes     *PhaseCreateNodes     `json:"createNodes"`
	CreatePods      *PhaseCreatePods      `json:"createPods"`
	Barrier         *PhaseBarrier         `json:"barrier"`
	Sleep           *PhaseSleep           `json:"sleep"`
	DeletePods      *PhaseDeletePods      `json:"deletePods"`
	Churn           *PhaseChurn           `json:"churn"`
	StartCollecting *PhaseStartCollecting `json:"startCollecting"`
	StopCollecting  *PhaseStopCollecting  `json:"stopCollecting"`
	UngatePods      *PhaseUngatePods      `json:"ungatePods"`
	Thresholds      *ScenarioThresholds   `json:"thresholds"`
}

// PhaseCreateNodes adds count nodes of the cluster's shape, with the
// allocatable, labels and taints given here on top of it.
type PhaseCreateNodes struct {
	Count       *int                 `json:"count"`
	Allocatable *ScenarioAllocatable `json:"allocatable"`
	Labels      []ScenarioLabel      `json:"labels"`
	Taints      []ScenarioTaint      `json:"taints"`
}

// PhaseCreatePods creates count pending pods of the template (none: the
// scenario's pod mix) in namespace; the phase ends once each is bound or
// found unschedulable, unless skipWait.
type PhaseCreatePods struct {
	Count          *int              `json:"count"`
	Namespace      string            `json:"namespace"`
	Template       *PhasePodTemplate `json:"template"`
	CollectMetrics bool              `json:"collectMetrics"`
	SkipWait       bool              `json:"skipWait"`
}

// PhasePodTemplate is podMix's template (shape.go) without a weight, plus
// labels, priority, required node affinity, required pod (anti-)affinity,
// topology spread and gangs.
type PhasePodTemplate struct {
	// PodDefault makes every pod scheduler_perf's templates/pod-default.yaml
	// exactly (one "pause" container, registry.k8s.io/pause:3.10.2, port
	// 80, requests equal to limits: cpu and memory, 100m and 500Mi when
	// not given), with no label but the template's: none of the
	// generator's standard pod. It excludes plain, containers,
	// tolerations and nodeSelector.
	PodDefault      bool                   `json:"podDefault"`
	Plain           bool                   `json:"plain"`
	Containers      *IntRange              `json:"containers"`
	CPU             *QuantityRange         `json:"cpu"`
	Memory          *QuantityRange         `json:"memory"`
	Tolerations     []ScenarioToleration   `json:"tolerations"`
	NodeSelector    map[string]string      `json:"nodeSelector"`
	Labels          map[string]string      `json:"labels"`
	Priority        *int32                 `json:"priority"`
	NodeAffinity    []ScenarioNodeSelector `json:"nodeAffinity"`
	PodAffinity     []ScenarioAffinityTerm `json:"podAffinity"`
	PodAntiAffinity []ScenarioAffinityTerm `json:"podAntiAffinity"`
	TopologySpread  []ScenarioSpread       `json:"topologySpread"`
	GangSize        *int                   `json:"gangSize"`
	// SchedulerName is the pods' spec.schedulerName ("": the
	// generator's, default-scheduler): a picker with several profiles
	// (loadgen-fwk -config) schedules each pod with the profile of
	// that name.
	SchedulerName string `json:"schedulerName"`
	// SchedulingGates are the pods' spec.schedulingGates: a gated pod
	// waits until an ungatePods phase removes them.
	SchedulingGates []string `json:"schedulingGates"`
	// RunFor and FailRate are the pods' lifecycle, as podMix's
	// (lifecycle.go).
	RunFor   *ScenarioRunFor `json:"runFor"`
	FailRate *float64        `json:"failRate"`
}

// ScenarioNodeSelector is one requirement of a required node affinity
// term (the requirements of a template are ANDed in one term).
type ScenarioNodeSelector struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// ScenarioAffinityTerm is a required pod (anti-)affinity term: the pods
// with all of labels, in namespaces (none: the pod's own), per topologyKey.
type ScenarioAffinityTerm struct {
	Labels      map[string]string `json:"labels"`
	TopologyKey string            `json:"topologyKey"`
	Namespaces  []string          `json:"namespaces"`
}

// ScenarioSpread is a topology spread constraint over the pods with all
// of labels.
type ScenarioSpread struct {
	MaxSkew           *int32            `json:"maxSkew"`
	TopologyKey       string            `json:"topologyKey"`
	WhenUnsatisfiable string            `json:"whenUnsatisfiable"`
	Labels            map[string]string `json:"labels"`
}

// PhaseBarrier waits until every pod created so far (of namespaces, when
// given) is bound or found unschedulable.
type PhaseBarrier struct {
	Namespaces []string `json:"namespaces"`
}

// PhaseSleep lets duration of run time pass.
type PhaseSleep struct {
	Duration *string `json:"duration"`
}

// PhaseDeletePods deletes count (or all) pods of namespace, oldest first,
// at once or rate a second.
type PhaseDeletePods struct {
	Namespace string   `json:"namespace"`
	Count     *int     `json:"count"`
	All       bool     `json:"all"`
	Rate      *float64 `json:"rate"`
}

// PhaseChurn is the API server's churn (the churn section's rates) for
// duration; with skipWait the next phase starts at once and the churn
// goes on in the background (without duration: until the run ends).
type PhaseChurn struct {
	PodUpdateRate  *float64 `json:"podUpdateRate"`
	PodDeleteRate  *float64 `json:"podDeleteRate"`
	NodeAddRate    *float64 `json:"nodeAddRate"`
	NodeRemoveRate *float64 `json:"nodeRemoveRate"`
	DrainRate      *float64 `json:"drainRate"`
	NotReadyRate   *float64 `json:"notReadyRate"`
	ZoneMoveRate   *float64 `json:"zoneMoveRate"`
	Duration       *string  `json:"duration"`
	SkipWait       bool     `json:"skipWait"`
}

// PhaseUngatePods removes the scheduling gates of count (or all) gated
// pods of namespace, oldest first, at once: they join the scheduling
// queue.
type PhaseUngatePods struct {
	Namespace string `json:"namespace"`
	Count     *int   `json:"count"`
	All       bool   `json:"all"`
}

// PhaseStartCollecting opens a measured span, named by the phase's name,
// that the next stopCollecting closes.
type PhaseStartCollecting struct{}

// PhaseStopCollecting closes the open measured span.
type PhaseStopCollecting struct{}

// ScenarioThresholds are limits on a measured phase's figures: one that
// does not hold fails the run (exit code 4).
type ScenarioThresholds struct {
	// MinThroughput: pods scheduled per second over the phase (virtual
	// time in deterministic mode).
	MinThroughput *float64 `json:"minThroughput"`
	// MaxP50 … MaxP99: the scheduling latency, creation to binding.
	MaxP50 *string `json:"maxP50"`
	MaxP90 *string `json:"maxP90"`
	MaxP95 *string `json:"maxP95"`
	MaxP99 *string `json:"maxP99"`
	// MaxAttemptP99: the attempt latency (wall clock: pick, assume, bind).
	MaxAttemptP99    *string `json:"maxAttemptP99"`
	MaxUnschedulable *int64  `json:"maxUnschedulable"`
	MinScheduled     *int64  `json:"minScheduled"`
}

// Phase ops, as written in a scenario.
const (
	opCreateNodes     = "createNodes"
	opCreatePods      = "createPods"
	opBarrier         = "barrier"
	opSleep           = "sleep"
	opDeletePods      = "deletePods"
	opChurn           = "churn"
	opStartCollecting = "startCollecting"
	opStopCollecting  = "stopCollecting"
	opUngatePods      = "ungatePods"
)

// phaseOps lists the ops in the order of ScenarioPhase's fields.
var phaseOps = []string{opCreateNodes, opCreatePods, opBarrier, opSleep, opDeletePods, opChurn, opStartCollecting, opStopCollecting, opUngatePods}

// Limits of a phases scenario.
const (
	maxPhases      = 1000
	maxPhaseCount  = maxInitialPods // pods or nodes of one phase
	maxPhasePods   = maxInitialPods // pods and nodes created by every phase: what one machine holds
	maxGangSize    = 100_000
	maxScale       = 100.0
	defaultNS      = "default"
	bindRetryLimit = 16 // bindings a pod may fail before it counts as failed
)

// phasePlan is immutable once built (parseFlags): the checked phases of a
// scenario. Copies of a Config share it.
type phasePlan struct {
	phases []planPhase
	// nodes are the first createNodes phase's, unscaled: the cluster the
	// run loads before its virtual time starts.
	nodes int
	// evict: a churn phase drains or removes nodes (the informer then
	// indexes pods by node).
	evict bool
}

// planPhase is one checked phase. Counts are unscaled: the run scales
// them (scaled).
type planPhase struct {
	name, op string
	field    string // "phases[3]", for messages
	count    int    // createNodes, createPods, deletePods, ungatePods (-1: all)
	ns       string // createPods, deletePods, ungatePods
	shape    *workload.Shape
	tmpl     *podTemplate // createPods; nil: the cluster's pod mix
	collect  bool         // createPods collectMetrics, startCollecting
	skipWait bool
	nss      []string      // barrier: the namespaces (nil: all)
	dur      time.Duration // sleep, churn (0: churn until the end)
	rate     float64       // deletePods: pods/s (0: at once)
	churn    []churnRate   // churn
	limits   []limit       // measured phases: their thresholds
}

// churnRate is a plain value: one churn action's rate.
type churnRate struct {
	kind actKind
	rate float64
}

// podTemplate is immutable: what createPods makes its pods of.
type podTemplate struct {
	cl       *workload.Cluster // Spec.Shape.PodMix: the template's resources, tolerations, selector
	labels   map[string]string
	priority *int32
	sched    string       // spec.schedulerName; "": the generator's
	affinity *v1.Affinity // nil: none
	spread   []v1.TopologySpreadConstraint
	gang     int // pods per gang (0: none)
	gates    []v1.PodSchedulingGate
	// podDefault: the pod is remade as scheduler_perf's pod-default.yaml
	// (decorate), keeping the generated requests.
	podDefault bool
	// life is the template's runFor and failRate; lifeSet: either given
	// (its pods then carry annPhase).
	life    LifeSpec
	lifeSet bool
}

// limit is a plain value: one threshold of a phase.
type limit struct {
	metric string  // the scenario's name: minThroughput, maxP99, …
	value  float64 // pods/s, a count, or nanoseconds
	dur    bool    // value is a duration
}

// hasPhases says whether the scenario runs phases.
func (sc *Scenario) hasPhases() bool { return len(sc.Phases) > 0 }

// phaseField is the field path of phase i's field f ("" the phase).
func phaseField(i int, f string) string {
	if f == "" {
		return fmt.Sprintf("phases[%d]", i)
	}
	return fmt.Sprintf("phases[%d].%s", i, f)
}

// applyPhases checks the scenario's phases into cfg.Phases and sets what
// a phases run needs: deterministic mode, the first createNodes phase's
// nodes, no initial pods, every pod kept until deleted. It refuses the
// fields that a phases scenario does not take.
func (sc *Scenario) applyPhases(cfg *Config) error {
	if sc.Thresholds != nil && !sc.hasPhases() {
		return sc.errorAt("thresholds", "only with phases (they apply to the measured phases)")
	}
	if !sc.hasPhases() {
		return nil
	}
	if len(sc.Phases) > maxPhases {
		return sc.errorAt("phases", "at most %d phases, got %d", maxPhases, len(sc.Phases))
	}
	type refusal struct {
		field string
		set   bool
		why   string
	}
	var refused []refusal
	if c := sc.Cluster; c != nil {
		refused = append(refused,
			refusal{"cluster.nodes", c.Nodes != nil, "the nodes come from createNodes phases"},
			refusal{"cluster.podsPerNode", c.PodsPerNode != nil, "the pods come from createPods phases"},
			refusal{"cluster.initialPods", c.InitialPods != nil, "the pods come from createPods phases"},
			refusal{"cluster.manifests", len(c.Manifests) > 0, "the cluster comes from createNodes phases"})
	}
	if sc.Run != nil {
		refused = append(refused, refusal{"run.pods", sc.Run.Pods != nil, "the phases say how many pods are created (run.duration, if given, bounds the run)"})
	}
	if w := sc.Workload; w != nil {
		refused = append(refused, refusal{"workload.keepPods", w.KeepPods != nil, "a phases run keeps every pod until a deletePods phase"})
	}
	refused = append(refused, refusal{"arrivals", sc.Arrivals != nil, "pods arrive with createPods phases"})
	for _, r := range refused {
		if r.set {
			return sc.errorAt(r.field, "not with phases: %s", r.why)
		}
	}
	plan, err := sc.buildPlan()
	if err != nil {
		return err
	}
	cfg.Phases = plan
	cfg.Deterministic = true
	cfg.Nodes, cfg.PodsPerNode, cfg.InitialPods = plan.nodes, 0, 0
	cfg.KeepPods = true
	if plan.phases[0].shape != nil {
		cfg.Shape = plan.phases[0].shape
		annotateMix(cfg.Shape, cfg.Life.Mix) // the pod mix's lifecycle, as applyLife set it
	}
	cfg.Life.Phase = make([]LifeSpec, len(plan.phases))
	for i, p := range plan.phases {
		if p.tmpl != nil {
			cfg.Life.Phase[i] = p.tmpl.life
		}
	}
	return nil
}

// buildPlan checks every phase.
func (sc *Scenario) buildPlan() (*phasePlan, error) {
	plan := &phasePlan{}
	names := map[string]int{}
	collecting := -1 // the open startCollecting
	var wl []limit
	if sc.Thresholds != nil {
		var err error
		if wl, err = sc.limits("thresholds", sc.Thresholds); err != nil {
			return nil, err
		}
	}
	total := 0
	for i := range sc.Phases {
		ph := &sc.Phases[i]
		p, err := sc.planOne(i, ph)
		if err != nil {
			return nil, err
		}
		if p.name == "" {
			p.name = fmt.Sprintf("%s-%d", p.op, i+1)
		}
		if j, dup := names[p.name]; dup {
			return nil, sc.errorAt(phaseField(i, "name"), "%q names phases[%d] already", p.name, j)
		}
		names[p.name] = i
		if p.op == opCreatePods || p.op == opCreateNodes {
			total += p.count
		}
		switch {
		case i == 0 && p.op != opCreateNodes:
			return nil, sc.errorAt(phaseField(0, ""), "the first phase must be createNodes (the cluster the run starts with), got %s", p.op)
		case p.op == opStartCollecting && collecting >= 0:
			return nil, sc.errorAt(phaseField(i, p.op), "phases[%d] is collecting already: stopCollecting first", collecting)
		case p.op == opStopCollecting && collecting < 0:
			return nil, sc.errorAt(phaseField(i, p.op), "no startCollecting before it")
		case p.op == opCreatePods && p.collect && collecting >= 0:
			return nil, sc.errorAt(phaseField(i, "createPods.collectMetrics"), "phases[%d] is collecting already (one measured span at a time)", collecting)
		}
		switch p.op {
		case opStartCollecting:
			collecting = i
		case opStopCollecting:
			collecting = -1
		}
		if ph.Thresholds != nil && !p.collect {
			return nil, sc.errorAt(phaseField(i, "thresholds"), "only on a measured phase (createPods with collectMetrics, or startCollecting)")
		}
		if p.collect {
			own, err := sc.limits(phaseField(i, "thresholds"), ph.Thresholds)
			if err != nil {
				return nil, err
			}
			p.limits = mergeLimits(wl, own)
		}
		if p.op == opChurn {
			for _, r := range p.churn {
				if r.kind == actDrain || r.kind == actNodeRemove {
					plan.evict = true
				}
			}
		}
		plan.phases = append(plan.phases, p)
	}
	if sc.Thresholds != nil && !measured(plan.phases) {
		return nil, sc.errorAt("thresholds", "no measured phase to apply them to (createPods with collectMetrics, or startCollecting)")
	}
	if total > maxPhasePods {
		return nil, sc.errorAt("phases", "%d pods and nodes created in all, more than the %d this tool holds", total, maxPhasePods)
	}
	plan.nodes = plan.phases[0].count
	return plan, nil
}

// measured says whether a phase collects metrics.
func measured(ps []planPhase) bool {
	for _, p := range ps {
		if p.collect {
			return true
		}
	}
	return false
}

// mergeLimits is the workload's limits with a phase's own replacing those
// of the same metric, in a fixed order.
func mergeLimits(wl, own []limit) []limit {
	m := map[string]limit{}
	for _, l := range wl {
		m[l.metric] = l
	}
	for _, l := range own {
		m[l.metric] = l
	}
	out := make([]limit, 0, len(m))
	for _, name := range thresholdNames {
		if l, ok := m[name]; ok {
			out = append(out, l)
		}
	}
	return out
}

// thresholdNames are the threshold metrics in report order.
var thresholdNames = []string{"minThroughput", "minScheduled", "maxUnschedulable", "maxP50", "maxP90", "maxP95", "maxP99", "maxAttemptP99"}

// limits checks thresholds t (at field) into limits.
func (sc *Scenario) limits(field string, t *ScenarioThresholds) ([]limit, error) {
	if t == nil {
		return nil, nil
	}
	var out []limit
	if t.MinThroughput != nil {
		if *t.MinThroughput < 0 || *t.MinThroughput > maxRate {
			return nil, sc.errorAt(field+".minThroughput", "must be 0 to %d pods/s, got %v", maxRate, *t.MinThroughput)
		}
		out = append(out, limit{metric: "minThroughput", value: *t.MinThroughput})
	}
	for _, c := range []struct {
		name string
		v    *int64
	}{{"minScheduled", t.MinScheduled}, {"maxUnschedulable", t.MaxUnschedulable}} {
		if c.v == nil {
			continue
		}
		if *c.v < 0 || *c.v > maxPhasePods {
			return nil, sc.errorAt(field+"."+c.name, "must be 0 to %d, got %d", maxPhasePods, *c.v)
		}
		out = append(out, limit{metric: c.name, value: float64(*c.v)})
	}
	for _, c := range []struct {
		name string
		v    *string
	}{{"maxP50", t.MaxP50}, {"maxP90", t.MaxP90}, {"maxP95", t.MaxP95}, {"maxP99", t.MaxP99}, {"maxAttemptP99", t.MaxAttemptP99}} {
		if c.v == nil {
			continue
		}
		d, err := time.ParseDuration(*c.v)
		if err != nil {
			return nil, sc.errorAt(field+"."+c.name, "not a duration (like 50ms, 2s): %q", *c.v)
		}
		if d <= 0 || d > maxDuration {
			return nil, sc.errorAt(field+"."+c.name, "must be positive and at most %v, got %v", maxDuration, d)
		}
		out = append(out, limit{metric: c.name, value: float64(d), dur: true})
	}
	if len(out) == 0 {
		return nil, sc.errorAt(field, "empty: give minThroughput, minScheduled, maxUnschedulable, maxP50, maxP90, maxP95, maxP99 or maxAttemptP99")
	}
	return out, nil
}

// opOf returns phase i's one op, or an error naming the phase.
func (sc *Scenario) opOf(i int, ph *ScenarioPhase) (string, error) {
	// A key given with no value ("- barrier:") decodes as nil: the file's
	// node tree says it is there.
	var ops []string
	for _, op := range phaseOps {
		if _, given := nodeLine(sc.doc, phaseField(i, op)); given {
			ops = append(ops, op)
		}
	}
	if sc.doc == nil { // a Scenario built in code
		set := []bool{ph.CreateNodes != nil, ph.CreatePods != nil, ph.Barrier != nil, ph.Sleep != nil, ph.DeletePods != nil,
			ph.Churn != nil, ph.StartCollecting != nil, ph.StopCollecting != nil, ph.UngatePods != nil}
		for k, s := range set {
			if s {
				ops = append(ops, phaseOps[k])
			}
		}
	}
	switch len(ops) {
	case 0:
		return "", sc.errorAt(phaseField(i, ""), "no op: give one of %s", strings.Join(phaseOps, ", "))
	case 1:
		return ops[0], nil
	}
	return "", sc.errorAt(phaseField(i, ops[1]), "one op per phase, got %s", strings.Join(ops, " and "))
}

// planOne checks phase i.
func (sc *Scenario) planOne(i int, ph *ScenarioPhase) (planPhase, error) {
	op, err := sc.opOf(i, ph)
	if err != nil {
		return planPhase{}, err
	}
	p := planPhase{name: ph.Name, op: op, field: phaseField(i, "")}
	if ph.Name != "" {
		if errs := validation.IsQualifiedName(ph.Name); len(errs) > 0 || len(ph.Name) > 63 {
			msg := "at most 63 characters"
			if len(errs) > 0 {
				msg = errs[0]
			}
			return p, sc.errorAt(phaseField(i, "name"), "%q: %s", ph.Name, msg)
		}
	}
	f := func(field string) string { return phaseField(i, op+"."+field) }
	count := func(c *int, what string) (int, error) {
		if c == nil {
			return 0, sc.errorAt(phaseField(i, op), "missing count: the number of %s", what)
		}
		if *c < 1 || *c > maxPhaseCount {
			return 0, sc.errorAt(f("count"), "must be 1 to %d, got %d", maxPhaseCount, *c)
		}
		return *c, nil
	}
	dur := func(s *string, field string, need bool) (time.Duration, error) {
		if s == nil {
			if need {
				return 0, sc.errorAt(phaseField(i, op), "missing %s (like 5s)", field)
			}
			return 0, nil
		}
		d, err := time.ParseDuration(*s)
		if err != nil {
			return 0, sc.errorAt(f(field), "not a duration (like 5s, 250ms): %q", *s)
		}
		if d <= 0 || d > maxDuration {
			return 0, sc.errorAt(f(field), "must be positive and at most %v, got %v", maxDuration, d)
		}
		return d, nil
	}
	ns := func(s string, field string) (string, error) {
		if s == "" {
			return defaultNS, nil
		}
		if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
			return "", sc.errorAt(f(field), "%q: %s", s, errs[0])
		}
		return s, nil
	}
	switch op {
	case opCreateNodes:
		c := ph.CreateNodes
		if c == nil {
			c = &PhaseCreateNodes{}
		}
		if p.count, err = count(c.Count, "nodes"); err != nil {
			return p, err
		}
		if p.count > maxNodes {
			return p, sc.errorAt(f("count"), "at most %d nodes, got %d", maxNodes, p.count)
		}
		p.shape, err = sc.nodeShape(i, c)
	case opCreatePods:
		c := ph.CreatePods
		if c == nil {
			c = &PhaseCreatePods{}
		}
		if p.count, err = count(c.Count, "pods"); err != nil {
			return p, err
		}
		if p.ns, err = ns(c.Namespace, "namespace"); err != nil {
			return p, err
		}
		if c.CollectMetrics && c.SkipWait {
			return p, sc.errorAt(f("skipWait"), "not with collectMetrics: a measured phase lasts until its pods are scheduled")
		}
		p.collect, p.skipWait = c.CollectMetrics, c.SkipWait
		if c.Template != nil {
			if p.tmpl, err = sc.podTemplate(i, c.Template); err != nil {
				return p, err
			}
			if g := p.tmpl.gang; g > 0 && p.count%g != 0 {
				return p, sc.errorAt(f("count"), "%d pods are not whole gangs of %d (template.gangSize)", p.count, g)
			}
		}
	case opBarrier:
		if b := ph.Barrier; b != nil {
			for j, s := range b.Namespaces {
				if _, err := ns(s, fmt.Sprintf("namespaces[%d]", j)); err != nil || s == "" {
					if err == nil {
						err = sc.errorAt(f(fmt.Sprintf("namespaces[%d]", j)), "empty")
					}
					return p, err
				}
				p.nss = append(p.nss, s)
			}
		}
	case opSleep:
		s := ph.Sleep
		if s == nil {
			s = &PhaseSleep{}
		}
		p.dur, err = dur(s.Duration, "duration", true)
	case opDeletePods:
		d := ph.DeletePods
		if d == nil {
			d = &PhaseDeletePods{}
		}
		if d.Namespace == "" {
			return p, sc.errorAt(phaseField(i, op), "missing namespace: the namespace whose pods are deleted")
		}
		if p.ns, err = ns(d.Namespace, "namespace"); err != nil {
			return p, err
		}
		switch {
		case d.All && d.Count != nil:
			return p, sc.errorAt(f("all"), "give count or all, not both")
		case d.All:
			p.count = -1
		case d.Count == nil:
			return p, sc.errorAt(phaseField(i, op), "missing count (or all: true)")
		default:
			if p.count, err = count(d.Count, "pods"); err != nil {
				return p, err
			}
		}
		if d.Rate != nil {
			if *d.Rate <= 0 || *d.Rate > maxRate {
				return p, sc.errorAt(f("rate"), "must be a rate in (0, %d] pods/s, got %v", maxRate, *d.Rate)
			}
			p.rate = *d.Rate
		}
	case opChurn:
		c := ph.Churn
		if c == nil {
			c = &PhaseChurn{}
		}
		if p.dur, err = dur(c.Duration, "duration", !c.SkipWait); err != nil {
			return p, err
		}
		p.skipWait = c.SkipWait
		for _, r := range []struct {
			name string
			kind actKind
			v    *float64
		}{{"podUpdateRate", actPodUpdate, c.PodUpdateRate}, {"podDeleteRate", actPodDelete, c.PodDeleteRate},
			{"nodeAddRate", actNodeAdd, c.NodeAddRate}, {"nodeRemoveRate", actNodeRemove, c.NodeRemoveRate},
			{"drainRate", actDrain, c.DrainRate}, {"notReadyRate", actNotReady, c.NotReadyRate}, {"zoneMoveRate", actZoneMove, c.ZoneMoveRate}} {
			if r.v == nil {
				continue
			}
			if *r.v < 0 || *r.v > maxChurnRate {
				return p, sc.errorAt(f(r.name), "must be a rate in [0, %d] per second, got %v", maxChurnRate, *r.v)
			}
			if *r.v > 0 {
				p.churn = append(p.churn, churnRate{r.kind, *r.v})
			}
		}
		if len(p.churn) == 0 {
			return p, sc.errorAt(phaseField(i, op), "no rate: give at least one positive rate (podUpdateRate, podDeleteRate, nodeAddRate, nodeRemoveRate, drainRate, notReadyRate, zoneMoveRate)")
		}
	case opStartCollecting:
		p.collect = true
	case opUngatePods:
		u := ph.UngatePods
		if u == nil {
			u = &PhaseUngatePods{}
		}
		if u.Namespace == "" {
			return p, sc.errorAt(phaseField(i, op), "missing namespace: the namespace whose gated pods are ungated")
		}
		if p.ns, err = ns(u.Namespace, "namespace"); err != nil {
			return p, err
		}
		switch {
		case u.All && u.Count != nil:
			return p, sc.errorAt(f("all"), "give count or all, not both")
		case u.All:
			p.count = -1
		case u.Count == nil:
			return p, sc.errorAt(phaseField(i, op), "missing count (or all: true)")
		default:
			p.count, err = count(u.Count, "pods")
		}
	}
	return p, err
}

// nodeShape is the shape of a createNodes phase's nodes: the cluster's,
// with the phase's allocatable, and its labels and taints added.
func (sc *Scenario) nodeShape(i int, c *PhaseCreateNodes) (*workload.Shape, error) {
	if c.Allocatable == nil && len(c.Labels) == 0 && len(c.Taints) == 0 {
		return nil, nil // the cluster's shape
	}
	own := &ScenarioCluster{Allocatable: c.Allocatable, Labels: c.Labels, Taints: c.Taints}
	if _, err := shapeOf(own, nil); err != nil {
		var ue *UsageError
		errors.As(err, &ue)
		return nil, sc.errorAt(phaseField(i, "createNodes"+strings.TrimPrefix(ue.Flag, "cluster")), "%s", ue.Msg)
	}
	merged := ScenarioCluster{}
	if sc.Cluster != nil {
		merged = *sc.Cluster
	}
	if c.Allocatable != nil {
		a := ScenarioAllocatable{}
		if merged.Allocatable != nil {
			a = *merged.Allocatable
		}
		if c.Allocatable.CPU != nil {
			a.CPU = c.Allocatable.CPU
		}
		if c.Allocatable.Memory != nil {
			a.Memory = c.Allocatable.Memory
		}
		if c.Allocatable.Pods != nil {
			a.Pods = c.Allocatable.Pods
		}
		merged.Allocatable = &a
	}
	merged.Labels = append(append([]ScenarioLabel(nil), merged.Labels...), c.Labels...)
	merged.Taints = append(append([]ScenarioTaint(nil), merged.Taints...), c.Taints...)
	s, err := shapeOf(&merged, sc.PodMix)
	if err != nil {
		return nil, sc.errorAt(phaseField(i, "createNodes"), "%v", err)
	}
	return s, nil
}

// podTemplate checks a createPods template.
func (sc *Scenario) podTemplate(i int, t *PhasePodTemplate) (*podTemplate, error) {
	base := phaseField(i, "createPods.template")
	fail := func(field, format string, args ...any) error {
		if field != "" {
			field = "." + field
		}
		return sc.errorAt(base+field, format, args...)
	}
	st := ScenarioPodTemplate{Plain: t.Plain, Containers: t.Containers, CPU: t.CPU, Memory: t.Memory, Tolerations: t.Tolerations, NodeSelector: t.NodeSelector}
	if t.PodDefault {
		switch {
		case t.Plain:
			return nil, fail("plain", "podDefault is the whole pod: drop plain")
		case t.Containers != nil:
			return nil, fail("containers", "podDefault is the whole pod (one container): drop containers")
		case len(t.Tolerations) > 0:
			return nil, fail("tolerations", "podDefault has none: drop tolerations")
		case len(t.NodeSelector) > 0:
			return nil, fail("nodeSelector", "podDefault has none: use nodeAffinity")
		}
		one := IntRange{1, 1}
		st.Plain, st.Containers = true, &one
		if st.CPU == nil {
			st.CPU = &QuantityRange{"100m", "100m"}
		}
		if st.Memory == nil {
			st.Memory = &QuantityRange{"500Mi", "500Mi"}
		}
	}
	shape, err := shapeOf(nil, []ScenarioPodTemplate{st})
	if err != nil {
		var ue *UsageError
		errors.As(err, &ue)
		return nil, sc.errorAt(base+strings.TrimPrefix(ue.Flag, "podMix[0]"), "%s", ue.Msg)
	}
	pt := &podTemplate{cl: &workload.Cluster{Spec: workload.ClusterSpec{Shape: shape}}, priority: t.Priority, podDefault: t.PodDefault}
	labels := func(field string, m map[string]string, need bool) (map[string]string, error) {
		if need && len(m) == 0 {
			return nil, fail(field, "empty: give the labels the term selects")
		}
		for _, k := range sortedKeys(m) {
			if err := labelKV("", k, m[k]); err != nil {
				var ue *UsageError
				errors.As(err, &ue)
				return nil, fail(field, "%s", ue.Msg)
			}
		}
		return m, nil
	}
	if pt.labels, err = labels("labels", t.Labels, false); err != nil {
		return nil, err
	}
	if t.SchedulerName != "" {
		if errs := validation.IsDNS1123Subdomain(t.SchedulerName); len(errs) > 0 {
			return nil, fail("schedulerName", "%q: %s", t.SchedulerName, errs[0])
		}
		pt.sched = t.SchedulerName
	}
	qualified := func(field, key string) error {
		if key == "" {
			return fail(field, "missing")
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return fail(field, "%q: %s", key, errs[0])
		}
		return nil
	}
	aff := &v1.Affinity{}
	if len(t.NodeAffinity) > 0 {
		var term v1.NodeSelectorTerm
		for j, r := range t.NodeAffinity {
			rf := fmt.Sprintf("nodeAffinity[%d]", j)
			if err := qualified(rf+".key", r.Key); err != nil {
				return nil, err
			}
			op := v1.NodeSelectorOperator(r.Operator)
			switch op {
			case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
				if len(r.Values) == 0 {
					return nil, fail(rf+".values", "operator %s needs at least one value", op)
				}
			case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
				if len(r.Values) > 0 {
					return nil, fail(rf+".values", "operator %s takes no value", op)
				}
			case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
				if len(r.Values) != 1 {
					return nil, fail(rf+".values", "operator %s needs exactly one value", op)
				}
				if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
					return nil, fail(rf+".values[0]", "operator %s needs an integer, got %q", op, r.Values[0])
				}
			default:
				return nil, fail(rf+".operator", "must be In, NotIn, Exists, DoesNotExist, Gt or Lt, got %q", r.Operator)
			}
			for k, v := range r.Values {
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					return nil, fail(fmt.Sprintf("%s.values[%d]", rf, k), "%q: %s", v, errs[0])
				}
			}
			term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{Key: r.Key, Operator: op, Values: r.Values})
		}
		aff.NodeAffinity = &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{term}}}
	}
	terms := func(name string, ts []ScenarioAffinityTerm) ([]v1.PodAffinityTerm, error) {
		var out []v1.PodAffinityTerm
		for j, at := range ts {
			tf := fmt.Sprintf("%s[%d]", name, j)
			m, err := labels(tf+".labels", at.Labels, true)
			if err != nil {
				return nil, err
			}
			if err := qualified(tf+".topologyKey", at.TopologyKey); err != nil {
				return nil, err
			}
			for k, s := range at.Namespaces {
				if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
					return nil, fail(fmt.Sprintf("%s.namespaces[%d]", tf, k), "%q: %s", s, errs[0])
				}
			}
			out = append(out, v1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: m}, TopologyKey: at.TopologyKey, Namespaces: at.Namespaces})
		}
		return out, nil
	}
	pa, err := terms("podAffinity", t.PodAffinity)
	if err != nil {
		return nil, err
	}
	if len(pa) > 0 {
		aff.PodAffinity = &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pa}
	}
	anti, err := terms("podAntiAffinity", t.PodAntiAffinity)
	if err != nil {
		return nil, err
	}
	if len(anti) > 0 {
		aff.PodAntiAffinity = &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: anti}
	}
	if aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
		pt.affinity = aff
	}
	for j, s := range t.TopologySpread {
		sf := fmt.Sprintf("topologySpread[%d]", j)
		c := v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: s.TopologyKey, WhenUnsatisfiable: v1.DoNotSchedule}
		if s.MaxSkew != nil {
			if *s.MaxSkew < 1 {
				return nil, fail(sf+".maxSkew", "must be at least 1, got %d", *s.MaxSkew)
			}
			c.MaxSkew = *s.MaxSkew
		}
		if err := qualified(sf+".topologyKey", s.TopologyKey); err != nil {
			return nil, err
		}
		switch w := v1.UnsatisfiableConstraintAction(s.WhenUnsatisfiable); w {
		case "":
		case v1.DoNotSchedule, v1.ScheduleAnyway:
			c.WhenUnsatisfiable = w
		default:
			return nil, fail(sf+".whenUnsatisfiable", "must be DoNotSchedule or ScheduleAnyway, got %q", s.WhenUnsatisfiable)
		}
		m, err := labels(sf+".labels", s.Labels, true)
		if err != nil {
			return nil, err
		}
		c.LabelSelector = &metav1.LabelSelector{MatchLabels: m}
		pt.spread = append(pt.spread, c)
	}
	if t.GangSize != nil {
		if *t.GangSize < 1 || *t.GangSize > maxGangSize {
			return nil, fail("gangSize", "must be 1 to %d, got %d", maxGangSize, *t.GangSize)
		}
		pt.gang = *t.GangSize
	}
	seen := map[string]bool{}
	for j, g := range t.SchedulingGates {
		gf := fmt.Sprintf("schedulingGates[%d]", j)
		if err := qualified(gf, g); err != nil {
			return nil, err
		}
		if seen[g] {
			return nil, fail(gf, "%q twice", g)
		}
		seen[g] = true
		pt.gates = append(pt.gates, v1.PodSchedulingGate{Name: g})
	}
	if len(pt.gates) > 0 && pt.gang > 0 {
		return nil, fail("schedulingGates", "not with gangSize (a gang's members are placed together)")
	}
	if t.RunFor != nil {
		if pt.life, err = sc.lifeSpec(base+".runFor", t.RunFor); err != nil {
			return nil, err
		}
	}
	if err := sc.failRate(base+".failRate", t.FailRate, &pt.life); err != nil {
		return nil, err
	}
	pt.lifeSet = pt.life.On() || pt.life.FailSet
	return pt, nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// phaseFlags applies the flags to a phases run (set: the flags given):
// -scale sizes its counts; the flags that size or feed a generated run are
// refused. Without phases, -scale is refused.
func (c *Config) phaseFlags(set map[string]bool) error {
	if c.Phases == nil {
		if set["scale"] {
			return bad("scale", "only with a phases scenario (its createNodes, createPods and deletePods counts)")
		}
		return nil
	}
	for _, f := range []string{"nodes", "pods-per-node", "initial-pods", "pods", "arrival", "rate", "burst-size", "burst-interval", "keep-pods", "cluster-from"} {
		if set[f] {
			return bad(f, "not with a phases scenario: its phases say what is created (-scale sizes them)")
		}
	}
	if math.IsNaN(c.Scale) || c.Scale <= 0 || c.Scale > maxScale {
		return bad("scale", "must be in (0, %v], got %v", maxScale, c.Scale)
	}
	c.Nodes = scaled(c.Phases.nodes, c.Scale, 1)
	total := 0
	for _, p := range c.Phases.phases {
		switch p.op {
		case opCreateNodes:
			n := scaled(p.count, c.Scale, 1)
			if n > maxNodes {
				return bad("scale", "%v makes %d nodes in phase %s, more than %d", c.Scale, n, p.name, maxNodes)
			}
			total += n
		case opCreatePods:
			g := 0
			if p.tmpl != nil {
				g = p.tmpl.gang
			}
			total += scaled(p.count, c.Scale, g)
		}
	}
	if total > maxPhasePods {
		return bad("scale", "%v makes %d pods and nodes in all, more than the %d this tool holds", c.Scale, total, maxPhasePods)
	}
	if !set["sample"] && c.Sample > c.Nodes {
		c.Sample = c.Nodes
	}
	return nil
}

// scaled is n times scale, rounded, at least one step (and a multiple of
// step: a gang's size).
func scaled(n int, scale float64, step int) int {
	if step < 1 {
		step = 1
	}
	if scale == 1 {
		return n
	}
	k := int(math.Round(float64(n) * scale / float64(step)))
	return max(k, 1) * step
}

// validatePhases checks what a phases run needs of the rest of cfg.
func (c *Config) validatePhases() error {
	if c.Phases == nil {
		return nil
	}
	switch {
	case !c.Deterministic && c.Phases.realtimeRefusal() != "":
		return bad("deterministic", "%s", c.Phases.realtimeRefusal())
	case c.openLoop():
		return bad("arrival", "not with a phases scenario: pods arrive with createPods phases")
	case c.Loaded != nil:
		return bad("cluster-from", "not with a phases scenario: the cluster comes from createNodes phases")
	case !c.KeepPods:
		return bad("keep-pods", "a phases run keeps every pod until a deletePods phase")
	case c.Phases.evict && c.DrainGrace == 0:
		return bad("drain-grace", "must be positive with a churn phase's drainRate or nodeRemoveRate")
	}
	for _, p := range c.Phases.phases {
		if p.op != opChurn {
			continue
		}
		for _, r := range p.churn {
			if r.kind == actNotReady && c.NotReadyFor == 0 {
				return bad("not-ready-for", "must be positive with a churn phase's notReadyRate")
			}
		}
	}
	return nil
}
