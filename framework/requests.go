package framework

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// This file computes a pod's Requested contribution (semantics 4.2) and its
// non-zero cpu/memory (4.3) exactly as upstream PodInfo.CalculateResource
// with the v1.35 gates (InPlacePodVerticalScaling on, PodLevelResources on,
// InPlacePodLevelResourcesVerticalScaling off), in one pass and without
// building intermediate v1.ResourceLists.
//
// Every operation of the upstream aggregation (add, max, default-if-absent,
// override, overhead) is per resource name, so the defaulted aggregation
// T0 of 4.3 only needs its cpu and memory entries; they are carried as two
// extra slots (cpu0, memory0) next to the plain aggregation T. Names that
// can never reach a Resource (neither cpu, memory, ephemeral-storage, pods
// nor a scalar name) are dropped on entry: they influence nothing.

const (
	slotCPU = iota
	slotMemory
	slotEphemeral
	slotPods
	slotCPU0    // cpu with the 100m default for containers that lack cpu
	slotMemory0 // memory with the 200Mi default for containers that lack memory
	numSlots
)

// Default non-zero requests (upstream schedutil.DefaultMilliCPURequest and
// DefaultMemoryRequest).
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

var (
	defaultCPUQuantity    = *resource.NewMilliQuantity(DefaultMilliCPURequest, resource.DecimalSI)
	defaultMemoryQuantity = *resource.NewQuantity(DefaultMemoryRequest, resource.DecimalSI)
)

type namedQuantity struct {
	name v1.ResourceName
	q    resource.Quantity
}

// reqList is an exact resource list restricted to names that reach a
// Resource. Every Quantity stored in it is owned by it (stored through
// DeepCopy), so in-place Add never touches a pod's own quantities.
type reqList struct {
	has     uint8 // bit i set: fixed[i] is present
	fixed   [numSlots]resource.Quantity
	scalars []namedQuantity // unsorted, unique names
}

func (r *reqList) reset() {
	r.has = 0
	clear(r.scalars) // drop references to inf.Dec values
	r.scalars = r.scalars[:0]
}

func (r *reqList) present(slot int) bool { return r.has&(1<<slot) != 0 }

func fixedSlot(name v1.ResourceName) int {
	switch name {
	case v1.ResourceCPU:
		return slotCPU
	case v1.ResourceMemory:
		return slotMemory
	case v1.ResourceEphemeralStorage:
		return slotEphemeral
	case v1.ResourcePods:
		return slotPods
	}
	return -1
}

func (r *reqList) scalarIndex(name v1.ResourceName) int {
	for i := range r.scalars {
		if r.scalars[i].name == name {
			return i
		}
	}
	return -1
}

// setFixed stores a copy of q in slot.
func (r *reqList) setFixed(slot int, q *resource.Quantity) {
	r.fixed[slot] = q.DeepCopy()
	r.has |= 1 << slot
}

// addFixed adds q to slot (absent counts as zero).
func (r *reqList) addFixed(slot int, q *resource.Quantity) {
	if !r.present(slot) {
		r.setFixed(slot, q)
		return
	}
	r.fixed[slot].Add(*q)
}

// maxFixed raises slot to q (absent counts as missing, so q is taken).
func (r *reqList) maxFixed(slot int, q *resource.Quantity) {
	if !r.present(slot) || q.Cmp(r.fixed[slot]) > 0 {
		r.setFixed(slot, q)
	}
}

func (r *reqList) setScalar(name v1.ResourceName, q *resource.Quantity) {
	if i := r.scalarIndex(name); i >= 0 {
		r.scalars[i].q = q.DeepCopy()
		return
	}
	r.scalars = append(r.scalars, namedQuantity{name: name, q: q.DeepCopy()})
}

func (r *reqList) addScalar(name v1.ResourceName, q *resource.Quantity) {
	if i := r.scalarIndex(name); i >= 0 {
		r.scalars[i].q.Add(*q)
		return
	}
	r.scalars = append(r.scalars, namedQuantity{name: name, q: q.DeepCopy()})
}

func (r *reqList) maxScalar(name v1.ResourceName, q *resource.Quantity) {
	if i := r.scalarIndex(name); i >= 0 {
		if q.Cmp(r.scalars[i].q) > 0 {
			r.scalars[i].q = q.DeepCopy()
		}
		return
	}
	r.scalars = append(r.scalars, namedQuantity{name: name, q: q.DeepCopy()})
}

