package nodeinfo

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Sentinel errors shared by the whole project (the root package re-exports
// them). Match them with errors.Is: functions may wrap them with context.
var (
	// ErrNilPod reports a nil *v1.Pod argument.
	ErrNilPod = errors.New("schedcache: nil pod")
	// ErrNilNode reports a nil *v1.Node argument.
	ErrNilNode = errors.New("schedcache: nil node")
	// ErrEmptyUID reports a pod whose UID (its cache key) is empty.
	ErrEmptyUID = errors.New("schedcache: pod has an empty UID")
	// ErrPodNotOnNode reports a NodeState.RemovePod for a key the node does
	// not hold.
	ErrPodNotOnNode = errors.New("schedcache: pod not found on node")
)

// PodKey returns the cache key of pod: string(pod.UID) (semantics 1.1). It
// returns ErrNilPod for a nil pod and ErrEmptyUID for an empty UID. It is
// pure and safe for concurrent use.
func PodKey(pod *v1.Pod) (string, error) {
	if pod == nil {
		return "", ErrNilPod
	}
	if pod.UID == "" {
		return "", ErrEmptyUID
	}
	return string(pod.UID), nil
}

// Bounds that keep every node total in range. A node's totals
// (Requested: cpu, memory, ephemeral storage, each scalar; NonZeroRequested:
// cpu, memory) are sums over the pods it holds of one int64 per pod. Every
// such per-pod amount v satisfies |v| <= MaxPodQuantity (NewPodInfo
// refuses a pod otherwise), and a node entry holds at most MaxPodsPerNode
// pods (the cache's coordinator refuses the pod that would be one more),
// so every total t satisfies
//
//	|t| <= MaxPodsPerNode * MaxPodQuantity = 2^16 * (2^47 - 1) = 2^63 - 2^16 < 2^63 - 1,
//
// and no total can wrap, whatever the order of adds and removes (a total
// is always the sum over the pods held at that moment). Upstream has no
// bound: it wraps silently (a node read cpu -2).
//
// MaxPodQuantity is 140,737,488,355,327: 128 TiB less one byte of memory
// or ephemeral storage, 140 million cpus in millicores, per pod; no real
// request comes near it. MaxPodsPerNode is 65,536 pods on one node entry
// (ghosts and nodeless entries included); kubelet's default is 110.
const (
	MaxPodQuantity int64 = 1<<47 - 1
	MaxPodsPerNode       = 1 << 16
)

// ErrQuantityOverflow reports an amount that node totals could not hold
// without wrapping: a pod amount beyond MaxPodQuantity (see QuantityError),
// or a pod that would be one more than MaxPodsPerNode on its node.
var ErrQuantityOverflow = errors.New("schedcache: quantity out of the range node totals can hold")

// QuantityError is returned by NewPodInfo (and so by every cache call that
// takes a pod's requests: AssumePod, AddPod, UpdatePod and their Async
// forms) for a pod one of whose per-pod amounts is beyond MaxPodQuantity
// in absolute value. Nothing is changed. It wraps ErrQuantityOverflow.
type QuantityError struct {
	Key      string          // the pod's UID
	Pod      string          // namespace/name
	Resource v1.ResourceName // cpu (in millicores), memory, ephemeral-storage or a scalar name
	NonZero  bool            // the non-zero (defaulted) amount of cpu or memory
	Value    int64           // the amount, rounded up and saturated to the int64 range
}

func (e *QuantityError) Error() string {
	what := string(e.Resource)
	if e.NonZero {
		what += " (non-zero request)"
	}
	return fmt.Sprintf("pod %s (%s): %s request %d is beyond +-%d: %v",
		e.Key, e.Pod, what, e.Value, MaxPodQuantity, ErrQuantityOverflow)
}

func (e *QuantityError) Unwrap() error { return ErrQuantityOverflow }

// checkQuantities returns a *QuantityError for the first amount of p
// beyond MaxPodQuantity (cpu, memory, ephemeral storage, scalars in name
// order, then the non-zero cpu and memory), or nil.
func checkQuantities(p *PodInfo) error {
	bad := func(v int64) bool { return v > MaxPodQuantity || v < -MaxPodQuantity }
	fail := func(name v1.ResourceName, v int64, nonZero bool) error {
		return &QuantityError{Key: string(p.pod.UID), Pod: p.pod.Namespace + "/" + p.pod.Name, Resource: name, NonZero: nonZero, Value: v}
	}
	r := &p.requests
	switch {
	case bad(r.MilliCPU):
		return fail(v1.ResourceCPU, r.MilliCPU, false)
	case bad(r.Memory):
		return fail(v1.ResourceMemory, r.Memory, false)
	case bad(r.EphemeralStorage):
		return fail(v1.ResourceEphemeralStorage, r.EphemeralStorage, false)
	}
	for _, s := range r.scalars {
		if bad(s.Value) {
			return fail(s.Name, s.Value, false)
		}
	}
	switch {
	case bad(p.non0CPU):
		return fail(v1.ResourceCPU, p.non0CPU, true)
	case bad(p.non0Mem):
		return fail(v1.ResourceMemory, p.non0Mem, true)
	}
	return nil
}
