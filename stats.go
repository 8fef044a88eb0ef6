package schedcache

import "github.com/schedcache/schedcache/actor"

// Stats is a reading of the cache's counters (see Cache.Stats).
type Stats = actor.Stats

// OpKind names a cache operation; Stats.Ops and Stats.Errors are indexed
// by it.
type OpKind = actor.OpKind

// Operation kinds, as counted in Stats.
const (
	OpAssumePod     = actor.OpAssumePod
	OpFinishBinding = actor.OpFinishBinding
	OpForgetPod     = actor.OpForgetPod
	OpAddPod        = actor.OpAddPod
	OpUpdatePod     = actor.OpUpdatePod
	OpRemovePod     = actor.OpRemovePod
	OpAddNode       = actor.OpAddNode
	OpUpdateNode    = actor.OpUpdateNode
	OpRemoveNode    = actor.OpRemoveNode
	OpGetNode       = actor.OpGetNode
	OpDump          = actor.OpDump
	OpSync          = actor.OpSync
)

// NumOpKinds is the length of Stats.Ops and Stats.Errors.
const NumOpKinds = actor.NumOpKinds

// BatchBuckets are the upper bounds of Stats.BatchSizes' buckets.
var BatchBuckets = actor.BatchBuckets

// Stats returns the cache's counters: mailbox depth, batches and their
// sizes, publications, the latest epoch and the injected clock's time at
// its publication, operations and errors by kind, expiries, async errors,
// and the assumed-pod, pod and node counts upstream's cache_size metric
// reports.
//
// Contract: safe for concurrent use, never blocks, allocates nothing and
// never waits for the coordinator: each counter is one atomic load, the
// mailbox depth is len of its channel, and the counts come from the latest
// published snapshot. It may be called after Close.
func (c *Cache) Stats() Stats {
	if c.started() != nil {
		return Stats{}
	}
	return c.a.Stats()
}

// SerialStats is a reading of the serial section's timing (see
// Cache.SerialStats).
type SerialStats = actor.SerialStats

// Hold is a histogram of durations the serial section was held.
type Hold = actor.Hold

// NumHoldBuckets is the number of buckets of a Hold.
const NumHoldBuckets = actor.NumHoldBuckets

// SerialStats returns how long the coordinator's token was held: by
// operation kind (applying it), by publication, and by batch size (the
// whole batch). Ceiling() is the operations per second that section
// allows on any number of cores, at the recorded mix and batch sizes.
// Enabled is false unless the cache was made WithSerialTiming.
//
// Contract: safe for concurrent use, never blocks, never waits for the
// coordinator; each counter is one atomic load. It may be called after
// Close.
func (c *Cache) SerialStats() SerialStats {
	if c.started() != nil {
		return SerialStats{}
	}
	return c.a.SerialStats()
}