// maxList merges rl into r with per-name max (upstream maxResourceList).
// The cpu0/memory0 slots are not touched; see applyDefaults.
func (r *reqList) maxList(rl v1.ResourceList) {
	for name, q := range rl {
		if slot := fixedSlot(name); slot >= 0 {
			r.maxFixed(slot, &q)
		} else if IsScalarResourceName(name) {
			r.maxScalar(name, &q)
		}
	}
}

// applyDefaults fills cpu0/memory0 from cpu/memory, or from the non-zero
// defaults where the container has no such key (upstream applyNonMissing:
// an explicit zero stays zero).
func (r *reqList) applyDefaults() {
	if r.present(slotCPU) {
		r.fixed[slotCPU0] = r.fixed[slotCPU] // shared within r; r is never mutated in place
	} else {
		r.fixed[slotCPU0] = defaultCPUQuantity
	}
	if r.present(slotMemory) {
		r.fixed[slotMemory0] = r.fixed[slotMemory]
	} else {
		r.fixed[slotMemory0] = defaultMemoryQuantity
	}
	r.has |= 1<<slotCPU0 | 1<<slotMemory0
}

// add adds o into r per name (upstream addResourceList).
func (r *reqList) add(o *reqList) {
	for slot := range numSlots {
		if o.present(slot) {
			r.addFixed(slot, &o.fixed[slot])
		}
	}
	for i := range o.scalars {
		r.addScalar(o.scalars[i].name, &o.scalars[i].q)
	}
}

// max raises r to o per name (upstream maxResourceList).
func (r *reqList) max(o *reqList) {
	for slot := range numSlots {
		if o.present(slot) {
			r.maxFixed(slot, &o.fixed[slot])
		}
	}
	for i := range o.scalars {
		r.maxScalar(o.scalars[i].name, &o.scalars[i].q)
	}
}

// containerRequests sets r to the effective requests R'(c) of a regular or
// restartable init container (useStatus) or a plain init container.
func (r *reqList) containerRequests(pod *v1.Pod, c *v1.Container, useStatus, infeasible bool) {
	r.reset()
	if useStatus {
		if cs := findContainerStatus(pod, c.Name); cs != nil && cs.Resources != nil {
			// upstream determineEffectiveRequests: max(spec, actuated,
			// allocated), spec left out when the resize is infeasible.
			if !infeasible {
				r.maxList(c.Resources.Requests)
			}
			r.maxList(cs.Resources.Requests)
			r.maxList(cs.AllocatedResources)
			r.applyDefaults()
			return
		}
	}
	r.maxList(c.Resources.Requests)
	r.applyDefaults()
}

// findContainerStatus returns the status upstream's name-indexed map would
// hold for name: the last init container status with that name, else the
// last container status with that name, else nil.
func findContainerStatus(pod *v1.Pod, name string) *v1.ContainerStatus {
	for i := len(pod.Status.InitContainerStatuses) - 1; i >= 0; i-- {
		if pod.Status.InitContainerStatuses[i].Name == name {
			return &pod.Status.InitContainerStatuses[i]
		}
	}
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// isPodResizeInfeasible is upstream IsPodResizeInfeasible: the first
// PodResizePending condition decides.
func isPodResizeInfeasible(pod *v1.Pod) bool {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodResizePending {
			return pod.Status.Conditions[i].Reason == v1.PodReasonInfeasible
		}
	}
	return false
}

// isSupportedPodLevelResource is upstream IsSupportedPodLevelResource.
func isSupportedPodLevelResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory ||
		strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// podLevelRequestsSet is upstream IsPodLevelRequestsSet.
func podLevelRequestsSet(pod *v1.Pod) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	for name := range pod.Spec.Resources.Requests {
		if isSupportedPodLevelResource(name) {
			return true
		}
	}
	return false
}

