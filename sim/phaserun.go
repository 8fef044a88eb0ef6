package sim

import (
	"fmt"
	"maps"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/hist"
	"github.com/schedcache/schedcache/sim/trace"
	"github.com/schedcache/schedcache/workload"
)

// A phases plan runs in the deterministic engine (det.go): the phases one
// after another at virtual times, each started by an evPhase event; the
// pods of createPods phases wait in the scheduling queue (queue.go) that
// the virtual schedulers take from (a scheduler with nothing to take
// sleeps until pods are queued); a pod is settled once bound, found
// unschedulable (it waits with the unschedulable pods, and a cluster
// event that moves it back unsettles it), gated, failed (bindRetryLimit
// failed bindings) or deleted. A pod that preempted and waits for its
// victims is not settled. Every pod the phases create is in the API
// server (the truth) from its creation, pending until bound.

// podState is where a phase pod stands.
type podState uint8

const (
	psQueued        podState = iota // waiting for a scheduler
	psInFlight                      // a scheduler took it: assumed, held for its gang, or binding
	psBound                         // bound (its confirmation may be in flight)
	psUnschedulable                 // no node fitted (settled)
	psFailed                        // bindRetryLimit bindings failed (settled)
	psDeleted                       // deleted (settled)
	psCompleted                     // ran for its duration and completed (lifecycle.go; settled)
	psGated                         // has scheduling gates: waits for an ungatePods phase (settled)
)

// phasePod is owned by the event loop: one pod a createPods phase made.
type phasePod struct {
	pod     *v1.Pod       // the latest object the API server holds
	phase   int           // the phase that created it
	created time.Duration // its creation, run time
	state   podState
	tries   int   // failed bindings
	gang    *gang // nil: none (or a member requeued after its gang was placed)
	pre     preemptState
	q       queueInfo // its place in the scheduling queue (queue.go)
	counted bool      // counted unschedulable in the open spans once already
}

// gang is owned by the event loop: the members of one gang, placed all or
// none (the simulator's stand-in for a PodGroup with minCount = size).
type gang struct {
	size    int
	members []*phasePod
	held    []heldPod // assumed, their binding held until every member is assumed
	failed  bool
}

// heldPod is one assumed member of a gang waiting for the others.
type heldPod struct {
	pp   *phasePod
	node string
	tr   time.Time // when its attempt began
}

// timerKind is what a phase timer does when its evPhase event fires.
type timerKind uint8

const (
	tmStep    timerKind = iota // advance the phases
	tmChurn                    // one churn action, then the next
	tmDelete                   // one deletion of a rate-limited deletePods
	tmBackoff                  // the backoff queues' flush at a whole second (queue.go)
	tmFlush                    // the 30 s flush of long-unschedulable pods (queue.go)
)

// phaseTimer is owned by the event loop: an evPhase event's target (the
// event's worker field indexes phaseRun.timers).
type phaseTimer struct {
	what  timerKind
	phase int
	act   actKind       // tmChurn
	rate  float64       // tmChurn
	until time.Duration // tmChurn: no action from then on (0: until the run ends)
}

// phaseStat is owned by the event loop: what happened during one phase's
// span (a startCollecting phase's lasts until its stopCollecting).
type phaseStat struct {
	started, ended     bool
	cut                bool          // ended by the run's end, not by its own
	start, end         time.Duration // run time
	wallStart, wallEnd time.Time
	procStart, procEnd procMark // the process's CPU time and GCs at the span's start and end
	created, deleted   int64    // pods
	nodes              int64    // nodes created
	scheduled          int64
	unschedulable      int64 // pods settled unschedulable (gang members included)
	failed             int64 // pods settled failed
	failedBindings     int64 // bindings failed (the pod retried)
	gangsFailed        int64
	churn              int64           // churn actions
	preemptions        int64           // pods that preempted
	victims            int64           // pods they deleted
	completed          int64           // pods that completed (lifecycle.go)
	completedFailed    int64           // of them, ended Failed
	ungated            int64           // pods whose gates an ungatePods phase removed
	win                []int64         // pods scheduled per 1 s since start
	e2e, attempt       *hist.Histogram // nil until a pod is scheduled
}

