package immutable

import (
	"reflect"
	"sync"
	"unsafe"
)

// A trie node and its larger array are allocated as one object, so that a
// path copy costs one allocation per node instead of two or three (a node
// holding both entries and kids gets its smaller array separately). The
// object is a nodeWith[V, [n]T]: a node followed by an array of exactly the
// capacity asked for, so the GC knows every pointer word and no slot is
// wasted beyond the allocator's size class. The node's slice points into
// the array; an interior pointer keeps the whole object alive, as for any
// Go object.

// maxInline is the longest array a node object holds: a node's 32 slots,
// plus one that growCap's doubling may reach. Longer arrays (collision
// nodes only) are allocated separately.
const maxInline = width + 1

type nodeWith[V, A any] struct {
	n mnode[V]
	a A
}

// nodeAllocs holds the constructors of one value type, by array length.
// Contract: immutable once built by allocsFor; any number of editors on any
// goroutines share it.
type nodeAllocs[V any] struct {
	withEntries [maxInline + 1]func() (*mnode[V], []mentry[V])
	withKids    [maxInline + 1]func() (*mnode[V], []*mnode[V])
}

func allocE[V, A any]() (*mnode[V], []mentry[V]) {
	b := new(nodeWith[V, A])
	n := int(unsafe.Sizeof(b.a) / unsafe.Sizeof(mentry[V]{}))
	return &b.n, unsafe.Slice((*mentry[V])(unsafe.Pointer(&b.a)), n)[:0]
}

func allocK[V, A any]() (*mnode[V], []*mnode[V]) {
	b := new(nodeWith[V, A])
	n := int(unsafe.Sizeof(b.a) / unsafe.Sizeof((*mnode[V])(nil)))
	return &b.n, unsafe.Slice((**mnode[V])(unsafe.Pointer(&b.a)), n)[:0]
}

// allocTables maps reflect.TypeFor[V]() to its *nodeAllocs[V].
var allocTables sync.Map

// allocsFor returns the constructor table of V.
func allocsFor[V any]() *nodeAllocs[V] {
	t := reflect.TypeFor[V]()
	if a, ok := allocTables.Load(t); ok {
		return a.(*nodeAllocs[V])
	}
	a := &nodeAllocs[V]{
		withEntries: [maxInline + 1]func() (*mnode[V], []mentry[V]){nil,
			allocE[V, [1]mentry[V]],
			allocE[V, [2]mentry[V]],
			allocE[V, [3]mentry[V]],
			allocE[V, [4]mentry[V]],
			allocE[V, [5]mentry[V]],
			allocE[V, [6]mentry[V]],
			allocE[V, [7]mentry[V]],
			allocE[V, [8]mentry[V]],
			allocE[V, [9]mentry[V]],
			allocE[V, [10]mentry[V]],
			allocE[V, [11]mentry[V]],
			allocE[V, [12]mentry[V]],
			allocE[V, [13]mentry[V]],
			allocE[V, [14]mentry[V]],
			allocE[V, [15]mentry[V]],
			allocE[V, [16]mentry[V]],
			allocE[V, [17]mentry[V]],
			allocE[V, [18]mentry[V]],
			allocE[V, [19]mentry[V]],
			allocE[V, [20]mentry[V]],
			allocE[V, [21]mentry[V]],
			allocE[V, [22]mentry[V]],
			allocE[V, [23]mentry[V]],
			allocE[V, [24]mentry[V]],
			allocE[V, [25]mentry[V]],
			allocE[V, [26]mentry[V]],
			allocE[V, [27]mentry[V]],
			allocE[V, [28]mentry[V]],
			allocE[V, [29]mentry[V]],
			allocE[V, [30]mentry[V]],
			allocE[V, [31]mentry[V]],
			allocE[V, [32]mentry[V]],
			allocE[V, [33]mentry[V]],
		},
		withKids: [maxInline + 1]func() (*mnode[V], []*mnode[V]){nil,
			allocK[V, [1]*mnode[V]],
			allocK[V, [2]*mnode[V]],
			allocK[V, [3]*mnode[V]],
			allocK[V, [4]*mnode[V]],
			allocK[V, [5]*mnode[V]],
			allocK[V, [6]*mnode[V]],
			allocK[V, [7]*mnode[V]],
			allocK[V, [8]*mnode[V]],
			allocK[V, [9]*mnode[V]],
			allocK[V, [10]*mnode[V]],
			allocK[V, [11]*mnode[V]],
			allocK[V, [12]*mnode[V]],
			allocK[V, [13]*mnode[V]],
			allocK[V, [14]*mnode[V]],
			allocK[V, [15]*mnode[V]],
			allocK[V, [16]*mnode[V]],
			allocK[V, [17]*mnode[V]],
			allocK[V, [18]*mnode[V]],
			allocK[V, [19]*mnode[V]],
			allocK[V, [20]*mnode[V]],
			allocK[V, [21]*mnode[V]],
			allocK[V, [22]*mnode[V]],
			allocK[V, [23]*mnode[V]],
			allocK[V, [24]*mnode[V]],
			allocK[V, [25]*mnode[V]],
			allocK[V, [26]*mnode[V]],
			allocK[V, [27]*mnode[V]],
			allocK[V, [28]*mnode[V]],
			allocK[V, [29]*mnode[V]],
			allocK[V, [30]*mnode[V]],
			allocK[V, [31]*mnode[V]],
			allocK[V, [32]*mnode[V]],
			allocK[V, [33]*mnode[V]],
		},
	}
	got, _ := allocTables.LoadOrStore(t, a)
	return got.(*nodeAllocs[V])
}

// node returns a new node owned by tok whose entries and kids are empty
// slices of capacity ne and nk (nil where 0). The larger array, by bytes,
// shares the node's object where it fits inline.
func (a *nodeAllocs[V]) node(tok editToken, ne, nk int) *mnode[V] {
	var n *mnode[V]
	eBytes := uintptr(ne) * unsafe.Sizeof(mentry[V]{})
	kBytes := uintptr(nk) * unsafe.Sizeof((*mnode[V])(nil))
	switch {
	case ne > 0 && ne <= maxInline && eBytes >= kBytes:
		var es []mentry[V]
		n, es = a.withEntries[ne]()
		n.entries, ne = es, 0
	case nk > 0 && nk <= maxInline:
		var ks []*mnode[V]
		n, ks = a.withKids[nk]()
		n.kids, nk = ks, 0
	default:
		n = new(mnode[V])
	}
	n.edit = tok
	if ne > 0 {
		n.entries = make([]mentry[V], 0, ne)
	}
	if nk > 0 {
		n.kids = make([]*mnode[V], 0, nk)
	}
	return n
}
