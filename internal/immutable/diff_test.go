package immutable

import (
	"math/rand/v2"
	"testing"
)

// TestDiffVectorsAgainstGet checks DiffVectors against a plain element by
// element comparison, for versions derived from one another by random
// sets, appends and truncations (so lengths, depths and shared subtrees
// vary), in both directions.
func TestDiffVectorsAgainstGet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var a Vector[int]
		ed := a.Edit()
		for i := 0; i < r.IntN(3000); i++ {
			ed.Append(r.IntN(5))
		}
		a = ed.Done()
		ed = a.Edit()
		for k := 0; k < r.IntN(40); k++ {
			switch x := r.IntN(10); {
			case x < 6 && ed.Len() > 0:
				ed.Set(r.IntN(ed.Len()), r.IntN(5))
			case x < 8:
				for j := 0; j < r.IntN(100); j++ {
					ed.Append(r.IntN(5))
				}
			default:
				if ed.Len() > 0 {
					ed.Truncate(r.IntN(ed.Len()))
				}
			}
		}
		b := ed.Done()
		for _, pair := range [][2]Vector[int]{{a, b}, {b, a}} {
			x, y := pair[0], pair[1]
			var want, got []int
			for i := 0; i < max(x.Len(), y.Len()); i++ {
				if x.Get(i) != y.Get(i) {
					want = append(want, i)
				}
			}
			last := -1
			DiffVectors(x, y, func(i, p, q int) {
				if i <= last {
					t.Fatalf("round %d: index %d after %d: not in order", round, i, last)
				}
				last = i
				if p != x.Get(i) || q != y.Get(i) {
					t.Fatalf("round %d: index %d reported (%d, %d), versions hold (%d, %d)", round, i, p, q, x.Get(i), y.Get(i))
				}
				got = append(got, i)
			})
			if len(want) != len(got) {
				t.Fatalf("round %d: %d differences reported, %d exist (lengths %d, %d)", round, len(got), len(want), x.Len(), y.Len())
			}
		}
	}
}