// phaseRun is owned by the event loop: a phases plan being run.
type phaseRun struct {
	d      *detRun
	plan   *phasePlan // immutable
	scale  float64    // immutable
	cur    int        // the phase running; len(plan.phases) once all ended
	stats  []phaseStat
	open   []int // the phases whose span is open
	timers []phaseTimer

	q     podQueue
	byUID map[string]*phasePod
	byNS  map[string][]*phasePod
	// unsettled pods: all, per namespace, per creating phase.
	unsettled   int64
	unsettledNS map[string]int64
	unsettledPh []int64

	idle       []bool // idle[w]: scheduler w sleeps until pods are queued
	stepQueued bool   // a tmStep event at the current time is queued
	nodes      int    // nodes created so far (the next one's index)
	waitNodes  []string
	delLeft    int                    // pods a rate-limited deletePods still deletes
	flushes    map[time.Duration]bool // the backoff flushes queued (tmBackoff events), by time
	leftover   bool                   // a tmFlush event is queued
	preemptors []Preemptor            // preemptors[w]: scheduler w's picker as a Preemptor (nil: the stand-in)
	binders    []BindingCycle         // binders[w]: scheduler w's picker as a BindingCycle; nil: the cache calls stand in (bindcycle.go)
	waiting    map[types.UID]*waitingPod
	waitGen    uint64 // the last wait's generation
	bc         BindingCycleCounts
	groups     bool                 // the picker schedules pod groups (podgroups.go)
	enq        Enqueuer             // scheduler 0's picker's PreEnqueue (nil: none; podgroups.go)
	preGated   []*phasePod          // pods a PreEnqueue plugin holds, in the order held
	podGroups  int64                // PodGroup objects created
	err        error                // the first error of a callback that cannot return one; decide returns it
	vbuf       []victim             // victimsOn's buffer
	nominated  map[string]*phasePod // node -> the preemptor nominated to it, until it tries it
	done       bool
	warnings   []string
}

// newPhaseRun starts running d's plan: its first step at time 0.
func newPhaseRun(d *detRun) *phaseRun {
	plan := d.cfg.Phases
	pr := &phaseRun{d: d, plan: plan, scale: d.cfg.Scale, stats: make([]phaseStat, len(plan.phases)),
		timers: []phaseTimer{{what: tmStep}, {what: tmStep}, {what: tmBackoff}, {what: tmFlush}}, byUID: map[string]*phasePod{}, byNS: map[string][]*phasePod{},
		unsettledNS: map[string]int64{}, unsettledPh: make([]int64, len(plan.phases)), idle: make([]bool, d.cfg.Schedulers),
		nominated: map[string]*phasePod{}, q: newPodQueue(), flushes: map[time.Duration]bool{}}
	for _, np := range d.pickers.pickers {
		p, _ := np.(Preemptor)
		pr.preemptors = append(pr.preemptors, p)
	}
	pr.binders = bindingCycles(d.pickers.pickers)
	pr.waiting = map[types.UID]*waitingPod{}
	if podGroupsOn(d.h.picker) && pr.binders != nil {
		pr.groups = true
		pr.enq, _ = d.pickers.pickers[0].(Enqueuer)
	}
	if pr.scale == 0 {
		pr.scale = 1
	}
	if plan.evict && d.inf.byNode == nil {
		d.inf.byNode = map[string]map[string]*v1.Pod{} // drains evict a node's pods
	}
	pr.queueStep(0)
	return pr
}

// queueStep queues one advance at now (timer 0); further settles at the
// same time reuse it.
func (pr *phaseRun) queueStep(now time.Duration) {
	if pr.stepQueued {
		return
	}
	pr.stepQueued = true
	pr.d.push(event{at: now, kind: evPhase, worker: 0})
}

// stepAt queues an advance at a later time (timer 1).
func (pr *phaseRun) stepAt(at time.Duration) {
	pr.d.push(event{at: at, kind: evPhase, worker: 1})
}

// handle (evPhase) runs the timer ev.worker.
func (pr *phaseRun) handle(ev event) error {
	t := pr.timers[ev.worker]
	switch t.what {
	case tmStep:
		if ev.worker == 0 {
			pr.stepQueued = false
		}
		return pr.advance(ev.at)
	case tmChurn:
		if pr.done || (t.until > 0 && ev.at >= t.until) {
			return nil
		}
		if err := pr.d.api.do(action{at: ev.at, kind: t.act}); err != nil {
			return fmt.Errorf("phase %s: churn: %w", pr.plan.phases[t.phase].name, err)
		}
		pr.stats[t.phase].churn++
		pr.d.push(event{at: ev.at + pr.d.api.gap(t.rate), kind: evPhase, worker: ev.worker})
	case tmBackoff:
		pr.flushBackoff(ev.at)
	case tmFlush:
		pr.flushLeftover(ev.at)
	case tmDelete:
		if pr.cur != t.phase || pr.delLeft <= 0 {
			return nil
		}
		p := &pr.plan.phases[t.phase]
		if pr.deletePods(ev.at, p.ns, 1) == 0 {
			pr.delLeft = 0 // nothing left to delete
		} else {
			pr.delLeft--
		}
		if pr.delLeft > 0 {
			pr.d.push(event{at: ev.at + max(time.Duration(float64(time.Second)/p.rate), 1), kind: evPhase, worker: ev.worker})
		} else {
			pr.queueStep(ev.at)
		}
	}
	return nil
}

