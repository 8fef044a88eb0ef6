package snapshot

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/schedcache/schedcache/internal/persist"
)

// Folder folds pod logs into pod tries on its own goroutine, so that the
// builder's owner (the coordinator) only appends to the log.
//
// Contract: one Builder uses a Folder (Builder.SetFolder), from the builder's
// goroutine; Stop is called once, by the owner, after the builder's last use.
// A fold reads only immutable values (a trie and a log prefix no one writes
// again), so it runs concurrently with the builder and with every reader.
// The builder never waits for a fold unless its log reaches podLogMax.
type Folder struct {
	reqc chan foldReq    // builder -> folder; at most one request in flight
	resc chan foldResult // folder -> builder; buffered, so the folder never waits
	done chan struct{}   // closed when the goroutine has returned
}

type foldReq struct {
	base persist.Map[PodEntry]
	log  []podChange // a prefix of the builder's log: never written again
}

type foldResult struct {
	pods persist.Map[PodEntry]
	err  error // a panic of the fold; the builder panics with it
}

// StartFolder starts a folder goroutine. The caller owns it and stops it
// with Stop.
func StartFolder() *Folder {
	f := &Folder{reqc: make(chan foldReq, 1), resc: make(chan foldResult, 1), done: make(chan struct{})}
	go f.run()
	return f
}

func (f *Folder) run() {
	defer close(f.done)
	seen := make(map[string]struct{}, podLogCap) // owned by this goroutine; reused by every fold
	for r := range f.reqc {
		f.resc <- r.fold(seen)
	}
}

// foldHook, if non-nil, runs at the start of every fold. Tests set it to
// make a fold panic.
var foldHook func()

// fold runs foldLog with seen as its scratch map (nil: a new one).
func (r foldReq) fold(seen map[string]struct{}) (res foldResult) {
	defer func() {
		if v := recover(); v != nil {
			res = foldResult{err: fmt.Errorf("schedcache: pod log fold panicked: %v\n%s", v, debug.Stack())}
		}
	}()
	if foldHook != nil {
		foldHook()
	}
	return foldResult{pods: foldLog(r.base, r.log, foldYield, seen)}
}

// foldYield is how many keys a fold on the folder applies between two
// yields of its P. A fold of a full window takes milliseconds; without
// yields, a goroutine made runnable on the folder's P (the informer, the
// coordinator, a shard) could wait for it up to a whole time slice (10 ms).
const foldYield = 64

// Stop ends the goroutine after the fold in flight, if any, and waits for
// it. Its result is dropped.
func (f *Folder) Stop() {
	close(f.reqc)
	<-f.done
}

// foldLog returns base with the changes of log applied, yielding the P
// (runtime.Gosched) after every yieldEvery keys if yieldEvery > 0. Only each
// key's last change matters: walking the log backwards, a key seen already
// is skipped, so a pod added and removed within one log costs no path copy
// at all.
//
// seen is scratch space, empty on entry and on return; nil allocates one.
func foldLog(base persist.Map[PodEntry], log []podChange, yieldEvery int, seen map[string]struct{}) persist.Map[PodEntry] {
	e := base.Edit()
	if seen == nil {
		seen = make(map[string]struct{}, len(log))
	}
	defer clear(seen)
	var keys [persist.PrefetchMax]string
	var sink uintptr
	for end := len(log); end > 0; end -= persist.PrefetchMax {
		// Load the paths of a chunk of keys together (misses in flight at
		// once), then apply the chunk's changes, last first.
		chunk := log[max(0, end-persist.PrefetchMax):end]
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

// SetFolder makes the builder fold its pod log on f's goroutine; nil (the
// default) folds on the builder's own goroutine, in FoldPods.
func (b *Builder) SetFolder(f *Folder) { b.folder = f }

// FoldPods keeps the pod log short: past podLogFold entries it folds them
// into a new trie, on the folder if the builder has one (the snapshots
// committed meanwhile keep the old trie and the whole log), else at once.
// A fold's result is installed by the first FoldPods after it is ready,
// and waited for only if the log has reached podLogMax. A builder with a
// folder must call FoldPods in every transaction (the coordinator does,
// while the shards apply the epoch's mutations); without one, Commit does.
// A fold that panicked panics here, on the builder's goroutine.
func (b *Builder) FoldPods() {
	if b.foldLen > 0 {
		select {
		case r := <-b.folder.resc:
			b.installFold(r)
		default:
			if len(b.podLog) < podLogMax {
				return
			}
			b.installFold(<-b.folder.resc)
		}
	}
	if len(b.podLog) <= podLogFold {
		return
	}
	n := len(b.podLog)
	req := foldReq{base: b.pods, log: b.podLog[:n:n]}
	if b.folder == nil {
		b.foldLen = n
		b.installFold(foldResult{pods: foldLog(req.base, req.log, 0, nil)})
		return
	}
	b.folder.reqc <- req
	b.foldLen = n
}

// installFold makes r the pod trie and keeps the log past the folded prefix,
// copied into a new log: earlier snapshots share the old one.
func (b *Builder) installFold(r foldResult) {
	if r.err != nil {
		panic(r.err)
	}
	tail, sums := b.podLog[b.foldLen:], b.podSum[b.foldLen:]
	b.pods = r.pods
	b.podLog = append(make([]podChange, 0, max(podLogCap, 2*len(tail))), tail...)
	b.podSum = append(make([]uint64, 0, cap(b.podLog)), sums...)
	b.foldLen = 0
}
