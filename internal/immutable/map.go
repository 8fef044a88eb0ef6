package immutable

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"unsafe"
)

// seed is the process-wide hash seed of every Map.
var seed = maphash.MakeSeed()

// hashHook, if non-nil, replaces the key hash. Tests set it, before building
// any Map, to force collisions.
var hashHook func(string) uint64

func hashKey(k string) uint64 {
	if hashHook != nil {
		return hashHook(k)
	}
	return maphash.String(seed, k)
}

// Map is a persistent map from string keys to values of type V: a hash array
// mapped trie with 32-way bitmap-compressed nodes and collision nodes for
// keys whose 64-bit hashes are equal.
//
// Contract: a Map value is immutable; any number of goroutines may call its
// methods concurrently, and all reads of one value see the same entries. No
// method blocks. Edit returns an editor that builds a new version without
// changing this one. The zero Map is empty and ready to use.
type Map[V any] struct {
	root *mnode[V] // nil if n == 0
	n    int
}

// mnode is a trie node at some depth d (shift 5*d). Below shift 64 an entry
// or a child sits in slot (hash>>shift)&31: entries holds, in slot order, the
// entries of the slots set in datamap; kids the children of the slots set in
// nodemap. At shift >= 64 the node is a collision node: both bitmaps are 0
// and entries holds keys of equal hash in insertion order.
//
// Canonical form: every node other than the root holds at least two entries
// or at least one child.
type mnode[V any] struct {
	edit    editToken
	datamap uint32
	nodemap uint32
	entries []mentry[V]
	kids    []*mnode[V]
}

type mentry[V any] struct {
	hash uint64
	key  string
	val  V
}

// Len returns the number of entries.
func (m Map[V]) Len() int {
	return m.n
}

// Get returns the value of key k and whether k is present.
func (m Map[V]) Get(k string) (V, bool) {
	return mget(m.root, k)
}

// Range calls fn for each key and value, each key once, in an unspecified
// order, until fn returns false.
func (m Map[V]) Range(fn func(k string, v V) bool) {
	if m.root != nil {
		mrange(m.root, fn)
	}
}

// Edit returns an editor whose initial contents are those of m.
func (m Map[V]) Edit() *MapEditor[V] {
	e := new(MapEditor[V])
	m.EditInto(e)
	return e
}

// EditInto makes e an editor of m, as Edit would return, reusing e's
// memory: whatever e was editing is dropped (a finished editor loses
// nothing).
func (m Map[V]) EditInto(e *MapEditor[V]) {
	a := e.allocs
	if a == nil {
		a = allocsFor[V]()
	}
	*e = MapEditor[V]{root: m.root, n: m.n, tok: newToken(), allocs: a}
}

func mget[V any](n *mnode[V], k string) (V, bool) {
	var zero V
	if n == nil {
		return zero, false
	}
	h := hashKey(k)
	for shift := uint(0); shift < 64; shift += levelBits {
		bit := uint32(1) << ((h >> shift) & levelMask)
		if n.datamap&bit != 0 {
			e := &n.entries[bits.OnesCount32(n.datamap&(bit-1))]
			if e.hash == h && e.key == k {
				return e.val, true
			}
			return zero, false
		}
		if n.nodemap&bit == 0 {
			return zero, false
		}
		n = n.kids[bits.OnesCount32(n.nodemap&(bit-1))]
	}
	for i := range n.entries {
		if n.entries[i].key == k {
			return n.entries[i].val, true
		}
	}
	return zero, false
}

func mrange[V any](n *mnode[V], fn func(string, V) bool) bool {
	for i := range n.entries {
		if !fn(n.entries[i].key, n.entries[i].val) {
			return false
		}
	}
	for _, c := range n.kids {
		if !mrange(c, fn) {
			return false
		}
	}
	return true
}

// MapEditor builds a new Map version from an existing one.
//
// Contract: an editor is owned by one goroutine; its methods must not be
// called concurrently with each other. No method blocks. Editing never
// changes the version the editor started from nor any other version, so
// distinct editors, even of one version, may run concurrently. After
// Done the editor is frozen: Get and Len report the returned version, Set
// does nothing and Delete does nothing and returns false.
type MapEditor[V any] struct {
	root   *mnode[V]
	n      int
	tok    editToken      // 0 after Done
	allocs *nodeAllocs[V] // node constructors; shared by every editor of V
}

// Len returns the number of entries of the map being built.
func (e *MapEditor[V]) Len() int {
	return e.n
}

// Get returns the value of key k and whether k is present.
func (e *MapEditor[V]) Get(k string) (V, bool) {
	return mget(e.root, k)
}

// Set sets the value of key k to v.
func (e *MapEditor[V]) Set(k string, v V) {
	if e.tok == 0 {
		return
	}
	ent := mentry[V]{hash: hashKey(k), key: k, val: v}
	if e.root == nil {
		e.root = e.allocs.node(e.tok, 1, 0)
		e.root.datamap = uint32(1) << (ent.hash & levelMask)
		e.root.entries = append(e.root.entries, ent)
		e.n = 1
		return
	}
	var added bool
	e.root, added = e.set(e.root, 0, &ent)
	if added {
		e.n++
	}
}

