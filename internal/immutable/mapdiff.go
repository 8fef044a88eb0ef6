package immutable

import "math/bits"

// DiffMaps calls fn(k, x, y) for every key whose value differs between a
// and b, x and y being its values in a and b (the zero value where the key
// is absent), in an unspecified order, each key once. Subtrees the two
// versions share are skipped without being read, so comparing two versions
// of one map edited in between costs O(changed keys x depth), not O(size).
func DiffMaps[V comparable](a, b Map[V], fn func(k string, x, y V)) {
	diffNodes(a.root, b.root, 0, fn)
}

func diffNodes[V comparable](x, y *mnode[V], shift uint, fn func(string, V, V)) {
	if x == y {
		return
	}
	if x == nil || y == nil || shift >= 64 {
		diffFlat(x, y, fn)
		return
	}
	for slot := uint32(0); slot < 32; slot++ {
		bit := uint32(1) << slot
		xk, yk := x.nodemap&bit != 0, y.nodemap&bit != 0
		if xk && yk {
			diffNodes(x.kids[bits.OnesCount32(x.nodemap&(bit-1))], y.kids[bits.OnesCount32(y.nodemap&(bit-1))], shift+levelBits, fn)
			continue
		}
		xd, yd := x.datamap&bit != 0, y.datamap&bit != 0
		if !xk && !yk {
			// At most one entry on each side: compare in place, without
			// gathering slices (a path node has up to 31 such slots).
			diffPair(x, y, xd, yd, bit, fn)
			continue
		}
		var xs, ys []mentry[V]
		if xd {
			xs = append(xs, x.entries[bits.OnesCount32(x.datamap&(bit-1))])
		} else if xk {
			xs = collect(x.kids[bits.OnesCount32(x.nodemap&(bit-1))], nil)
		}
		if yd {
			ys = append(ys, y.entries[bits.OnesCount32(y.datamap&(bit-1))])
		} else if yk {
			ys = collect(y.kids[bits.OnesCount32(y.nodemap&(bit-1))], nil)
		}
		diffEntries(xs, ys, fn)
	}
}

// diffPair compares slot bit of x and y where neither holds a subtree.
func diffPair[V comparable](x, y *mnode[V], xd, yd bool, bit uint32, fn func(string, V, V)) {
	var zero V
	switch {
	case xd && yd:
		ex := x.entries[bits.OnesCount32(x.datamap&(bit-1))]
		ey := y.entries[bits.OnesCount32(y.datamap&(bit-1))]
		if ex.key != ey.key {
			fn(ex.key, ex.val, zero)
			fn(ey.key, zero, ey.val)
		} else if ex.val != ey.val {
			fn(ex.key, ex.val, ey.val)
		}
	case xd:
		ex := x.entries[bits.OnesCount32(x.datamap&(bit-1))]
		fn(ex.key, ex.val, zero)
	case yd:
		ey := y.entries[bits.OnesCount32(y.datamap&(bit-1))]
		fn(ey.key, zero, ey.val)
	}
}

// diffFlat compares every entry under x with every entry under y.
func diffFlat[V comparable](x, y *mnode[V], fn func(string, V, V)) {
	diffEntries(collect(x, nil), collect(y, nil), fn)
}

func collect[V any](n *mnode[V], out []mentry[V]) []mentry[V] {
	if n == nil {
		return out
	}
	out = append(out, n.entries...)
	for _, c := range n.kids {
		out = collect(c, out)
	}
	return out
}

// diffEntries reports the keys whose values differ between two small sets
// of entries (one trie slot's worth).
func diffEntries[V comparable](xs, ys []mentry[V], fn func(string, V, V)) {
	var zero V
	for _, ex := range xs {
		found := false
		for _, ey := range ys {
			if ey.key == ex.key {
				found = true
				if ey.val != ex.val {
					fn(ex.key, ex.val, ey.val)
				}
				break
			}
		}
		if !found {
			fn(ex.key, ex.val, zero)
		}
	}
	for _, ey := range ys {
		found := false
		for _, ex := range xs {
			if ex.key == ey.key {
				found = true
				break
			}
		}
		if !found {
			fn(ey.key, zero, ey.val)
		}
	}
}
