package framework

import (
	"errors"

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
