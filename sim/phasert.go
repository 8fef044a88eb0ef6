package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/hist"
)

// A phases plan in real time (realtime.go): the phase driver goroutine
// runs the phases one after another in wall-clock time; the pods of
// createPods phases wait in one FIFO queue that the scheduler goroutines
// take from; what the API server owns (createNodes, deletePods, churn
// actions) runs on the API server goroutine, through rt.apiReq. A pod is
// settled as in deterministic mode (phaserun.go): bound, unschedulable,
// failed (bindRetryLimit failed bindings), deleted or completed. Gangs and
// preemption are deterministic mode's only (validatePhases refuses them).

// errRunStopped: the run stopped while the phase driver waited.
var errRunStopped = errors.New("the run stopped")

// rtPhases is a phases plan being run in real time.
type rtPhases struct {
	rt    *realtimeRun // immutable
	plan  *phasePlan   // immutable
	scale float64      // immutable
	r     *rand.Rand   // owned by the phase driver goroutine: the pods' random parts
	nodes int          // owned by the phase driver goroutine: nodes created so far

	mu          sync.Mutex // guards every field below
	cur         int        // the phase running; len(plan.phases) once all ended
	stats       []phaseStat
	open        []int // the phases whose span is open
	queue       []*phasePod
	head        int
	byUID       map[string]*phasePod
	byNS        map[string][]*phasePod
	unsettled   int64
	unsettledNS map[string]int64
	unsettledPh []int64
	warnings    []string

	ready   chan struct{}  // immutable; cap 1: pods were queued (a waiting scheduler takes them)
	changed chan struct{}  // immutable; cap 1: a pod settled (the phase driver looks again)
	over    chan struct{}  // immutable; closed by the phase driver once every phase has ended
	wg      sync.WaitGroup // the phase driver and the churn goroutines; joined by rt.wait
}

// apiReq is work the phase driver hands the API server goroutine: fn runs
// there at run time now, under the world's read lock; its result is sent
// on done (cap 1).
type apiReq struct {
	fn   func(now time.Duration) error
	done chan error
}

func newRTPhases(rt *realtimeRun) *rtPhases {
	plan := rt.cfg.Phases
	ph := &rtPhases{rt: rt, plan: plan, scale: rt.cfg.Scale, r: rand.New(rand.NewPCG(uint64(rt.cfg.Seed), 77)),
		stats: make([]phaseStat, len(plan.phases)), byUID: map[string]*phasePod{}, byNS: map[string][]*phasePod{},
		unsettledNS: map[string]int64{}, unsettledPh: make([]int64, len(plan.phases)),
		ready: make(chan struct{}, 1), changed: make(chan struct{}, 1), over: make(chan struct{})}
	if ph.scale == 0 {
		ph.scale = 1
	}
	return ph
}

// signal makes a non-blocking send on c (cap 1).
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// start starts the phase driver goroutine.
func (ph *rtPhases) start() {
	ph.wg.Add(1)
	go ph.drive()
}

// drive is the phase driver goroutine: it runs the phases, then closes
// over; it returns early once the run stops.
func (ph *rtPhases) drive() {
	defer ph.wg.Done()
	for i := range ph.plan.phases {
		if err := ph.runPhase(i); err != nil {
			if !errors.Is(err, errRunStopped) {
				ph.rt.fail(fmt.Errorf("phase %s: %w", ph.plan.phases[i].name, err))
			}
			return
		}
	}
	now := ph.rt.since()
	ph.mu.Lock()
	ph.cur = len(ph.plan.phases)
	for _, i := range append([]int(nil), ph.open...) {
		ph.endLocked(i, now, true) // a startCollecting never stopped
	}
	ph.mu.Unlock()
	close(ph.over)
}

// call runs fn on the API server goroutine and returns its result.
func (ph *rtPhases) call(fn func(now time.Duration) error) error {
	q := apiReq{fn: fn, done: make(chan error, 1)}
	select {
	case ph.rt.apiReq <- q:
	case <-ph.rt.done:
		return errRunStopped
	}
	select {
	case err := <-q.done:
		return err
	case <-ph.rt.done:
		return errRunStopped
	}
}

