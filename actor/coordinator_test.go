package actor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/shard"
)

// A batch is taken from the mailbox in chunks of prefetchChunk ops, each
// prefetched and then applied in order. Chunk boundaries must not show:
// with the coordinator held inside its first op while the mailbox fills
// with several chunks' worth of async ops, sync barriers and failing ops at
// known positions, every barrier sees exactly the ops queued before it,
// every failure is reported for its own op, and the final state holds
// every successful op.
func TestBatchChunksKeepOrder(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var asyncErrs []AsyncError
	a := Start(context.Background(), Options{
		Shards:      2,
		MailboxSize: 1024,
		MaxBatch:    256,
		faults: faultHooks{op: func(*Op) {
			once.Do(func() {
				close(entered)
				<-release
			})
		}},
		OnAsyncError: func(e AsyncError) {
			mu.Lock()
			asyncErrs = append(asyncErrs, e)
			mu.Unlock()
		},
	})
	defer a.Stop()

	submit := func(op *Op) { require.NoError(t, a.Submit(op)) }
	addNode := func(name string) *Op {
		op := a.NewOp()
		op.Kind, op.Node = OpAddNode, testNode(name, "z")
		return op
	}
	addPod := func(uid, node string) *Op {
		op := a.NewOp()
		op.Kind, op.Info = OpAddPod, testPod(t, uid, node, 10)
		op.Key = op.Info.Key()
		return op
	}
	// queued waits until the mailbox holds n ops, so that a synchronous
	// call started in a goroutine takes its place in the order.
	queued := func(n int) {
		require.Eventually(t, func() bool { return len(a.mailbox) == n }, 10*time.Second, time.Millisecond)
	}
	type syncResult struct {
		pos int
		res Result
	}
	results := make(chan syncResult, 8)
	do := func(pos int, op *Op) {
		go func() {
			res := a.Do(op)
			a.PutOp(op)
			results <- syncResult{pos, res}
		}()
		queued(pos + 1)
	}

	submit(addNode("n1")) // the coordinator takes it and waits in the hook
	watchdog.Recv(entered, "the coordinator entering the hook")
	pos := 0
	for i := range 70 { // more than two chunks
		submit(addPod(fmt.Sprintf("a%d", i), "n1"))
		pos++
	}
	get := a.NewOp()
	get.Kind, get.Name = OpGetNode, "n1"
	do(pos, get) // barrier after 70 pods
	pos++
	for i := range 40 {
		if i == 5 { // a failure in the middle of a chunk: "a3" is already added
			submit(addPod("a3", "n1"))
		} else {
			submit(addPod(fmt.Sprintf("b%d", i), "n1"))
		}
		pos++
	}
	do(pos, addNode("n2")) // a synchronous AddNode flushes mid-batch
	pos++
	for i := range 30 {
		submit(addPod(fmt.Sprintf("c%d", i), "n2"))
		pos++
	}
	get2 := a.NewOp()
	get2.Kind, get2.Name = OpGetNode, "n1"
	do(pos, get2) // barrier after 70 + 39 pods on n1
	close(release)

	got := map[int]Result{}
	for range 3 {
		r := watchdog.Recv(results, "a result")
		got[r.pos] = r.res
	}
	require.NoError(t, got[70].Err)
	require.Equal(t, 70, got[70].Node.NumPods(), "the first barrier sees exactly the 70 pods queued before it")
	require.NoError(t, got[111].Err)
	require.Equal(t, "n2", got[111].Node.NodeName())
	require.NoError(t, got[142].Err)
	require.Equal(t, 109, got[142].Node.NumPods(), "the second barrier sees the 39 later pods too, not the duplicate")

	barrier := a.NewOp()
	barrier.Kind = OpSync
	require.NoError(t, a.Do(barrier).Err)
	a.PutOp(barrier)
	snap := a.Snapshot()
	require.Equal(t, 139, snap.PodCount())
	n2, err := snap.Get("n2")
	require.NoError(t, err)
	require.Equal(t, 30, n2.NumPods())

	a.Stop() // delivers the async errors still queued
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, asyncErrs, 1)
	require.Equal(t, OpAddPod, asyncErrs[0].Kind)
	require.Equal(t, "a3", string(asyncErrs[0].Pod.UID))
	require.ErrorIs(t, asyncErrs[0].Err, ErrPodAlreadyAdded)
}

// A panic in the prefetch of a chunk (a bug: it only reads) is recovered
// like one in an op: the cache reports itself failed with a *PanicError,
// every caller of the chunk gets that error, and nothing of the chunk is
// published.
func TestPrefetchPanicFailsCache(t *testing.T) {
	prefetchHook = func() { panic("prefetch bug") }
	defer func() { prefetchHook = nil }()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a := Start(context.Background(), Options{Shards: 1, faults: faultHooks{op: func(*Op) {
		once.Do(func() {
			close(entered)
			<-release
		})
	}}})
	defer a.Stop()
	op := a.NewOp()
	op.Kind, op.Node = OpAddNode, testNode("n", "z")
	require.NoError(t, a.Submit(op)) // held in the hook: a chunk of one, not prefetched
	watchdog.Recv(entered, "the coordinator entering the hook")
	results := make(chan error, 8)
	for i := range 8 {
		go func() {
			op := a.NewOp()
			op.Kind, op.Info = OpAddPod, testPod(t, fmt.Sprint("p", i), "n", 10)
			op.Key = op.Info.Key()
			results <- a.Do(op).Err
		}()
	}
	require.Eventually(t, func() bool { return len(a.mailbox) == 8 }, 10*time.Second, time.Millisecond)
	close(release)
	for range 8 {
		err := watchdog.Recv(results, "a result")
		var failed *FailedError
		require.ErrorAs(t, err, &failed)
		var pe *shard.PanicError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "prefetch bug", pe.Value)
	}
	require.Error(t, a.Failed())
	require.Zero(t, a.Snapshot().PodCount(), "nothing of the failed chunk is published")
}
