package immutable

import (
	"math"
	"unsafe"
)

// Vector is a persistent array of T indexed from 0 to Len()-1: a radix-16
// trie whose leaves hold leafWidth (32) elements each.
//
// The branches are narrow because a path copy (Set of one element in a new
// version: what every published snapshot pays per changed node) copies one
// leaf and every branch above it: a branch of 16 pointers is a 144-byte
// object where one of 32 is 288 bytes. For 5000 elements a path copy is
// 2x144+288 = 576 bytes instead of 3x288 = 864, with the same three levels;
// for 50000, 3x144+288 = 720 instead of 4x288 = 1152, with the same four.
// The leaves stay 32 wide: 8-element leaves (80 bytes) made the copy 512
// bytes at 5000 elements but added a level there, and W1's readers, whose
// every node read walks the trie, were 3-7% slower for it.
//
// Contract: a Vector value is immutable; any number of goroutines may call its
// methods concurrently, and all reads of one value see the same elements. No
// method blocks. Edit returns an editor that builds a new version without
// changing this one. The zero Vector is empty and ready to use.
//
// A Vector value is 16 bytes (its length and height are 32-bit): a
// snapshot holds one and every published snapshot is a copy. Its length is
// at most MaxVectorLen.
type Vector[T any] struct {
	root  *vbranch[T] // nil if n == 0
	n     int32
	shift uint32 // bit offset of the root's index; leafBits if root holds leaves
}

// MaxVectorLen is the greatest length of a Vector: Set of a larger index
// does nothing.
const MaxVectorLen = math.MaxInt32

// Trie geometry: a leaf holds leafWidth elements, indexed by the low
// leafBits bits of an index; each branch level above takes vecBits more
// (vecWidth children). Map's nodes are 32 wide (levelBits); a Vector's are
// narrower, for the path copies above.
const (
	leafBits  = 5
	leafWidth = 1 << leafBits
	leafMask  = leafWidth - 1
	vecBits   = 4
	vecWidth  = 1 << vecBits
	vecMask   = vecWidth - 1
)

// vbranch is an inner trie node. Nodes at shift leafBits use leaves;
// higher nodes use kids. A nil child stands for a subtree of zero values.
type vbranch[T any] struct {
	edit editToken
	// ptrs holds *vbranch[T] children above shift leafBits and *vleaf[T]
	// children at shift leafBits: one array instead of two halves the
	// bytes a path copy moves. The GC traces unsafe.Pointer like any pointer.
	ptrs [vecWidth]unsafe.Pointer
}

type vleaf[T any] struct {
	edit editToken
	vals [leafWidth]T
}

// Len returns the number of elements.
func (v Vector[T]) Len() int {
	return int(v.n)
}

// Get returns the element at index i, or the zero T if i is out of range.
func (v Vector[T]) Get(i int) T {
	if uint(i) >= uint(v.n) {
		var zero T
		return zero
	}
	return vget(v.root, uint(v.shift), i)
}

// Range calls fn for each index and element in index order until fn returns
// false.
func (v Vector[T]) Range(fn func(i int, x T) bool) {
	vrange(v.root, uint(v.shift), int(v.n), fn)
}

// Edit returns an editor whose initial contents are those of v.
func (v Vector[T]) Edit() *VectorEditor[T] {
	e := new(VectorEditor[T])
	v.EditInto(e)
	return e
}

// EditInto makes e an editor of v, as Edit would return, reusing e's
// memory: whatever e was editing is dropped (a finished editor loses
// nothing).
func (v Vector[T]) EditInto(e *VectorEditor[T]) {
	*e = VectorEditor[T]{root: v.root, n: int(v.n), shift: uint(v.shift), tok: newToken()}
}

func vget[T any](b *vbranch[T], shift uint, i int) T {
	var zero T
	for s := shift; s > leafBits; s -= vecBits {
		b = (*vbranch[T])(b.ptrs[(i>>s)&vecMask])
		if b == nil {
			return zero
		}
	}
	l := (*vleaf[T])(b.ptrs[(i>>leafBits)&vecMask])
	if l == nil {
		return zero
	}
	return l.vals[i&leafMask]
}

// vleafAt returns the leaf holding index i, or nil for a zero subtree.
func vleafAt[T any](b *vbranch[T], shift uint, i int) *vleaf[T] {
	for s := shift; s > leafBits; s -= vecBits {
		b = (*vbranch[T])(b.ptrs[(i>>s)&vecMask])
		if b == nil {
			return nil
		}
	}
	return (*vleaf[T])(b.ptrs[(i>>leafBits)&vecMask])
}

func vrange[T any](root *vbranch[T], shift uint, n int, fn func(int, T) bool) {
	var zero T
	for base := 0; base < n; base += leafWidth {
		l := vleafAt(root, shift, base)
		end := min(leafWidth, n-base)
		for j := range end {
			x := zero
			if l != nil {
				x = l.vals[j]
			}
			if !fn(base+j, x) {
				return
			}
		}
	}
}

