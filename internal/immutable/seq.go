package immutable

import (
	"slices"
	"sort"
)

// Seq is a persistent sorted sequence of distinct T, stored as chunks of at
// most 2*SeqChunk elements. Inserting or removing k elements copies the
// chunks they fall in and the chunk index (Len()/SeqChunk slice headers at
// most), not the whole sequence: for 50,000 elements about 4 KB where a
// flat slice copies 200 KB.
//
// The order is given by the cmp passed to SeqOf and Edit, which must be the
// same strict total order on every call for one Seq's history (a Seq does not
// store it).
//
// Contract: a Seq value is immutable; any number of goroutines may read it
// concurrently, and no method blocks. Edit returns a new Seq that shares
// every unchanged chunk with s and never writes one. The zero Seq is empty.
type Seq[T any] struct {
	chunks [][]T // each non-empty, len <= 2*SeqChunk, cap == len; never written
	n      int
}

// SeqChunk is the chunk size SeqOf cuts a slice into; Edit keeps every chunk
// between 1 and 2*SeqChunk elements and merges one that falls below
// SeqChunk/4 into its left neighbour when they fit in one chunk.
const SeqChunk = 512

// SeqOf returns a Seq holding the elements of sorted, which must be sorted
// and without duplicates by the order Edit will use. It copies sorted.
func SeqOf[T any](sorted []T) Seq[T] {
	if len(sorted) == 0 {
		return Seq[T]{}
	}
	return Seq[T]{chunks: cut(make([][]T, 0, len(sorted)/SeqChunk+1), sorted, true), n: len(sorted)}
}

// Len returns the number of elements.
func (s Seq[T]) Len() int { return s.n }

// AppendTo appends the elements in order to dst and returns it.
func (s Seq[T]) AppendTo(dst []T) []T {
	dst = slices.Grow(dst, s.n)
	for _, c := range s.chunks {
		dst = append(dst, c...)
	}
	return dst
}

// All calls fn for each element in order until fn returns false.
func (s Seq[T]) All(fn func(T) bool) {
	for _, c := range s.chunks {
		for _, x := range c {
			if !fn(x) {
				return
			}
		}
	}
}

// SeqEdit is one change for Seq.Edit: insert X (Insert) or remove it.
type SeqEdit[T any] struct {
	X      T
	Insert bool
}

// Edit returns s with edits applied, or false (and s) if an insertion finds
// its element already present, a removal finds it missing, or two edits name
// the same element. edits is sorted in place by cmp; no other argument is
// written.
func (s Seq[T]) Edit(edits []SeqEdit[T], cmp func(a, b T) int) (Seq[T], bool) {
	if len(edits) == 0 {
		return s, true
	}
	slices.SortFunc(edits, func(a, b SeqEdit[T]) int { return cmp(a.X, b.X) })
	for i := 1; i < len(edits); i++ {
		if cmp(edits[i-1].X, edits[i].X) == 0 {
			return s, false
		}
	}
	if s.n == 0 { // insertions only
		c, ok := mergeChunk(nil, edits, cmp)
		if !ok {
			return s, false
		}
		return Seq[T]{chunks: cut(nil, c, false), n: len(c)}, true
	}
	n := s.n
	out := make([][]T, 0, len(s.chunks)+1)
	ci := 0
	for len(edits) > 0 {
		// The first chunk from ci whose last element is >= the next edit's
		// (the last chunk if none): the chunks before it are unchanged.
		t := ci + sort.Search(len(s.chunks)-1-ci, func(j int) bool {
			c := s.chunks[ci+j]
			return cmp(c[len(c)-1], edits[0].X) >= 0
		})
		out = append(out, s.chunks[ci:t]...)
		c := s.chunks[t]
		ci = t + 1
		k := len(edits)
		if ci < len(s.chunks) { // the last chunk takes every remaining edit
			last := c[len(c)-1]
			k, _ = slices.BinarySearchFunc(edits, last, func(e SeqEdit[T], x T) int {
				if cmp(e.X, x) <= 0 {
					return -1
				}
				return 1
			})
		}
		nc, ok := mergeChunk(c, edits[:k], cmp)
		if !ok {
			return s, false
		}
		n += len(nc) - len(c)
		edits = edits[k:]
		out = appendChunk(out, nc)
	}
	if n == 0 {
		return Seq[T]{}, true
	}
	return Seq[T]{chunks: append(out, s.chunks[ci:]...), n: n}, true
}

// mergeChunk returns a new slice: c with edits (sorted, distinct) applied,
// or false if an edit disagrees with c. It never writes c.
func mergeChunk[T any](c []T, edits []SeqEdit[T], cmp func(a, b T) int) ([]T, bool) {
	size := len(c)
	for _, e := range edits {
		if e.Insert {
			size++
		} else {
			size--
		}
	}
	if size < 0 {
		return nil, false
	}
	nc := make([]T, 0, size)
	i := 0
	for _, e := range edits {
		j, found := slices.BinarySearchFunc(c[i:], e.X, cmp)
		if found == e.Insert {
			return nil, false
		}
		nc = append(nc, c[i:i+j]...)
		i += j
		if e.Insert {
			nc = append(nc, e.X)
		} else {
			i++ // drop c[i]
		}
	}
	return append(nc, c[i:]...), true
}

// appendChunk appends the new chunk c to out: nothing if it is empty, cut
// into pieces if it is longer than 2*SeqChunk, and merged with out's last
// chunk if it is shorter than SeqChunk/4 and both fit in one chunk.
func appendChunk[T any](out [][]T, c []T) [][]T {
	switch {
	case len(c) == 0:
		return out
	case len(c) > 2*SeqChunk:
		return cut(out, c, false)
	case len(c) < SeqChunk/4 && len(out) > 0 && len(out[len(out)-1])+len(c) <= 2*SeqChunk:
		prev := out[len(out)-1]
		m := make([]T, 0, len(prev)+len(c))
		out[len(out)-1] = append(append(m, prev...), c...)
		return out
	}
	return append(out, c)
}

// cut appends c to out in pieces of SeqChunk elements, the last piece also
// taking a tail shorter than SeqChunk/4. With clone each piece is a copy of
// its own (SeqOf: the caller keeps its slice); without, the pieces share c's
// array, which nothing writes.
func cut[T any](out [][]T, c []T, clone bool) [][]T {
	for len(c) > 0 {
		k := min(len(c), SeqChunk)
		if len(c)-k < SeqChunk/4 {
			k = len(c) // no small tail
		}
		piece := c[:k:k]
		if clone {
			piece = make([]T, k)
			copy(piece, c)
		}
		out = append(out, piece)
		c = c[k:]
	}
	return out
}
