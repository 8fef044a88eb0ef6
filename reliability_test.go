package schedcache_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/cachetest"
	"github.com/schedcache/schedcache/internal/watchdog"
)

// A second RemoveNode of a ghost (a removed node that still holds pods)
// keeps upstream's effects (the ghost's generation moves, it keeps its
// pods and stays out of snapshots) and fails with a NodeError naming the
// node that matches ErrNodeNotFound (and the tree's ErrNodeNotInZone);
// a second RemoveNode of a node fully deleted changes nothing and fails
// with ErrNodeNotFound alone.
func TestRemoveNodeTwice(t *testing.T) {
	for _, zone := range []string{"", "z1"} {
		t.Run("zone="+zone, func(t *testing.T) {
			c := newCache(t)
			g, n := node("ghost", zone), node("gone", zone)
			_, err := c.AddNode(logger, g)
			require.NoError(t, err)
			_, err = c.AddNode(logger, n)
			require.NoError(t, err)
			require.NoError(t, c.AddPod(logger, pod("p", "ghost", 100)))
			require.NoError(t, c.RemoveNode(logger, g))
			require.NoError(t, c.RemoveNode(logger, n))

			before, err := c.GetNode("ghost")
			require.NoError(t, err)
			require.Nil(t, before.Node())
			err = c.RemoveNode(logger, g)
			require.Error(t, err)
			require.ErrorIs(t, err, schedcache.ErrNodeNotFound)
			require.ErrorIs(t, err, schedcache.ErrNodeNotInZone)
			var ne *schedcache.NodeError
			require.True(t, errors.As(err, &ne), "%T %v", err, err)
			require.Equal(t, "ghost", ne.Name)
			require.Equal(t, "RemoveNode", ne.Op)
			after, err := c.GetNode("ghost")
			require.NoError(t, err)
			require.Greater(t, after.Generation(), before.Generation(), "upstream bumps the ghost's generation")
			require.Equal(t, 1, after.NumPods())
			require.Equal(t, int64(100), after.Requested().MilliCPU)
			require.Equal(t, 1, c.NodeCount())
			require.Equal(t, 0, c.Snapshot().NumNodes())

			err = c.RemoveNode(logger, n)
			require.ErrorIs(t, err, schedcache.ErrNodeNotFound)
			require.NotErrorIs(t, err, schedcache.ErrNodeNotInZone)
			ne = nil
			require.True(t, errors.As(err, &ne), "%T %v", err, err)
			require.Equal(t, "gone", ne.Name)
			require.Equal(t, 1, c.NodeCount())
			_, err = c.GetNode("gone")
			require.ErrorIs(t, err, schedcache.ErrNodeNotFound)

			// The ghost's last pod leaving deletes it, as upstream.
			require.NoError(t, c.RemovePod(logger, pod("p", "ghost", 100)))
			require.Equal(t, 0, c.NodeCount())
			err = c.RemoveNode(logger, g)
			require.ErrorIs(t, err, schedcache.ErrNodeNotFound)
			require.True(t, errors.As(err, &ne))
			require.Equal(t, "ghost", ne.Name)
		})
	}
}

