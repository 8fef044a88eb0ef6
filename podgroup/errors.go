package podgroup

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns is an *Error wrapping
// one of them: match them with errors.Is, and get the Op and Key with
// errors.As.
var (
	// ErrNilPod: a nil *v1.Pod argument.
	ErrNilPod = errors.New("podgroup: nil pod")
	// ErrEmptyUID: a pod whose UID (its key within a group) is empty.
	ErrEmptyUID = errors.New("podgroup: pod has an empty UID")
	// ErrNoPodGroupName: a pod whose Spec.SchedulingGroup is set but whose
	// SchedulingGroup.PodGroupName is nil (upstream dereferences it and
	// panics).
	ErrNoPodGroupName = errors.New("podgroup: pod's scheduling group has no pod group name")
	// ErrNoSchedulingGroup: Hierarchy of a pod without Spec.SchedulingGroup;
	// the *Error's text is upstream's "pod has no scheduling group".
	ErrNoSchedulingGroup = errors.New("podgroup: pod has no scheduling group")
	// ErrNilPodGroup: a nil *schedulingv1beta1.PodGroup argument.
	ErrNilPodGroup = errors.New("podgroup: nil pod group")
	// ErrNilComposite: a nil *schedulingv1alpha3.CompositePodGroup argument.
	ErrNilComposite = errors.New("podgroup: nil composite pod group")
	// ErrBadKey: a Key whose Kind is neither PodGroupKind nor CompositeKind.
	ErrBadKey = errors.New("podgroup: key of an unknown kind")
	// ErrEditorDone: an Editor used after Done.
	ErrEditorDone = errors.New("podgroup: editor used after Done")

	// ErrGateDisabled: a lister called while the feature gate it needs
	// (GenericWorkload or CompositePodGroup) is off; the *Error's text is
	// upstream's ("generic workload feature gate is disabled", "composite
	// pod group feature gate is disabled").
	ErrGateDisabled = errors.New("podgroup: feature gate is disabled")
	// ErrStateNotFound: no state for the group; the *Error's text is
	// upstream's for the lister or call that failed.
	ErrStateNotFound = errors.New("podgroup: group state not found")
	// ErrObjectNotFound: the group's state exists but holds no API object
	// (a placeholder kept for its members or children); the *Error's text
	// is upstream's.
	ErrObjectNotFound = errors.New("podgroup: group API object not found")
	// ErrMissedEvent: an update, forget or removal found no state for its
	// group, which upstream logs as a missed add event. Nothing changed.
	ErrMissedEvent = errors.New("podgroup: group state not found: a missed add event")
	// ErrCycle: the composite pod group hierarchy has a cycle; the *Error's
	// text is upstream's where upstream detects it.
	ErrCycle = errors.New("podgroup: cycle in the composite pod group hierarchy")
	// ErrTooDeep: Hierarchy walked WorkloadMaxTreeDepth-1 parents up from
	// the pod's group without finding a root.
	ErrTooDeep = errors.New("podgroup: composite pod group hierarchy deeper than WorkloadMaxTreeDepth")
)

// Error is every error the package returns. Its text is upstream's text
// where upstream returns an error (listers, Hierarchy, RootKey), else
// "podgroup: Op ...". It wraps one of the sentinels. A value: nothing in
// it is shared with the table.
type Error struct {
	Op  string // the method: "Get", "PodGroup", "AddMember", "Hierarchy", ...; immutable
	Key Key    // the group involved, zero if none; immutable
	Err error  // the sentinel; immutable
	msg string // the text; immutable
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// newError returns an *Error of text format(args...).
func newError(op string, key Key, sentinel error, format string, args ...any) *Error {
	return &Error{Op: op, Key: key, Err: sentinel, msg: fmt.Sprintf(format, args...)}
}

// inputError returns the *Error of bad input: "podgroup: op: what".
func inputError(op string, key Key, sentinel error, what string) *Error {
	return &Error{Op: op, Key: key, Err: sentinel, msg: "podgroup: " + op + ": " + what}
}

// Upstream's texts for a gate that is off.
const (
	textGenericDisabled   = "generic workload feature gate is disabled"
	textCompositeDisabled = "composite pod group feature gate is disabled"
)
