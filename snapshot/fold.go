package snapshot

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/internal/snapbuild"
)

// foldQueue is the snapbuild.FoldQueue: it carries a builder's pod-log
// folds to the goroutine that runs them, and their results back, so that
// the builder's owner (the coordinator) only appends to the log. The
// package starts no goroutine: the owner runs Serve on one of its own.
//
// Contract: one builder uses a foldQueue (builder.SetFoldQueue), from the
// builder's owner (one goroutine at a time: the coordinator's token
// holder); one goroutine calls Serve; Close is called once, by
// the owner, after the builder's last use, and Serve then returns after
// the fold in flight, if any (its result is dropped). A fold reads only
// immutable values (a trie and a log prefix no one writes again), so it
// runs concurrently with the builder and with every reader. The builder
// never waits for a fold: at podLogMax it folds the log itself.
type foldQueue struct {
	reqc chan foldReq    // builder -> Serve; at most one request in flight; closed by Close
	resc chan foldResult // Serve -> builder; buffered, so Serve never waits
}

// newFoldQueue returns a queue with no fold in flight.
func newFoldQueue() *foldQueue {
	return &foldQueue{reqc: make(chan foldReq, 1), resc: make(chan foldResult, 1)}
}

// Serve runs the queue's folds on the calling goroutine until Close. A fold
// that panics is reported to the builder, and Serve goes on.
func (q *foldQueue) Serve() {
	seen := make(map[string]struct{}, podLogCap) // owned by this goroutine; reused by every fold
	for r := range q.reqc {
		q.resc <- r.fold(seen) // buffered: the builder receives before it sends again
	}
}

// Close ends Serve once the fold in flight, if any, is done.
func (q *foldQueue) Close() { close(q.reqc) }

type foldReq struct {
	base immutable.Map[PodEntry]
	log  []podChange // a prefix of the builder's log: never written again
}

type foldResult struct {
	pods immutable.Map[PodEntry]
	err  error // a panic of the fold; the builder panics with it
}

// foldHook, if non-nil, runs at the start of every fold. Tests set it to
// make a fold panic.
var foldHook func()

// fold runs foldLog with seen as its scratch map (nil: a new one),
// yielding every foldYield keys (the folder goroutine's fold).
func (r foldReq) fold(seen map[string]struct{}) foldResult { return r.foldYielding(seen, foldYield) }

// foldYielding is fold yielding every yieldEvery keys (0: never).
func (r foldReq) foldYielding(seen map[string]struct{}, yieldEvery int) (res foldResult) {
	defer func() {
		if v := recover(); v != nil {
			res = foldResult{err: fmt.Errorf("schedcache: pod log fold panicked: %v\n%s", v, debug.Stack())}
		}
	}()
	if foldHook != nil {
		foldHook()
	}
	return foldResult{pods: foldLog(r.base, r.log, yieldEvery, seen)}
}

// foldYield is how many keys a fold run by Serve applies between two
// yields of its P. A fold of a full window takes milliseconds; without
// yields, a goroutine made runnable on the folder's P (the informer, the
// coordinator, a shard) could wait for it up to a whole time slice (10 ms).
const foldYield = 64

// foldLog returns base with the changes of log applied, yielding the P
// (runtime.Gosched) after every yieldEvery keys if yieldEvery > 0. Only each
// key's last change matters: walking the log backwards, a key seen already
// is skipped, so a pod added and removed within one log costs no path copy
// at all.
//
// seen is scratch space, empty on entry and on return; nil allocates one.
func foldLog(base immutable.Map[PodEntry], log []podChange, yieldEvery int, seen map[string]struct{}) immutable.Map[PodEntry] {
	e := base.Edit()
	if seen == nil {
		seen = make(map[string]struct{}, len(log))
	}
	defer clear(seen)
	var keys [immutable.PrefetchMax]string
	var sink uintptr
	for end := len(log); end > 0; end -= immutable.PrefetchMax {
		// Load the paths of a chunk of keys together (misses in flight at
		// once), then apply the chunk's changes, last first.
		chunk := log[max(0, end-immutable.PrefetchMax):end]
		for i := range chunk {
			keys[i] = chunk[i].key
		}
		sink += e.Prefetch(keys[:len(chunk)])
		for i := len(chunk) - 1; i >= 0; i-- {
			c := &chunk[i]
			if _, later := seen[c.key]; later {
				continue
			}
			seen[c.key] = struct{}{}
			if yieldEvery > 0 && len(seen)%yieldEvery == 0 {
				runtime.Gosched()
			}
			if c.gone {
				e.Delete(c.key)
			} else {
				e.Set(c.key, c.e)
			}
		}
	}
	runtime.KeepAlive(sink) // keeps the prefetches' loads
	return e.Done()
}

// SetFoldQueue makes the builder fold its pod log through q, on the
// goroutine that serves it; nil (the default) folds on the builder's own
// goroutine, in FoldPods.
func (b *builder) SetFoldQueue(q snapbuild.FoldQueue) {
	b.foldq, _ = q.(*foldQueue) // the only implementation; nil stays nil
}

// FoldPods keeps the pod log short: past podLogFold entries it folds them
// into a new trie, through the fold queue if the builder has one (the snapshots
// committed meanwhile keep the old trie and the whole log), else at once.
// A fold's result is installed by the first FoldPods after it is ready.
// If the log reaches podLogMax before it is, FoldPods folds the whole log
// itself, at once, rather than wait: the folder's goroutine may be waiting
// for a P behind goroutines that never block (readers spinning on every P),
// and every yield of its fold costs it another wait; the late result is
// dropped when it arrives, and no fold is queued before that. A builder
// with a fold queue must call FoldPods in every transaction (the
// coordinator does, while the shards apply the epoch's mutations); without
// one, Commit does. A fold that panicked panics here, on the builder's
// goroutine.
func (b *builder) FoldPods() {
	if b.foldLen > 0 || b.foldStale {
		select {
		case r := <-b.foldq.resc:
			if b.foldStale {
				b.foldStale = false // the log it folded was folded here already
				if r.err != nil {
					panic(r.err)
				}
			} else {
				b.installFold(r)
			}
		default:
			if len(b.podLog) >= podLogMax {
				b.foldHere()
			}
			return
		}
	}
	if len(b.podLog) <= podLogFold {
		return
	}
	n := len(b.podLog)
	if b.foldq == nil {
		b.foldHere()
		return
	}
	req := foldReq{base: b.pods, log: b.podLog[:n:n]}
	b.foldq.reqc <- req
	b.foldLen = n
}

// foldHere folds the whole log into the trie on the builder's goroutine,
// without yielding. A fold in flight, if any, becomes stale: its result is
// dropped when it arrives (foldStale).
func (b *builder) foldHere() {
	n := len(b.podLog)
	r := foldReq{base: b.pods, log: b.podLog[:n:n]}.foldYielding(nil, 0)
	stale := b.foldLen > 0 || b.foldStale
	b.foldLen = n
	b.installFold(r)
	b.foldStale = stale
}

// installFold makes r the pod trie and keeps the log past the folded prefix,
// copied into a new log: earlier snapshots share the old one.
func (b *builder) installFold(r foldResult) {
	if r.err != nil {
		panic(r.err)
	}
	tail, sums := b.podLog[b.foldLen:], b.podSum[b.foldLen:]
	b.pods = r.pods
	b.podLog = append(make([]podChange, 0, max(podLogCap, 2*len(tail))), tail...)
	b.podSum = append(make([]uint64, 0, cap(b.podLog)), sums...)
	b.foldLen = 0
}
