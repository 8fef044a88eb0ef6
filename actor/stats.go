package actor

import (
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
)

// NumOpKinds bounds OpKind values: Stats arrays are indexed by OpKind.
const NumOpKinds = int(OpCompositePodGroup) + 1

// BatchBuckets are the upper bounds of Stats.BatchSizes' buckets (a batch
// of n ops falls in the first bucket whose bound is >= n; the last bucket
// takes the rest).
var BatchBuckets = [...]int{1, 2, 4, 8, 16, 32, 64, 128, 256, 1 << 30}

// NumBatchBuckets is len(BatchBuckets).
const NumBatchBuckets = len(BatchBuckets)

// counters are the coordinator's statistics. Every field is written only
// by the token holder, one goroutine at a time (single-writer atomics: an
// uncontended add), and may be read by any goroutine. The struct sits behind its own pointer so its
// cache lines are not shared with the coordinator's other fields.
type counters struct {
	ops          [NumOpKinds]atomic.Uint64      // atomic; ops finished, by kind (refused ones included)
	errs         [NumOpKinds]atomic.Uint64      // atomic; ops finished with an error, by kind
	batches      atomic.Uint64                  // atomic; mailbox batches applied
	batchOps     atomic.Uint64                  // atomic; ops taken by those batches
	batchSizes   [NumBatchBuckets]atomic.Uint64 // atomic; batches by size bucket
	publications atomic.Uint64                  // atomic; snapshots published
	publishedAt  atomic.Int64                   // atomic; Clock.Now().UnixNano() at the last publication (0: none yet)
	assumed      atomic.Int64                   // atomic; assumed pods as of the last publication
	expired      atomic.Uint64                  // atomic; assumed pods removed by expiry
	asyncErrs    atomic.Uint64                  // atomic; async failures recorded for OnAsyncError
	conflicts    [2]atomic.Uint64               // atomic; optimistic checks failed: Commit, AssumePodIfGeneration
}

func (s *counters) finished(op *Op, err error) {
	if k := int(op.Kind); k < NumOpKinds {
		s.ops[k].Add(1)
		if err != nil {
			s.errs[k].Add(1)
			if _, ok := err.(*CommitConflictError); ok && op.Kind >= OpCommit {
				s.conflicts[op.Kind-OpCommit].Add(1)
			}
		}
	}
}

func (s *counters) batch(n int) {
	s.batches.Add(1)
	s.batchOps.Add(uint64(n))
	for i, b := range BatchBuckets {
		if n <= b {
			s.batchSizes[i].Add(1)
			return
		}
	}
}

func (s *counters) published(now time.Time, assumed int) {
	s.publications.Add(1)
	if !now.IsZero() {
		s.publishedAt.Store(now.UnixNano())
	}
	s.assumed.Store(int64(assumed))
}

// Stats is a reading of the coordinator's counters. Contract: a value;
// each field is read with its own atomic load, so fields may come from
// consecutive publications (Epoch, Pods and Nodes come from one snapshot;
// PublishedAt and AssumedPods are stored just after that snapshot is
// published).
type Stats struct {
	MailboxDepth int // ops queued in the mailbox (len of the channel)
	MailboxCap   int
	Batches      uint64                  // batches applied: mailbox batches, and each op run inline as a batch of one
	BatchedOps   uint64                  // ops those batches took
	BatchSizes   [NumBatchBuckets]uint64 // batches by size, buckets bounded by BatchBuckets
	Publications uint64                  // snapshots published
	Epoch        uint64                  // epoch of the latest published snapshot
	PublishedAt  time.Time               // the injected clock's time at the last publication; zero before the first
	Ops          [NumOpKinds]uint64      // ops finished, by OpKind (ErrClosed refusals included)
	Errors       [NumOpKinds]uint64      // ops finished with an error, by OpKind
	Expired      uint64                  // assumed pods removed by TTL expiry
	AsyncErrors  uint64                  // failures of Async ops (handed to OnAsyncError)
	AsyncBacklog int64                   // of those, not yet delivered
	AssumedPods  int                     // assumed pods (upstream's len(assumedPods))
	Pods         int                     // cached pods, assumed included (upstream's len(podStates))
	Nodes        int                     // node entries, ghosts included (upstream's len(nodes))
	Failed       bool                    // the cache has failed (see FailedError)
	// CommitConflicts and AssumeConflicts count the optimistic checks that
	// failed (*CommitConflictError) in Commit and AssumePodIfGeneration;
	// Ops[OpCommit] and Ops[OpAssumeIfGen] count the calls.
	CommitConflicts uint64
	AssumeConflicts uint64
}

// Stats reads the counters. It never blocks and allocates nothing; it
// does not wait for the coordinator.
func (a *Coordinator) Stats() Stats {
	s := a.stats
	st := Stats{
		MailboxDepth: len(a.mailbox),
		MailboxCap:   cap(a.mailbox),
		Batches:      s.batches.Load(),
		BatchedOps:   s.batchOps.Load(),
		Publications: s.publications.Load(),
		Expired:      s.expired.Load(),
		AsyncErrors:  s.asyncErrs.Load(),
		AsyncBacklog: a.backlog.load(),
		AssumedPods:  int(s.assumed.Load()),
		Failed:       a.failed.Load() != nil,
	}
	st.CommitConflicts, st.AssumeConflicts = s.conflicts[0].Load(), s.conflicts[1].Load()
	if ns := s.publishedAt.Load(); ns != 0 {
		st.PublishedAt = time.Unix(0, ns)
	}
	for i := range st.BatchSizes {
		st.BatchSizes[i] = s.batchSizes[i].Load()
	}
	for i := range st.Ops {
		st.Ops[i] = s.ops[i].Load()
		st.Errors[i] = s.errs[i].Load()
	}
	snap := a.published.Load()
	st.Epoch, st.Pods, st.Nodes = snap.Epoch(), snap.PodCount(), snap.NodeCount()
	return st
}

// Closed reports whether the coordinator has started shutting down (Stop
// or cancellation): from then on every operation is refused.
func (a *Coordinator) Closed() bool {
	return a.closing.Load() || a.stopping()
}

// Dispatcher queues API calls on behalf of the cache (upstream's
// fwk.APIDispatcher reduced to what BindPod needs, with no dependency on
// client-go). Contract: DispatchBinding may be called concurrently and
// must not block for long; it queues binding, or refuses it. The final
// outcome of a queued call is sent on onFinish without blocking (a full
// channel drops it), at most once. A call that is not queued returns an
// error: one wrapping ErrCallSkipped is expected (the skip is also sent on
// onFinish, as upstream's dispatcher does); any other error means the call
// was not queued.
type Dispatcher interface {
	DispatchBinding(binding *v1.Binding, onFinish chan<- error) error
}

// Dispatcher returns the dispatcher set in Options, or nil.
func (a *Coordinator) Dispatcher() Dispatcher { return a.opts.Dispatcher }

// AssumedCount returns the number of assumed pods.
func (c *core) AssumedCount() int { return c.assumed }