// VectorEditor builds a new Vector version from an existing one.
//
// Contract: an editor is owned by one goroutine; its methods must not be
// called concurrently with each other. No method blocks. Editing never
// changes the version the editor started from nor any other version, so
// distinct editors, even of one version, may run concurrently. After
// Done the editor is frozen: Get and Len report the returned version, and
// Set, Append and Truncate do nothing.
type VectorEditor[T any] struct {
	root  *vbranch[T]
	n     int
	shift uint
	tok   editToken // 0 after Done
}

// Len returns the number of elements of the vector being built.
func (e *VectorEditor[T]) Len() int {
	return e.n
}

// Get returns the element at index i, or the zero T if i is out of range.
func (e *VectorEditor[T]) Get(i int) T {
	if uint(i) >= uint(e.n) {
		var zero T
		return zero
	}
	return vget(e.root, e.shift, i)
}

// Set sets the element at index i to x. If i >= Len, the vector grows to
// length i+1 and the new elements other than i are zero. Set does nothing if
// i < 0 or i >= MaxVectorLen.
func (e *VectorEditor[T]) Set(i int, x T) {
	if e.tok == 0 || i < 0 || i >= MaxVectorLen {
		return
	}
	if e.root == nil {
		e.root = &vbranch[T]{edit: e.tok}
		e.shift = leafBits
	}
	for i>>(e.shift+vecBits) != 0 {
		r := &vbranch[T]{edit: e.tok}
		r.ptrs[0] = unsafe.Pointer(e.root)
		e.root = r
		e.shift += vecBits
	}
	b := e.ownBranch(e.root)
	e.root = b
	for s := e.shift; s > leafBits; s -= vecBits {
		idx := (i >> s) & vecMask
		c := e.ownBranch((*vbranch[T])(b.ptrs[idx]))
		b.ptrs[idx] = unsafe.Pointer(c)
		b = c
	}
	idx := (i >> leafBits) & vecMask
	l := e.ownLeaf((*vleaf[T])(b.ptrs[idx]))
	b.ptrs[idx] = unsafe.Pointer(l)
	l.vals[i&leafMask] = x
	if i >= e.n {
		e.n = i + 1
	}
}

// Append sets the element at index Len to x.
func (e *VectorEditor[T]) Append(x T) {
	e.Set(e.n, x)
}

// Truncate shortens the vector to n elements. It does nothing if n < 0 or
// n >= Len. Elements later re-created by growth are zero.
func (e *VectorEditor[T]) Truncate(n int) {
	if e.tok == 0 || n < 0 || n >= e.n {
		return
	}
	if n == 0 {
		e.root, e.n, e.shift = nil, 0, 0
		return
	}
	last := n - 1
	for e.shift > leafBits && last>>e.shift == 0 {
		r := (*vbranch[T])(e.root.ptrs[0])
		if r == nil {
			r = &vbranch[T]{edit: e.tok}
		}
		e.root = r
		e.shift -= vecBits
	}
	e.n = n
	// Zero every slot after last on last's path, so that growth exposes
	// zeros. Copy the path only if something needs zeroing.
	if !e.hasTail(last) {
		return
	}
	b := e.ownBranch(e.root)
	e.root = b
	for s := e.shift; s > leafBits; s -= vecBits {
		idx := (last >> s) & vecMask
		clear(b.ptrs[idx+1:])
		if (*vbranch[T])(b.ptrs[idx]) == nil {
			return
		}
		c := e.ownBranch((*vbranch[T])(b.ptrs[idx]))
		b.ptrs[idx] = unsafe.Pointer(c)
		b = c
	}
	idx := (last >> leafBits) & vecMask
	clear(b.ptrs[idx+1:])
	if (*vleaf[T])(b.ptrs[idx]) == nil {
		return
	}
	l := e.ownLeaf((*vleaf[T])(b.ptrs[idx]))
	b.ptrs[idx] = unsafe.Pointer(l)
	clear(l.vals[last&leafMask+1:])
}

// hasTail reports whether any node on the path to index last holds a child
// or, for the leaf, a slot after last's (a leaf slot is assumed set).
func (e *VectorEditor[T]) hasTail(last int) bool {
	b := e.root
	for s := e.shift; s > leafBits; s -= vecBits {
		idx := (last >> s) & vecMask
		if hasNonNil(b.ptrs[idx+1:]) {
			return true
		}
		if b = (*vbranch[T])(b.ptrs[idx]); b == nil {
			return false
		}
	}
	idx := (last >> leafBits) & vecMask
	if hasNonNil(b.ptrs[idx+1:]) {
		return true
	}
	return (*vleaf[T])(b.ptrs[idx]) != nil && last&leafMask != leafMask
}

func hasNonNil[P comparable](s []P) bool {
	var zero P
	for _, p := range s {
		if p != zero {
			return true
		}
	}
	return false
}

