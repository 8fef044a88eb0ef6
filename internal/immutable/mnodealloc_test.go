package immutable

import (
	"math/bits"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// ptrVal is a value type holding a pointer: p is never read, it only makes
// the arrays pointer-bearing.
type ptrVal struct {
	p *int //lint:ignore U1000 present for its type only
	b bool
}

// TestNodeAllocCapacities asks for every pair of capacities: the slices are
// empty, have exactly the capacity asked for (nil for 0), and the larger
// array by bytes, if it fits inline, starts right after the node in the
// same object.
func TestNodeAllocCapacities(t *testing.T) {
	testNodeAllocCapacities[int](t)
	testNodeAllocCapacities[ptrVal](t)
	testNodeAllocCapacities[struct{}](t)
}

func testNodeAllocCapacities[V any](t *testing.T) {
	a := allocsFor[V]()
	require.Same(t, a, allocsFor[V](), "one table per value type")
	const tok = editToken(7)
	esz, ksz := unsafe.Sizeof(mentry[V]{}), unsafe.Sizeof((*mnode[V])(nil))
	for ne := range maxInline + 4 {
		for nk := range maxInline + 4 {
			n := a.node(tok, ne, nk)
			require.Equal(t, tok, n.edit)
			require.Zero(t, n.datamap|n.nodemap)
			require.Empty(t, n.entries)
			require.Empty(t, n.kids)
			require.Equal(t, ne, cap(n.entries), "entries cap for %d/%d", ne, nk)
			require.Equal(t, nk, cap(n.kids), "kids cap for %d/%d", ne, nk)
			require.Equal(t, ne == 0, n.entries == nil)
			require.Equal(t, nk == 0, n.kids == nil)

			after := uintptr(unsafe.Pointer(n)) + unsafe.Sizeof(mnode[V]{})
			inlineE := ne > 0 && ne <= maxInline && uintptr(ne)*esz >= uintptr(nk)*ksz
			inlineK := !inlineE && nk > 0 && nk <= maxInline
			if inlineE {
				require.Equal(t, after, uintptr(unsafe.Pointer(unsafe.SliceData(n.entries[:1]))), "entries inline for %d/%d", ne, nk)
			}
			if inlineK {
				require.Equal(t, after, uintptr(unsafe.Pointer(unsafe.SliceData(n.kids[:1]))), "kids inline for %d/%d", ne, nk)
			}
		}
	}
}

// pathAllocs is what copying the path to key's node costs: one object per
// node, two for a node that holds both entries and kids.
func pathAllocs[V any](m Map[V], key string) int {
	h := hashKey(key)
	allocs := 0
	n := m.root
	for shift := uint(0); n != nil; shift += levelBits {
		allocs++
		if len(n.entries) > 0 && len(n.kids) > 0 {
			allocs++
		}
		if shift >= 64 {
			break
		}
		bit := uint32(1) << ((h >> shift) & levelMask)
		if n.nodemap&bit == 0 {
			break
		}
		n = n.kids[bits.OnesCount32(n.nodemap&(bit-1))]
	}
	return allocs
}

// TestMapPathCopyAllocs updates keys of a shared version: the edit
// allocates exactly one object per node on the key's path (two for a node
// with both entries and kids) and nothing else.
func TestMapPathCopyAllocs(t *testing.T) {
	e := Map[ptrVal]{}.Edit()
	for i := range 20000 {
		e.Set(strconv.Itoa(i), ptrVal{})
	}
	m := e.Done()
	var ed MapEditor[ptrVal]
	for _, k := range []string{"0", "17", "4242", "19999"} {
		want := pathAllocs(m, k)
		require.GreaterOrEqual(t, want, 3, "a 20,000-key trie is at least 3 deep")
		got := testing.AllocsPerRun(50, func() {
			m.EditInto(&ed)
			ed.Set(k, ptrVal{b: true})
			ed.Done()
		})
		require.Equal(t, float64(want), got, "key %s", k)
	}
}

// TestMapTransientGrowth inserts 32 keys into one node within one edit:
// the node grows by doubling, so the edit allocates O(log 32) objects, and
// the result is exact.
func TestMapTransientGrowth(t *testing.T) {
	setHash(t, func(k string) uint64 {
		i, _ := strconv.Atoi(k)
		return uint64(i) // keys 0..31: one root slot each
	})
	build := func() Map[int] {
		e := Map[int]{}.Edit()
		for i := range width {
			e.Set(strconv.Itoa(i), i)
		}
		return e.Done()
	}
	allocs := testing.AllocsPerRun(20, func() { build() })
	// At most the editor and the root at capacities 1, 2, 4, 8, 16 and 32.
	require.LessOrEqual(t, allocs, 7.0)
	m := build()
	require.Equal(t, width, m.Len())
	require.Len(t, m.root.entries, width)
	require.Empty(t, m.root.kids)
	for i := range width {
		v, ok := m.Get(strconv.Itoa(i))
		require.True(t, ok)
		require.Equal(t, i, v)
	}
	// Copies of a shared node are exact: an update copies 32 entries into a
	// 32-entry array.
	e := m.Edit()
	e.Set("3", -3)
	m2 := e.Done()
	require.Equal(t, width, cap(m2.root.entries))
	v, _ := m.Get("3")
	require.Equal(t, 3, v, "the shared version is unchanged")
}