// advance ends the phases whose work is done and starts the next, until
// one must wait; once every phase has ended it ends the run.
func (pr *phaseRun) advance(now time.Duration) error {
	for pr.cur < len(pr.plan.phases) {
		if !pr.stats[pr.cur].started {
			if err := pr.start(now); err != nil {
				return err
			}
		}
		if !pr.finished(now) {
			return nil
		}
		pr.end(pr.cur, now)
		pr.cur++
	}
	if !pr.done {
		pr.done = true
		for _, i := range append([]int(nil), pr.open...) {
			pr.end(i, now) // a startCollecting never stopped
		}
		d := pr.d
		if !d.stopped {
			d.stopped, d.endAt = true, now
			d.rep.Stopped = "phases"
		}
	}
	return nil
}

// start starts phase pr.cur at now.
func (pr *phaseRun) start(now time.Duration) error {
	i, d := pr.cur, pr.d
	p := &pr.plan.phases[i]
	st := &pr.stats[i]
	st.started, st.start, st.wallStart, st.procStart = true, now, time.Now(), markProc()
	pr.open = append(pr.open, i)
	traceEvent(d.digest, now, "phase-start", p.name, p.op)
	d.prog.printf("phase %d/%d %s (%s) at %v virtual\n", i+1, len(pr.plan.phases), p.name, p.op, now)
	switch p.op {
	case opCreateNodes:
		if i == 0 {
			pr.nodes = d.cfg.Nodes // loaded with the cluster
			st.nodes = int64(d.cfg.Nodes)
			return nil
		}
		pr.createNodes(now, i, p)
	case opCreatePods:
		return pr.createPods(now, i, p)
	case opSleep:
		pr.stepAt(now + p.dur)
	case opDeletePods:
		n := -1
		if p.count > 0 {
			n = scaled(p.count, pr.scale, 1)
		}
		if p.rate == 0 {
			got := pr.deletePods(now, p.ns, n)
			if n > 0 && got < n {
				pr.warnings = append(pr.warnings, fmt.Sprintf("phase %s: %d pods of namespace %s deleted, %d asked", p.name, got, p.ns, n))
			}
			return nil
		}
		if n < 0 {
			n = len(pr.byNS[p.ns])
		}
		pr.delLeft = n
		pr.timers = append(pr.timers, phaseTimer{what: tmDelete, phase: i})
		d.push(event{at: now, kind: evPhase, worker: len(pr.timers) - 1})
	case opChurn:
		var until time.Duration
		if p.dur > 0 {
			until = now + p.dur
		}
		for _, r := range p.churn {
			pr.timers = append(pr.timers, phaseTimer{what: tmChurn, phase: i, act: r.kind, rate: r.rate, until: until})
			d.push(event{at: now + d.api.gap(r.rate), kind: evPhase, worker: len(pr.timers) - 1})
		}
		if !p.skipWait {
			pr.stepAt(until)
		}
	case opStopCollecting:
		for _, j := range pr.open {
			if pr.plan.phases[j].op == opStartCollecting {
				pr.end(j, now)
				break
			}
		}
	case opUngatePods:
		n := -1
		if p.count > 0 {
			n = scaled(p.count, pr.scale, 1)
		}
		got := pr.ungate(now, p.ns, n)
		st.ungated = int64(got)
		if n > 0 && got < n {
			pr.warnings = append(pr.warnings, fmt.Sprintf("phase %s: %d gated pods of namespace %s ungated, %d asked", p.name, got, p.ns, n))
		}
	}
	return nil
}

