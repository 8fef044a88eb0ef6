package shard

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache/nodeinfo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func podInfo(t *testing.T, uid string, milli int64) *nodeinfo.PodInfo {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}}}}}}
	pi, err := nodeinfo.NewPodInfo(p)
	require.NoError(t, err)
	return pi
}

func newGen() func() int64 {
	var g atomic.Int64
	return func() int64 { return g.Add(1) }
}

// Flush freezes exactly the entries changed since the previous Flush, in
// first-change order; nodeless and deleted entries freeze to nil.
func TestCoreFlushDirtyOnly(t *testing.T) {
	c := NewCore(newGen())
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	require.NoError(t, c.Apply([]Mutation{
		{Kind: Create, Slot: 3}, {Kind: SetNode, Slot: 3, Node: node},
		{Kind: Create, Slot: 1}, // nodeless
		{Kind: AddPod, Slot: 3, Pod: podInfo(t, "a", 100)},
		{Kind: AddPod, Slot: 1, Pod: podInfo(t, "b", 50)},
	}))
	fs := append([]Frozen(nil), c.Flush()...)
	require.Len(t, fs, 2)
	require.Equal(t, int32(3), fs[0].Slot)
	require.Equal(t, int64(100), fs[0].Info.Requested().MilliCPU)
	require.Equal(t, int32(1), fs[1].Slot)
	require.Nil(t, fs[1].Info, "nodeless entries never reach snapshots")
	require.Empty(t, c.Flush(), "nothing changed since")

	held := fs[0].Info
	require.NoError(t, c.Apply([]Mutation{{Kind: RemovePod, Slot: 3, Key: "a"}, {Kind: Delete, Slot: 1}}))
	fs = c.Flush()
	require.Len(t, fs, 2)
	require.Equal(t, 0, fs[0].Info.NumPods())
	require.Nil(t, fs[1].Info)
	require.Equal(t, int64(100), held.Requested().MilliCPU, "a frozen NodeInfo never changes")
	require.Greater(t, fs[0].Info.Generation(), held.Generation())
	require.Equal(t, 1, c.Len())
}

// A mutation that contradicts the state is an *InvariantError naming it;
// the mutations before it stay applied.
func TestCoreInvariantErrors(t *testing.T) {
	c := NewCore(newGen())
	err := c.Apply([]Mutation{{Kind: Create, Slot: 0}, {Kind: Create, Slot: 0}})
	var ie *InvariantError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, Create, ie.Mutation)
	require.Equal(t, 1, c.Len())
	err = c.Apply([]Mutation{{Kind: RemovePod, Slot: 0, Key: "ghost"}})
	require.ErrorIs(t, err, nodeinfo.ErrPodNotOnNode)
	err = c.Apply([]Mutation{{Kind: AddPod, Slot: 9, Pod: podInfo(t, "x", 1)}})
	require.ErrorAs(t, err, &ie)
	require.Equal(t, int32(9), ie.Slot)
	err = c.Apply([]Mutation{{Kind: Create, Slot: -1}})
	require.ErrorAs(t, err, &ie)
	require.Equal(t, int32(-1), ie.Slot)
	require.Nil(t, c.Get(-1))
	require.Equal(t, 1, c.Len(), "refused mutations leave the entries as they were")
}

// Slots may arrive sparse (the other shards own the holes), be deleted and
// be created again: Len, Get, Dump and Flush see exactly the live ones.
func TestCoreSparseSlots(t *testing.T) {
	c := NewCore(newGen())
	require.NoError(t, c.Apply([]Mutation{{Kind: Create, Slot: 7}, {Kind: Create, Slot: 2}, {Kind: AddPod, Slot: 7, Pod: podInfo(t, "a", 3)}}))
	require.Equal(t, 2, c.Len())
	require.Nil(t, c.Get(5), "a hole has no entry")
	require.Nil(t, c.Get(100), "past the end has no entry")
	c.Flush()
	require.NoError(t, c.Apply([]Mutation{{Kind: Delete, Slot: 7}, {Kind: Create, Slot: 7}, {Kind: AddPod, Slot: 7, Pod: podInfo(t, "b", 4)}}))
	fs := c.Flush()
	require.Len(t, fs, 1, "one slot changed three times is frozen once")
	require.Equal(t, int32(7), fs[0].Slot)
	require.Equal(t, int64(4), c.Get(7).Requested().MilliCPU, "the re-created entry starts empty")
	d := c.Dump()
	require.Len(t, d, 2)
	require.Contains(t, d, int32(2))
	require.Contains(t, d, int32(7))
	require.NoError(t, c.Apply([]Mutation{{Kind: Delete, Slot: 2}}))
	require.Equal(t, 1, c.Len())
	require.Len(t, c.Dump(), 1)
}

