package snapshot

import (
	"errors"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/errs"
	"github.com/schedcache/schedcache/nodeinfo"
)

// pod returns the current entry of pod key.
func (e *forkEdit) pod(key string) (PodEntry, bool) {
	if p, ok := e.pend[key]; ok {
		return p.o.e, !p.del && !p.o.gone
	}
	if o, ok := e.over.Get(key); ok {
		return o.e, !o.gone
	}
	return e.podUnder(key)
}

// podUnder is the base's entry of pod key (the state's pods and pod log
// are the base's). Past podLogScans lookups the base's log is indexed.
func (e *forkEdit) podUnder(key string) (PodEntry, bool) {
	if e.scans <= podLogScans {
		if e.scans++; e.scans > podLogScans {
			e.base.indexPodLog()
		}
	}
	return e.s.podUnder(key)
}

// cached is what the state machine's rules (errs.Check*) read of pod key.
func (e *forkEdit) cached(key string) (PodEntry, errs.Cached) {
	pe, ok := e.pod(key)
	if !ok {
		return pe, errs.Cached{}
	}
	return pe, errs.Cached{OK: true, Assumed: pe.Assumed, Node: pe.Pod.Spec.NodeName}
}

// full reports whether node is known to the fork and holds
// nodeinfo.MaxPodsPerNode pods.
func (e *forkEdit) full(node string) bool {
	slot, ok := e.slotOf(node)
	return ok && e.numPods(slot) >= nodeinfo.MaxPodsPerNode
}

// taken reports whether pod key is in the fork.
func (e *forkEdit) taken(key string) bool {
	_, ok := e.pod(key)
	return ok
}

// setPod records pod key's entry; dropPod its removal.
func (e *forkEdit) setPod(key string, pe PodEntry) {
	e.pend[key] = pendPod{o: podOver{e: pe}}
}

func (e *forkEdit) dropPod(key string) {
	switch _, under := e.podUnder(key); {
	case under:
		e.pend[key] = pendPod{o: podOver{gone: true}}
	case e.over.Len() > 0 && e.overHas(key):
		e.pend[key] = pendPod{del: true}
	default:
		delete(e.pend, key)
	}
}

func (e *forkEdit) overHas(key string) bool {
	_, ok := e.over.Get(key)
	return ok
}

// applyPend applies the open edit's pod changes to over.
func (e *forkEdit) applyPend() {
	for k, p := range e.pend {
		if p.del {
			e.over.Delete(k)
		} else {
			e.over.Set(k, p.o)
		}
	}
	clear(e.pend)
}

func forkPodError(op string, pod *v1.Pod, err error) error {
	var pe *errs.PodError
	if errors.As(err, &pe) {
		return err
	}
	name := "<nil>"
	if pod != nil {
		name = pod.Namespace + "/" + pod.Name
	}
	return &errs.PodError{Op: op, Key: name, Err: err}
}

// attach aggregates info into slot's entry. An entry the edit has not
// thawed is not thawed for it: the add is deferred (adds, chained per
// entry) until something needs the entry's aggregate (state: another
// kind of change; close: the entry is frozen), which then replays the
// entry's adds in order. Only the pod count is asked of an entry before
// that (numPods), and it is the frozen entry's plus the adds. So a run of
// adds that is reverted (the what-if pattern) never copies an entry.
func (e *forkEdit) attach(slot int32, info *nodeinfo.PodInfo) {
	e.changed = true
	t, ok := e.touched[slot]
	if ok && t.st != nil {
		t.st.AddPod(info)
		return
	}
	if !ok {
		t = touchedNode{init: e.frozen(slot), last: -1}
	}
	e.adds = append(e.adds, deferredAdd{info: info, prev: t.last})
	t.last = int32(len(e.adds) - 1)
	t.n++
	e.touched[slot] = t
}

// detach removes the stored pod key from slot's entry (affinity sub-lists
// searched as the removal object's classification says, as the cache),
// deleting an entry left without pods and node object unless keep.
func (e *forkEdit) detach(name string, slot int32, key string, removal *v1.Pod, keep bool) error {
	st := e.state(slot)
	if err := st.RemovePod(key, nodeinfo.PodHasAffinity(removal), nodeinfo.PodHasRequiredAntiAffinity(removal),
		nodeinfo.PodHasRequiredNonHostScopedAntiAffinity(removal)); err != nil {
		return err
	}
	e.changed = true
	if !keep && st.NumPods() == 0 && st.Node() == nil {
		e.deleteEntry(name, slot)
	}
	return nil
}