// sleep waits d, or until the run stops.
func (ph *rtPhases) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ph.rt.done:
		return errRunStopped
	}
}

// waitFor waits until cond, checked under mu, holds: it looks again each
// time a pod settles.
func (ph *rtPhases) waitFor(cond func() bool) error {
	for {
		ph.mu.Lock()
		ok := cond()
		ph.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ph.changed:
		case <-ph.rt.done:
			return errRunStopped
		}
	}
}

// runPhase runs phase i and ends its span.
func (ph *rtPhases) runPhase(i int) error {
	rt := ph.rt
	p := &ph.plan.phases[i]
	now := rt.since()
	ph.mu.Lock()
	ph.cur = i
	st := &ph.stats[i]
	st.started, st.start, st.wallStart, st.procStart = true, now, time.Now(), markProc()
	ph.open = append(ph.open, i)
	ph.mu.Unlock()
	rt.prog.printf("phase %d/%d %s (%s) at %v\n", i+1, len(ph.plan.phases), p.name, p.op, now.Round(time.Millisecond))
	if err := ph.work(i, p); err != nil {
		return err
	}
	ph.mu.Lock()
	ph.endLocked(i, rt.since(), false)
	ph.mu.Unlock()
	return nil
}

// work does phase i's work (p), waiting for it as the phase says.
func (ph *rtPhases) work(i int, p *planPhase) error {
	rt := ph.rt
	switch p.op {
	case opCreateNodes:
		if i == 0 {
			ph.nodes = rt.cfg.Nodes // loaded with the cluster
			ph.mu.Lock()
			ph.stats[i].nodes = int64(rt.cfg.Nodes)
			ph.mu.Unlock()
			return nil
		}
		return ph.createNodes(i, p)
	case opCreatePods:
		ph.createPods(i, p)
		if p.skipWait {
			return nil
		}
		return ph.waitFor(func() bool { return ph.unsettledPh[i] == 0 })
	case opBarrier:
		return ph.waitFor(func() bool { return ph.barrierDone(p) })
	case opSleep:
		return ph.sleep(p.dur)
	case opDeletePods:
		return ph.deletePhase(i, p)
	case opChurn:
		var until time.Duration
		if p.dur > 0 {
			until = rt.since() + p.dur
		}
		for _, r := range p.churn {
			ph.wg.Add(1)
			go ph.churn(i, r.kind, r.rate, until)
		}
		if !p.skipWait {
			return ph.sleep(p.dur)
		}
	case opStopCollecting:
		ph.mu.Lock()
		for _, j := range ph.open {
			if ph.plan.phases[j].op == opStartCollecting {
				ph.endLocked(j, ph.stats[i].start, true) // the span ends as this phase starts
				break
			}
		}
		ph.mu.Unlock()
	}
	return nil
}

// createNodes adds phase i's nodes through the API server goroutine and
// waits until its informer has delivered them.
func (ph *rtPhases) createNodes(i int, p *planPhase) error {
	var names []string
	err := ph.call(func(now time.Duration) error {
		names = addPhaseNodes(ph.rt.cfg, ph.rt.api, now, ph.nodes, i, p, ph.scale)
		return nil
	})
	if err != nil {
		return err
	}
	ph.nodes += len(names)
	ph.mu.Lock()
	ph.stats[i].nodes = int64(len(names))
	ph.mu.Unlock()
	for {
		delivered := false
		err := ph.call(func(time.Duration) error {
			inf := ph.rt.inf
			for len(names) > 0 {
				n := names[len(names)-1]
				if inf.nodes[n] == nil || inf.busy("n/"+n) {
					return nil
				}
				names = names[:len(names)-1]
			}
			delivered = true
			return nil
		})
		if err != nil || delivered {
			return err
		}
		if err := ph.sleep(max(ph.rt.cfg.ConfirmDelay, time.Millisecond)); err != nil {
			return err
		}
	}
}