// Delete removes key k and reports whether it was present.
func (e *MapEditor[V]) Delete(k string) bool {
	if e.tok == 0 || e.root == nil {
		return false
	}
	root, removed := e.del(e.root, 0, hashKey(k), k)
	if removed {
		e.root = root
		e.n--
	}
	return removed
}

// Done returns the version built and freezes the editor.
func (e *MapEditor[V]) Done() Map[V] {
	e.tok = 0
	return Map[V]{root: e.root, n: e.n}
}

// own returns n if e owns it, else an owned copy of n, allocated as one
// object with its arrays (see nodeWith). The copy's arrays are exactly
// full: a path copy touches most nodes once per edit, so a spare slot would
// cost memory in every version for an insertion that rarely comes (room
// grows an owned node when one does). An empty array is dropped, never
// shared with n.
func (e *MapEditor[V]) own(n *mnode[V]) *mnode[V] {
	if n.edit == e.tok {
		return n
	}
	return e.copyNode(n, len(n.entries), len(n.kids))
}

// room returns n, owned by e, with room for addE more entries and addK more
// kids: n itself if e owns it and it has the room, else a copy (exactly
// full if n is shared, as own's). A copy of an
// owned node doubles the grown array, so that a long transient edit grows a
// node in amortised constant time, as append would; it replaces n, which
// no other version can reference.
func (e *MapEditor[V]) room(n *mnode[V], addE, addK int) *mnode[V] {
	le, lk := len(n.entries), len(n.kids)
	if n.edit != e.tok {
		return e.copyNode(n, le+addE, lk+addK)
	}
	if cap(n.entries)-le >= addE && cap(n.kids)-lk >= addK {
		return n
	}
	return e.copyNode(n, growCap(le, cap(n.entries), addE), growCap(lk, cap(n.kids), addK))
}

// growCap is the capacity of an owned array of l elements and capacity c
// about to get add more: c if that is enough, else at least double l, up to
// the inline limit.
func growCap(l, c, add int) int {
	if l+add <= c {
		return c
	}
	return max(l+add, min(2*l, maxInline))
}

// copyNode returns a copy of n owned by e with capacities ne and nk.
func (e *MapEditor[V]) copyNode(n *mnode[V], ne, nk int) *mnode[V] {
	c := e.allocs.node(e.tok, ne, nk)
	c.datamap, c.nodemap = n.datamap, n.nodemap
	c.entries = append(c.entries, n.entries...)
	c.kids = append(c.kids, n.kids...)
	return c
}

// set stores ent in the subtree n at shift and returns the subtree's new
// root and whether a key was added.
func (e *MapEditor[V]) set(n *mnode[V], shift uint, ent *mentry[V]) (*mnode[V], bool) {
	if shift >= 64 {
		for i := range n.entries {
			if n.entries[i].key == ent.key {
				n = e.own(n)
				n.entries[i].val = ent.val
				return n, false
			}
		}
		n = e.room(n, 1, 0)
		n.entries = append(n.entries, *ent)
		return n, true
	}
	bit := uint32(1) << ((ent.hash >> shift) & levelMask)
	if n.datamap&bit != 0 {
		i := bits.OnesCount32(n.datamap & (bit - 1))
		if old := n.entries[i]; old.hash != ent.hash || old.key != ent.key {
			sub := e.merge(shift+levelBits, &old, ent)
			n = e.room(n, 0, 1)
			n.entries = slices.Delete(n.entries, i, i+1)
			n.datamap ^= bit
			n.kids = slices.Insert(n.kids, bits.OnesCount32(n.nodemap&(bit-1)), sub)
			n.nodemap |= bit
			return n, true
		}
		n = e.own(n)
		n.entries[i].val = ent.val
		return n, false
	}
	if n.nodemap&bit != 0 {
		j := bits.OnesCount32(n.nodemap & (bit - 1))
		kid, added := e.set(n.kids[j], shift+levelBits, ent)
		if kid != n.kids[j] {
			n = e.own(n)
			n.kids[j] = kid
		}
		return n, added
	}
	n = e.room(n, 1, 0)
	n.entries = slices.Insert(n.entries, bits.OnesCount32(n.datamap&(bit-1)), *ent)
	n.datamap |= bit
	return n, true
}