// Every async submission that returned nil is, after Close (or context
// cancellation) during a burst of submissions, either applied (visible in
// the last snapshot) or reported to the async error handler, exactly
// once, never both. Producers submit pods and nodes (applied unless
// refused by shutdown) and removals of unknown pods (always reported,
// failing in the coordinator). The handler is held on its first error
// until a producer sees ErrClosed, so the coordinator's later errors are
// still pending when shutdown starts; the coordinator is held inside its
// H-th operation until the mailbox is full, so shutdown also refuses
// queued operations. A shutdown that drops the pending errors, or the
// refused ops' errors, is caught.
func TestAsyncErrorsAtShutdown(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	const (
		producers = 4
		mailbox   = 64
		maxBatch  = 8
		holdAt    = 200 // the coordinator's op during which shutdown is requested
	)
	for _, viaCtx := range []bool{false, true} {
		for round := range rounds {
			t.Run(fmt.Sprintf("ctx=%v/round=%d", viaCtx, round), func(t *testing.T) {
				var ops atomic.Int64
				release := make(chan struct{})
				var releaseOnce sync.Once
				unhold := func() { releaseOnce.Do(func() { close(release) }) }
				defer unhold()
				gate := make(chan struct{})
				var gateOnce sync.Once
				openGate := func() { gateOnce.Do(func() { close(gate) }) }
				defer openGate()

				var mu sync.Mutex
				reports := map[string]int{} // "kind/pod or node" -> reports
				closedReports := 0
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				c, err := schedcache.New(ctx, schedcache.WithShards(2),
					schedcache.WithMailboxSize(mailbox), schedcache.WithMaxBatch(maxBatch),
					cachetest.WithFaultHooks(func(string) {
						if ops.Add(1) == holdAt {
							<-release
						}
					}, nil),
					schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
						<-gate
						key := e.Kind.String() + "/"
						if e.Pod != nil {
							key += string(e.Pod.UID)
						} else if e.Node != nil {
							key += e.Node.Name
						}
						mu.Lock()
						reports[key]++
						if errors.Is(e.Err, schedcache.ErrClosed) {
							closedReports++
						}
						mu.Unlock()
					}))
				require.NoError(t, err)
				_, err = c.AddNode(logger, node("n0", "z"))
				require.NoError(t, err)
				setupOps := ops.Load() // the hook counts the AddNode too

				type sub struct {
					key  string // as the handler builds it
					uid  string // AddPod: the pod; AddNode: ""
					node string // AddNode: the node
				}
				accepted := make([][]sub, producers)
				var nAccepted atomic.Int64
				var wg sync.WaitGroup
				for g := range producers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer openGate() // also if a producer stops on an unexpected error
						for k := 0; ; k++ {
							var s sub
							var err error
							switch k % 4 {
							case 0, 1:
								s.uid = fmt.Sprintf("p%d-%d", g, k)
								s.key = "AddPod/" + s.uid
								err = c.AddPodAsync(pod(s.uid, "n0", 1))
							case 2:
								uid := fmt.Sprintf("unknown%d-%d", g, k)
								s.key = "RemovePod/" + uid
								err = c.RemovePodAsync(pod(uid, "n0", 1))
							case 3:
								s.node = fmt.Sprintf("n%d-%d", g, k)
								s.key = "AddNode/" + s.node
								err = c.AddNodeAsync(node(s.node, fmt.Sprint("z", k%7)))
							}
							if err != nil {
								if !errors.Is(err, schedcache.ErrClosed) {
									t.Errorf("submission %s: %v", s.key, err)
								}
								return
							}
							accepted[g] = append(accepted[g], s)
							nAccepted.Add(1)
						}
					}()
				}
				// The coordinator holds inside op holdAt, having taken the
				// ops before it, it and at most maxBatch-1 more; once the
				// ops before it and it plus a full mailbox are accepted
				// (which must happen), at least mailbox-maxBatch+1 are
				// queued: shut down and let it go on.
				for nAccepted.Load() < holdAt-setupOps+mailbox {
					runtime.Gosched()
				}
				if viaCtx {
					cancel()
					unhold()
					watchdog.Recv(c.Done(), "the cache stopping")
				} else {
					closed := make(chan struct{})
					go func() { _ = c.Close(); close(closed) }()
					time.Sleep(time.Millisecond) // let Close start: not needed for the assertions
					unhold()
					watchdog.Recv(closed, "Close returning")
				}
				wg.Wait()

				snap := c.Snapshot()
				mu.Lock()
				defer mu.Unlock()
				applied, reported := 0, 0
				for _, subs := range accepted {
					for _, s := range subs {
						var in bool
						switch {
						case s.uid != "":
							_, ok := snap.Pod(s.uid)
							in = ok
						case s.node != "":
							_, err := snap.Get(s.node)
							in = err == nil
						}
						n := reports[s.key]
						switch {
						case in && n == 0:
							applied++
						case !in && n == 1:
							reported++
						default:
							t.Fatalf("%s: applied %v, reported %d times", s.key, in, n)
						}
						delete(reports, s.key)
					}
				}
				require.Empty(t, reports, "reports for submissions that were never accepted")
				require.Positive(t, applied)
				require.Greater(t, reported, applied/8, "the unknown-pod removals are reported")
				if viaCtx {
					// Deterministic: shutdown started while at least
					// mailbox-maxBatch ops were queued.
					require.GreaterOrEqual(t, closedReports, mailbox-maxBatch)
				}
				t.Logf("accepted %d: applied %d, reported %d (%d with ErrClosed)", nAccepted.Load(), applied, reported, closedReports)
			})
		}
	}
}

