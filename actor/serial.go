package actor

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// NumHoldBuckets is the number of buckets of a Hold histogram: bucket 0
// counts durations of 0 ns, bucket i > 0 those of 2^(i-1) to 2^i - 1 ns
// (bucket 11: 1,024 ns to 2,047 ns); the last bucket takes the rest (over
// 4.5 minutes).
const NumHoldBuckets = 40

// holdHist is a histogram of durations, written by the token holder only
// (single-writer atomics) and read by anyone.
type holdHist struct {
	n, sum atomic.Uint64                 // atomic; durations recorded, their total in ns
	b      [NumHoldBuckets]atomic.Uint64 // atomic; by holdBucket
}

func holdBucket(ns int64) int {
	if ns < 0 {
		ns = 0
	}
	return min(bits.Len64(uint64(ns)), NumHoldBuckets-1)
}

func (h *holdHist) add(d time.Duration) {
	ns := int64(d)
	if ns < 0 {
		ns = 0 // a clock that went back: counted, as 0
	}
	h.n.Add(1)
	h.sum.Add(uint64(ns))
	h.b[holdBucket(ns)].Add(1)
}

func (h *holdHist) read() Hold {
	out := Hold{Count: h.n.Load(), Total: time.Duration(h.sum.Load())}
	for i := range out.Buckets {
		out.Buckets[i] = h.b[i].Load()
	}
	return out
}

// Hold is a histogram of the time something held the coordinator's token
// (the serial section): a value. Count and Total may come from one more
// or one fewer record than Buckets (each is its own atomic load).
type Hold struct {
	Count   uint64
	Total   time.Duration
	Buckets [NumHoldBuckets]uint64 // see NumHoldBuckets
}

// Mean returns Total/Count (0 for none).
func (h Hold) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Total / time.Duration(h.Count)
}

// Quantile returns an upper bound of the q-quantile (0 < q <= 1): the
// largest duration of the bucket it falls in (within a factor 2); 0 for
// none.
func (h Hold) Quantile(q float64) time.Duration {
	var n uint64
	for _, c := range h.Buckets {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.Buckets {
		seen += c
		if seen >= rank {
			return time.Duration(int64(1)<<i - 1)
		}
	}
	return time.Duration(int64(1)<<(NumHoldBuckets-1) - 1)
}

// serialHists are the serial-section histograms: written by the token
// holder only, read by SerialStats. Behind their own pointer, allocated
// only when Options.SerialTiming is on.
type serialHists struct {
	apply   [NumOpKinds]holdHist      // applying one op, by kind
	publish holdHist                  // one publication: the core's part and the shards', up to the snapshot's store (answering its callers counts in batch only)
	batch   [NumBatchBuckets]holdHist // one batch, receive to last reply, by BatchBuckets
}

// SerialStats is a reading of the serial section's timing (Options.
// SerialTiming): how long the coordinator's token was held, the only
// thing every operation waits for whatever the number of cores. Apply is
// the time applying an op, by OpKind; Publish the time of each
// publication; Batch the whole time a batch held the token (receiving its
// ops, applying them, publishing, answering), by the batch-size buckets of
// BatchBuckets (an op run inline is a batch of one). Durations come from
// the injected clock.
type SerialStats struct {
	Enabled bool
	Apply   [NumOpKinds]Hold
	Publish Hold
	Batch   [NumBatchBuckets]Hold
}

// Ops returns the number of ops the recorded batches applied (Apply's
// counts), and Held the total time the batches held the token.
func (s SerialStats) Ops() uint64 {
	var n uint64
	for _, h := range s.Apply {
		n += h.Count
	}
	return n
}

// Held returns the total time the recorded batches held the token.
func (s SerialStats) Held() time.Duration {
	var t time.Duration
	for _, h := range s.Batch {
		t += h.Total
	}
	return t
}

// Ceiling returns the ops per second the serial section allows whatever
// the number of cores, at the batch sizes and mix recorded: ops applied
// divided by the time the token was held (0 with nothing recorded).
func (s SerialStats) Ceiling() float64 {
	held := s.Held()
	if held <= 0 {
		return 0
	}
	return float64(s.Ops()) / held.Seconds()
}

// SerialStats reads the serial-section histograms; Enabled is false (and
// the rest zero) unless Options.SerialTiming is on. It never blocks.
func (a *Coordinator) SerialStats() SerialStats {
	h := a.serial
	if h == nil {
		return SerialStats{}
	}
	s := SerialStats{Enabled: true, Publish: h.publish.read()}
	for i := range s.Apply {
		s.Apply[i] = h.apply[i].read()
	}
	for i := range s.Batch {
		s.Batch[i] = h.batch[i].read()
	}
	return s
}

// The serial timing chains its readings: each step's time runs from the
// previous reading of the batch to its own, so a batch of n ops reads the
// clock n+3 times (its start, after each op, at its publication, shared
// with Stats.PublishedAt, and at its end) instead of twice per step. The
// readings are part of what they time, so fewer readings measure the
// section more closely. Gaps between steps (queueing an op among the
// waiters, the prefetch of a chunk) count in the step that follows.

// serialStart returns the clock's time when serial timing is on (the
// token holder's), else the zero time, and starts the chain there.
func (a *Coordinator) serialStart() time.Time {
	if a.serial == nil {
		return time.Time{}
	}
	a.mark = a.clock.Now()
	return a.mark
}

// serialMark restarts the chain without recording a step (after a
// chunk's prefetch, which only the batch's total counts).
func (a *Coordinator) serialMark() {
	if a.serial != nil {
		a.mark = a.clock.Now()
	}
}

// serialBatch records a batch of n ops that took the token at t0.
func (a *Coordinator) serialBatch(t0 time.Time, n int) {
	if a.serial == nil {
		return
	}
	d := a.clock.Now().Sub(t0)
	for i, b := range BatchBuckets {
		if n <= b {
			a.serial.batch[i].add(d)
			return
		}
	}
}

func newSerialHists(on bool) *serialHists {
	if !on {
		return nil
	}
	return new(serialHists)
}

// serialApply records applying one op of kind k: the time since the
// chain's last reading.
func (a *Coordinator) serialApply(k OpKind) {
	if a.serial == nil {
		return
	}
	now := a.clock.Now()
	if int(k) < NumOpKinds {
		a.serial.apply[k].add(now.Sub(a.mark))
	}
	a.mark = now
}

// serialPublish records a publication that ended at now (the reading
// Stats.PublishedAt stores): the time since the chain's last reading.
func (a *Coordinator) serialPublish(now time.Time) {
	if a.serial == nil {
		return
	}
	a.serial.publish.add(now.Sub(a.mark))
	a.mark = now
}
