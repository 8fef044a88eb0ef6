// Package invariant holds the oracles the robustness suites under tests/
// share: internal-consistency checks for published snapshots and Dumps
// (docs/upstream-semantics.md section 7, the invariants that hold for any consistent event
// stream), immutability fingerprints, canonical renderings used to prove
// that a rejected call changed nothing, and the "is this error typed"
// predicate.
//
// Contract: every function is pure with respect to the cache (it only
// reads the immutable snapshot or dump it is given) and safe for
// concurrent use.
package invariant

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"unsafe"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
)

// Sentinels lists every exported error sentinel of package schedcache.
var Sentinels = []error{
	schedcache.ErrNilPod, schedcache.ErrNilNode, schedcache.ErrEmptyUID, schedcache.ErrEmptyNodeName,
	schedcache.ErrClosed, schedcache.ErrFailed, schedcache.ErrPodAlreadyCached, schedcache.ErrPodAlreadyAdded,
	schedcache.ErrPodNotFound, schedcache.ErrPodAssumed, schedcache.ErrPodNotAssumed, schedcache.ErrPodNodeMismatch,
	schedcache.ErrCorrupted, schedcache.ErrUIDMismatch,
	// ErrNodeNotInZone before ErrNodeNotFound: a RemoveNode error matches both.
	schedcache.ErrNodeNotInZone, schedcache.ErrNodeNotFound, schedcache.ErrNodeNameMismatch,
	schedcache.ErrNodeInfoNotFound, schedcache.ErrInconsistentList,
	schedcache.ErrSnapshotPublished, schedcache.ErrNilSnapshot, schedcache.ErrInvalidArgument,
	schedcache.ErrTooManyPods, schedcache.ErrQuantityOverflow,
}

var sentinelNames = []string{
	"ErrNilPod", "ErrNilNode", "ErrEmptyUID", "ErrEmptyNodeName",
	"ErrClosed", "ErrFailed", "ErrPodAlreadyCached", "ErrPodAlreadyAdded",
	"ErrPodNotFound", "ErrPodAssumed", "ErrPodNotAssumed", "ErrPodNodeMismatch",
	"ErrCorrupted", "ErrUIDMismatch",
	"ErrNodeNotInZone", "ErrNodeNotFound", "ErrNodeNameMismatch",
	"ErrNodeInfoNotFound", "ErrInconsistentList",
	"ErrSnapshotPublished", "ErrNilSnapshot", "ErrInvalidArgument",
	"ErrTooManyPods", "ErrQuantityOverflow",
}

// SentinelName returns the name of the first exported sentinel err
// matches ("ErrPodNotFound"), "nil" for nil, or "untyped".
func SentinelName(err error) string {
	if err == nil {
		return "nil"
	}
	for i, s := range Sentinels {
		if errors.Is(err, s) {
			return sentinelNames[i]
		}
	}
	return "untyped"
}

