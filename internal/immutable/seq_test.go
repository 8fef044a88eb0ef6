package immutable

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkSeq verifies s against model (sorted, distinct) and the chunk
// invariants: non-empty chunks of at most 2*SeqChunk with cap == len.
func checkSeq(t testing.TB, model []int, s Seq[int], msg ...any) {
	t.Helper()
	require.Equal(t, len(model), s.Len(), msg...)
	got := s.AppendTo(nil)
	if len(model) == 0 {
		require.Empty(t, got, msg...)
	} else {
		require.Equal(t, model, got, msg...)
	}
	var ranged []int
	s.All(func(x int) bool { ranged = append(ranged, x); return true })
	require.Equal(t, got, ranged, msg...)
	total := 0
	for i, c := range s.chunks {
		require.NotEmpty(t, c, "chunk %d: %v", i, msg)
		require.LessOrEqual(t, len(c), 2*SeqChunk, "chunk %d: %v", i, msg)
		require.Equal(t, len(c), cap(c), "chunk %d: %v", i, msg)
		total += len(c)
	}
	require.Equal(t, s.n, total, msg...)
	if s.n == 0 {
		require.Nil(t, s.chunks, msg...)
	}
}

// modelEdit applies edits to model the simple way, or reports false where
// Seq.Edit must refuse.
func modelEdit(model []int, edits []SeqEdit[int]) ([]int, bool) {
	seen := map[int]bool{}
	out := slices.Clone(model)
	for _, e := range edits {
		if seen[e.X] {
			return model, false
		}
		seen[e.X] = true
		i, found := slices.BinarySearch(out, e.X)
		if found == e.Insert {
			return model, false
		}
		if e.Insert {
			out = slices.Insert(out, i, e.X)
		} else {
			out = slices.Delete(out, i, i+1)
		}
	}
	return out, true
}

func TestSeqOf(t *testing.T) {
	for _, n := range []int{0, 1, SeqChunk - 1, SeqChunk, SeqChunk + 1, 5*SeqChunk + 7, 5*SeqChunk + SeqChunk/4} {
		model := make([]int, n)
		for i := range model {
			model[i] = 3 * i
		}
		s := SeqOf(model)
		checkSeq(t, model, s, n)
		for i, c := range s.chunks { // cut without a small tail
			if len(s.chunks) > 1 {
				require.GreaterOrEqual(t, len(c), SeqChunk/4, "n %d chunk %d", n, i)
			}
		}
		if n > 0 {
			model[0] = -1 // SeqOf copied its input
			require.Equal(t, 0, s.AppendTo(nil)[0])
		}
	}
}

// TestSeqEditModel applies random batches of edits (valid and invalid) to
// a Seq and to a sorted slice, checking after every batch that the two
// agree, that a refused batch leaves the Seq as it was, and that every
// earlier version still reads as it did.
func TestSeqEditModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type version struct {
		model []int
		s     Seq[int]
	}
	for _, start := range []int{0, 10, 3 * SeqChunk, 20 * SeqChunk} {
		var model []int
		for i := range start {
			model = append(model, 2*i)
		}
		s := SeqOf(model)
		universe := 2*start + 4*SeqChunk
		var history []version
		for step := range 400 {
			k := 1 + rng.IntN(8)
			if step%50 == 0 {
				k = 3 * SeqChunk // a large batch: splits and wholesale removals
			}
			edits := make([]SeqEdit[int], 0, k)
			for range k {
				var x int
				if len(model) > 0 && rng.IntN(2) == 0 {
					x = model[rng.IntN(len(model))]
				} else {
					x = rng.IntN(universe)
				}
				_, present := slices.BinarySearch(model, x)
				ins := !present
				if rng.IntN(40) == 0 {
					ins = !ins // invalid: insert present or remove missing
				}
				edits = append(edits, SeqEdit[int]{X: x, Insert: ins})
			}
			want, wantOK := modelEdit(model, edits)
			got, ok := s.Edit(edits, cmp.Compare[int])
			require.Equal(t, wantOK, ok, "step %d", step)
			if !ok {
				checkSeq(t, model, got, "refused step %d", step)
				continue
			}
			checkSeq(t, want, got, "step %d", step)
			history = append(history, version{model, s})
			model, s = want, got
		}
		for i, h := range history {
			checkSeq(t, h.model, h.s, "start %d: version %d after later edits", start, i)
		}
		// The chunk count stays proportional to the length: small chunks
		// are merged into their neighbours.
		require.LessOrEqual(t, len(s.chunks), 2+2*len(model)/(SeqChunk/4), "start %d", start)
	}
}

func TestSeqEditRefusals(t *testing.T) {
	s := SeqOf([]int{1, 3, 5})
	for name, edits := range map[string][]SeqEdit[int]{
		"insert present":  {{X: 3, Insert: true}},
		"remove missing":  {{X: 4}},
		"same element":    {{X: 4, Insert: true}, {X: 4, Insert: true}},
		"insert + remove": {{X: 3}, {X: 3, Insert: true}},
	} {
		got, ok := s.Edit(edits, cmp.Compare[int])
		require.False(t, ok, name)
		checkSeq(t, []int{1, 3, 5}, got, name)
	}
	got, ok := Seq[int]{}.Edit([]SeqEdit[int]{{X: 1}}, cmp.Compare[int])
	require.False(t, ok, "remove from an empty Seq")
	checkSeq(t, nil, got)

	got, ok = s.Edit(nil, cmp.Compare[int])
	require.True(t, ok)
	checkSeq(t, []int{1, 3, 5}, got)
	got, ok = s.Edit([]SeqEdit[int]{{X: 1}, {X: 3}, {X: 5}}, cmp.Compare[int])
	require.True(t, ok)
	checkSeq(t, nil, got)
}

// TestSeqEditCopies: one insertion into a 50,000-element Seq allocates the
// new chunk index and one chunk, and shares every other chunk.
func TestSeqEditCopies(t *testing.T) {
	model := make([]int, 50_000)
	for i := range model {
		model[i] = 2 * i
	}
	s := SeqOf(model)
	edits := make([]SeqEdit[int], 1)
	allocs := testing.AllocsPerRun(100, func() {
		edits[0] = SeqEdit[int]{X: 2*25_000 + 1, Insert: true}
		_, _ = s.Edit(edits, cmp.Compare[int])
	})
	require.Equal(t, 2.0, allocs)
	got, ok := s.Edit([]SeqEdit[int]{{X: 2*25_000 + 1, Insert: true}}, cmp.Compare[int])
	require.True(t, ok)
	shared := 0
	for _, c := range got.chunks {
		for _, old := range s.chunks {
			if &c[0] == &old[0] {
				shared++
			}
		}
	}
	require.Equal(t, len(s.chunks)-1, shared)
}

func BenchmarkSeqEdit(b *testing.B) {
	for _, n := range []int{5_000, 50_000} {
		model := make([]int, n)
		for i := range model {
			model[i] = 2 * i
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s := SeqOf(model)
			rng := rand.New(rand.NewPCG(3, 3))
			edits := make([]SeqEdit[int], 1)
			b.ReportAllocs()
			for b.Loop() {
				x := 2*rng.IntN(n) + 1
				edits[0] = SeqEdit[int]{X: x, Insert: true}
				next, _ := s.Edit(edits, cmp.Compare[int])
				edits[0] = SeqEdit[int]{X: x}
				s, _ = next.Edit(edits, cmp.Compare[int])
			}
		})
	}
}