// finished says whether phase pr.cur's work is done at now.
func (pr *phaseRun) finished(now time.Duration) bool {
	p := &pr.plan.phases[pr.cur]
	st := &pr.stats[pr.cur]
	switch p.op {
	case opCreateNodes:
		inf := pr.d.inf
		for len(pr.waitNodes) > 0 {
			n := pr.waitNodes[len(pr.waitNodes)-1]
			if inf.nodes[n] == nil || inf.busy("n/"+n) {
				pr.stepAt(now + max(pr.d.cfg.ConfirmDelay, time.Millisecond))
				return false
			}
			pr.waitNodes = pr.waitNodes[:len(pr.waitNodes)-1]
		}
		return true
	case opCreatePods:
		return p.skipWait || pr.unsettledPh[pr.cur] == 0
	case opBarrier:
		return pr.barrierDone(p)
	case opSleep:
		return now >= st.start+p.dur
	case opDeletePods:
		return pr.delLeft <= 0
	case opChurn:
		return p.skipWait || now >= st.start+p.dur
	}
	return true
}

func (pr *phaseRun) barrierDone(p *planPhase) bool {
	return barrierDone(p, pr.unsettled, pr.unsettledNS)
}

// barrierDone is both engines' barrier test: no pod is unsettled, or,
// for a barrier naming namespaces, none of theirs.
func barrierDone(p *planPhase, unsettled int64, unsettledNS map[string]int64) bool {
	if p.nss == nil {
		return unsettled == 0
	}
	for _, ns := range p.nss {
		if unsettledNS[ns] > 0 {
			return false
		}
	}
	return true
}

// waitOver says whether the current phase waited for pods to settle and
// they have.
func (pr *phaseRun) waitOver() bool {
	if pr.cur >= len(pr.plan.phases) || !pr.stats[pr.cur].started {
		return false
	}
	switch p := &pr.plan.phases[pr.cur]; p.op {
	case opCreatePods:
		return !p.skipWait && pr.unsettledPh[pr.cur] == 0
	case opBarrier:
		return pr.barrierDone(p)
	}
	return false
}

// end closes phase i's span at now.
func (pr *phaseRun) end(i int, now time.Duration) {
	st := &pr.stats[i]
	if st.ended {
		return
	}
	p := &pr.plan.phases[i]
	if p.op == opStartCollecting && pr.cur == i && !pr.done {
		return // its span lasts until stopCollecting
	}
	st.ended, st.end, st.wallEnd, st.procEnd = true, now, time.Now(), markProc()
	for k, j := range pr.open {
		if j == i {
			pr.open = append(pr.open[:k], pr.open[k+1:]...)
			break
		}
	}
	traceEvent(pr.d.digest, now, "phase-end", p.name, strconv.FormatInt(st.scheduled, 10))
}

// createNodes adds a createNodes phase's nodes through the API server; the
// phase ends once the informer has delivered them.
func (pr *phaseRun) createNodes(now time.Duration, i int, p *planPhase) {
	d := pr.d
	names := addPhaseNodes(d.cfg, d.api, now, pr.nodes, i, p, pr.scale)
	pr.waitNodes = append(pr.waitNodes, names...)
	n := len(names)
	pr.nodes += n
	pr.stats[i].nodes = int64(n)
	traceEvent(d.digest, now, "create-nodes", p.name, strconv.Itoa(n))
	pr.stepAt(now + d.cfg.ConfirmDelay + d.cfg.InformerJitter)
}

// addPhaseNodes adds the nodes of createNodes phase i (p), numbered from
// first, to the API server a at now and emits them to its informer; it
// returns their names. Both engines call it on the goroutine owning a.
func addPhaseNodes(cfg Config, a *apiServer, now time.Duration, first, i int, p *planPhase, scale float64) []string {
	n := scaled(p.count, scale, 1)
	shape := p.shape
	if shape == nil {
		shape = cfg.Shape
	}
	cl := workload.Build(workload.ClusterSpec{Nodes: n, Seed: cfg.Seed*1_000_003 + int64(i), Shape: shape})
	names := make([]string, 0, n)
	for k, node := range cl.Nodes {
		idx := first + k
		node.Name = workload.NodeName(idx)
		node.UID = types.UID(node.Name)
		node.Labels[v1.LabelHostname] = node.Name
		node.Labels[v1.LabelTopologyZone] = workload.ZoneOf(idx)
		if cfg.Zones > 0 {
			node.Labels[v1.LabelTopologyZone] = fmt.Sprintf("zone-%d", idx%cfg.Zones)
		}
		node.ResourceVersion = a.nextRV()
		a.truth.setNode(node, false)
		a.names = append(a.names, node.Name)
		a.state[node.Name] = nsReady
		a.inf.emitNode(now, node, false)
		names = append(names, node.Name)
	}
	return names
}