// Typed reports whether err matches at least one exported sentinel.
func Typed(err error) bool {
	for _, s := range Sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// Expect returns nil if err is exactly what want says: nil when want is nil,
// else a typed error matching want with errors.Is.
func Expect(op string, err, want error) error {
	switch {
	case want == nil && err == nil:
		return nil
	case want == nil:
		return fmt.Errorf("%s: unexpected error %v (%T)", op, err, err)
	case err == nil:
		return fmt.Errorf("%s: got nil, want an error matching %q", op, want)
	case !errors.Is(err, want):
		return fmt.Errorf("%s: got %v (%T), want an error matching %q", op, err, err, want)
	case !Typed(err):
		return fmt.Errorf("%s: error %v matches no exported sentinel", op, err)
	}
	return nil
}

// ---- snapshot checks ----

// Options tune CheckSnapshot.
type Options struct {
	// RecomputeRequests recomputes every pod's requests with
	// nodeinfo.NewPodInfo from the pod object and compares them with the
	// stored PodInfo (slow; catches a PodInfo that does not match its pod).
	RecomputeRequests bool
	// RecomputeSample, when > 1 and RecomputeRequests is set, recomputes
	// only the pods of every RecomputeSample-th listed node (starting at an
	// offset taken from the epoch, so successive snapshots cover all nodes).
	RecomputeSample int
	// PVCDelta accepts PVC reference counts that differ from the sum over
	// listed nodes, as a snapshot refreshed with UpdateSnapshot may hold
	// (upstream v1.37 moves them by a pending delta that counts nodeless
	// entries' pods too); the used set must still be the counts above 0.
	// Published and new snapshots must hold the sum exactly.
	PVCDelta bool
	// AllowListErr accepts a snapshot whose Err() is non-nil (hand-written
	// inconsistent node streams); by default Err() must be nil.
	AllowListErr bool
	// ImagesNow checks image counts against the snapshot itself (see
	// CheckImagesNow): for a new snapshot (NewEmptySnapshot and
	// UpdateSnapshot) of a cache fed a consistent stream, not for a
	// published one, whose counts are as of each node's last change.
	ImagesNow bool
}

type sums struct {
	cpu, mem, eph int64
	scalars       map[v1.ResourceName]int64
	n0cpu, n0mem  int64
	aff, anti     int
	nonHost       int
	pvc           map[string]int
	ports         map[nodeinfo.HostPort]int
	seen          map[string]struct{}
}

func (s *sums) reset() {
	s.cpu, s.mem, s.eph, s.n0cpu, s.n0mem, s.aff, s.anti, s.nonHost = 0, 0, 0, 0, 0, 0, 0, 0
	clear(s.scalars)
	clear(s.pvc)
	clear(s.ports)
	if s.seen == nil {
		s.seen = make(map[string]struct{})
	}
	clear(s.seen)
}

func (s *sums) add(pi *nodeinfo.PodInfo, recompute bool) error {
	req, n0c, n0m := pi.Requests(), pi.NonZeroCPU(), pi.NonZeroMemory()
	if recompute {
		fresh, err := nodeinfo.NewPodInfo(pi.Pod())
		if err != nil {
			return fmt.Errorf("pod %q: NewPodInfo: %v", pi.Key(), err)
		}
		if fresh.HasAffinity() != pi.HasAffinity() || fresh.HasRequiredAntiAffinity() != pi.HasRequiredAntiAffinity() ||
			fresh.HasRequiredNonHostScopedAntiAffinity() != pi.HasRequiredNonHostScopedAntiAffinity() {
			return fmt.Errorf("pod %q: stored PodInfo affinity flags %v/%v/%v, recomputed %v/%v/%v", pi.Key(),
				pi.HasAffinity(), pi.HasRequiredAntiAffinity(), pi.HasRequiredNonHostScopedAntiAffinity(),
				fresh.HasAffinity(), fresh.HasRequiredAntiAffinity(), fresh.HasRequiredNonHostScopedAntiAffinity())
		}
		if !fresh.Requests().Equal(req) || fresh.NonZeroCPU() != n0c || fresh.NonZeroMemory() != n0m {
			return fmt.Errorf("pod %q: stored PodInfo requests %v/%d/%d, recomputed %v/%d/%d",
				pi.Key(), req, n0c, n0m, fresh.Requests(), fresh.NonZeroCPU(), fresh.NonZeroMemory())
		}
	}
	s.cpu += req.MilliCPU
	s.mem += req.Memory
	s.eph += req.EphemeralStorage
	if req.NumScalars() > 0 {
		for _, sq := range req.Scalars() {
			if s.scalars == nil {
				s.scalars = make(map[v1.ResourceName]int64)
			}
			s.scalars[sq.Name] += sq.Value
		}
	}
	s.n0cpu += n0c
	s.n0mem += n0m
	if pi.HasAffinity() {
		s.aff++
	}
	if pi.HasRequiredAntiAffinity() {
		s.anti++
	}
	if pi.HasRequiredNonHostScopedAntiAffinity() {
		s.nonHost++
	}
	for _, k := range pi.PVCKeys() {
		if s.pvc == nil {
			s.pvc = make(map[string]int)
		}
		s.pvc[k]++
	}
	for _, hp := range pi.HostPorts() {
		if s.ports == nil {
			s.ports = make(map[nodeinfo.HostPort]int)
		}
		s.ports[hp]++
	}
	return nil
}

// CheckNodeInfo verifies the aggregation invariants (7.3-7.6) of one
// NodeInfo: Requested and NonZeroRequested are the sums of its pods' (CPU,
// memory, ephemeral storage, every scalar resource; no pod count), with
// every scalar key a pod requests; Allocatable is its node object's; the
// affinity sub-lists hold exactly the qualifying pods, PVC reference
// counts match the pods, every used port is held by some pod.
func CheckNodeInfo(ni *nodeinfo.NodeInfo, recompute bool) error {
	var s sums
	return s.check(ni, recompute)
}

func (s *sums) check(ni *nodeinfo.NodeInfo, recompute bool) error {
	if ni == nil {
		return errors.New("nil NodeInfo")
	}
	s.reset()
	for i := 0; i < ni.NumPods(); i++ {
		pi := ni.PodAt(i)
		if pi == nil || pi.Pod() == nil {
			return fmt.Errorf("pod %d is nil", i)
		}
		if _, dup := s.seen[pi.Key()]; dup {
			return fmt.Errorf("pod %q listed twice", pi.Key())
		}
		s.seen[pi.Key()] = struct{}{}
		if err := s.add(pi, recompute); err != nil {
			return err
		}
	}
	r := ni.Requested()
	if r.MilliCPU != s.cpu || r.Memory != s.mem || r.EphemeralStorage != s.eph {
		//lint:ignore ST1005 the message starts with the field or method name
		return fmt.Errorf("Requested %v, sum of %d pods cpu=%d mem=%d eph=%d", r, ni.NumPods(), s.cpu, s.mem, s.eph)
	}
	if r.AllowedPodNumber != 0 {
		return fmt.Errorf("Requested.AllowedPodNumber=%d, want 0", r.AllowedPodNumber)
	}
	if r.NumScalars() > 0 {
		for _, sq := range r.Scalars() {
			if want := s.scalars[sq.Name]; sq.Value != want {
				//lint:ignore ST1005 the message starts with the field or method name
				return fmt.Errorf("Requested scalar %s=%d, sum of pods %d", sq.Name, sq.Value, want)
			}
		}
	}
	for name, want := range s.scalars {
		if !r.HasScalar(name) {
			// A pod's scalar key stays even at zero (upstream never
			// deletes a key), so every key a pod requests is there.
			//lint:ignore ST1005 the message starts with the field or method name
			return fmt.Errorf("Requested lacks scalar %s, pods sum to %d", name, want)
		}
	}
	nz := ni.NonZeroRequested()
	if nz.MilliCPU != s.n0cpu || nz.Memory != s.n0mem || nz.EphemeralStorage != 0 || nz.AllowedPodNumber != 0 || nz.NumScalars() != 0 {
		return fmt.Errorf("NonZeroRequested %v, sum of pods cpu=%d mem=%d", nz, s.n0cpu, s.n0mem)
	}
	if node := ni.Node(); node != nil {
		if want := nodeinfo.NewResource(node.Status.Allocatable); !ni.Allocatable().Equal(want) {
			//lint:ignore ST1005 the message starts with the field or method name
			return fmt.Errorf("Allocatable %v, the node object's %v", ni.Allocatable(), want)
		}
	}
	if ni.NumPodsWithAffinity() != s.aff || ni.NumPodsWithRequiredAntiAffinity() != s.anti ||
		ni.NumPodsWithRequiredNonHostScopedAntiAffinity() != s.nonHost {
		return fmt.Errorf("affinity sub-lists %d/%d/%d, pods qualifying %d/%d/%d",
			ni.NumPodsWithAffinity(), ni.NumPodsWithRequiredAntiAffinity(), ni.NumPodsWithRequiredNonHostScopedAntiAffinity(),
			s.aff, s.anti, s.nonHost)
	}
	for i := 0; i < ni.NumPodsWithAffinity(); i++ {
		pi := ni.PodWithAffinityAt(i)
		if _, ok := s.seen[pi.Key()]; !ok || !pi.HasAffinity() {
			return fmt.Errorf("affinity sub-list holds %q, not a qualifying pod of the node", pi.Key())
		}
	}
	for i := 0; i < ni.NumPodsWithRequiredAntiAffinity(); i++ {
		pi := ni.PodWithRequiredAntiAffinityAt(i)
		if _, ok := s.seen[pi.Key()]; !ok || !pi.HasRequiredAntiAffinity() {
			return fmt.Errorf("anti-affinity sub-list holds %q, not a qualifying pod of the node", pi.Key())
		}
	}
	for i := 0; i < ni.NumPodsWithRequiredNonHostScopedAntiAffinity(); i++ {
		pi := ni.PodWithRequiredNonHostScopedAntiAffinityAt(i)
		if _, ok := s.seen[pi.Key()]; !ok || !pi.HasRequiredNonHostScopedAntiAffinity() {
			return fmt.Errorf("non-host-scoped anti-affinity sub-list holds %q, not a qualifying pod of the node", pi.Key())
		}
	}
	if ni.NumPVCRefCounts() != len(s.pvc) {
		return fmt.Errorf("%d PVC ref counts, pods reference %d claims", ni.NumPVCRefCounts(), len(s.pvc))
	}
	var pvcErr error
	ni.RangePVCRefCounts(func(k string, n int) bool {
		if n <= 0 || s.pvc[k] != n {
			pvcErr = fmt.Errorf("PVC %q ref count %d, pods reference it %d times", k, n, s.pvc[k])
			return false
		}
		return true
	})
	if pvcErr != nil {
		return pvcErr
	}
	if ni.NumUsedPorts() == 0 && len(s.ports) == 0 {
		return nil
	}
	used := ni.UsedPorts()
	nUsed := 0
	for ip, set := range used {
		for pp := range set {
			nUsed++
			hp := nodeinfo.NewHostPort(ip, pp.Protocol, pp.Port)
			if s.ports[hp] == 0 {
				return fmt.Errorf("used port %v held by no pod", hp)
			}
		}
	}
	if nUsed != ni.NumUsedPorts() {
		return fmt.Errorf("UsedPorts has %d entries, NumUsedPorts says %d", nUsed, ni.NumUsedPorts())
	}
	// Not checked: equality with the pods' ports. UsedPorts is a set, not
	// a multiset (semantics 4.6): once two pods on the node shared a port,
	// removing one forgets it although the other still uses it, so the
	// pods may hold ports UsedPorts lacks (it depends on history).
	return nil
}

// Stats describes what CheckSnapshot looked at.
type Stats struct {
	Nodes, Pods, PodsOnListedNodes, AssumedPods int
}

// CheckSnapshot verifies the internal consistency of s: every listed node's
// aggregates (CheckNodeInfo); NumNodes()==len(List()), At and Range agree
// with List, no node listed twice, Get finds every listed node (the same
// NodeInfo); each pod on a listed node is in the pod map with the very same
// object and names that node; every pod of the pod map (assumed ones
// included) is on exactly one listed node - the one it names - or names an
// unlisted node (a nodeless or ghost entry); the nodeless entries implied
// by the pod map account for NodeCount()-NumNodes(); the affinity lists
// are exactly the listed nodes with qualifying pods, in list order; the
// used-PVC set is the union of the listed nodes' claims.
func CheckSnapshot(s *schedcache.Snapshot, o Options) (Stats, error) {
	var st Stats
	if s == nil {
		return st, errors.New("nil snapshot")
	}
	if err := s.Err(); err != nil && !o.AllowListErr {
		return st, fmt.Errorf("epoch %d: snapshot reports %v", s.Epoch(), err)
	}
	list, err := s.List()
	if err != nil {
		//lint:ignore ST1005 the message starts with the field or method name
		return st, fmt.Errorf("List: %v", err)
	}
	if s.NumNodes() != len(list) {
		return st, fmt.Errorf("NumNodes()=%d, len(List())=%d", s.NumNodes(), len(list))
	}
	st.Nodes = len(list)
	where := make(map[string]string) // pod key -> listed node holding it
	listed := make(map[string]int, len(list))
	pvcUnion := make(map[string]struct{})
	pvcSum := make(map[string]int)
	var wantAff, wantAnti, wantNonHost []*nodeinfo.NodeInfo
	var scratch sums
	for i, ni := range list {
		if ni == nil || ni.Node() == nil {
			return st, fmt.Errorf("epoch %d: list entry %d is %v", s.Epoch(), i, ni)
		}
		name := ni.NodeName()
		if j, dup := listed[name]; dup {
			return st, fmt.Errorf("epoch %d: node %q listed at %d and %d", s.Epoch(), name, j, i)
		}
		listed[name] = i
		if at := s.At(i); at != ni {
			return st, fmt.Errorf("epoch %d: At(%d) differs from List()[%d]", s.Epoch(), i, i)
		}
		got, err := s.Get(name)
		if err != nil || got != ni {
			return st, fmt.Errorf("epoch %d: Get(%q) = %v, %v; want the listed NodeInfo", s.Epoch(), name, got, err)
		}
		recompute := o.RecomputeRequests
		if recompute && o.RecomputeSample > 1 {
			recompute = (uint64(i)+s.Epoch())%uint64(o.RecomputeSample) == 0
		}
		if err := scratch.check(ni, recompute); err != nil {
			return st, fmt.Errorf("epoch %d: node %q: %v", s.Epoch(), name, err)
		}
		for k := 0; k < ni.NumPods(); k++ {
			pi := ni.PodAt(k)
			key := pi.Key()
			if other, dup := where[key]; dup {
				return st, fmt.Errorf("epoch %d: pod %q on nodes %q and %q", s.Epoch(), key, other, name)
			}
			where[key] = name
			if pi.Pod().Spec.NodeName != name {
				return st, fmt.Errorf("epoch %d: pod %q names node %q but is on %q", s.Epoch(), key, pi.Pod().Spec.NodeName, name)
			}
			e, ok := s.Pod(key)
			if !ok {
				return st, fmt.Errorf("epoch %d: pod %q on node %q is missing from the pod map", s.Epoch(), key, name)
			}
			if e.Pod != pi.Pod() {
				return st, fmt.Errorf("epoch %d: pod %q: the pod map holds another object than node %q", s.Epoch(), key, name)
			}
		}
		ni.RangePVCRefCounts(func(k string, n int) bool { pvcUnion[k] = struct{}{}; pvcSum[k] += n; return true })
		if ni.NumPodsWithAffinity() > 0 {
			wantAff = append(wantAff, ni)
		}
		if ni.NumPodsWithRequiredAntiAffinity() > 0 {
			wantAnti = append(wantAnti, ni)
		}
		if ni.NumPodsWithRequiredNonHostScopedAntiAffinity() > 0 {
			wantNonHost = append(wantNonHost, ni)
		}
	}
	st.PodsOnListedNodes = len(where)
	n := 0
	s.Range(func(i int, ni *nodeinfo.NodeInfo) bool {
		if i != n || ni != list[i] {
			err = fmt.Errorf("epoch %d: Range yields entry %d at position %d", s.Epoch(), i, n)
			return false
		}
		n++
		return true
	})
	if err != nil {
		return st, err
	}
	if n != len(list) {
		return st, fmt.Errorf("epoch %d: Range yields %d nodes, List %d", s.Epoch(), n, len(list))
	}
	if s.At(len(list)) != nil || s.At(-1) != nil {
		return st, fmt.Errorf("epoch %d: At out of range is not nil", s.Epoch())
	}
	// Pod map against the node entries.
	unlisted := make(map[string]struct{})
	var podErr error
	pods := 0
	s.RangePods(func(key string, e snapshot.PodEntry) bool {
		pods++
		if e.Pod == nil || string(e.Pod.UID) != key {
			podErr = fmt.Errorf("epoch %d: pod map entry %q holds %v", s.Epoch(), key, e.Pod)
			return false
		}
		if e.Assumed {
			st.AssumedPods++
		}
		nodeName := e.Pod.Spec.NodeName
		if _, ok := listed[nodeName]; ok {
			if where[key] != nodeName {
				podErr = fmt.Errorf("epoch %d: pod %q (assumed=%v) names listed node %q but is not on it", s.Epoch(), key, e.Assumed, nodeName)
				return false
			}
		} else {
			if on, ok := where[key]; ok {
				podErr = fmt.Errorf("epoch %d: pod %q names unlisted node %q but is on %q", s.Epoch(), key, nodeName, on)
				return false
			}
			if _, err := s.Get(nodeName); err == nil {
				podErr = fmt.Errorf("epoch %d: Get(%q) succeeds for a node that is not listed", s.Epoch(), nodeName)
				return false
			}
			unlisted[nodeName] = struct{}{}
		}
		return true
	})
	if podErr != nil {
		return st, podErr
	}
	st.Pods = pods
	if s.PodCount() != pods {
		return st, fmt.Errorf("epoch %d: PodCount()=%d, RangePods yields %d", s.Epoch(), s.PodCount(), pods)
	}
	if got, want := s.NodeCount(), len(list)+len(unlisted); got != want {
		return st, fmt.Errorf("epoch %d: NodeCount()=%d, want %d listed + %d nodeless entries implied by the pods",
			s.Epoch(), got, len(list), len(unlisted))
	}
	// Affinity lists.
	aff, _ := s.HavePodsWithAffinityList()
	anti, _ := s.HavePodsWithRequiredAntiAffinityList()
	if !slices.Equal(aff, wantAff) || s.NumNodesWithAffinity() != len(wantAff) {
		return st, fmt.Errorf("epoch %d: affinity list has %d nodes, %d listed nodes hold affinity pods", s.Epoch(), len(aff), len(wantAff))
	}
	if !slices.Equal(anti, wantAnti) || s.NumNodesWithRequiredAntiAffinity() != len(wantAnti) {
		return st, fmt.Errorf("epoch %d: anti-affinity list has %d nodes, %d listed nodes hold such pods", s.Epoch(), len(anti), len(wantAnti))
	}
	nonHost, _ := s.HavePodsWithRequiredNonHostScopedAntiAffinityList()
	if !slices.Equal(nonHost, wantNonHost) || s.NumNodesWithRequiredNonHostScopedAntiAffinity() != len(wantNonHost) {
		return st, fmt.Errorf("epoch %d: non-host-scoped anti-affinity list has %d nodes, %d listed nodes hold such pods",
			s.Epoch(), len(nonHost), len(wantNonHost))
	}
	if o.ImagesNow {
		if err := CheckImagesNow(s); err != nil {
			return st, err
		}
	}
	// Used PVC set and reference counts.
	used := 0
	s.RangeUsedPVCs(func(k string) bool {
		used++
		if s.PVCRefCount(k) <= 0 {
			podErr = fmt.Errorf("epoch %d: PVC %q marked used with reference count %d", s.Epoch(), k, s.PVCRefCount(k))
			return false
		}
		return true
	})
	if podErr != nil || o.PVCDelta {
		return st, podErr
	}
	for k, n := range pvcSum {
		if got := s.PVCRefCount(k); got != n {
			return st, fmt.Errorf("epoch %d: PVC %q: reference count %d, listed nodes' pods reference it %d times", s.Epoch(), k, got, n)
		}
	}
	if s.NumUsedPVCs() != len(pvcUnion) {
		return st, fmt.Errorf("epoch %d: %d used PVCs, listed nodes reference %d", s.Epoch(), s.NumUsedPVCs(), len(pvcUnion))
	}
	s.RangeUsedPVCs(func(k string) bool {
		if _, ok := pvcUnion[k]; !ok {
			podErr = fmt.Errorf("epoch %d: PVC %q marked used, no listed node references it", s.Epoch(), k)
			return false
		}
		return true
	})
	return st, podErr
}

// CheckImagesNow verifies that the image summaries of every listed node
// are a clone's taken at s's epoch by a cache fed a consistent stream
// (every node with an object listed, each removed with the object it
// holds), as in a new snapshot from UpdateSnapshot (semantics 3.5, 7.9):
// the node has one summary per name its object lists, and each summary's
// NumNodes is the number of listed nodes whose object lists that name.
func CheckImagesNow(s *schedcache.Snapshot) error {
	names := func(n *v1.Node) map[string]struct{} {
		out := make(map[string]struct{})
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				out[name] = struct{}{}
			}
		}
		return out
	}
	count := make(map[string]int)
	var err error
	s.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		for name := range names(ni.Node()) {
			count[name]++
		}
		return true
	})
	s.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		own := names(ni.Node())
		if ni.NumImageStates() != len(own) {
			err = fmt.Errorf("epoch %d: node %q has %d image summaries, its object lists %d names", s.Epoch(), ni.NodeName(), ni.NumImageStates(), len(own))
			return false
		}
		for name := range own {
			st, ok := ni.ImageState(name)
			if !ok || st.NumNodes != count[name] {
				err = fmt.Errorf("epoch %d: node %q image %q: summary %+v (found %v), %d listed nodes list it",
					s.Epoch(), ni.NodeName(), name, st, ok, count[name])
				return false
			}
		}
		return true
	})
	return err
}