// Pod amounts beyond MaxPodQuantity are refused by every call that takes
// a pod's requests, with a *QuantityError naming the pod, the resource
// and the amount, and nothing changes; at the bound they are accepted and
// summed exactly. Without the bound two pods of MaxInt64 millicores (a
// huge request saturates there) made their node's cpu read -2. A node
// allocatable at MaxInt64 is kept exactly.
func TestQuantityOverflowRefused(t *testing.T) {
	var asyncErrs []schedcache.AsyncError
	var mu sync.Mutex
	c := newCache(t, schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
		mu.Lock()
		asyncErrs = append(asyncErrs, e)
		mu.Unlock()
	}))
	n := node("n", "z")
	n.Status.Allocatable[v1.ResourceCPU] = *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	n.Status.Allocatable[v1.ResourceMemory] = *resource.NewQuantity(math.MaxInt64, resource.BinarySI)
	_, err := c.AddNode(logger, n)
	require.NoError(t, err)

	atBound := pod("at", "n", schedcache.MaxPodQuantity)
	require.NoError(t, c.AddPod(logger, atBound))
	require.NoError(t, c.AssumePod(logger, pod("at2", "n", schedcache.MaxPodQuantity)))
	before, err := c.Dump()
	require.NoError(t, err)
	snapBefore := c.Snapshot()

	check := func(op string, err error, uid string, value int64) {
		t.Helper()
		require.ErrorIs(t, err, schedcache.ErrQuantityOverflow, op)
		var qe *schedcache.QuantityError
		require.True(t, errors.As(err, &qe), "%s: %T %v", op, err, err)
		require.Equal(t, uid, qe.Key, op)
		require.Equal(t, "ns/"+uid, qe.Pod, op)
		require.Equal(t, v1.ResourceCPU, qe.Resource, op)
		require.Equal(t, value, qe.Value, op)
	}
	over := pod("over", "n", schedcache.MaxPodQuantity+1)
	check("AssumePod", c.AssumePod(logger, over), "over", schedcache.MaxPodQuantity+1)
	check("AddPod", c.AddPod(logger, over), "over", schedcache.MaxPodQuantity+1)
	check("AddPod 2^62", c.AddPod(logger, pod("big", "n", 1<<62)), "big", 1<<62)
	check("UpdatePod", c.UpdatePod(logger, atBound, pod("at", "n", schedcache.MaxPodQuantity+1)), "at", schedcache.MaxPodQuantity+1)
	check("AddPod negative", c.AddPod(logger, pod("neg", "n", -schedcache.MaxPodQuantity-1)), "neg", -schedcache.MaxPodQuantity-1)
	check("AddPodAsync", c.AddPodAsync(over), "over", schedcache.MaxPodQuantity+1)
	check("UpdatePodAsync", c.UpdatePodAsync(atBound, pod("at", "n", math.MaxInt64)), "at", math.MaxInt64)
	require.NoError(t, c.Sync())

	after, err := c.Dump()
	require.NoError(t, err)
	require.Equal(t, before.AssumedPods, after.AssumedPods)
	require.Equal(t, before.Nodes["n"].Generation(), after.Nodes["n"].Generation(), "state changed")
	require.Same(t, snapBefore, c.Snapshot(), "a refused call published a snapshot")
	ni, err := c.Snapshot().Get("n")
	require.NoError(t, err)
	require.Equal(t, 2*schedcache.MaxPodQuantity, ni.Requested().MilliCPU)
	require.Equal(t, int64(math.MaxInt64), ni.Allocatable().MilliCPU)
	require.Equal(t, int64(math.MaxInt64), ni.Allocatable().Memory)
	require.Equal(t, 2, ni.NumPods())
	mu.Lock()
	require.Empty(t, asyncErrs, "refused before submission: nothing reaches the handler")
	mu.Unlock()
}

// NewSnapshot skips a pod whose amounts are beyond MaxPodQuantity and
// reports it through the snapshot's Err; the other pods are aggregated.
func TestNewSnapshotRefusesOverflow(t *testing.T) {
	s := schedcache.NewSnapshot([]*v1.Pod{pod("ok", "n", schedcache.MaxPodQuantity), pod("over", "n", math.MaxInt64)},
		[]*v1.Node{node("n", "z")})
	require.ErrorIs(t, s.Err(), schedcache.ErrQuantityOverflow)
	var qe *schedcache.QuantityError
	require.True(t, errors.As(s.Err(), &qe))
	require.Equal(t, "over", qe.Key)
	ni, err := s.Get("n")
	require.NoError(t, err)
	require.Equal(t, 1, ni.NumPods())
	require.Equal(t, schedcache.MaxPodQuantity, ni.Requested().MilliCPU)
	_, ok := s.Pod("over")
	require.False(t, ok)
	require.NoError(t, schedcache.NewSnapshot([]*v1.Pod{pod("ok", "n", 1)}, nil).Err())
}