// createPods creates a createPods phase's pods, pending in the API server,
// and queues them.
func (pr *phaseRun) createPods(now time.Duration, i int, p *planPhase) error {
	d := pr.d
	g := 0
	if p.tmpl != nil {
		g = p.tmpl.gang
	}
	n := scaled(p.count, pr.scale, g)
	var cur *gang
	var queued []*phasePod
	for j := 0; j < n; j++ {
		uid := fmt.Sprintf("ph%d-%06d", i, j)
		var pod *v1.Pod
		if p.tmpl != nil {
			pod = p.tmpl.cl.NewPod(d.r, uid, "")
			gangID := ""
			if g > 0 && !pr.groups { // the stand-in's label; a PodGroup member needs none
				gangID = fmt.Sprintf("ph%d-%d", i, j/g)
			}
			p.tmpl.decorate(pod, gangID, i)
		} else {
			pod = d.e.cl.NewPod(d.r, uid, "")
		}
		pod.Namespace = p.ns
		pp := &phasePod{pod: pod, phase: i, created: now}
		if g > 0 && pr.groups {
			// The picker's gang scheduling: a PodGroup per gang.
			name := fmt.Sprintf("ph%d-%d", i, j/g)
			if j%g == 0 {
				if err := pr.addPodGroup(p.ns, name, g); err != nil {
					return err
				}
			}
			if err := pr.joinGroup(pod, name); err != nil {
				return err
			}
		} else if g > 0 {
			if j%g == 0 {
				cur = &gang{size: g}
			}
			cur.members = append(cur.members, pp)
			pp.gang = cur
		}
		d.e.truth.Pending(pod)
		pr.byUID[uid] = pp
		pr.byNS[p.ns] = append(pr.byNS[p.ns], pp)
		if len(pod.Spec.SchedulingGates) > 0 {
			pp.state, pp.q.where, pp.q.ts = psGated, qGated, now
			pr.q.gated++
			continue
		}
		queued = append(queued, pp)
		pr.unsettled++
		pr.unsettledNS[p.ns]++
		pr.unsettledPh[i]++
	}
	pr.stats[i].created = int64(n)
	traceEvent(d.digest, now, "create-pods", p.name, strconv.Itoa(n))
	// The pods are queued once all exist (a gang's members are created
	// together), through the picker's PreEnqueue when it has one; the
	// pods it held before are asked again.
	if err := pr.retryPreEnqueue(now); err != nil {
		return err
	}
	for _, pp := range queued {
		if err := pr.enqueue(now, pp); err != nil {
			return err
		}
	}
	pr.wake(now)
	return nil
}

// gangLabel labels the members of a gang with its name.
const gangLabel = "sim.schedcache.io/gang"

// decorate puts the template's labels, priority, scheduler name,
// affinity and spread constraints on p (a fresh pod sharing immutable
// parts), the gang's label when gang is not "", and, when the template
// has a lifecycle, the index of its phase (annPhase).
func (t *podTemplate) decorate(p *v1.Pod, gang string, phase int) {
	if t.podDefault {
		remakePodDefault(p)
	}
	if t.lifeSet {
		a := maps.Clone(p.Annotations)
		if a == nil {
			a = map[string]string{}
		}
		a[annPhase] = strconv.Itoa(phase)
		p.Annotations = a
	}
	if len(t.labels) > 0 || gang != "" {
		l := maps.Clone(p.Labels)
		if l == nil {
			l = map[string]string{}
		}
		maps.Copy(l, t.labels)
		if gang != "" {
			l[gangLabel] = gang
		}
		p.Labels = l
	}
	if t.priority != nil {
		p.Spec.Priority = t.priority
	}
	if t.sched != "" {
		p.Spec.SchedulerName = t.sched
	}
	if a := t.affinity; a != nil {
		merged := &v1.Affinity{}
		if p.Spec.Affinity != nil {
			*merged = *p.Spec.Affinity
		}
		if a.NodeAffinity != nil {
			merged.NodeAffinity = a.NodeAffinity
		}
		if a.PodAffinity != nil {
			merged.PodAffinity = a.PodAffinity
		}
		if a.PodAntiAffinity != nil {
			merged.PodAntiAffinity = a.PodAntiAffinity
		}
		p.Spec.Affinity = merged
	}
	if len(t.spread) > 0 {
		p.Spec.TopologySpreadConstraints = t.spread
	}
	if len(t.gates) > 0 {
		p.Spec.SchedulingGates = t.gates
	}
}

// PodDefaultImage is the image of scheduler_perf's pod-default.yaml.
const PodDefaultImage = "registry.k8s.io/pause:3.10.2"