// CheckDump verifies a Dump: every entry's aggregates, entry names match
// their node objects, nodeless entries hold at least one pod, every pod is
// on the entry it names and on no other, every assumed key is a pod of
// some entry. It returns the number of pods.
func CheckDump(d *schedcache.Dump, recompute bool) (int, error) {
	if d == nil {
		return 0, errors.New("nil dump")
	}
	where := make(map[string]string)
	var scratch sums
	for name, ni := range d.Nodes {
		if ni == nil {
			return 0, fmt.Errorf("dump entry %q is nil", name)
		}
		if ni.Node() != nil && ni.NodeName() != name {
			return 0, fmt.Errorf("dump entry %q holds node %q", name, ni.NodeName())
		}
		if ni.Node() == nil && ni.NumPods() == 0 {
			return 0, fmt.Errorf("dump entry %q is nodeless and empty", name)
		}
		if err := scratch.check(ni, recompute); err != nil {
			return 0, fmt.Errorf("dump entry %q: %v", name, err)
		}
		for i := 0; i < ni.NumPods(); i++ {
			pi := ni.PodAt(i)
			if other, dup := where[pi.Key()]; dup {
				return 0, fmt.Errorf("pod %q in dump entries %q and %q", pi.Key(), other, name)
			}
			where[pi.Key()] = name
			if pi.Pod().Spec.NodeName != name {
				return 0, fmt.Errorf("pod %q names %q but is in dump entry %q", pi.Key(), pi.Pod().Spec.NodeName, name)
			}
		}
	}
	for k := range d.AssumedPods {
		if _, ok := where[k]; !ok {
			return 0, fmt.Errorf("assumed pod %q is on no dump entry", k)
		}
	}
	return len(where), nil
}