// createPods creates phase i's pods, pending in the API server, and
// queues them.
func (ph *rtPhases) createPods(i int, p *planPhase) {
	rt := ph.rt
	n := scaled(p.count, ph.scale, 1)
	now := rt.since()
	pods := make([]*phasePod, n)
	for j := range pods {
		uid := fmt.Sprintf("ph%d-%06d", i, j)
		var pod *v1.Pod
		if p.tmpl != nil {
			pod = p.tmpl.cl.NewPod(ph.r, uid, "")
			p.tmpl.decorate(pod, "", i)
		} else {
			pod = rt.e.cl.NewPod(ph.r, uid, "")
		}
		pod.Namespace = p.ns
		pods[j] = &phasePod{pod: pod, phase: i, created: now}
	}
	rt.world.RLock()
	defer rt.world.RUnlock()
	ph.mu.Lock()
	defer ph.mu.Unlock()
	for _, pp := range pods {
		rt.e.truth.Pending(pp.pod)
		ph.queue = append(ph.queue, pp)
		ph.byUID[string(pp.pod.UID)] = pp
		ph.byNS[p.ns] = append(ph.byNS[p.ns], pp)
		ph.unsettled++
		ph.unsettledNS[p.ns]++
		ph.unsettledPh[i]++
	}
	ph.stats[i].created = int64(n)
	signal(ph.ready)
}

// deletePhase runs deletePods phase i (p): at once, or one pod every
// 1/rate seconds.
func (ph *rtPhases) deletePhase(i int, p *planPhase) error {
	n := -1
	if p.count > 0 {
		n = scaled(p.count, ph.scale, 1)
	}
	del := func(k int) (int, error) {
		got := 0
		err := ph.call(func(now time.Duration) error {
			got = ph.deletePods(now, i, p.ns, k)
			return nil
		})
		return got, err
	}
	if p.rate == 0 {
		got, err := del(n)
		if err == nil && n > 0 && got < n {
			ph.mu.Lock()
			ph.warnings = append(ph.warnings, fmt.Sprintf("phase %s: %d pods of namespace %s deleted, %d asked", p.name, got, p.ns, n))
			ph.mu.Unlock()
		}
		return err
	}
	if n < 0 {
		ph.mu.Lock()
		n = len(ph.byNS[p.ns])
		ph.mu.Unlock()
	}
	gap := max(time.Duration(float64(time.Second)/p.rate), 1)
	for ; n > 0; n-- {
		got, err := del(1)
		if err != nil || got == 0 {
			return err // nothing left to delete
		}
		if n > 1 {
			if err := ph.sleep(gap); err != nil {
				return err
			}
		}
	}
	return nil
}

// deletePods (on the API server goroutine, under the world's read lock)
// deletes up to n (n < 0: all) pods of namespace ns for phase i, oldest
// first, as phaseRun.deletePods does, and returns how many.
func (ph *rtPhases) deletePods(now time.Duration, i int, ns string, n int) int {
	rt := ph.rt
	ph.mu.Lock()
	defer ph.mu.Unlock()
	got := deletePhasePods(ph.byNS, ph.byUID, ns, n, now, rt.e.truth, rt.api,
		func(*phasePod) {}, func(pp *phasePod) { ph.settleLocked(pp, psDeleted) })
	ph.stats[i].deleted += int64(got)
	return got
}

// churn is one churn goroutine of churn phase i: an action of kind at
// rate per second (Poisson) on the API server goroutine until until (0:
// until the run stops).
func (ph *rtPhases) churn(i int, kind actKind, rate float64, until time.Duration) {
	defer ph.wg.Done()
	rt := ph.rt
	for {
		var gap time.Duration
		if err := ph.call(func(time.Duration) error { gap = rt.api.gap(rate); return nil }); err != nil {
			return
		}
		if err := ph.sleep(gap); err != nil {
			return
		}
		if until > 0 && rt.since() >= until {
			return
		}
		err := ph.call(func(now time.Duration) error { return rt.api.do(action{at: now, kind: kind}) })
		if errors.Is(err, errRunStopped) {
			return
		}
		if err != nil {
			rt.fail(fmt.Errorf("phase %s: churn: %w", ph.plan.phases[i].name, err))
			return
		}
		ph.mu.Lock()
		ph.stats[i].churn++
		ph.mu.Unlock()
	}
}

