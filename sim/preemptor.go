package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// Preemptor is an optional interface of a NodePicker: PostFilter, for a
// pod that found no node. A phases run (deterministic mode) uses it
// instead of its preemption stand-in (phasepreempt.go) when every
// scheduler's picker implements it; cmd/loadgen-fwk's runs upstream's
// DefaultPreemption.
//
// Contract: as NodePicker's (one goroutine at a time). The run calls
// Preempt right after the Pick that found no node, on the same
// snapshot; it tells every node picker of the run of every change of a
// pod's nomination through Nominate, its own preemptions' included, and
// a picker must count the nominated pods on their nodes from then on (as
// upstream's PodNominator does for RunFilterPluginsWithNominatedPods) and
// try a pod's nominated node first (upstream's evaluateNominatedNode).
type Preemptor interface {
	// Preempt runs PostFilter for pod on snap (which it must not
	// change) and returns the outcome: the nominated node and the
	// victims to delete, or none. r is the scheduler's random source. An
	// error stops the run.
	Preempt(ctx context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, r *rand.Rand) (Preemption, error)
	// Nominate records that pod (pending) is nominated to node; node ""
	// forgets its nomination (it was bound, deleted, or its nomination
	// cleared).
	Nominate(pod *v1.Pod, node string)
}

// Preemption is a plain value: what PostFilter decided for one pod.
type Preemption struct {
	// Node is the node the pod is nominated to; "" none.
	Node string
	// Clear: with Node "", the pod's nomination is cleared (upstream's
	// PostFilterResult naming no node); without, it is kept.
	Clear bool
	// Victims are the pods to delete for the pod to fit on Node: bound
	// pods of a lower priority than the pod's.
	Victims []*v1.Pod
	// Cleared are pods whose nomination to Node the preemption cleared
	// (pods of a lower priority nominated there).
	Cleared []*v1.Pod
}

// postFilter runs p's PostFilter for pp, which found no node on snap at
// now: the victims are deleted through the API server, as the stand-in
// deletes its own, and the nominations are recorded.
func (pr *phaseRun) postFilter(now time.Duration, pp *phasePod, p Preemptor, snap *schedcache.Snapshot) (preemptOutcome, error) {
	d := pr.d
	pod := pp.pod
	info, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		return poNone, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	res, err := p.Preempt(d.ctx, snap, info, d.r)
	if err != nil {
		return poNone, fmt.Errorf("preempt %s: %w", pod.Name, err)
	}
	prio := priority(pod)
	for _, c := range res.Cleared {
		cp := pr.byUID[string(c.UID)]
		if cp == nil || cp == pp || cp.pre.nominated == "" {
			continue
		}
		pr.setNomination(cp, "")
		if cp.q.where == qUnsched {
			// Its status changed: an update moves it (upstream's
			// queue moves an updated unschedulable pod).
			pr.q.dropUnsched(cp)
			pr.unsettleMove(cp, now)
		}
	}
	if res.Node == "" {
		if res.Clear {
			pr.setNomination(pp, "")
		}
		return poNone, nil
	}
	if r, ok := d.e.truth.nodes.Load(res.Node); !ok || r.Node == nil {
		return poNone, fmt.Errorf("%w: %s: pod %s nominated to %q, a node the API server does not hold", ErrPicker, d.pickers.name, pod.Name, res.Node)
	}
	a := d.api
	deleted := 0
	for _, v := range res.Victims {
		if v == nil || priority(v) >= prio || v.UID == pod.UID {
			return poNone, fmt.Errorf("%w: %s: victim %v of pod %s (priority %d) is not a pod of a lower priority", ErrPicker, d.pickers.name, podRef(v), pod.Name, prio)
		}
		uid := string(v.UID)
		r, ok := d.e.truth.pods.Load(uid)
		if !ok || !r.Bound || a.gone[uid] {
			continue // deleted already, or not bound yet
		}
		a.gone[uid] = true
		a.deletePod(now, r.Pod)
		if vp := pr.byUID[uid]; vp != nil {
			vp.state = psDeleted
		}
		deleted++
	}
	pp.pre.count++
	pr.setNomination(pp, res.Node)
	nv := int64(deleted)
	pr.record(func(st *phaseStat) { st.preemptions++; st.victims += nv })
	traceEvent(d.digest, now, "preempt", pod.Name, res.Node+" "+strconv.Itoa(deleted))
	if deleted == 0 {
		return poRetry, nil
	}
	return poNominated, nil
}

// podRef names a pod for a message.
func podRef(p *v1.Pod) string {
	if p == nil {
		return "<nil>"
	}
	return p.Namespace + "/" + p.Name
}

// setNomination nominates pp, pending, to node ("" none): its object in
// the API server carries the node (status.nominatedNodeName), and every
// Preemptor picker is told.
func (pr *phaseRun) setNomination(pp *phasePod, node string) {
	if pp.pre.nominated == node && pp.pod.Status.NominatedNodeName == node {
		return
	}
	if old := pp.pre.nominated; old != "" && pr.nominated[old] == pp {
		delete(pr.nominated, old)
	}
	pp.pre.nominated = node
	np := *pp.pod
	np.Status.NominatedNodeName = node
	pp.pod = &np
	pr.d.e.truth.Pending(&np)
	pr.tellNominated(&np, node)
}

// forgetNomination forgets pp's nomination, if any, without changing its
// object (it is being bound, or is gone).
func (pr *phaseRun) forgetNomination(pp *phasePod) {
	old := pp.pre.nominated
	if old == "" {
		return
	}
	if pr.nominated[old] == pp {
		delete(pr.nominated, old)
	}
	pp.pre.nominated = ""
	pr.tellNominated(pp.pod, "")
}

// tellNominated tells every Preemptor picker that pod is nominated to
// node ("" none).
func (pr *phaseRun) tellNominated(pod *v1.Pod, node string) {
	for _, p := range pr.preemptors {
		if p != nil {
			p.Nominate(pod, node)
		}
	}
}