// ---- fingerprints ----

var seed = maphash.MakeSeed()

// hasher is an order-sensitive 64-bit mix (cheap under -race: no calls).
type hasher struct{ v uint64 }

func (h *hasher) i64(x int64) {
	h.v ^= uint64(x)
	h.v *= 0x100000001b3
	h.v ^= h.v >> 29
}
func (h *hasher) str(s string)         { h.i64(int64(maphash.String(seed, s))) }
func (h *hasher) ptr(p unsafe.Pointer) { h.i64(int64(uintptr(p))) }
func (h *hasher) res(r nodeinfo.Resource) {
	h.i64(r.MilliCPU)
	h.i64(r.Memory)
	h.i64(r.EphemeralStorage)
	h.i64(r.AllowedPodNumber)
	if r.NumScalars() > 0 {
		for _, s := range r.Scalars() {
			h.str(string(s.Name))
			h.i64(s.Value)
		}
	}
}

func newHasher() *hasher { return &hasher{v: 0xcbf29ce484222325} }

// hashNodeInfo covers every observable field of ni without copying: node
// object identity, generation, the four pod lists (keys and object
// identities), the aggregates, the used ports (count and membership of the
// pods' ports), claims, the number of image summaries and the first one.
func hashNodeInfo(h *hasher, ni *nodeinfo.NodeInfo) {
	node := ni.Node()
	h.ptr(unsafe.Pointer(node))
	h.i64(ni.Generation())
	for _, l := range [4]struct {
		n  int
		at func(int) *nodeinfo.PodInfo
	}{{ni.NumPods(), ni.PodAt}, {ni.NumPodsWithAffinity(), ni.PodWithAffinityAt}, {ni.NumPodsWithRequiredAntiAffinity(), ni.PodWithRequiredAntiAffinityAt},
		{ni.NumPodsWithRequiredNonHostScopedAntiAffinity(), ni.PodWithRequiredNonHostScopedAntiAffinityAt}} {
		h.i64(int64(l.n))
		for i := 0; i < l.n; i++ {
			pi := l.at(i)
			h.ptr(unsafe.Pointer(pi))
			h.ptr(unsafe.Pointer(pi.Pod()))
		}
	}
	h.res(ni.Requested())
	h.res(ni.NonZeroRequested())
	h.res(ni.Allocatable())
	h.i64(int64(ni.NumUsedPorts()))
	for i := 0; i < ni.NumPods(); i++ {
		for _, hp := range ni.PodAt(i).HostPorts() {
			if ni.HasHostPort(hp.IP, string(hp.Protocol), hp.Port) {
				h.i64(1)
			}
		}
	}
	ni.RangePVCRefCounts(func(k string, n int) bool { h.str(k); h.i64(int64(n)); return true })
	h.i64(int64(ni.NumImageStates()))
	if node != nil && len(node.Status.Images) > 0 && len(node.Status.Images[0].Names) > 0 {
		// One image summary per node: the maps are shared and immutable,
		// and looking all of them up dominates the cost under -race.
		if st, ok := ni.ImageState(node.Status.Images[0].Names[0]); ok {
			h.i64(st.Size)
			h.i64(int64(st.NumNodes))
		}
	}
}

