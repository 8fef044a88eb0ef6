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
// resources, and every list a container's requests are taken from (its
// spec, and its status's actuated and allocated resources if the status
// has resources) holding at most cpu and memory, in whole millicores and
// bytes, with sums that fit an int64. For any other pod ok is false and
// the caller takes podRequestsExact, whose results these equal on every
// pod they accept (TestPlainPodRequestsMatchExact).
func plainPodRequests(pod *v1.Pod) (req Resource, non0CPU, non0Mem int64, ok bool) {
	if len(pod.Spec.InitContainers) > 0 || len(pod.Spec.Overhead) > 0 || pod.Spec.Resources != nil {
		return Resource{}, 0, 0, false
	}
	infeasible, checked := false, false
	var cpuSum, memSum, cpu0, mem0 int64
	fits := true // no sum overflowed
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		var cur plainReq
		if cs := findContainerStatus(pod, c.Name); cs != nil && cs.Resources != nil {
			// As containerRequests: max(spec, actuated, allocated), the
			// spec left out when the resize is infeasible.
			if !checked {
				infeasible, checked = isPodResizeInfeasible(pod), true
			}
			if !infeasible && !cur.max(c.Resources.Requests) {
				return Resource{}, 0, 0, false
			}
			if !cur.max(cs.Resources.Requests) || !cur.max(cs.AllocatedResources) {
				return Resource{}, 0, 0, false
			}
		} else if !cur.max(c.Resources.Requests) {
			return Resource{}, 0, 0, false
		}
		cpu, mem := DefaultMilliCPURequest, DefaultMemoryRequest
		if cur.hasCPU {
			cpu = cur.cpu
			cpuSum = addChecked(cpuSum, cur.cpu, &fits)
		}
		if cur.hasMem {
			mem = cur.mem
			memSum = addChecked(memSum, cur.mem, &fits)
		}
		cpu0 = addChecked(cpu0, cpu, &fits)
		mem0 = addChecked(mem0, mem, &fits)
	}
	if !fits {
		return Resource{}, 0, 0, false
	}
	return Resource{MilliCPU: cpuSum, Memory: memSum}, cpu0, mem0, true
}

// plainReq is one container's effective cpu (millicores) and memory
// (bytes), each present or not.
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

// plainInitPodRequests is podRequests, in int64 arithmetic, for a pod
// with init containers or overhead: the second common shape (sidecars,
// runtime classes), taken when plainPodRequests refuses. It follows
// podRequestsExact step for step on cpu and memory alone, and refuses
// (ok false) a pod with pod-level resources, a list or overhead holding
// any other name, an amount that is not a whole unit, or a sum past
// int64. It is a separate function so that the common pod's path keeps
// its single cheap test (TestPlainInitPodRequestsMatchExact).
func plainInitPodRequests(pod *v1.Pod) (req Resource, non0CPU, non0Mem int64, ok bool) {
	if pod.Spec.Resources != nil {
		return Resource{}, 0, 0, false
	}
	infeasible := isPodResizeInfeasible(pod)
	fits := true
	var cur, total plainList
	for i := range pod.Spec.Containers {
		if !cur.container(pod, &pod.Spec.Containers[i], true, infeasible) {
			return Resource{}, 0, 0, false
		}
		total.add(&cur, &fits)
	}
	if len(pod.Spec.InitContainers) > 0 {
		var side, initMax, tmp plainList
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if isRestartable(c) {
				if !cur.container(pod, c, true, infeasible) {
					return Resource{}, 0, 0, false
				}
				total.add(&cur, &fits)
				side.add(&cur, &fits)
				initMax.max(&side)
			} else {
				if !cur.container(pod, c, false, infeasible) {
					return Resource{}, 0, 0, false
				}
				tmp = plainList{}
				tmp.add(&cur, &fits)
				tmp.add(&side, &fits)
				initMax.max(&tmp)
			}
		}
		total.max(&initMax)
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

// container sets l to c's effective requests with the defaults applied,
// as reqList.containerRequests; false if a list it reads is not plain.
func (l *plainList) container(pod *v1.Pod, c *v1.Container, useStatus, infeasible bool) bool {
	var r plainReq
	var cs *v1.ContainerStatus
	if useStatus {
		cs = findContainerStatus(pod, c.Name)
	}
	if cs != nil && cs.Resources != nil {
		if !infeasible && !r.max(c.Resources.Requests) {
			return false
		}
		if !r.max(cs.Resources.Requests) || !r.max(cs.AllocatedResources) {
			return false
		}
	} else if !r.max(c.Resources.Requests) {
		return false
	}
	*l = plainList{v: [numPlain]int64{r.cpu, r.mem, DefaultMilliCPURequest, DefaultMemoryRequest}, has: 1<<plainCPU0 | 1<<plainMem0}
	if r.hasCPU {
		l.v[plainCPU0] = r.cpu
		l.has |= 1 << plainCPU
	}
	if r.hasMem {
		l.v[plainMem0] = r.mem
		l.has |= 1 << plainMem
	}
	return true
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

// podRequestsExact is podRequests for any pod, with exact amounts
// throughout (sums of Quantities where an amount is not a whole unit or
// does not fit an int64).
func podRequestsExact(pod *v1.Pod) (req Resource, non0CPU, non0Mem int64) {
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
				n := loadNum(&q, resource.Milli)
				total.setFixed(slotCPU, n)
				total.setFixed(slotCPU0, n)
			case name == v1.ResourceMemory:
				n := loadNum(&q, 0)
				total.setFixed(slotMemory, n)
				total.setFixed(slotMemory0, n)
			case strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix):
				total.setScalar(name, loadNum(&q, 0))
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
	// key the plain aggregation lacks; otherwise always.
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
