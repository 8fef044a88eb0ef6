package actor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/shard"
)

// startWatched starts a coordinator with two shards whose hooks record the
// goroutine that last applied an op (opG) and the one that last served a
// shard request (shardG).
func startWatched() (a *Coordinator, opG, shardG *atomic.Int64) {
	opG, shardG = new(atomic.Int64), new(atomic.Int64)
	a = Start(context.Background(), Options{
		Shards: 2,
		faults: faultHooks{
			op:    func(*Op) { opG.Store(goid()) },
			shard: func(int, shard.Request) { shardG.Store(goid()) },
		},
	})
	return a, opG, shardG
}

// A synchronous op on an idle coordinator runs on the caller's goroutine
// (no hand-off), and so do the shard requests of its publication; once
// ops are queued, a synchronous op goes through the mailbox and the run
// goroutine applies it after them.
func TestDoRunsInlineWhenIdle(t *testing.T) {
	a, opG, shardG := startWatched()
	defer a.Stop()
	me := goid()

	op := a.NewOp()
	op.Kind, op.Node = OpAddNode, testNode("n", "z")
	res := a.Do(op)
	a.PutOp(op)
	require.NoError(t, res.Err)
	require.NotNil(t, res.Node, "AddNode returns the published NodeInfo")
	require.Equal(t, me, opG.Load(), "the op ran on the caller's goroutine")
	require.Equal(t, me, shardG.Load(), "the shard request ran on the caller's goroutine")

	op = a.NewOp()
	op.Kind, op.Info = OpAssumePod, testPod(t, "p", "n", 100)
	op.Key = op.Info.Key()
	require.NoError(t, a.Do(op).Err)
	a.PutOp(op)
	got, err := a.Snapshot().Get("n")
	require.NoError(t, err)
	require.Len(t, got.Pods(), 1, "read-your-writes: published before Do returned")
	require.Equal(t, uint64(2), a.Stats().Publications)

	// Barriers keep the mailbox: run serves them.
	op = a.NewOp()
	op.Kind, op.Name = OpGetNode, "n"
	opG.Store(0)
	require.NoError(t, a.Do(op).Err)
	a.PutOp(op)
	require.Zero(t, opG.Load(), "GetNode applies nothing: no hook")
}

// An op taken from the mailbox by the run goroutine counts as queued until
// it is published, so an inline call made after it (the same goroutine
// submitting async and then calling synchronously) cannot overtake it,
// even while run waits for the token.
func TestInlineDoesNotOvertakeQueuedOps(t *testing.T) {
	a := Start(context.Background(), Options{Shards: 1})
	defer a.Stop()

	<-a.token // the test plays a caller running inline
	add := a.NewOp()
	add.Kind, add.Node = OpAddNode, testNode("n", "z")
	require.NoError(t, a.Submit(add))
	// run takes it and waits for the token.
	require.Eventually(t, func() bool { return len(a.mailbox) == 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, int64(1), a.queued.Load())

	op := a.NewOp()
	op.Kind, op.Info = OpAssumePod, testPod(t, "p", "n", 100)
	op.Key = op.Info.Key()
	require.False(t, a.runInline(op), "an op is queued: the caller must take the mailbox")
	// runInline gave the token back: run applies AddNode, and the AssumePod
	// queued after it finds the node.
	res := a.Do(op)
	a.PutOp(op)
	require.NoError(t, res.Err)
	ni, err := a.Snapshot().Get("n")
	require.NoError(t, err)
	require.Len(t, ni.Pods(), 1)
	require.Zero(t, a.queued.Load(), "every queued op was published")
}

// A fault in an op run inline fails the cache as one in a batch does: the
// caller gets a *FailedError carrying the panic, nothing of the op is
// published, later calls get the failure through the run goroutine's
// failure mode, and Stop still stops every goroutine (goleak checks).
func TestInlineFaultFailsCache(t *testing.T) {
	var boom atomic.Bool
	a := Start(context.Background(), Options{Shards: 2, faults: faultHooks{op: func(op *Op) {
		if boom.Load() {
			panic("inline bug")
		}
	}}})
	defer a.Stop()
	op := a.NewOp()
	op.Kind, op.Node = OpAddNode, testNode("n", "z")
	require.NoError(t, a.Do(op).Err)
	a.PutOp(op)
	before := a.Snapshot()

	boom.Store(true)
	op = a.NewOp()
	op.Kind, op.Info = OpAssumePod, testPod(t, "p", "n", 100)
	op.Key = op.Info.Key()
	err := a.Do(op).Err
	a.PutOp(op)
	var failed *FailedError
	require.ErrorAs(t, err, &failed)
	var pe *shard.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "inline bug", pe.Value)
	require.ErrorIs(t, a.Failed(), ErrFailed)
	require.Same(t, before, a.Snapshot(), "nothing was published")

	for _, sync := range []bool{true, false} {
		op = a.NewOp()
		op.Kind, op.Info = OpAddPod, testPod(t, "q", "n", 100)
		op.Key = op.Info.Key()
		if sync {
			err = a.Do(op).Err
			a.PutOp(op)
		} else {
			err = a.Submit(op)
		}
		require.True(t, errors.As(err, &failed), "sync=%v: %v", sync, err)
		require.Same(t, failed, a.Failed(), "one failure, the first cause")
	}
	// A barrier reaches the run goroutine, which has switched to its
	// failure mode.
	op = a.NewOp()
	op.Kind = OpSync
	require.ErrorIs(t, a.Do(op).Err, ErrFailed)
	a.PutOp(op)
}