// FingerprintNodeInfo hashes everything observable through ni (see
// hashNodeInfo); NodeInfos are immutable, so it never changes.
func FingerprintNodeInfo(ni *nodeinfo.NodeInfo) uint64 {
	h := newHasher()
	hashNodeInfo(h, ni)
	return h.v
}

// Fingerprint hashes everything observable through s: epoch, counts, error,
// list order and every listed NodeInfo (pods, aggregates, ports, claims,
// images, generation, object identities), the affinity lists, the pod map
// (keys, objects, assumed flags) and the used-PVC set. Two calls on an
// unchanged snapshot give the same value.
func Fingerprint(s *schedcache.Snapshot) uint64 {
	h := newHasher()
	h.i64(int64(s.Epoch()))
	h.i64(int64(s.NodeCount()))
	h.i64(int64(s.PodCount()))
	h.i64(int64(s.NumNodes()))
	if err := s.Err(); err != nil {
		h.str(err.Error())
	}
	s.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		hashNodeInfo(h, ni)
		return true
	})
	aff, _ := s.HavePodsWithAffinityList()
	anti, _ := s.HavePodsWithRequiredAntiAffinityList()
	nonHost, _ := s.HavePodsWithRequiredNonHostScopedAntiAffinityList()
	for _, l := range [][]*nodeinfo.NodeInfo{aff, anti, nonHost} {
		h.i64(int64(len(l)))
		for _, ni := range l {
			h.ptr(unsafe.Pointer(ni))
		}
	}
	var sum uint64
	s.RangePods(func(k string, e snapshot.PodEntry) bool {
		v := maphash.String(seed, k) ^ uint64(uintptr(unsafe.Pointer(e.Pod)))*0x9e3779b97f4a7c15
		if e.Assumed {
			v = ^v
		}
		sum += v
		return true
	})
	h.i64(int64(sum))
	sum = 0
	s.RangeUsedPVCs(func(k string) bool {
		sum += maphash.String(seed, k)
		return true
	})
	h.i64(int64(sum))
	return h.v
}