func TestCoreGetAndDump(t *testing.T) {
	c := NewCore(newGen())
	require.NoError(t, c.Apply([]Mutation{{Kind: Create, Slot: 0}, {Kind: AddPod, Slot: 0, Pod: podInfo(t, "a", 7)}}))
	require.Equal(t, int64(7), c.Get(0).Requested().MilliCPU)
	require.Nil(t, c.Get(1))
	d := c.Dump()
	require.Len(t, d, 1)
	require.Nil(t, d[0].Node(), "Dump includes nodeless entries")
}

// The actor serves requests in order, Stop is a handshake, and a panic
// becomes a sticky *PanicError instead of killing the process.
func TestShardActor(t *testing.T) {
	var boom atomic.Bool
	s := Start("shard 0", NewCore(newGen()), func(Request) {
		if boom.Load() {
			panic("injected")
		}
	})
	r := s.Do(Request{Muts: []Mutation{{Kind: Create, Slot: 0}, {Kind: AddPod, Slot: 0, Pod: podInfo(t, "a", 5)}}, Get: true, Slot: 0})
	require.NoError(t, r.Err)
	require.Equal(t, int64(5), r.Node.Requested().MilliCPU)
	boom.Store(true)
	r = s.Do(Request{Flush: true})
	var pe *PanicError
	require.ErrorAs(t, r.Err, &pe)
	require.Equal(t, "injected", pe.Value)
	require.Equal(t, "shard 0", pe.Actor)
	boom.Store(false)
	r = s.Do(Request{Flush: true})
	require.ErrorAs(t, r.Err, &pe, "a failed shard refuses every later request")
	s.Stop()
	s.Stop() // idempotent
	require.True(t, errors.Is(s.Do(Request{}).Err, ErrStopped))
}

// Apply works through its mutations in prefetched chunks; the chunks must
// not show. A batch several chunks long, whose mutation in the middle of
// the second chunk contradicts the state, stops exactly there: the
// mutations before it are applied, the ones after are not, and the error
// names the failing mutation. Applied one at a time, the same mutations
// leave the same state.
func TestCoreApplyChunks(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	var muts []Mutation
	for slot := int32(0); slot < 8; slot++ {
		muts = append(muts, Mutation{Kind: Create, Slot: slot}, Mutation{Kind: SetNode, Slot: slot, Node: node})
	}
	for i := range prefetchChunk { // triples on one slot: add two pods, remove the first
		slot := int32(i % 8)
		a, b := podInfo(t, fmt.Sprint("a", i), int64(i+1)), podInfo(t, fmt.Sprint("b", i), int64(i+2))
		muts = append(muts, Mutation{Kind: AddPod, Slot: slot, Pod: a}, Mutation{Kind: AddPod, Slot: slot, Pod: b},
			Mutation{Kind: RemovePod, Slot: slot, Pod: a, Key: a.Key()})
	}
	bad := prefetchChunk + prefetchChunk/2
	require.NotEqual(t, 0, bad/prefetchChunk, "the failure is past the first chunk")
	muts[bad] = Mutation{Kind: RemovePod, Slot: muts[bad].Slot, Key: "absent"}

	chunked := NewCore(newGen())
	err := chunked.Apply(muts)
	var inv *InvariantError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, RemovePod, inv.Mutation)
	require.Equal(t, muts[bad].Slot, inv.Slot)

	single := NewCore(newGen())
	for i := range muts[:bad] {
		require.NoError(t, single.Apply(muts[i:i+1]), "mutation %d", i)
	}
	require.Error(t, single.Apply(muts[bad:bad+1]))
	for slot := int32(0); slot < 8; slot++ {
		want, got := single.Get(slot), chunked.Get(slot)
		require.Equal(t, want.NumPods(), got.NumPods(), "slot %d", slot)
		require.Equal(t, want.Requested(), got.Requested(), "slot %d", slot)
		for i := range want.NumPods() {
			require.Same(t, want.PodAt(i), got.PodAt(i), "slot %d pod %d", slot, i)
		}
	}
}