// endLocked closes phase i's span at now (a startCollecting span only when
// force: by its stopCollecting or the plan's end); mu is held.
func (ph *rtPhases) endLocked(i int, now time.Duration, force bool) {
	st := &ph.stats[i]
	if st.ended || (!force && ph.plan.phases[i].op == opStartCollecting) {
		return
	}
	st.ended, st.end, st.wallEnd, st.procEnd = true, now, time.Now(), markProc()
	for k, j := range ph.open {
		if j == i {
			ph.open = append(ph.open[:k], ph.open[k+1:]...)
			break
		}
	}
}

// barrierDone: mu is held.
func (ph *rtPhases) barrierDone(p *planPhase) bool {
	return barrierDone(p, ph.unsettled, ph.unsettledNS)
}

// take (a scheduler goroutine) returns the queue's next pod, now in
// flight, and its object; it waits for one, and returns nil once the run
// stops.
func (ph *rtPhases) take() (*phasePod, *v1.Pod) {
	for {
		ph.mu.Lock()
		for ph.head < len(ph.queue) {
			pp := ph.queue[ph.head]
			ph.queue[ph.head] = nil
			ph.head++
			if ph.head > 4096 && ph.head*2 > len(ph.queue) {
				ph.queue = append(ph.queue[:0:0], ph.queue[ph.head:]...)
				ph.head = 0
			}
			if pp.state == psQueued {
				pp.state = psInFlight
				if ph.head < len(ph.queue) {
					signal(ph.ready) // more for the next scheduler
				}
				pod := pp.pod
				ph.mu.Unlock()
				return pp, pod
			}
		}
		ph.mu.Unlock()
		select {
		case <-ph.ready:
		case <-ph.rt.done:
			return nil, nil
		}
	}
}

// recordLocked applies fn to the stats of every open span; mu is held.
func (ph *rtPhases) recordLocked(fn func(st *phaseStat)) {
	for _, i := range ph.open {
		fn(&ph.stats[i])
	}
}

// settleLocked marks pp settled as state; mu is held.
func (ph *rtPhases) settleLocked(pp *phasePod, state podState) {
	if pp.state == psQueued || pp.state == psInFlight {
		ph.unsettled--
		ph.unsettledNS[pp.pod.Namespace]--
		ph.unsettledPh[pp.phase]--
	}
	pp.state = state
	signal(ph.changed)
}

// bound: pod's binding succeeded at run time at; took is its attempt's
// wall time.
func (ph *rtPhases) bound(at time.Duration, pod *v1.Pod, took time.Duration) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	pp := ph.byUID[string(pod.UID)]
	if pp == nil {
		return
	}
	ph.recordLocked(func(st *phaseStat) {
		st.scheduled++
		w := int(max(at-st.start, 0) / time.Second)
		for len(st.win) <= w {
			st.win = append(st.win, 0)
		}
		st.win[w]++
		if st.e2e == nil {
			st.e2e, st.attempt = hist.New(), hist.New()
		}
		st.e2e.Record(at - pp.created)
		st.attempt.Record(took)
	})
	ph.settleLocked(pp, psBound)
}

// unschedulable: no node fits pod.
func (ph *rtPhases) unschedulable(pod *v1.Pod) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	pp := ph.byUID[string(pod.UID)]
	if pp == nil {
		return
	}
	ph.recordLocked(func(st *phaseStat) { st.unschedulable++ })
	ph.settleLocked(pp, psUnschedulable)
}

// attemptFailed: the picker failed pod's attempt with an error wrapping
// ErrAttempt: the pod is settled failed.
func (ph *rtPhases) attemptFailed(pod *v1.Pod) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	pp := ph.byUID[string(pod.UID)]
	if pp == nil {
		return
	}
	ph.recordLocked(func(st *phaseStat) { st.failed++ })
	ph.settleLocked(pp, psFailed)
}