// ---- canonical renderings ----

// RenderNodeInfo returns a canonical text of everything ni shows: node
// object, generation, pods in order, sub-lists, aggregates, ports, claims
// and every image summary.
func RenderNodeInfo(ni *nodeinfo.NodeInfo) string {
	var b strings.Builder
	renderNodeInfo(&b, ni)
	return b.String()
}

func renderNodeInfo(b *strings.Builder, ni *nodeinfo.NodeInfo) {
	node := "<nodeless>"
	if n := ni.Node(); n != nil {
		node = fmt.Sprintf("%s rv=%s zone=%s obj=%p", n.Name, n.ResourceVersion, n.Labels[v1.LabelTopologyZone], n)
	}
	fmt.Fprintf(b, "  node %s gen=%d\n", node, ni.Generation())
	for i := 0; i < ni.NumPods(); i++ {
		pi := ni.PodAt(i)
		fmt.Fprintf(b, "    pod %s obj=%p node=%s\n", pi.Key(), pi.Pod(), pi.Pod().Spec.NodeName)
	}
	var aff, anti, nonHost []string
	for _, pi := range ni.PodsWithAffinity() {
		aff = append(aff, pi.Key())
	}
	for _, pi := range ni.PodsWithRequiredAntiAffinity() {
		anti = append(anti, pi.Key())
	}
	for _, pi := range ni.PodsWithRequiredNonHostScopedAntiAffinity() {
		nonHost = append(nonHost, pi.Key())
	}
	fmt.Fprintf(b, "    aff=%v anti=%v nonHostAnti=%v\n", aff, anti, nonHost)
	fmt.Fprintf(b, "    requested=%v nonzero=%v allocatable=%v\n", ni.Requested(), ni.NonZeroRequested(), ni.Allocatable())
	var ports []string
	for ip, set := range ni.UsedPorts() {
		for pp := range set {
			ports = append(ports, fmt.Sprintf("%s/%s/%d", ip, pp.Protocol, pp.Port))
		}
	}
	sort.Strings(ports)
	fmt.Fprintf(b, "    ports=%v\n", ports)
	var pvcs []string
	ni.RangePVCRefCounts(func(k string, n int) bool { pvcs = append(pvcs, fmt.Sprintf("%s:%d", k, n)); return true })
	fmt.Fprintf(b, "    pvcs=%v\n", pvcs)
	imgs := ni.ImageStates()
	names := make([]string, 0, len(imgs))
	for k := range imgs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(b, "    image %s %d/%d\n", k, imgs[k].Size, imgs[k].NumNodes)
	}
}