// remakePodDefault makes p, a generated pod of one container, scheduler_perf's
// pod-default.yaml with p's requests: the container "pause" of
// PodDefaultImage with container port 80, limits equal to requests, and
// no labels, annotations or other spec fields (name, namespace, UID,
// resource version and scheduler name are kept).
func remakePodDefault(p *v1.Pod) {
	var req v1.ResourceList
	if len(p.Spec.Containers) > 0 {
		req = p.Spec.Containers[0].Resources.Requests
	}
	p.Labels, p.Annotations = nil, nil
	p.Spec = v1.PodSpec{
		SchedulerName: p.Spec.SchedulerName,
		Containers: []v1.Container{{
			Name:      "pause",
			Image:     PodDefaultImage,
			Ports:     []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}},
			Resources: v1.ResourceRequirements{Requests: req, Limits: req.DeepCopy()},
		}},
	}
}

// wake queues a decision at now for every sleeping scheduler.
func (pr *phaseRun) wake(now time.Duration) {
	for w, idle := range pr.idle {
		if idle {
			pr.idle[w] = false
			pr.d.push(event{at: now, kind: evDecide, worker: w})
		}
	}
}

// decide (evDecide) is one decision of scheduler ev.worker: the queue's
// next pod, or sleep until pods are queued.
func (pr *phaseRun) decide(ev event) error {
	if pr.err != nil {
		return pr.err
	}
	pp := pr.q.pop()
	if pp == nil {
		pr.idle[ev.worker] = true
		return nil
	}
	pr.d.push(event{at: ev.at + pr.d.cfg.DecisionTime, kind: evDecide, worker: ev.worker})
	pp.state = psInFlight
	if pr.preemptors[ev.worker] == nil {
		// The stand-in binds a preemptor to its node itself; a
		// Preemptor's picker tries the nominated node first.
		node, ok, err := pr.nominatedFit(pp)
		if err != nil {
			return err
		}
		if ok { // a preemptor's node, freed for it
			return pr.d.bind(ev, pp.pod, node, pp.created, time.Now())
		}
	}
	return pr.d.attempt(ev, pp.pod, pp.created)
}

// record applies fn to the stats of every open span.
func (pr *phaseRun) record(fn func(st *phaseStat)) {
	for _, i := range pr.open {
		fn(&pr.stats[i])
	}
}

// settle marks pp settled as state at now; a phase waiting for it may end.
func (pr *phaseRun) settle(pp *phasePod, state podState, now time.Duration) {
	if pp.state == psQueued || pp.state == psInFlight {
		pr.unsettled--
		pr.unsettledNS[pp.pod.Namespace]--
		pr.unsettledPh[pp.phase]--
	}
	pp.state = state
	if state != psUnschedulable {
		pr.forgetNomination(pp)
	}
	if pr.waitOver() {
		pr.queueStep(now)
	}
}

// bound: pod's binding succeeded at at; took is its attempt's wall time
// (known: false with -bind-latency).
func (pr *phaseRun) bound(at time.Duration, pod *v1.Pod, took time.Duration, known bool) {
	pp := pr.byUID[string(pod.UID)]
	if pp == nil {
		return
	}
	pr.record(func(st *phaseStat) {
		st.scheduled++
		w := int((at - st.start) / time.Second)
		for len(st.win) <= w {
			st.win = append(st.win, 0)
		}
		st.win[w]++
		if st.e2e == nil {
			st.e2e, st.attempt = hist.New(), hist.New()
		}
		st.e2e.Record(at - pp.created)
		if known {
			st.attempt.Record(took)
		}
	})
	pr.settle(pp, psBound, at)
}

// unschedulable: no node fits pod on snap at ev.at (scheduler
// ev.worker's attempt). A gang member fails its gang; another pod runs
// PostFilter (the picker's Preemptor, else the stand-in) and waits with
// the unschedulable pods: unsettled if it preempted, else settled.
func (pr *phaseRun) unschedulable(ev event, pod *v1.Pod, snap *schedcache.Snapshot) error {
	now := ev.at
	pp := pr.byUID[string(pod.UID)]
	if pp == nil {
		return nil
	}
	if g := pp.gang; g != nil {
		return pr.failGang(now, g)
	}
	var (
		out preemptOutcome
		err error
	)
	if p := pr.preemptors[ev.worker]; p != nil {
		out, err = pr.postFilter(now, pp, p, snap)
	} else {
		out, err = pr.preempt(now, pp)
	}
	if err != nil || out == poBound {
		return err // bound at once (the stand-in found room without victims)
	}
	pp.failed(now, false)
	switch out {
	case poRetry: // its victims were gone already: back to the queue
		pp.state = psQueued
		pr.requeue(pp, now)
		return nil
	case poNominated:
		pp.state = psQueued // waits for its victims' deletions
		pr.q.unschedulable(pp)
		pr.flushLater(now)
		return nil
	}
	pr.parkUnschedulable(pp, now)
	return nil
}