// requeue: pod, forgotten (pending in the API server), is queued again:
// after a conflict, or after a failed binding (failed: bindRetryLimit
// times at most, then it is settled failed).
func (ph *rtPhases) requeue(pod *v1.Pod, failed bool) {
	rt := ph.rt
	ph.mu.Lock()
	defer ph.mu.Unlock()
	pp := ph.byUID[string(pod.UID)]
	if pp == nil {
		return
	}
	if failed {
		ph.recordLocked(func(st *phaseStat) { st.failedBindings++ })
		pp.tries++
		if pp.tries >= bindRetryLimit {
			ph.recordLocked(func(st *phaseStat) { st.failed++ })
			ph.settleLocked(pp, psFailed)
			return
		}
	}
	np := *pod
	np.Spec.NodeName = ""
	rt.e.truth.Pending(&np)
	pp.pod = &np
	pp.state = psQueued
	ph.queue = append(ph.queue, pp)
	signal(ph.ready)
}

// completed (the API server goroutine): pod, bound, completed at now
// (lifecycle.go).
func (ph *rtPhases) completed(_ time.Duration, pod *v1.Pod, failed bool) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	pp := ph.byUID[string(pod.UID)]
	if pp == nil || pp.state != psBound {
		return
	}
	ph.settleLocked(pp, psCompleted)
	ph.recordLocked(func(st *phaseStat) {
		st.completed++
		if failed {
			st.completedFailed++
		}
	})
}

// progress is the fraction of the phases ended (the current one counted
// by its settled pods) and the pods queued, for the progress bar.
func (ph *rtPhases) progress() (float64, int) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	n := len(ph.plan.phases)
	done := float64(min(ph.cur, n))
	if ph.cur < n {
		if c := ph.stats[ph.cur].created; c > 0 {
			done += 1 - float64(ph.unsettledPh[ph.cur])/float64(c)
		}
	}
	return done / float64(n), len(ph.queue) - ph.head
}

// finishReport (the main goroutine, once every goroutine is joined) fills
// rep's phases; a phase not ended ends at end, unfinished.
func (ph *rtPhases) finishReport(rep *Report, end time.Duration) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	for i := range ph.stats {
		st := &ph.stats[i]
		if st.started && !st.ended {
			st.ended, st.cut, st.end, st.wallEnd, st.procEnd = true, true, max(end, st.start), time.Now(), markProc()
			ph.warnings = append(ph.warnings, fmt.Sprintf("phase %s did not finish: the run %s", ph.plan.phases[i].name, stoppedWhy(rep.Stopped)))
		}
	}
	rep.Phases = phaseResults(ph.plan, ph.stats, time.Millisecond)
	for _, pp := range ph.queue[ph.head:] {
		if pp.state == psQueued {
			rep.PendingAtEnd++
		}
	}
	ph.rt.e.warnings = append(ph.rt.e.warnings, ph.warnings...)
}

// realtimeRefusal says why real-time mode cannot run the plan ("": it
// can): gangs and preemption are deterministic mode's only.
func (plan *phasePlan) realtimeRefusal() string {
	for _, p := range plan.phases {
		if p.op == opUngatePods {
			return fmt.Sprintf("phase %s: ungatePods runs in deterministic mode only: drop -deterministic=false", p.name)
		}
		if p.tmpl == nil {
			continue
		}
		if p.tmpl.gang > 0 {
			return fmt.Sprintf("phase %s: gangs (template.gangSize) run in deterministic mode only: drop -deterministic=false", p.name)
		}
		if len(p.tmpl.gates) > 0 {
			return fmt.Sprintf("phase %s: scheduling gates (template.schedulingGates) run in deterministic mode only: drop -deterministic=false", p.name)
		}
		if p.tmpl.priority != nil && *p.tmpl.priority != 0 {
			return fmt.Sprintf("phase %s: priorities and preemption (template.priority) run in deterministic mode only: drop -deterministic=false", p.name)
		}
	}
	return ""
}