// RenderDump returns a canonical text of d: entries sorted by name with
// their node object, generation, pods in order, sub-lists, aggregates,
// ports, claims and images; then the sorted assumed set.
func RenderDump(d *schedcache.Dump) string {
	var b strings.Builder
	names := make([]string, 0, len(d.Nodes))
	for k := range d.Nodes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "entry %q\n", k)
		renderNodeInfo(&b, d.Nodes[k])
	}
	assumed := make([]string, 0, len(d.AssumedPods))
	for k := range d.AssumedPods {
		assumed = append(assumed, k)
	}
	sort.Strings(assumed)
	fmt.Fprintf(&b, "assumed %v\n", assumed)
	return b.String()
}

// RenderSnapshot returns a canonical text of what s shows, epoch excluded:
// the node list in order (each NodeInfo rendered), the affinity lists, the
// sorted pod map with assumed flags, the used-PVC set, the counts and Err.
func RenderSnapshot(s *schedcache.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "nodes=%d entries=%d pods=%d err=%v\n", s.NumNodes(), s.NodeCount(), s.PodCount(), s.Err())
	s.Range(func(i int, ni *nodeinfo.NodeInfo) bool {
		fmt.Fprintf(&b, "list[%d]\n", i)
		renderNodeInfo(&b, ni)
		return true
	})
	aff, _ := s.HavePodsWithAffinityList()
	anti, _ := s.HavePodsWithRequiredAntiAffinityList()
	nonHost, _ := s.HavePodsWithRequiredNonHostScopedAntiAffinityList()
	for _, l := range [][]*nodeinfo.NodeInfo{aff, anti, nonHost} {
		names := make([]string, len(l))
		for i, ni := range l {
			names[i] = ni.NodeName()
		}
		fmt.Fprintf(&b, "affinity list %v\n", names)
	}
	var pods []string
	s.RangePods(func(k string, e snapshot.PodEntry) bool {
		pods = append(pods, fmt.Sprintf("%s obj=%p node=%s assumed=%v", k, e.Pod, e.Pod.Spec.NodeName, e.Assumed))
		return true
	})
	sort.Strings(pods)
	for _, p := range pods {
		fmt.Fprintf(&b, "pod %s\n", p)
	}
	var pvcs []string
	s.RangeUsedPVCs(func(k string) bool { pvcs = append(pvcs, k); return true })
	sort.Strings(pvcs)
	fmt.Fprintf(&b, "pvcs %v\n", pvcs)
	return b.String()
}

// Diff returns the first differing line of two renderings with context, or
// "" when equal.
func Diff(a, b string) string {
	if a == b {
		return ""
	}
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(la), len(lb)); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  before: %s\n  after:  %s", i+1, x, y)
		}
	}
	return "renderings differ"
}
