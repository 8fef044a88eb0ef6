package sim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
)

// Preemption in a phases run: a picker that is a Preemptor runs PostFilter
// itself (cmd/loadgen-fwk's runs upstream's DefaultPreemption; see
// postFilter); for the others, the simulator's stand-in for upstream's
// DefaultPreemption described here. A phase pod
// with a positive priority that finds no node looks, from a random node
// on, for nodes where deleting pods of lower priority (the lowest first,
// as few as needed) makes it fit by resources, taints and node selector,
// until it has found max(100, 10% of the nodes) such candidates (upstream's
// minCandidateNodesAbsolute and minCandidateNodesPercentage); it takes the
// candidate whose highest victim priority is lowest, then the one with the
// fewest victims, then the first found (a node where it fits without
// victims, which a sampling picker can miss, is taken at once). The victims are deleted through
// the API server; the pod is nominated to the node and waits with the
// unschedulable pods until their deletions, delivered, move it back
// (queue.go); its next attempt binds it to the nominated node if it fits
// there, else picks as usual. A pod
// preempts at most maxPreemptions times, then it is unschedulable. Until
// the nominated pod has tried its node, the node is no other preemptor's
// candidate, and a pick of it for another pod counts as finding no node
// (upstream's Filter counts nominated pods; the pickers do not know them).

const (
	maxPreemptions       = 3
	minCandidates        = 100
	minCandidatesPercent = 10
)

// priority is a pod's priority (0 without one).
func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// preemptState is owned by the event loop: a phase pod's preemption.
type preemptState struct {
	nominated string // the node its victims were deleted from ("" none)
	count     int    // preemptions made
}

// preemptOutcome is what PostFilter did for a pod that found no node.
type preemptOutcome uint8

const (
	poNone      preemptOutcome = iota // nothing: the pod is unschedulable
	poNominated                       // victims deleted, the pod nominated: it waits for their deletions
	poRetry                           // nominated, but no victim was left to delete: it is queued again
	poBound                           // bound at once (the stand-in found a node without victims)
)

// victim is a pod a preemption would delete.
type victim struct {
	pod  *v1.Pod
	prio int32
	req  nodeinfo.Resource
}

// preempt (the stand-in) tries to make room for pp, which found no node
// at now.
func (pr *phaseRun) preempt(now time.Duration, pp *phasePod) (preemptOutcome, error) {
	d := pr.d
	pod := pp.pod
	prio := priority(pod)
	if prio <= 0 || pp.pre.count >= maxPreemptions {
		return poNone, nil
	}
	info, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		return poNone, err
	}
	want := info.Requests()
	snap := d.c.Snapshot()
	n := snap.NumNodes()
	if n == 0 {
		return poNone, nil
	}
	need := min(n, max(minCandidates, n*minCandidatesPercent/100))
	var best []victim
	bestNode, found := "", 0
	bestMax := int32(0)
	start := d.r.IntN(n)
	for k := 0; k < n && found < need; k++ {
		ni := snap.At((start + k) % n)
		vs, ok := pr.victimsOn(ni, pod, prio, want)
		if !ok {
			continue
		}
		found++
		hi := int32(math.MinInt32)
		if len(vs) > 0 {
			hi = vs[len(vs)-1].prio // the victims are sorted by priority
		}
		if bestNode == "" || hi < bestMax || (hi == bestMax && len(vs) < len(best)) {
			best, bestNode, bestMax = append(best[:0], vs...), ni.Node().Name, hi
		}
		if len(vs) == 0 {
			break // nothing beats no victim
		}
	}
	if bestNode == "" {
		return poNone, nil
	}
	if len(best) == 0 { // no victim: bind it there now
		traceEvent(d.digest, now, "preempt-none", pod.Name, bestNode)
		return poBound, d.bind(event{at: now}, pod, bestNode, pp.created, time.Now())
	}
	a := d.api
	for _, v := range best {
		uid := string(v.pod.UID)
		r, _ := d.e.truth.pods.Load(uid)
		a.gone[uid] = true
		a.deletePod(now, r.Pod)
		if vp := pr.byUID[uid]; vp != nil {
			vp.state = psDeleted
		}
	}
	pp.pre.count++
	pr.setNomination(pp, bestNode)
	pr.nominated[bestNode] = pp
	nv := int64(len(best))
	pr.record(func(st *phaseStat) { st.preemptions++; st.victims += nv })
	traceEvent(d.digest, now, "preempt", pod.Name, bestNode+" "+strconv.Itoa(len(best)))
	return poNominated, nil
}