// target finds the entry a pod operation names, or a *PodError wrapping
// ErrNodeNotFound.
func (e *forkEdit) target(op, key, node string) (int32, error) {
	slot, ok := e.slotOf(node)
	if !ok {
		return 0, &errs.PodError{Op: op, Key: key, Node: node, Err: errs.ErrNodeNotFound}
	}
	return slot, nil
}

// AssumePod assumes pod on pod.Spec.NodeName, as Cache.AssumePod: the pod
// must not be in the fork (ErrPodAlreadyCached); the node must be known
// to the fork (ErrNodeNotFound) and hold fewer than
// nodeinfo.MaxPodsPerNode pods (ErrTooManyPods).
func (f *Fork) AssumePod(pod *v1.Pod) error {
	const op = "AssumePod"
	info, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	return f.assume(op, pod, info)
}

// AssumePodInfo is AssumePod of info.Pod() with info, built by
// nodeinfo.NewPodInfo, as its aggregate: a caller trying one pod on many
// forks or nodes builds it once (upstream v1.37's Snapshot.AssumePod takes
// a PodInfo for the same reason). A nil info, one without a pod or with
// an empty UID is refused as AssumePod refuses such a pod.
func (f *Fork) AssumePodInfo(info *nodeinfo.PodInfo) error {
	const op = "AssumePod"
	pod, err := checkInfo(info)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	return f.assume(op, pod, info)
}

// checkInfo returns info's pod, or the error NewPodInfo gives for it.
func checkInfo(info *nodeinfo.PodInfo) (*v1.Pod, error) {
	pod := info.Pod()
	if _, err := nodeinfo.PodKey(pod); err != nil {
		return pod, err
	}
	return pod, nil
}

func (f *Fork) assume(op string, pod *v1.Pod, info *nodeinfo.PodInfo) error {
	e := f.begin()
	key, node := info.Key(), info.NodeName()
	_, cur := e.cached(key)
	if err := errs.CheckAssume(key, node, cur, e.full); err != nil {
		return err
	}
	slot, err := e.target(op, key, node)
	if err != nil {
		return err
	}
	e.attach(slot, info)
	e.setPod(key, PodEntry{Pod: pod, Assumed: true})
	e.s.podCount++
	return nil
}

// ForgetPod removes an assumed pod, as Cache.ForgetPod: a pod not in the
// fork is a no-op; pod must name the stored pod's node
// (ErrPodNodeMismatch) and the pod must be assumed (ErrPodNotAssumed).
func (f *Fork) ForgetPod(pod *v1.Pod) error {
	const op = "ForgetPod"
	key, err := nodeinfo.PodKey(pod)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	e := f.begin()
	_, cur := e.cached(key)
	if apply, err := errs.CheckForget(op, key, pod, cur); !apply {
		return err
	}
	stored := cur.Node
	slot, err := e.target(op, key, stored)
	if err != nil {
		return err
	}
	if err := e.detach(stored, slot, key, pod, false); err != nil {
		return &errs.PodError{Op: op, Key: key, Node: stored, Err: err}
	}
	e.dropPod(key)
	e.s.podCount--
	return nil
}

// AddPod confirms an assumed pod (possibly on another node) or adds a new
// one, as Cache.AddPod: an added pod is refused (ErrPodAlreadyAdded), and
// so is one more pod on a full node (ErrTooManyPods) or on a node the
// fork does not know (ErrNodeNotFound).
func (f *Fork) AddPod(pod *v1.Pod) error {
	const op = "AddPod"
	info, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	return f.add(op, pod, info)
}

// AddPodInfo is AddPod of info.Pod() with info, built by
// nodeinfo.NewPodInfo, as its aggregate (see AssumePodInfo).
func (f *Fork) AddPodInfo(info *nodeinfo.PodInfo) error {
	const op = "AddPod"
	pod, err := checkInfo(info)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	return f.add(op, pod, info)
}