// attemptFailed: the picker failed pod's attempt with an error wrapping
// ErrAttempt. Upstream runs no PostFilter after an error: the pod is
// settled failed, without preemption; a gang member fails its gang.
func (pr *phaseRun) attemptFailed(now time.Duration, pod *v1.Pod) error {
	pp := pr.byUID[string(pod.UID)]
	if pp == nil {
		return nil
	}
	if g := pp.gang; g != nil {
		return pr.failGang(now, g)
	}
	pr.record(func(st *phaseStat) { st.failed++ })
	pr.settle(pp, psFailed, now)
	return nil
}

// failGang: a member of g found no node: the members assumed are forgotten
// and every member not settled is unschedulable.
func (pr *phaseRun) failGang(now time.Duration, g *gang) error {
	d := pr.d
	g.failed = true
	for _, h := range g.held {
		pod := h.pp.pod
		if err := d.rec(trace.Record{Op: trace.ForgetPod, Pod: pod}, d.c.ForgetPod(d.logger, pod)); err != nil {
			return fmt.Errorf("ForgetPod %s: %w", pod.Name, err)
		}
		d.e.truth.Pending(pod)
		traceEvent(d.digest, now, "gang-forget", pod.Name, h.node)
	}
	g.held = nil
	n := int64(0)
	for _, m := range g.members {
		if m.state == psQueued || m.state == psInFlight {
			pr.settle(m, psUnschedulable, now)
			n++
		}
	}
	pr.record(func(st *phaseStat) { st.unschedulable += n; st.gangsFailed++ })
	return nil
}

// assumed: pod was assumed on node (its attempt began at tr). A gang
// member is held (true) until its gang's last member is assumed; that one
// releases the others' bindings and is bound by the caller (false).
func (pr *phaseRun) assumed(now time.Duration, pod *v1.Pod, node string, tr time.Time) (held bool, err error) {
	pp := pr.byUID[string(pod.UID)]
	if pp != nil {
		pr.forgetNomination(pp) // upstream's nominator forgets a pod as it is assumed
	}
	if pp == nil || pp.gang == nil {
		return false, nil
	}
	g := pp.gang
	if len(g.held)+1 < g.size {
		g.held = append(g.held, heldPod{pp, node, tr})
		return true, nil
	}
	held2 := g.held
	g.held = nil
	for _, h := range held2 {
		if err := pr.d.dispatch(now, h.pp.pod, h.node, h.tr); err != nil {
			return false, err
		}
	}
	return false, nil
}

// bindFailed: pod's binding failed: it is queued again (bindRetryLimit
// times at most, then it is settled failed).
func (pr *phaseRun) bindFailed(now time.Duration, pod *v1.Pod) {
	pp := pr.byUID[string(pod.UID)]
	if pp == nil {
		return
	}
	pr.record(func(st *phaseStat) { st.failedBindings++ })
	pp.tries++
	pp.gang = nil // its gang was placed: it retries alone
	if pp.tries >= bindRetryLimit {
		pr.record(func(st *phaseStat) { st.failed++ })
		pr.settle(pp, psFailed, now)
		return
	}
	np := *pod
	np.Spec.NodeName = ""
	np.Status.StartTime = nil
	pr.d.e.truth.Pending(&np)
	pp.pod = &np
	pp.state = psQueued
	pp.failed(now, true)
	pr.q.backoffError(pp)
	pr.backoffLater(pp)
}

// completed: pod, bound, completed at now (Failed when failed) and is
// being deleted by the API server (lifecycle.go): the open spans count it.
func (pr *phaseRun) completed(now time.Duration, pod *v1.Pod, failed bool) {
	pp := pr.byUID[string(pod.UID)]
	if pp == nil || pp.state != psBound {
		return
	}
	pr.settle(pp, psCompleted, now)
	pr.record(func(st *phaseStat) {
		st.completed++
		if failed {
			st.completedFailed++
		}
	})
}

