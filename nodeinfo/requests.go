package nodeinfo

import (
	"cmp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// This file computes a pod's Requested contribution (semantics 4.2) and its
// non-zero cpu/memory (4.3) exactly as upstream PodInfo.CalculateResource
// at v1.37.2 with the default gates (InPlacePodVerticalScaling GA and
// locked on, PodLevelResources and InPlacePodLevelResourcesVerticalScaling
// beta and on), without building intermediate v1.ResourceLists.
// DRANodeAllocatableResources (alpha, off by default) is followed as
// SetDRANodeAllocatableResources says (dra.go): while it is off, as by
// default, the pod status's nodeAllocatableResourceClaimStatuses are not
// read; while it is on, a pod with claim statuses takes the exact path
// (podRequestsExactWith), which adds their quantities where upstream does.
//
// Every operation of the upstream aggregation (add, max, default-if-absent,
// override, overhead) is per resource name, so the defaulted aggregation
// T0 of 4.3 only needs its cpu and memory entries; they are carried as two
// extra slots (cpu0, memory0) next to the plain aggregation T. Names that
// can never reach a Resource (neither cpu, memory, ephemeral-storage, pods
// nor a scalar name) are dropped on entry: they influence nothing.
// Amounts stay exact (see num) and are rounded up once, on the aggregate.

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

// num is an exact amount in a slot's unit (millicores for the cpu slots,
// the base unit otherwise). The common case is a plain int64; amounts that
// are not whole units or do not fit an int64 are held exactly as a
// Quantity in the resource's own unit. A num is immutable: operations
// return new values, so nums may be copied and shared freely.
type num struct {
	v int64              // the amount, when q == nil
	q *resource.Quantity // the exact amount when not representable by v; never mutated
}

// loadNum converts q to a num at scale (resource.Milli or 0). At scale 0
// a whole amount in int64 (AsInt64 is exact when it reports ok: every
// usual memory request) needs no check; anything else takes
// loadNumChecked. Cpu, at milli scale, is mostly fractional ("250m"),
// for which trying AsInt64 first would only add a miss.
func loadNum(q *resource.Quantity, scale resource.Scale) num {
	if scale == 0 {
		if v, ok := q.AsInt64(); ok {
			return num{v: v}
		}
	}
	return loadNumChecked(q, scale)
}

// loadNumChecked is loadNum for any amount: converted at scale, kept as an
// int64 only if converting back gives q, else held exactly.
func loadNumChecked(q *resource.Quantity, scale resource.Scale) num {
	v := q.ScaledValue(scale)
	var e resource.Quantity
	e.SetScaled(v, scale)
	if q.Cmp(e) == 0 {
		return num{v: v}
	}
	c := q.DeepCopy()
	return num{q: &c}
}

// quantity returns n as a Quantity the caller owns.
func (n num) quantity(scale resource.Scale) resource.Quantity {
	if n.q != nil {
		return n.q.DeepCopy()
	}
	var e resource.Quantity
	e.SetScaled(n.v, scale)
	return e
}

func addNum(a, b num, scale resource.Scale) num {
	if a.q == nil && b.q == nil {
		if s := a.v + b.v; (s > a.v) == (b.v > 0) {
			return num{v: s}
		}
	}
	x := a.quantity(scale)
	x.Add(b.quantity(scale))
	return num{q: &x}
}

func cmpNum(a, b num, scale resource.Scale) int {
	if a.q == nil && b.q == nil {
		return cmp.Compare(a.v, b.v)
	}
	x := a.quantity(scale)
	return x.Cmp(b.quantity(scale))
}

// ceil returns the amount rounded up to a whole unit, saturated to int64.
func (n num) ceil(scale resource.Scale) int64 {
	if n.q == nil {
		return n.v
	}
	return ceilScaled(n.q, scale)
}

func slotScale(slot int) resource.Scale {
	if slot == slotCPU || slot == slotCPU0 {
		return resource.Milli
	}
	return 0
}

type namedNum struct {
	name v1.ResourceName
	n    num
}

// reqList is an exact resource list restricted to names that reach a
// Resource.
type reqList struct {
	has     uint8 // bit i set: fixed[i] is present
	fixed   [numSlots]num
	scalars []namedNum // unsorted, unique names, scale 0
}

func (r *reqList) reset() {
	r.has = 0
	clear(r.scalars) // drop references to big amounts
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

func (r *reqList) setFixed(slot int, n num) {
	r.fixed[slot] = n
	r.has |= 1 << slot
}

// addFixed adds n to slot (absent counts as zero).
func (r *reqList) addFixed(slot int, n num) {
	if !r.present(slot) {
		r.setFixed(slot, n)
		return
	}
	r.fixed[slot] = addNum(r.fixed[slot], n, slotScale(slot))
}

// maxFixed raises slot to n (an absent slot takes n).
func (r *reqList) maxFixed(slot int, n num) {
	if !r.present(slot) || cmpNum(n, r.fixed[slot], slotScale(slot)) > 0 {
		r.setFixed(slot, n)
	}
}

func (r *reqList) setScalar(name v1.ResourceName, n num) {
	if i := r.scalarIndex(name); i >= 0 {
		r.scalars[i].n = n
		return
	}
	r.scalars = append(r.scalars, namedNum{name: name, n: n})
}

func (r *reqList) addScalar(name v1.ResourceName, n num) {
	if i := r.scalarIndex(name); i >= 0 {
		r.scalars[i].n = addNum(r.scalars[i].n, n, 0)
		return
	}
	r.scalars = append(r.scalars, namedNum{name: name, n: n})
}

func (r *reqList) maxScalar(name v1.ResourceName, n num) {
	if i := r.scalarIndex(name); i >= 0 {
		if cmpNum(n, r.scalars[i].n, 0) > 0 {
			r.scalars[i].n = n
		}
		return
	}
	r.scalars = append(r.scalars, namedNum{name: name, n: n})
}

// maxList merges rl into r with per-name max (upstream maxResourceList).
// The cpu0/memory0 slots are not touched; see applyDefaults. Direct lookups
// of cpu and memory are about twice as fast as iterating a small map, so the
// map is iterated only when it holds other names.
func (r *reqList) maxList(rl v1.ResourceList) {
	if len(rl) == 0 {
		return
	}
	found := 0
	if q, ok := rl[v1.ResourceCPU]; ok {
		r.maxFixed(slotCPU, loadNum(&q, resource.Milli))
		found++
	}
	if q, ok := rl[v1.ResourceMemory]; ok {
		r.maxFixed(slotMemory, loadNum(&q, 0))
		found++
	}
	if found == len(rl) {
		return
	}
	for name, q := range rl {
		switch slot := fixedSlot(name); {
		case slot == slotCPU || slot == slotMemory:
			// done above
		case slot >= 0:
			r.maxFixed(slot, loadNum(&q, 0))
		case IsScalarResourceName(name):
			r.maxScalar(name, loadNum(&q, 0))
		}
	}
}

var (
	defaultCPUNum    = num{v: DefaultMilliCPURequest}
	defaultMemoryNum = num{v: DefaultMemoryRequest}
)

// applyDefaults fills cpu0/memory0 from cpu/memory, or from the non-zero
// defaults where the container has no such key (upstream applyNonMissing:
// an explicit zero stays zero).
func (r *reqList) applyDefaults() {
	if r.present(slotCPU) {
		r.fixed[slotCPU0] = r.fixed[slotCPU]
	} else {
		r.fixed[slotCPU0] = defaultCPUNum
	}
	if r.present(slotMemory) {
		r.fixed[slotMemory0] = r.fixed[slotMemory]
	} else {
		r.fixed[slotMemory0] = defaultMemoryNum
	}
	r.has |= 1<<slotCPU0 | 1<<slotMemory0
}

// add adds o into r per name (upstream addResourceList).
func (r *reqList) add(o *reqList) {
	for slot := range numSlots {
		if o.present(slot) {
			r.addFixed(slot, o.fixed[slot])
		}
	}
	for i := range o.scalars {
		r.addScalar(o.scalars[i].name, o.scalars[i].n)
	}
}

// max raises r to o per name (upstream maxResourceList).
func (r *reqList) max(o *reqList) {
	for slot := range numSlots {
		if o.present(slot) {
			r.maxFixed(slot, o.fixed[slot])
		}
	}
	for i := range o.scalars {
		r.maxScalar(o.scalars[i].name, o.scalars[i].n)
	}
}

// Upstream (k8s.io/component-helpers v0.37.2 resource.PodRequests, as
// framework.PodInfo.CalculateResource calls it at v1.37.2 with the default
// gates: UseStatusResources and InPlacePodLevelResourcesVerticalScaling on,
// PodLevelResources on; DRANodeAllocatableResources as set by
// SetDRANodeAllocatableResources, off by default) aggregates three
// lists per container, each over the whole pod, and only then takes the
// per-name maximum of the three totals. These are the three kinds, in the
// order of its containerSpecRequests, containerAllocatedRequests and
// containerActuatedRequests.
const (
	kindSpec = iota
	kindAllocated
	kindActuated
	numKinds
)

// containerList returns c's list of kind (nil where the rules give none):
// spec is c's requests; allocated is the status entry's allocatedResources
// if set, else nothing when the resize is infeasible, else the spec;
// actuated is the status entry's resources.requests if set, else its
// allocatedResources if set, else as allocated. A set but empty list
// counts as set (upstream tests != nil).
func containerList(pod *v1.Pod, c *v1.Container, kind int, infeasible bool) v1.ResourceList {
	if kind == kindSpec {
		return c.Resources.Requests
	}
	if cs := findContainerStatus(pod, c.Name); cs != nil {
		if kind == kindActuated && cs.Resources != nil && cs.Resources.Requests != nil {
			return cs.Resources.Requests
		}
		if cs.AllocatedResources != nil {
			return cs.AllocatedResources
		}
	}
	if infeasible {
		return nil
	}
	return c.Resources.Requests
}

// containerRequests sets r to c's list of kind, with the non-zero defaults
// in the cpu0/memory0 slots (upstream applyNonMissing, which it applies to
// every container's list of every kind: regular, sidecar and plain init
// containers alike).
func (r *reqList) containerRequests(pod *v1.Pod, c *v1.Container, kind int, infeasible bool) {
	r.reset()
	r.maxList(containerList(pod, c, kind, infeasible))
	r.applyDefaults()
}

// loadRaw sets r to rl as it is: cpu0/memory0 mirror cpu/memory where
// present and get no defaults (upstream adds none to the pod-level status
// lists).
func (r *reqList) loadRaw(rl v1.ResourceList) {
	r.reset()
	r.maxList(rl)
	if r.present(slotCPU) {
		r.setFixed(slotCPU0, r.fixed[slotCPU])
	}
	if r.present(slotMemory) {
		r.setFixed(slotMemory0, r.fixed[slotMemory])
	}
}

// findContainerStatus is upstream's (component-helpers v0.37.2): the first
// container status named name, else the first init container status named
// name, else nil. Every container, init containers included, looks in both
// lists in that order.
func findContainerStatus(pod *v1.Pod, name string) *v1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == name {
			return &pod.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// hasContainerStatuses reports whether pod has any container status entry:
// without one, the allocated and actuated lists of every container are its
// spec unless the resize is infeasible.
func hasContainerStatuses(pod *v1.Pod) bool {
	return len(pod.Status.ContainerStatuses)+len(pod.Status.InitContainerStatuses) > 0
}

// podStatusTotals reports whether upstream takes the allocated and actuated
// totals from the pod-level status as they are (AggregateContainerRequests
// with InPlacePodLevelResourcesVerticalScaling, on by default since v1.36):
// status.allocatedResources, status.resources and status.resources.requests
// all set, empty lists included.
func podStatusTotals(pod *v1.Pod) bool {
	return pod.Status.AllocatedResources != nil && pod.Status.Resources != nil && pod.Status.Resources.Requests != nil
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

// podLevelRequestsSet is upstream IsPodLevelRequestsSet: it reads the spec
// only, never the pod-level status.
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
// cpu (millicores) and memory (bytes), rounding once on the aggregate. A
// pod with claim statuses while DRANodeAllocatableResources is on
// (SetDRANodeAllocatableResources) takes the exact path with their
// quantities; the int64 paths never read them.
func podRequests(pod *v1.Pod) (req Resource, non0CPU, non0Mem int64) {
	if len(pod.Status.NodeAllocatableResourceClaimStatuses) > 0 && draNodeAllocatableResources.Load() {
		var dra reqList
		dra.loadDRAClaims(pod)
		return podRequestsExactWith(pod, &dra)
	}
	plain := plainPodRequests
	if len(pod.Spec.InitContainers) > 0 || len(pod.Spec.Overhead) > 0 {
		plain = plainInitPodRequests
	}
	if req, non0CPU, non0Mem, ok := plain(pod); ok {
		return req, non0CPU, non0Mem
	}
	return podRequestsExact(pod)
}

// plainPodRequests is podRequests for the common pod, in int64 arithmetic
// without the exact lists: no init containers, overhead or pod-level
// requests, and every list the requests are read from holding at most cpu
// and memory, in whole millicores and bytes, with sums that fit an int64.
// It sums the first kind wanted (the spec, or the allocated lists when the
// resize is infeasible) and, while every container's other wanted lists
// equal that one (no status entry, or one that repeats the spec), lets the
// sum stand for all the totals; at the first container whose lists differ
// it starts the allocated and actuated sums from the sum so far. For any
// other pod ok is false and the caller takes podRequestsExact, whose
// results these equal on every pod they accept
// (TestPlainPodRequestsMatchExact).
func plainPodRequests(pod *v1.Pod) (req Resource, non0CPU, non0Mem int64, ok bool) {
	if len(pod.Spec.InitContainers) > 0 || len(pod.Spec.Overhead) > 0 || pod.Spec.Resources != nil {
		return Resource{}, 0, 0, false
	}
	infeasible := isPodResizeInfeasible(pod)
	fromPodStatus := podStatusTotals(pod)
	// Allocated and actuated lists are read unless the pod-level status
	// gives their totals or, without status entries, they are the spec.
	fromContainers := !fromPodStatus && (infeasible || hasContainerStatuses(pod))
	containers := pod.Spec.Containers
	if infeasible && !fromContainers {
		containers = nil // the spec is left out, and the statuses are not read
	}
	var base, alloc, act plainSum
	split := false
	fits := true // no sum overflowed
	for i := range containers {
		c := &containers[i]
		var b plainReq // the spec, or the allocated list when infeasible
		if !infeasible && !b.max(c.Resources.Requests) {
			return Resource{}, 0, 0, false
		}
		if fromContainers {
			al, ac := b, b // the spec, or nothing when infeasible
			if !plainStatusLists(pod, c, &al, &ac) {
				return Resource{}, 0, 0, false
			}
			if infeasible {
				b = al
			}
			if !split && (al != b || ac != b) {
				split = true
				alloc, act = base, base
			}
			if split {
				alloc.add(&al, &fits)
				act.add(&ac, &fits)
			}
		}
		cpu, mem := DefaultMilliCPURequest, DefaultMemoryRequest
		if b.hasCPU {
			cpu = b.cpu
			base.cpu = addChecked(base.cpu, b.cpu, &fits)
			base.hasCPU = true
		}
		if b.hasMem {
			mem = b.mem
			base.mem = addChecked(base.mem, b.mem, &fits)
			base.hasMem = true
		}
		base.cpu0 = addChecked(base.cpu0, cpu, &fits)
		base.mem0 = addChecked(base.mem0, mem, &fits)
	}
	if !fits {
		return Resource{}, 0, 0, false
	}
	if !split && !fromPodStatus { // one sum stands for every total wanted
		return Resource{MilliCPU: base.cpu, Memory: base.mem}, base.cpu0, base.mem0, true
	}
	var total, l plainList
	base.list(&total, len(containers) > 0)
	if split {
		alloc.list(&l, true)
		total.max(&l)
		act.list(&l, true)
		total.max(&l)
	}
	if fromPodStatus {
		if !l.raw(pod.Status.Resources.Requests) {
			return Resource{}, 0, 0, false
		}
		total.max(&l)
		if !l.raw(pod.Status.AllocatedResources) {
			return Resource{}, 0, 0, false
		}
		total.max(&l)
	}
	// An absent slot holds 0, which is what the exact path reports for it.
	return Resource{MilliCPU: total.v[plainCPU], Memory: total.v[plainMem]}, total.v[plainCPU0], total.v[plainMem0], true
}

// plainStatusLists sets *alloc and *act, which hold c's spec list (or
// nothing when the resize is infeasible), to c's allocated and actuated
// lists (containerList), reading c's status entry once; false if one is
// not plain.
func plainStatusLists(pod *v1.Pod, c *v1.Container, alloc, act *plainReq) bool {
	cs := findContainerStatus(pod, c.Name)
	if cs == nil {
		return true
	}
	if cs.AllocatedResources != nil {
		*alloc = plainReq{}
		if !alloc.max(cs.AllocatedResources) {
			return false
		}
		*act = *alloc
	}
	if cs.Resources != nil && cs.Resources.Requests != nil {
		*act = plainReq{}
		if !act.max(cs.Resources.Requests) {
			return false
		}
	}
	return true
}

// plainSum is a sum of plainReqs and of the same with the defaults: cpu
// and memory present once a summand has them.
type plainSum struct {
	cpu, mem, cpu0, mem0 int64
	hasCPU, hasMem       bool
}

func (s *plainSum) add(r *plainReq, fits *bool) {
	cpu, mem := DefaultMilliCPURequest, DefaultMemoryRequest
	if r.hasCPU {
		cpu = r.cpu
		s.cpu = addChecked(s.cpu, r.cpu, fits)
		s.hasCPU = true
	}
	if r.hasMem {
		mem = r.mem
		s.mem = addChecked(s.mem, r.mem, fits)
		s.hasMem = true
	}
	s.cpu0 = addChecked(s.cpu0, cpu, fits)
	s.mem0 = addChecked(s.mem0, mem, fits)
}

// list sets l to s; nonEmpty says whether s has a summand (the defaulted
// sums are present then).
func (s *plainSum) list(l *plainList, nonEmpty bool) {
	*l = plainList{v: [numPlain]int64{s.cpu, s.mem, s.cpu0, s.mem0}}
	if s.hasCPU {
		l.has |= 1 << plainCPU
	}
	if s.hasMem {
		l.has |= 1 << plainMem
	}
	if nonEmpty {
		l.has |= 1<<plainCPU0 | 1<<plainMem0
	}
}

// plainReq is one list's cpu (millicores) and memory (bytes), each present
// or not.
type plainReq struct {
	cpu, mem       int64
	hasCPU, hasMem bool
}

// max raises r to rl per name, as reqList.maxList does, and reports
// whether rl holds only cpu and memory, in whole units.
func (r *plainReq) max(rl v1.ResourceList) bool {
	if len(rl) == 0 {
		return true
	}
	found := 0
	if q, ok := rl[v1.ResourceCPU]; ok {
		n := loadNum(&q, resource.Milli)
		if n.q != nil {
			return false
		}
		if !r.hasCPU || n.v > r.cpu {
			r.cpu, r.hasCPU = n.v, true
		}
		found++
	}
	if q, ok := rl[v1.ResourceMemory]; ok {
		n := loadNum(&q, 0)
		if n.q != nil {
			return false
		}
		if !r.hasMem || n.v > r.mem {
			r.mem, r.hasMem = n.v, true
		}
		found++
	}
	return found == len(rl)
}

// plainInitPodRequests is podRequests, in int64 arithmetic, for a pod with
// init containers or overhead (sidecars, runtime classes): taken when
// plainPodRequests refuses. It follows podRequestsExact step for step on
// cpu and memory alone, in one walk over the containers that folds each
// kind's list into that kind's aggregation. As long as every container's lists of the kinds wanted are
// equal (no status entry, or one that repeats the spec), so are the
// aggregations, and one fold stands for all; it is copied into one per
// kind at the first container whose lists differ. It refuses (ok false) a
// pod with pod-level requests, a list or overhead holding any other name,
// an amount that is not a whole unit, or a sum past int64
// (TestPlainInitPodRequestsMatchExact).
func plainInitPodRequests(pod *v1.Pod) (req Resource, non0CPU, non0Mem int64, ok bool) {
	if pod.Spec.Resources != nil {
		return Resource{}, 0, 0, false
	}
	infeasible := isPodResizeInfeasible(pod)
	fromPodStatus := podStatusTotals(pod)
	// The kinds aggregated from the containers: spec unless the resize is
	// infeasible; allocated and actuated unless the pod-level status gives
	// them or, without status entries, they are the spec.
	var want [numKinds]bool
	want[kindSpec] = !infeasible
	if !fromPodStatus && (infeasible || hasContainerStatuses(pod)) {
		want[kindAllocated], want[kindActuated] = true, true
	}
	fits := true
	var total, l plainList
	// With none wanted (an infeasible resize, the totals from the pod-level
	// status) the containers are not read.
	if want != [numKinds]bool{} {
		var w plainWalk
		for i := range pod.Spec.Containers {
			if !w.lists(pod, &pod.Spec.Containers[i], &want, infeasible) {
				return Resource{}, 0, 0, false
			}
			w.fold(&want, false, false, &fits)
		}
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if !w.lists(pod, c, &want, infeasible) {
				return Resource{}, 0, 0, false
			}
			w.fold(&want, true, isRestartable(c), &fits)
		}
		if !w.split {
			w.folds[0].result(&total)
		} else {
			for k := range numKinds {
				if want[k] {
					w.folds[k].result(&l)
					total.max(&l)
				}
			}
		}
	}
	if fromPodStatus {
		if !l.raw(pod.Status.Resources.Requests) {
			return Resource{}, 0, 0, false
		}
		total.max(&l)
		if !l.raw(pod.Status.AllocatedResources) {
			return Resource{}, 0, 0, false
		}
		total.max(&l)
	}
	if len(pod.Spec.Overhead) > 0 {
		var oh plainReq
		if !oh.max(pod.Spec.Overhead) {
			return Resource{}, 0, 0, false
		}
		if oh.hasCPU {
			total.addSlot(plainCPU, oh.cpu, &fits)
			total.addSlot(plainCPU0, oh.cpu, &fits)
		}
		if oh.hasMem {
			total.addSlot(plainMem, oh.mem, &fits)
			total.addSlot(plainMem0, oh.mem, &fits)
		}
	}
	if !fits {
		return Resource{}, 0, 0, false
	}
	// An absent slot holds 0, which is what the exact path reports for it.
	return Resource{MilliCPU: total.v[plainCPU], Memory: total.v[plainMem]}, total.v[plainCPU0], total.v[plainMem0], true
}

// plainWalk is plainInitPodRequests's state: the current container's lists
// and the aggregations so far.
type plainWalk struct {
	cur   [numKinds]plainReq
	folds [numKinds]plainFold // folds[0] stands for every kind wanted until split
	split bool
}

// lists sets w.cur[k] to c's list of kind k for every kind wanted
// (containerList), reading c's status entry once; false if a list it reads
// is not plain. A kind not wanted holds a copy of a wanted one.
func (w *plainWalk) lists(pod *v1.Pod, c *v1.Container, want *[numKinds]bool, infeasible bool) bool {
	spec, alloc, act := &w.cur[kindSpec], &w.cur[kindAllocated], &w.cur[kindActuated]
	*spec = plainReq{}
	if !infeasible && !spec.max(c.Resources.Requests) {
		return false
	}
	*alloc, *act = *spec, *spec // the spec, or nothing when the resize is infeasible
	if !want[kindAllocated] {
		return true
	}
	if !plainStatusLists(pod, c, alloc, act) {
		return false
	}
	if infeasible {
		*spec = *alloc // not wanted; keeps the lists comparable
	}
	return true
}

// fold folds w.cur into the aggregations, as a regular container, a
// sidecar or a plain init container.
func (w *plainWalk) fold(want *[numKinds]bool, init, restartable bool, fits *bool) {
	if !w.split {
		if w.cur[kindAllocated] == w.cur[kindSpec] && w.cur[kindActuated] == w.cur[kindSpec] {
			w.folds[0].fold(&w.cur[kindSpec], init, restartable, fits)
			return
		}
		w.split = true
		for k := 1; k < numKinds; k++ {
			w.folds[k] = w.folds[0]
		}
	}
	for k := range numKinds {
		if want[k] {
			w.folds[k].fold(&w.cur[k], init, restartable, fits)
		}
	}
}

// plainFold is one kind's aggregation over the containers walked so far
// (aggScratch.aggregate): the sum, the running sum of the sidecars and the
// maximum of the init containers' candidates.
type plainFold struct {
	sum, side, initMax plainList
}

func (f *plainFold) fold(r *plainReq, init, restartable bool, fits *bool) {
	switch {
	case !init:
		f.sum.addReq(r, fits)
	case restartable:
		f.sum.addReq(r, fits)
		f.side.addReq(r, fits)
		f.initMax.max(&f.side)
	default:
		var l plainList
		l.set(r)
		l.add(&f.side, fits)
		f.initMax.max(&l)
	}
}

// result sets l to the aggregation: the per-slot maximum of the sum and
// the init containers' candidates.
func (f *plainFold) result(l *plainList) {
	*l = f.sum
	l.max(&f.initMax)
}

// Slots of a plainList: cpu (millicores), memory (bytes), and the same two
// with the non-zero defaults (reqList's slotCPU0 and slotMemory0).
const (
	plainCPU = iota
	plainMem
	plainCPU0
	plainMem0
	numPlain
)

// plainList is reqList restricted to cpu and memory in int64: each slot
// present or not, with reqList's add and max rules per slot.
type plainList struct {
	v   [numPlain]int64
	has uint8 // bit i set: v[i] is present
}

// set sets l to r with the defaults applied (reqList.applyDefaults).
func (l *plainList) set(r *plainReq) {
	*l = plainList{v: [numPlain]int64{r.cpu, r.mem, DefaultMilliCPURequest, DefaultMemoryRequest}, has: 1<<plainCPU0 | 1<<plainMem0}
	if r.hasCPU {
		l.v[plainCPU0] = r.cpu
		l.has |= 1 << plainCPU
	}
	if r.hasMem {
		l.v[plainMem0] = r.mem
		l.has |= 1 << plainMem
	}
}

// raw sets l to rl without defaults (reqList.loadRaw); false if rl is not
// plain.
func (l *plainList) raw(rl v1.ResourceList) bool {
	var r plainReq
	if !r.max(rl) {
		return false
	}
	*l = plainList{v: [numPlain]int64{r.cpu, r.mem, r.cpu, r.mem}}
	if r.hasCPU {
		l.has |= 1<<plainCPU | 1<<plainCPU0
	}
	if r.hasMem {
		l.has |= 1<<plainMem | 1<<plainMem0
	}
	return true
}

// addReq adds r with the defaults applied into l (add of set(r)).
func (l *plainList) addReq(r *plainReq, fits *bool) {
	cpu, mem := DefaultMilliCPURequest, DefaultMemoryRequest
	if r.hasCPU {
		cpu = r.cpu
		l.addSlot(plainCPU, r.cpu, fits)
	}
	if r.hasMem {
		mem = r.mem
		l.addSlot(plainMem, r.mem, fits)
	}
	l.addSlot(plainCPU0, cpu, fits)
	l.addSlot(plainMem0, mem, fits)
}

// addSlot adds n to slot i (an absent slot counts as zero).
func (l *plainList) addSlot(i int, n int64, fits *bool) {
	if l.has&(1<<i) == 0 {
		l.v[i], l.has = n, l.has|1<<i
		return
	}
	l.v[i] = addChecked(l.v[i], n, fits)
}

// add adds o into l per slot (reqList.add).
func (l *plainList) add(o *plainList, fits *bool) {
	for i := range numPlain {
		if o.has&(1<<i) != 0 {
			l.addSlot(i, o.v[i], fits)
		}
	}
}

// max raises l to o per slot, an absent slot taking o's (reqList.max).
func (l *plainList) max(o *plainList) {
	for i := range numPlain {
		if o.has&(1<<i) != 0 && (l.has&(1<<i) == 0 || o.v[i] > l.v[i]) {
			l.v[i], l.has = o.v[i], l.has|1<<i
		}
	}
}

// addChecked returns a+b, clearing *fits if the sum overflows.
func addChecked(a, b int64, fits *bool) int64 {
	s := a + b
	if (s > a) != (b > 0) {
		*fits = false
	}
	return s
}

// aggScratch holds the lists one aggregation works in, reused by the
// aggregations of a pod.
type aggScratch struct {
	cur, side, initMax reqList
}

// aggregate sets out to the pod-wide total of kind (upstream
// aggregateContainerResourcesByFn): the regular containers' lists summed;
// then, walking the init containers in order, a sidecar's list is added to
// the sum and to the running sum of the sidecars, which is its candidate; a
// plain init container's candidate is its list plus the running sum of the
// sidecars before it. The result is the per-name maximum of the sum and
// the candidates.
func (s *aggScratch) aggregate(pod *v1.Pod, kind int, infeasible bool, out *reqList) {
	out.reset()
	for i := range pod.Spec.Containers {
		s.cur.containerRequests(pod, &pod.Spec.Containers[i], kind, infeasible)
		out.add(&s.cur)
	}
	if len(pod.Spec.InitContainers) == 0 {
		return
	}
	s.side.reset()
	s.initMax.reset()
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		s.cur.containerRequests(pod, c, kind, infeasible)
		if isRestartable(c) {
			out.add(&s.cur)
			s.side.add(&s.cur)
			s.initMax.max(&s.side)
		} else {
			s.cur.add(&s.side)
			s.initMax.max(&s.cur)
		}
	}
	out.max(&s.initMax)
}

// podRequestsExact is podRequests for any pod, with exact amounts
// throughout (sums of Quantities where an amount is not a whole unit or
// does not fit an int64), with DRANodeAllocatableResources off.
func podRequestsExact(pod *v1.Pod) (req Resource, non0CPU, non0Mem int64) {
	return podRequestsExactWith(pod, nil)
}

// podRequestsExactWith is podRequestsExact with the claim quantities dra
// (loadDRAClaims) added where upstream's AggregateContainerRequests adds
// them with UseDRANodeAllocatableResourceClaimStatus: to the spec total S
// and to the allocated total A aggregated from the containers, never to
// the actuated total U nor to A and U taken from the pod-level status
// (those already hold them, upstream says); nil adds nothing (the gate
// off). As they join the aggregate before the pod-level override, a
// pod-level cpu, memory or hugepages-* request replaces them.
func podRequestsExactWith(pod *v1.Pod, dra *reqList) (req Resource, non0CPU, non0Mem int64) {
	infeasible := isPodResizeInfeasible(pod)
	var s aggScratch
	var total, other reqList
	// total = the per-name maximum of the spec (S), actuated (U) and
	// allocated (A) totals, S left out when the resize is infeasible
	// (upstream AggregateContainerRequests).
	if !infeasible {
		s.aggregate(pod, kindSpec, false, &total)
		if dra != nil {
			total.add(dra)
		}
	}
	switch {
	case podStatusTotals(pod):
		other.loadRaw(pod.Status.Resources.Requests)
		total.max(&other)
		other.loadRaw(pod.Status.AllocatedResources)
		total.max(&other)
	case infeasible || hasContainerStatuses(pod):
		s.aggregate(pod, kindAllocated, infeasible, &other)
		if dra != nil {
			other.add(dra)
		}
		total.max(&other)
		s.aggregate(pod, kindActuated, infeasible, &other)
		total.max(&other)
	case dra != nil:
		// Every container's allocated and actuated lists are its spec:
		// A = S + claims (already in total) and U = S, which only a
		// negative claim amount could make count.
		s.aggregate(pod, kindSpec, false, &other)
		total.max(&other)
	}
	// Otherwise (no claims) every container's allocated and actuated
	// lists are its spec: A = U = S.

	// Pod-level requests in effect (upstream PodRequests): the effective
	// list E is spec.resources.requests, or, once status.resources is set,
	// the per-name maximum of spec.resources.requests (left out when the
	// resize is infeasible), status.resources.requests and
	// status.allocatedResources. Its cpu, memory and hugepages-* replace
	// the aggregate's; other names are ignored.
	podLevel := podLevelRequestsSet(pod)
	if podLevel {
		e := &other
		e.reset()
		if pod.Status.Resources == nil || !infeasible {
			e.maxList(pod.Spec.Resources.Requests)
		}
		if pod.Status.Resources != nil {
			e.maxList(pod.Status.Resources.Requests)
			e.maxList(pod.Status.AllocatedResources)
		}
		if e.present(slotCPU) {
			total.setFixed(slotCPU, e.fixed[slotCPU])
			total.setFixed(slotCPU0, e.fixed[slotCPU])
		}
		if e.present(slotMemory) {
			total.setFixed(slotMemory, e.fixed[slotMemory])
			total.setFixed(slotMemory0, e.fixed[slotMemory])
		}
		for i := range e.scalars {
			if strings.HasPrefix(string(e.scalars[i].name), v1.ResourceHugePagesPrefix) {
				total.setScalar(e.scalars[i].name, e.scalars[i].n)
			}
		}
	}
	for name, q := range pod.Spec.Overhead {
		switch slot := fixedSlot(name); {
		case slot == slotCPU:
			n := loadNum(&q, resource.Milli)
			total.addFixed(slotCPU, n)
			total.addFixed(slotCPU0, n)
		case slot == slotMemory:
			n := loadNum(&q, 0)
			total.addFixed(slotMemory, n)
			total.addFixed(slotMemory0, n)
		case slot >= 0:
			total.addFixed(slot, loadNum(&q, 0))
		case IsScalarResourceName(name):
			total.addScalar(name, loadNum(&q, 0))
		}
	}

	if total.present(slotCPU) {
		req.MilliCPU = total.fixed[slotCPU].ceil(resource.Milli)
	}
	if total.present(slotMemory) {
		req.Memory = total.fixed[slotMemory].ceil(0)
	}
	if total.present(slotEphemeral) {
		req.EphemeralStorage = total.fixed[slotEphemeral].ceil(0)
	}
	if total.present(slotPods) {
		req.AllowedPodNumber = total.fixed[slotPods].ceil(0)
	}
	if len(total.scalars) > 0 {
		req.scalars = make([]ScalarQuantity, len(total.scalars))
		for i := range total.scalars {
			req.scalars[i] = ScalarQuantity{Name: total.scalars[i].name, Value: total.scalars[i].n.ceil(0)}
		}
		sortScalars(req.scalars)
	}

	// 4.3: with pod-level requests in effect the default applies only to a
	// key the plain aggregation lacks (upstream
	// getNonMissingContainerRequests); otherwise always.
	cpuSlot, memSlot := slotCPU0, slotMemory0
	if podLevel && total.present(slotCPU) {
		cpuSlot = slotCPU
	}
	if podLevel && total.present(slotMemory) {
		memSlot = slotMemory
	}
	if total.present(cpuSlot) {
		non0CPU = total.fixed[cpuSlot].ceil(resource.Milli)
	}
	if total.present(memSlot) {
		non0Mem = total.fixed[memSlot].ceil(0)
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