func (f *Fork) add(op string, pod *v1.Pod, info *nodeinfo.PodInfo) error {
	e := f.begin()
	key, node := info.Key(), info.NodeName()
	cur, st := e.cached(key)
	if err := errs.CheckAdd(key, node, st, e.full); err != nil {
		return err
	}
	slot, err := e.target(op, key, node)
	if err != nil {
		return err
	}
	ok := st.OK
	if ok {
		from, err := e.target(op, key, cur.Pod.Spec.NodeName)
		if err != nil {
			return err
		}
		if err := e.detach(cur.Pod.Spec.NodeName, from, key, cur.Pod, from == slot); err != nil {
			return &errs.PodError{Op: op, Key: key, Node: node, Err: err}
		}
	} else {
		e.s.podCount++
	}
	e.attach(slot, info)
	e.setPod(key, PodEntry{Pod: pod})
	return nil
}

// UpdatePod replaces an added pod, as Cache.UpdatePod: refused with
// nothing changed are a pod not in the fork (ErrPodNotFound), an assumed
// pod (ErrPodAssumed), a new pod on another node than the stored one
// (*CorruptionError), an old pod naming another node (ErrPodNodeMismatch)
// and a new UID held by another pod (ErrUIDMismatch). A new, free UID
// renames the pod.
func (f *Fork) UpdatePod(oldPod, newPod *v1.Pod) error {
	const op = "UpdatePod"
	key, err := nodeinfo.PodKey(oldPod)
	if err != nil {
		return forkPodError(op, oldPod, err)
	}
	info, err := nodeinfo.NewPodInfo(newPod)
	if err != nil {
		return forkPodError(op, newPod, err)
	}
	e := f.begin()
	_, cur := e.cached(key)
	newKey := info.Key()
	if err := errs.CheckUpdate(key, oldPod, newKey, info.NodeName(), cur, e.taken); err != nil {
		return err
	}
	stored := cur.Node
	slot, err := e.target(op, key, stored)
	if err != nil {
		return err
	}
	if err := e.detach(stored, slot, key, oldPod, true); err != nil {
		return &errs.PodError{Op: op, Key: key, Node: stored, Err: err}
	}
	e.attach(slot, info)
	if newKey != key {
		e.dropPod(key)
	}
	e.setPod(newKey, PodEntry{Pod: newPod})
	return nil
}

// RemovePod removes a pod (assumed or added), as Cache.RemovePod: a pod not
// in the fork is ErrPodNotFound; a non-empty node name other than the
// stored pod's is a *CorruptionError.
func (f *Fork) RemovePod(pod *v1.Pod) error {
	const op = "RemovePod"
	key, err := nodeinfo.PodKey(pod)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	e := f.begin()
	cur, st := e.cached(key)
	if err := errs.CheckRemove(key, pod, st); err != nil {
		return err
	}
	stored := st.Node
	slot, err := e.target(op, key, stored)
	if err != nil {
		return err
	}
	if err := e.detach(stored, slot, key, cur.Pod, false); err != nil {
		return &errs.PodError{Op: op, Key: key, Node: stored, Err: err}
	}
	e.dropPod(key)
	e.s.podCount--
	return nil
}

// RemoveHostPorts removes ports from the used host ports of node, pods or
// not: upstream v1.37's snapshot ForgetPod removes the forgotten pod's
// ports from its NodeInfo's set even where another pod on the node uses
// them (kube/fwkadapter.Mutable reproduces that). Ports the node does not
// use are skipped; an unknown node is a *PodError wrapping
// ErrNodeNotFound (op "RemoveHostPorts"). Undone by Revert like any
// change.
func (f *Fork) RemoveHostPorts(node string, ports []nodeinfo.HostPort) error {
	const op = "RemoveHostPorts"
	e := f.begin()
	slot, err := e.target(op, "", node)
	if err != nil {
		return err
	}
	if _, touched := e.touched[slot]; !touched && !e.frozen(slot).UsesAnyHostPort(ports) {
		return nil // nothing to remove: the entry stays frozen
	}
	if e.state(slot).RemoveHostPorts(ports) {
		e.changed = true
	}
	return nil
}