// deletePods deletes up to n (n < 0: all) pods of namespace ns, oldest
// first, and returns how many: a bound pod through the API server (its
// deletion reaches the cache through the informer), a pending one from
// the API server alone. Pods whose binding is in flight are skipped.
func (pr *phaseRun) deletePods(now time.Duration, ns string, n int) int {
	d := pr.d
	got := deletePhasePods(pr.byNS, pr.byUID, ns, n, now, d.e.truth, d.api,
		func(pp *phasePod) {
			traceEvent(d.digest, now, "delete-pending", pp.pod.Name, "")
			if pr.groups && pp.pod.Spec.SchedulingGroup != nil {
				if err := d.c.RemovePodGroupMember(pp.pod); err != nil && pr.err == nil {
					pr.err = fmt.Errorf("RemovePodGroupMember %s: %w", pp.pod.Name, err)
				}
			}
		},
		func(pp *phasePod) {
			pr.q.remove(pp)
			pr.settle(pp, psDeleted, now)
		})
	pr.stats[pr.cur].deleted += int64(got)
	return got
}

// deletePhasePods is deletePods of both engines: it deletes up to n (n <
// 0: all) pods of namespace ns in byNS, oldest first, and returns how
// many. A bound pod goes through the API server a (its deletion reaches
// the cache through the informer), a pending one from truth alone
// (pending is told); each deleted pod is settled. Pods whose binding is
// in flight, and those deleted or completed, are skipped; those found
// gone (churn, eviction) are marked deleted. The deleted and completed
// pods at the front of the namespace's list are dropped from it and from
// byUID. The caller owns byNS, byUID and the pods.
func deletePhasePods(byNS map[string][]*phasePod, byUID map[string]*phasePod, ns string, n int, now time.Duration,
	truth *Truth, a *apiServer, pending, settle func(*phasePod)) int {
	got := 0
	pods := byNS[ns]
	for k := 0; k < len(pods) && (n < 0 || got < n); k++ {
		pp := pods[k]
		switch pp.state {
		case psDeleted, psInFlight, psCompleted:
			continue
		case psBound:
			r, ok := truth.pods.Load(string(pp.pod.UID))
			if !ok { // deleted by churn or evicted
				pp.state = psDeleted
				continue
			}
			a.gone[string(pp.pod.UID)] = true // out of the churn's live pods
			a.deletePod(now, r.Pod)
		default:
			truth.Delete(pp.pod)
			pending(pp)
		}
		settle(pp)
		got++
	}
	k := 0
	for k < len(pods) && (pods[k].state == psDeleted || pods[k].state == psCompleted) {
		delete(byUID, string(pods[k].pod.UID))
		k++
	}
	byNS[ns] = pods[k:]
	return got
}

// progress is the fraction of the phases ended (the current one counted
// by its settled pods) and the pods queued, for the progress bar.
func (pr *phaseRun) progress() (float64, int) {
	n := len(pr.plan.phases)
	done := float64(min(pr.cur, n))
	if pr.cur < n {
		if c := pr.stats[pr.cur].created; c > 0 {
			done += 1 - float64(pr.unsettledPh[pr.cur])/float64(c)
		}
	}
	return done / float64(n), pr.q.len()
}

// finishReport fills rep's phases once the run is over; a phase not ended
// (the run was interrupted or hit run.duration) ends at the run's end,
// unfinished.
func (pr *phaseRun) finishReport(rep *Report) {
	end := pr.d.endAt
	for i := range pr.stats {
		st := &pr.stats[i]
		if st.started && !st.ended {
			st.ended, st.cut, st.end, st.wallEnd, st.procEnd = true, true, end, time.Now(), markProc()
			pr.warnings = append(pr.warnings, fmt.Sprintf("phase %s did not finish: the run %s", pr.plan.phases[i].name, stoppedWhy(rep.Stopped)))
		}
	}
	rep.Phases = pr.results()
	if pr.binders != nil {
		bc := pr.bc
		rep.BindingCycle = &bc
	}
	if pr.groups {
		rep.PodGroups = pr.podGroupCounts()
	}
	pr.d.e.warnings = append(pr.d.e.warnings, pr.warnings...)
}

// stoppedWhy words a run's Stopped for a message.
func stoppedWhy(s string) string {
	switch s {
	case "duration":
		return "reached run.duration (-duration)"
	case "interrupted":
		return "was interrupted"
	}
	return "stopped (" + s + ")"
}

// parkUnschedulable settles pp unschedulable at now (counted once per
// pod) and parks it in the unschedulable pods until an event or the
// flush moves it (upstream's AddUnschedulableIfNotPresent).
func (pr *phaseRun) parkUnschedulable(pp *phasePod, now time.Duration) {
	if !pp.counted {
		pp.counted = true
		pr.record(func(st *phaseStat) { st.unschedulable++ })
	}
	pr.settle(pp, psUnschedulable, now)
	pr.q.unschedulable(pp)
	pr.flushLater(now)
}