// victimsOn returns the fewest pods of priority below prio, lowest first,
// whose deletion from ni lets pod (requesting want) fit there, or false
// when none does: the node does not take the pod, or a pod it needs gone
// is not deletable now (not bound in the API server: in flight, or
// deleted already by another preemption). The slice is pr.vbuf's: valid
// until the next call.
func (pr *phaseRun) victimsOn(ni *nodeinfo.NodeInfo, pod *v1.Pod, prio int32, want nodeinfo.Resource) ([]victim, bool) {
	node := ni.Node()
	if node == nil || pr.nominated[node.Name] != nil {
		return nil, false // another preemptor's
	}
	req, alloc := ni.Requested(), ni.Allocatable()
	cpu, mem, pods := alloc.MilliCPU-req.MilliCPU, alloc.Memory-req.Memory, alloc.AllowedPodNumber-int64(ni.NumPods())
	fitsNow := func() bool { return cpu >= want.MilliCPU && mem >= want.Memory && pods >= 1 }
	if fitsNow() {
		// The picker missed it (a sampling picker can): no victim.
		return pr.vbuf[:0], fits(pod, node)
	}
	// What deleting every pod of lower priority would free: most nodes
	// are out at this point, before anything is allocated.
	var lc, lm, ln int64
	for k := 0; k < ni.NumPods(); k++ {
		if pi := ni.PodAt(k); priority(pi.Pod()) < prio {
			r := pi.Requests()
			lc, lm, ln = lc+r.MilliCPU, lm+r.Memory, ln+1
		}
	}
	if cpu+lc < want.MilliCPU || mem+lm < want.Memory || pods+ln < 1 || !fits(pod, node) {
		return nil, false
	}
	cands := pr.vbuf[:0]
	for k := 0; k < ni.NumPods(); k++ {
		pi := ni.PodAt(k)
		if p := pi.Pod(); priority(p) < prio {
			cands = append(cands, victim{pod: p, prio: priority(p), req: pi.Requests()})
		}
	}
	pr.vbuf = cands[:0]
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].prio != cands[j].prio {
			return cands[i].prio < cands[j].prio
		}
		return cands[i].pod.UID < cands[j].pod.UID
	})
	for k, v := range cands {
		cpu += v.req.MilliCPU
		mem += v.req.Memory
		pods++
		if fitsNow() {
			vs := cands[:k+1]
			for _, v := range vs {
				r, ok := pr.d.e.truth.pods.Load(string(v.pod.UID))
				if !ok || !r.Bound || r.Node != node.Name {
					return nil, false
				}
			}
			if r, ok := pr.d.e.truth.nodes.Load(node.Name); !ok || r.Draining {
				return nil, false
			}
			return vs, true
		}
	}
	return nil, false
}

// reserved says whether node is nominated to a preemptor other than pod:
// the room its victims left is that preemptor's (upstream's Filter counts
// nominated pods; here a pick of such a node counts as finding none).
func (pr *phaseRun) reserved(node string, pod *v1.Pod) bool {
	pp := pr.nominated[node]
	return pp != nil && pp.pod.UID != pod.UID
}

// nominatedFit (the stand-in) says whether pp fits on its nominated node
// now (resources, taints, node selector), and forgets the nomination.
func (pr *phaseRun) nominatedFit(pp *phasePod) (string, bool, error) {
	node := pp.pre.nominated
	if node == "" {
		return "", false, nil
	}
	pr.setNomination(pp, "")
	ni, err := pr.d.c.Snapshot().Get(node)
	if err != nil || ni == nil || ni.Node() == nil {
		return "", false, nil
	}
	info, err := nodeinfo.NewPodInfo(pp.pod)
	if err != nil {
		return "", false, fmt.Errorf("pod %s: %w", pp.pod.Name, err)
	}
	want := info.Requests()
	req, alloc := ni.Requested(), ni.Allocatable()
	ok := fits(pp.pod, ni.Node()) && alloc.MilliCPU-req.MilliCPU >= want.MilliCPU && alloc.Memory-req.Memory >= want.Memory &&
		int64(ni.NumPods()) < alloc.AllowedPodNumber
	return node, ok, nil
}