// podRequests computes the pod's Requested contribution and its non-zero
// cpu (millicores) and memory (bytes), rounding once on the aggregate.
func podRequests(pod *v1.Pod) (req Resource, non0CPU, non0Mem int64) {
	infeasible := isPodResizeInfeasible(pod)
	var cur, total reqList
	for i := range pod.Spec.Containers {
		cur.containerRequests(pod, &pod.Spec.Containers[i], true, infeasible)
		total.add(&cur)
	}
	if len(pod.Spec.InitContainers) > 0 {
		var side, initMax, tmp reqList
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if isRestartable(c) {
				cur.containerRequests(pod, c, true, infeasible)
				total.add(&cur)
				side.add(&cur)
				initMax.max(&side)
			} else {
				cur.containerRequests(pod, c, false, infeasible)
				tmp.reset()
				tmp.add(&cur)
				tmp.add(&side)
				initMax.max(&tmp)
			}
		}
		total.max(&initMax)
	}

	podLevel := podLevelRequestsSet(pod)
	if podLevel {
		for name, q := range pod.Spec.Resources.Requests {
			switch {
			case name == v1.ResourceCPU:
				total.setFixed(slotCPU, &q)
				total.setFixed(slotCPU0, &q)
			case name == v1.ResourceMemory:
				total.setFixed(slotMemory, &q)
				total.setFixed(slotMemory0, &q)
			case strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix):
				total.setScalar(name, &q)
			}
		}
	}
	for name, q := range pod.Spec.Overhead {
		switch slot := fixedSlot(name); {
		case slot == slotCPU:
			total.addFixed(slotCPU, &q)
			total.addFixed(slotCPU0, &q)
		case slot == slotMemory:
			total.addFixed(slotMemory, &q)
			total.addFixed(slotMemory0, &q)
		case slot >= 0:
			total.addFixed(slot, &q)
		case IsScalarResourceName(name):
			total.addScalar(name, &q)
		}
	}

	if total.present(slotCPU) {
		req.MilliCPU = ceilMilli(&total.fixed[slotCPU])
	}
	if total.present(slotMemory) {
		req.Memory = ceilValue(&total.fixed[slotMemory])
	}
	if total.present(slotEphemeral) {
		req.EphemeralStorage = ceilValue(&total.fixed[slotEphemeral])
	}
	if total.present(slotPods) {
		req.AllowedPodNumber = ceilValue(&total.fixed[slotPods])
	}
	if len(total.scalars) > 0 {
		req.scalars = make([]ScalarQuantity, len(total.scalars))
		for i := range total.scalars {
			req.scalars[i] = ScalarQuantity{Name: total.scalars[i].name, Value: ceilValue(&total.scalars[i].q)}
		}
		sortScalars(req.scalars)
	}

	// 4.3: with pod-level requests in effect the default applies only to a
	// key the plain aggregation lacks; otherwise always.
	cpuSlot, memSlot := slotCPU0, slotMemory0
	if podLevel && total.present(slotCPU) {
		cpuSlot = slotCPU
	}
	if podLevel && total.present(slotMemory) {
		memSlot = slotMemory
	}
	if total.present(cpuSlot) {
		non0CPU = ceilMilli(&total.fixed[cpuSlot])
	}
	if total.present(memSlot) {
		non0Mem = ceilValue(&total.fixed[memSlot])
	}
	return req, non0CPU, non0Mem
}

// pvcKeysOf returns "<namespace>/<claimName>" for every volume of pod with a
// persistentVolumeClaim source (duplicates kept), nil when there are none.
// All keys share one backing string.
func pvcKeysOf(pod *v1.Pod) []string {
	n, size := 0, 0
	for i := range pod.Spec.Volumes {
		if c := pod.Spec.Volumes[i].PersistentVolumeClaim; c != nil {
			n++
			size += len(pod.Namespace) + 1 + len(c.ClaimName)
		}
	}
	if n == 0 {
		return nil
	}
	var b strings.Builder
	b.Grow(size)
	for i := range pod.Spec.Volumes {
		if c := pod.Spec.Volumes[i].PersistentVolumeClaim; c != nil {
			b.WriteString(pod.Namespace)
			b.WriteByte('/')
			b.WriteString(c.ClaimName)
		}
	}
	all := b.String()
	keys := make([]string, 0, n)
	off := 0
	for i := range pod.Spec.Volumes {
		if c := pod.Spec.Volumes[i].PersistentVolumeClaim; c != nil {
			l := len(pod.Namespace) + 1 + len(c.ClaimName)
			keys = append(keys, all[off:off+l])
			off += l
		}
	}
	return slices.Clip(keys)
}