// Stop waits for a caller running inline, which publishes its op; calls
// after Stop are refused with ErrClosed without running inline.
func TestStopWaitsForInlineCaller(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var hold atomic.Bool
	a := Start(context.Background(), Options{Shards: 1, faults: faultHooks{op: func(op *Op) {
		if hold.Load() && op.Kind == OpAddNode {
			close(entered)
			<-release
		}
	}}})
	hold.Store(true)
	done := make(chan Result, 1)
	go func() {
		op := a.NewOp()
		op.Kind, op.Node = OpAddNode, testNode("n", "z")
		done <- a.Do(op)
	}()
	watchdog.Recv(entered, "the inline caller entering the hook")
	stopped := make(chan struct{})
	go func() { a.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a caller held the token")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	require.NoError(t, watchdog.Recv(done, "the inline op's result").Err, "the inline op was applied before the stop")
	watchdog.Recv(stopped, "Stop returning")
	_, err := a.Snapshot().Get("n")
	require.NoError(t, err, "and published")
	op := a.NewOp()
	op.Kind, op.Info = OpAssumePod, testPod(t, "p", "n", 100)
	op.Key = op.Info.Key()
	require.ErrorIs(t, a.Do(op).Err, ErrClosed)
}

// A token that is never given back (a fault path that forgets it, say)
// stalls every later call: the test binary's watchdog fails the waiting
// caller within its limit, with a *watchdog.StallError naming the wait
// and a dump naming the goroutine stuck on the token, instead of a hang
// until the binary's -timeout.
func TestLostTokenFailsFast(t *testing.T) {
	a := Start(context.Background(), Options{Shards: 1})
	defer a.Stop()
	<-a.token // a holder that never gives it back

	var dump bytes.Buffer
	restore := watchdog.Override(200*time.Millisecond, &dump)
	op := a.NewOp()
	op.Kind, op.Node = OpAddNode, testNode("n", "z")
	var stall *watchdog.StallError
	start := time.Now()
	func() {
		defer func() { stall, _ = recover().(*watchdog.StallError) }()
		a.Do(op)
	}()
	restore()
	require.NotNil(t, stall, "the call stalled and the watchdog said so")
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, "waiting for the reply to AddNode", stall.What)
	require.Contains(t, dump.String(), "(*Coordinator).lock", "the dump names run waiting for the token")

	a.token <- struct{}{} // give it back: run applies the op and Stop ends cleanly
	require.NoError(t, watchdog.Recv(op.reply, "reply").Err)
}

// The run goroutine serves the shards of a small epoch (at most
// smallEpochMuts mutations) on its own goroutine, as a caller running
// inline does, and hands a larger one to the shard goroutines, which
// freeze their entries in parallel.
func TestRunServesSmallEpochs(t *testing.T) {
	a, opG, shardG := startWatched()
	defer a.Stop()
	submit := func(n int, prefix string) {
		for i := range n {
			op := a.NewOp()
			op.Kind, op.Node = OpAddNode, testNode(fmt.Sprintf("%s%d", prefix, i), "z")
			require.NoError(t, a.Submit(op))
		}
	}
	sync := func() {
		op := a.NewOp()
		op.Kind = OpSync
		require.NoError(t, a.Do(op).Err)
		a.PutOp(op)
	}

	submit(1, "small")
	sync()
	require.Equal(t, opG.Load(), shardG.Load(), "a one-op epoch: run served the shards")

	<-a.token // the test plays a caller running inline: the ops pile up
	submit(smallEpochMuts+8, "big")
	require.Eventually(t, func() bool { return len(a.mailbox) == smallEpochMuts+7 }, 10*time.Second, time.Millisecond, "run took the first and waits for the token")
	a.token <- struct{}{}
	sync()
	require.NotEqual(t, opG.Load(), shardG.Load(), "a large epoch: the shard goroutines froze it")
	require.Equal(t, uint64(smallEpochMuts+9), a.Stats().Ops[OpAddNode])
}
