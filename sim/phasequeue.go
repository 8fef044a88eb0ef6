package sim

import "time"

// The phases engine's side of the scheduling queue (queue.go): the moves
// that change whether a pod is settled, and the timers of the flushes.

// requeue puts pp (in no queue, psQueued) in the backoff queue or activeQ
// at now, and wakes the sleeping schedulers (a scheduler takes from the
// backoff queue when activeQ is empty).
func (pr *phaseRun) requeue(pp *phasePod, now time.Duration) {
	if pr.q.requeue(pp, now) {
		pr.backoffLater(pp)
	}
	pr.wake(now)
}

// unsettleMove requeues pp, just taken out of the unschedulable pods: a
// pod settled unschedulable is unsettled again.
func (pr *phaseRun) unsettleMove(pp *phasePod, now time.Duration) {
	if pp.state == psUnschedulable {
		pr.unsettle(pp)
	}
	traceEvent(pr.d.digest, now, "requeue", pp.pod.Name, "")
	pr.requeue(pp, now)
}

// unsettle makes pp, settled, unsettled and queued.
func (pr *phaseRun) unsettle(pp *phasePod) {
	pp.state = psQueued
	pr.unsettled++
	pr.unsettledNS[pp.pod.Namespace]++
	pr.unsettledPh[pp.phase]++
}

// clusterEvent: a cluster event (a node added or changed, an assigned
// pod deleted) was delivered at now: every unschedulable pod is moved
// (MoveAllToActiveOrBackoffQueue with every hint answering Queue).
func (pr *phaseRun) clusterEvent(now time.Duration) {
	if pr.done {
		return
	}
	if err := pr.retryPreEnqueue(now); err != nil && pr.err == nil {
		pr.err = err
	}
	if len(pr.q.unsched) == 0 {
		return
	}
	for _, pp := range pr.q.takeUnsched(func(*phasePod) bool { return true }) {
		pr.unsettleMove(pp, now)
	}
}

// backoffLater queues the flush that ends pp's backoff, unless one is
// queued for that time.
func (pr *phaseRun) backoffLater(pp *phasePod) {
	at := pp.flushAt()
	if pr.flushes[at] {
		return
	}
	pr.flushes[at] = true
	pr.d.push(event{at: at, kind: evPhase, worker: 2})
}

// flushBackoff (timer 2) moves the pods whose backoff is over to activeQ.
func (pr *phaseRun) flushBackoff(now time.Duration) {
	delete(pr.flushes, now)
	if pr.q.flushBackoff(now) > 0 {
		pr.wake(now)
	}
}

// flushLater queues the next flush of long-unschedulable pods (upstream
// runs one every 30 s from its start), unless one is queued.
func (pr *phaseRun) flushLater(now time.Duration) {
	if pr.leftover {
		return
	}
	pr.leftover = true
	pr.d.push(event{at: (now/unschedulableFlush + 1) * unschedulableFlush, kind: evPhase, worker: 3})
}

// flushLeftover (timer 3) moves the pods unschedulable for more than
// podMaxInUnschedulable, and queues the next flush while some are left.
func (pr *phaseRun) flushLeftover(now time.Duration) {
	pr.leftover = false
	for _, pp := range pr.q.takeUnsched(func(pp *phasePod) bool { return now-pp.q.ts > podMaxInUnschedulable }) {
		pr.unsettleMove(pp, now)
	}
	if len(pr.q.unsched) > 0 {
		pr.flushLater(now)
	}
}

// ungate removes the scheduling gates of up to n (n < 0: all) gated pods
// of namespace ns, oldest first, at now, and queues them; it returns how
// many.
func (pr *phaseRun) ungate(now time.Duration, ns string, n int) int {
	got := 0
	for _, pp := range pr.byNS[ns] {
		if n >= 0 && got >= n {
			break
		}
		if pp.state != psGated {
			continue
		}
		np := *pp.pod
		np.Spec.SchedulingGates = nil
		pp.pod = &np
		pr.d.e.truth.Pending(&np)
		pr.q.remove(pp)
		pr.unsettle(pp)
		pr.q.addActive(pp, now, false)
		traceEvent(pr.d.digest, now, "ungate", np.Name, "")
		got++
	}
	if got > 0 {
		pr.wake(now)
	}
	return got
}
