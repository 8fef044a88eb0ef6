package actor

import (
	"errors"
	"fmt"

	"github.com/schedcache/schedcache/internal/errs"
)

// Sentinel errors. Every error the cache returns matches one of these (or a
// nodeinfo / snapshot / nodetree sentinel) with errors.Is. The pod and
// node state machine's are defined in internal/errs, shared with what-if
// forks (snapshot.Fork).
var (
	ErrClosed           = errors.New("schedcache: cache is closed")
	ErrFailed           = errors.New("schedcache: cache failed after an internal error; writes are refused")
	ErrPodAlreadyCached = errs.ErrPodAlreadyCached
	ErrPodAlreadyAdded  = errs.ErrPodAlreadyAdded
	ErrPodNotFound      = errs.ErrPodNotFound
	ErrPodAssumed       = errs.ErrPodAssumed
	ErrPodNotAssumed    = errs.ErrPodNotAssumed
	ErrPodNodeMismatch  = errs.ErrPodNodeMismatch
	ErrCorrupted        = errs.ErrCorrupted
	ErrEmptyNodeName    = errs.ErrEmptyNodeName
	ErrUIDMismatch      = errs.ErrUIDMismatch
	ErrNodeNotFound     = errs.ErrNodeNotFound
	ErrNodeNameMismatch = errs.ErrNodeNameMismatch
	ErrTooManyPods      = errs.ErrTooManyPods
)

// PodError is returned by pod operations. It wraps one of the sentinels.
type PodError = errs.PodError

// CorruptionError is returned where upstream exits the process. It wraps
// ErrCorrupted.
type CorruptionError = errs.CorruptionError

// NodeError is returned by node operations. It wraps one of the sentinels.
type NodeError = errs.NodeError

// FailedError is returned once the cache has failed: it wraps ErrFailed and
// the cause (a *shard.PanicError or an invariant violation).
type FailedError struct{ Cause error }

func (e *FailedError) Error() string   { return fmt.Sprintf("%v: %v", ErrFailed, e.Cause) }
func (e *FailedError) Unwrap() []error { return []error{ErrFailed, e.Cause} }