// ownBranch returns b if e owns it, else an owned copy of b (a new empty
// branch if b is nil).
func (e *VectorEditor[T]) ownBranch(b *vbranch[T]) *vbranch[T] {
	if b == nil {
		return &vbranch[T]{edit: e.tok}
	}
	if b.edit == e.tok {
		return b
	}
	c := *b
	c.edit = e.tok
	return &c
}

func (e *VectorEditor[T]) ownLeaf(l *vleaf[T]) *vleaf[T] {
	if l == nil {
		return &vleaf[T]{edit: e.tok}
	}
	if l.edit == e.tok {
		return l
	}
	c := *l
	c.edit = e.tok
	return &c
}

// Done returns the version built and freezes the editor.
func (e *VectorEditor[T]) Done() Vector[T] {
	e.tok = 0
	return Vector[T]{root: e.root, n: int32(e.n), shift: uint32(e.shift)}
}

// PrefetchLeaf reads, without changing anything, one word per cache line of
// the leaf that holds index i (nothing if i is out of range or its subtree
// is zero): what a Set of i through an editor copies. Calls for several
// indexes in a row do not depend on each other, so the processor keeps
// their cache misses in flight together. It returns a value computed from
// what it read, which the caller keeps so that the loads are not removed.
func (v Vector[T]) PrefetchLeaf(i int) uintptr {
	return prefetchLeaf(v.root, uint(v.shift), int(v.n), i)
}

// PrefetchLeaf is Vector.PrefetchLeaf for the vector being built. It has no
// effect on the editor.
func (e *VectorEditor[T]) PrefetchLeaf(i int) uintptr {
	return prefetchLeaf(e.root, e.shift, e.n, i)
}

func prefetchLeaf[T any](root *vbranch[T], shift uint, n, i int) uintptr {
	if uint(i) >= uint(n) || root == nil {
		return 0
	}
	l := vleafAt(root, shift, i)
	if l == nil {
		return 0
	}
	sum := uintptr(l.edit)
	for j := 0; j < leafWidth; j += perLine(unsafe.Sizeof(l.vals[0])) {
		sum += uintptr(*(*byte)(unsafe.Pointer(&l.vals[j])))
	}
	return sum
}

// DiffVectors calls fn(i, x, y) for every index i below the larger length
// where x = a.Get(i) and y = b.Get(i) differ, in index order. Subtrees the
// two versions share are skipped, so comparing a version with one derived
// from it costs O(changes x depth), not O(length).
func DiffVectors[T comparable](a, b Vector[T], fn func(i int, x, y T)) {
	an, bn := int(a.n), int(b.n)
	n := max(an, bn)
	if a.root != nil && b.root != nil && a.shift == b.shift {
		diffBranch(a.root, b.root, uint(a.shift), 0, an, bn, fn)
		return
	}
	for base := 0; base < n; base += leafWidth {
		var la, lb *vleaf[T]
		if base < an {
			la = vleafAt(a.root, uint(a.shift), base)
		}
		if base < bn {
			lb = vleafAt(b.root, uint(b.shift), base)
		}
		diffLeaf(la, lb, base, an, bn, fn)
	}
}

// straddles reports whether the indices [base, base+span) hold the end of
// one version but not of the other: a node the two share may still read
// differently there, as one version's length cuts it.
func straddles(base, span, na, nb int) bool {
	lo := min(na, nb)
	return na != nb && base < max(na, nb) && lo < base+span
}

func diffBranch[T comparable](x, y *vbranch[T], shift uint, base, na, nb int, fn func(int, T, T)) {
	if x == y && !straddles(base, 1<<(shift+vecBits), na, nb) {
		return
	}
	n := max(na, nb)
	for k := 0; k < vecWidth; k++ {
		cb := base + k<<shift
		if cb >= n {
			return
		}
		var px, py unsafe.Pointer
		if x != nil && cb < na {
			px = x.ptrs[k]
		}
		if y != nil && cb < nb {
			py = y.ptrs[k]
		}
		if px == py && !straddles(cb, 1<<shift, na, nb) {
			continue
		}
		if shift == leafBits {
			diffLeaf((*vleaf[T])(px), (*vleaf[T])(py), cb, na, nb, fn)
		} else {
			diffBranch((*vbranch[T])(px), (*vbranch[T])(py), shift-vecBits, cb, na, nb, fn)
		}
	}
}

func diffLeaf[T comparable](x, y *vleaf[T], base, na, nb int, fn func(int, T, T)) {
	if x == y && !straddles(base, leafWidth, na, nb) {
		return
	}
	var zero T
	for j := 0; j < leafWidth; j++ {
		i := base + j
		if i >= na && i >= nb {
			return
		}
		a, b := zero, zero
		if x != nil && i < na {
			a = x.vals[j]
		}
		if y != nil && i < nb {
			b = y.vals[j]
		}
		if a != b {
			fn(i, a, b)
		}
	}
}
