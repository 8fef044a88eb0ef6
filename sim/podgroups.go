package sim

import (
	"context"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod groups with the picker's own gang scheduling. A Picker that is a
// PodGroupPicker answering true schedules gangs itself (loadgen-fwk with
// the GenericWorkload feature gate: upstream's GangScheduling plugin). A
// phases run (deterministic) then models a template's gangs as upstream's
// objects instead of its stand-in (phaserun.go's gang): each gang is a
// scheduling.k8s.io/v1beta1 PodGroup named after it, with the Gang policy
// and minCount the gang's size, created in the API server and the cache
// (Cache.AddPodGroup) before its pods; each member carries
// spec.schedulingGroup.podGroupName and is added to its group in the
// cache as it is created (Cache.AddPodGroupMember: upstream's event
// handler does so for a pending pod). The cache's pod-group state is the
// frameworks' PodGroupManager (PickerConfig.Cache).
//
// The picker's PreEnqueue plugins (Enqueuer) decide whether a member
// enters the queue: one they hold waits, unsettled, and is asked again
// after every createPods phase's pods are created, when a bound pod's
// add is delivered and at every cluster event (upstream asks
// GangScheduling's queueing hints on a pod or pod group add). GangScheduling's Permit then holds each assumed member
// until minCount are assumed, and allows them all (the binding cycle,
// bindcycle.go).

// PodGroupPicker is an optional interface of a Picker: whether it
// schedules pod groups itself.
type PodGroupPicker interface {
	// PodGroups says whether the picker schedules pod groups (upstream's
	// GenericWorkload); the same answer on every call.
	PodGroups() bool
}

// Enqueuer is an optional interface of a NodePicker: the profile's
// PreEnqueue plugins. Contract: as NodePicker's.
type Enqueuer interface {
	// PreEnqueue runs the PreEnqueue plugins of pod's profile: ok when
	// every one admits it to the queue; else plugin names the first
	// that held it. An error stops the run.
	PreEnqueue(ctx context.Context, pod *v1.Pod) (ok bool, plugin string, err error)
}

// podGroupsOn says whether p schedules pod groups itself.
func podGroupsOn(p Picker) bool {
	g, ok := p.(PodGroupPicker)
	return ok && g.PodGroups()
}

// addPodGroup creates the PodGroup of a gang of size members, name in
// namespace ns, in the API server's view and the cache.
func (pr *phaseRun) addPodGroup(ns, name string, size int) error {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("pg-" + ns + "-" + name)},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(size)},
		}},
	}
	if err := pr.d.c.AddPodGroup(pg); err != nil {
		return fmt.Errorf("AddPodGroup %s/%s: %w", ns, name, err)
	}
	pr.podGroups++
	return nil
}

// joinGroup makes pod a member of the pod group name and adds it to the
// group in the cache.
func (pr *phaseRun) joinGroup(pod *v1.Pod, name string) error {
	n := name
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &n}
	// The cache keeps the object it is given as the pending pod the
	// informer delivered; the run sets nodeName on its own pod as it
	// binds it (upstream's scheduler assumes a deep copy).
	cp := *pod
	if err := pr.d.c.AddPodGroupMember(&cp); err != nil {
		return fmt.Errorf("AddPodGroupMember %s: %w", pod.Name, err)
	}
	return nil
}

// enqueue queues pp, created at now, through the picker's PreEnqueue:
// into activeQ, or held (qPreGated).
func (pr *phaseRun) enqueue(now time.Duration, pp *phasePod) error {
	if pr.enq == nil || pp.pod.Spec.SchedulingGroup == nil {
		pr.q.addActive(pp, now, true)
		return nil
	}
	ok, plugin, err := pr.enq.PreEnqueue(pr.d.ctx, pp.pod)
	if err != nil {
		return fmt.Errorf("PreEnqueue %s: %w", pp.pod.Name, err)
	}
	if ok {
		pr.q.addActive(pp, now, true)
		return nil
	}
	traceEvent(pr.d.digest, now, "pre-enqueue-held", pp.pod.Name, plugin)
	pp.q.where, pp.q.ts = qPreGated, now
	pr.preGated = append(pr.preGated, pp)
	return nil
}

// retryPreEnqueue asks PreEnqueue again for the held pods at now; those
// admitted join activeQ.
func (pr *phaseRun) retryPreEnqueue(now time.Duration) error {
	if len(pr.preGated) == 0 {
		return nil
	}
	held := pr.preGated
	pr.preGated = nil
	woke := false
	for k, pp := range held {
		if pp.q.where != qPreGated || pp.state != psQueued {
			continue // deleted
		}
		ok, _, err := pr.enq.PreEnqueue(pr.d.ctx, pp.pod)
		if err != nil {
			pr.preGated = append(pr.preGated, held[k:]...)
			return fmt.Errorf("PreEnqueue %s: %w", pp.pod.Name, err)
		}
		if !ok {
			pr.preGated = append(pr.preGated, pp)
			continue
		}
		traceEvent(pr.d.digest, now, "pre-enqueue-admitted", pp.pod.Name, "")
		pp.q.where = qNone
		pr.q.addActive(pp, now, false)
		woke = true
	}
	if woke {
		pr.wake(now)
	}
	return nil
}

// PodGroupCounts is a plain value: the pod groups of a run whose picker
// schedules them, at its end.
type PodGroupCounts struct {
	Groups  int64 `json:"groups"`  // PodGroup objects created
	Whole   int64 `json:"whole"`   // groups whose every member is bound
	Partial int64 `json:"partial"` // groups with some members bound, not all
	Members int64 `json:"members"` // member pods
	Bound   int64 `json:"bound"`   // member pods bound
}

// podGroupCounts counts the pod groups' members bound at the run's end
// (bound or completed after binding).
func (pr *phaseRun) podGroupCounts() *PodGroupCounts {
	type tally struct{ n, bound int64 }
	groups := map[string]*tally{}
	for _, pp := range pr.byUID {
		sg := pp.pod.Spec.SchedulingGroup
		if sg == nil || sg.PodGroupName == nil {
			continue
		}
		k := pp.pod.Namespace + "/" + *sg.PodGroupName
		t := groups[k]
		if t == nil {
			t = &tally{}
			groups[k] = t
		}
		t.n++
		if pp.state == psBound || pp.state == psCompleted {
			t.bound++
		}
	}
	c := &PodGroupCounts{Groups: pr.podGroups}
	for _, t := range groups {
		c.Members += t.n
		c.Bound += t.bound
		switch {
		case t.bound == t.n:
			c.Whole++
		case t.bound > 0:
			c.Partial++
		}
	}
	return c
}

// printPodGroups writes the pod groups line of the text report.
func (r *Report) printPodGroups(w io.Writer) {
	g := r.PodGroups
	if g == nil {
		return
	}
	fmt.Fprintf(w, "podgroups: %d PodGroups (the picker's gang scheduling): %d placed whole, %d partly; %d of %d member pods bound\n",
		g.Groups, g.Whole, g.Partial, g.Bound, g.Members)
}