// merge returns a new subtree at shift holding the entries a and b, whose
// keys differ and whose hashes agree below shift.
func (e *MapEditor[V]) merge(shift uint, a, b *mentry[V]) *mnode[V] {
	if shift >= 64 {
		n := e.allocs.node(e.tok, 2, 0)
		n.entries = append(n.entries, *a, *b)
		return n
	}
	ia, ib := (a.hash>>shift)&levelMask, (b.hash>>shift)&levelMask
	if ia == ib {
		n := e.allocs.node(e.tok, 0, 1)
		n.nodemap = uint32(1) << ia
		n.kids = append(n.kids, e.merge(shift+levelBits, a, b))
		return n
	}
	n := e.allocs.node(e.tok, 2, 0)
	n.datamap = uint32(1)<<ia | uint32(1)<<ib
	if ia < ib {
		n.entries = append(n.entries, *a, *b)
	} else {
		n.entries = append(n.entries, *b, *a)
	}
	return n
}

// del removes key k, of hash h, from the subtree n at shift. It returns the
// subtree's new root (nil if it became empty) and whether k was present;
// if k was absent the subtree is returned unchanged.
func (e *MapEditor[V]) del(n *mnode[V], shift uint, h uint64, k string) (*mnode[V], bool) {
	if shift >= 64 {
		for i := range n.entries {
			if n.entries[i].key == k {
				if len(n.entries) == 1 {
					return nil, true
				}
				n = e.own(n)
				n.entries = slices.Delete(n.entries, i, i+1)
				return n, true
			}
		}
		return n, false
	}
	bit := uint32(1) << ((h >> shift) & levelMask)
	if n.datamap&bit != 0 {
		i := bits.OnesCount32(n.datamap & (bit - 1))
		if old := &n.entries[i]; old.hash != h || old.key != k {
			return n, false
		}
		if n.datamap == bit && n.nodemap == 0 {
			return nil, true
		}
		n = e.own(n)
		n.entries = slices.Delete(n.entries, i, i+1)
		n.datamap ^= bit
		return n, true
	}
	if n.nodemap&bit == 0 {
		return n, false
	}
	j := bits.OnesCount32(n.nodemap & (bit - 1))
	kid, removed := e.del(n.kids[j], shift+levelBits, h, k)
	if !removed {
		return n, false
	}
	switch {
	case kid == nil:
		if n.nodemap == bit && n.datamap == 0 {
			return nil, true
		}
		n = e.own(n)
		n.kids = slices.Delete(n.kids, j, j+1)
		n.nodemap ^= bit
	case kid.nodemap == 0 && len(kid.entries) == 1:
		// Inline the kid's last entry here, keeping the canonical form.
		n = e.room(n, 1, 0)
		n.kids = slices.Delete(n.kids, j, j+1)
		n.nodemap ^= bit
		n.entries = slices.Insert(n.entries, bits.OnesCount32(n.datamap&(bit-1)), kid.entries[0])
		n.datamap |= bit
	case kid != n.kids[j]:
		n = e.own(n)
		n.kids[j] = kid
	}
	return n, true
}

// PrefetchMax is the most keys one Prefetch call reads the paths of.
const PrefetchMax = 64

// Prefetch reads, without changing anything, every node on the paths of
// keys (at most PrefetchMax; the rest are ignored) in the map being built:
// one word per cache line of each node's entries and children, which is
// what a path copy reads. It walks all the keys one level at a time, so
// the loads of one level do not depend on each other and the processor
// keeps their cache misses in flight together; an edit of those keys
// right after finds its nodes in cache. It returns a value computed from
// what it read, which the caller keeps so that the loads are not removed.
// It has no effect on the editor.
func (e *MapEditor[V]) Prefetch(keys []string) uintptr {
	if e.root == nil || e.tok == 0 {
		return 0
	}
	var cur [PrefetchMax]*mnode[V]
	var hs [PrefetchMax]uint64
	n := min(len(keys), PrefetchMax)
	for i := range n {
		hs[i], cur[i] = hashKey(keys[i]), e.root
	}
	var sink uintptr
	for shift := uint(0); shift < 64; shift += levelBits {
		more := false
		for i := range n {
			nd := cur[i]
			if nd == nil {
				continue
			}
			sink += touchNode(nd)
			bit := uint32(1) << ((hs[i] >> shift) & levelMask)
			if nd.nodemap&bit == 0 {
				cur[i] = nil
				continue
			}
			cur[i] = nd.kids[bits.OnesCount32(nd.nodemap&(bit-1))]
			more = true
		}
		if !more {
			break
		}
	}
	return sink
}

// touchNode reads one word per cache line of n's arrays.
func touchNode[V any](n *mnode[V]) uintptr {
	sum := uintptr(n.datamap)
	for i := 0; i < len(n.entries); i += perLine(unsafe.Sizeof(n.entries[0])) {
		sum += uintptr(n.entries[i].hash)
	}
	for i := 0; i < len(n.kids); i += perLine(unsafe.Sizeof(n.kids[0])) {
		sum += uintptr(unsafe.Pointer(n.kids[i]))
	}
	return sum
}

// cacheLine is the size in bytes of the cache line the prefetches step by.
const cacheLine = 64

// perLine is the number of elements of the given size in one cache line
// (at least 1): a prefetch reads one of them per line.
func perLine(size uintptr) int {
	return max(1, cacheLine/int(size))
}
