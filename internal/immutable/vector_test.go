package immutable

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requireVector checks v against model: length, every element, the
// out-of-range reads, Range, and the internal invariants.
func requireVector(t testing.TB, model []int, v Vector[int], msg ...string) {
	t.Helper()
	require.Equal(t, len(model), v.Len(), msg)
	for i, x := range model {
		if got := v.Get(i); got != x {
			require.Equal(t, x, got, "index %d: %v", i, msg)
		}
	}
	require.Zero(t, v.Get(-1), msg)
	require.Zero(t, v.Get(len(model)), msg)
	var ranged []int
	v.Range(func(i int, x int) bool {
		require.Equal(t, len(ranged), i)
		ranged = append(ranged, x)
		return true
	})
	require.Equal(t, len(model), len(ranged), msg)
	require.True(t, slices.Equal(model, ranged), msg)
	checkVector(t, v)
}

// checkVector verifies the trie shape: a nil root iff empty, a height that
// fits the length, and zero elements at every index >= Len.
func checkVector(t testing.TB, v Vector[int]) {
	t.Helper()
	if v.n == 0 {
		require.Nil(t, v.root)
		return
	}
	require.NotNil(t, v.root)
	n, shift := int(v.n), uint(v.shift)
	require.GreaterOrEqual(t, shift, uint(leafBits))
	require.Zero(t, (shift-leafBits)%vecBits)
	require.Zero(t, (n-1)>>(shift+vecBits), "height too small")
	capacity := 1 << (shift + vecBits)
	// Beyond Len, all slots must be zero (sampled densely near Len).
	for i := n; i < capacity && i < n+2*vecWidth*vecWidth; i++ {
		require.Zero(t, vget(v.root, shift, i), "stale slot %d beyond len %d", i, n)
	}
}

func TestVectorZeroValue(t *testing.T) {
	var v Vector[int]
	requireVector(t, nil, v)
	require.Zero(t, v.Get(0))
	require.Zero(t, v.Get(-5))
	e := v.Edit()
	require.Zero(t, e.Len())
	require.Zero(t, e.Get(0))
	e.Truncate(0)
	e.Set(-1, 7)
	requireVector(t, nil, e.Done())
	requireVector(t, nil, v)

	var s Vector[string]
	require.Equal(t, "", s.Get(3))
}

func TestVectorSetGrowth(t *testing.T) {
	for _, n := range []int{1, 31, 32, 33, 1023, 1024, 1025, 32768, 32769, 40000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := Vector[int]{}.Edit()
			model := make([]int, n)
			for i := range n {
				e.Append(i + 1)
				model[i] = i + 1
			}
			require.Equal(t, n, e.Len())
			requireVector(t, model, e.Done())
		})
	}
}

func TestVectorSparseGrowth(t *testing.T) {
	e := Vector[int]{}.Edit()
	e.Set(100000, 7)
	require.Equal(t, 100001, e.Len())
	v1 := e.Done()
	model := make([]int, 100001)
	model[100000] = 7
	requireVector(t, model, v1)

	e = v1.Edit()
	e.Set(5, 1)
	e.Set(2_000_000, 9)
	v2 := e.Done()
	requireVector(t, model, v1)
	model2 := make([]int, 2_000_001)
	model2[5], model2[100000], model2[2_000_000] = 1, 7, 9
	require.Equal(t, len(model2), v2.Len())
	for _, i := range []int{0, 5, 6, 99999, 100000, 100001, 1_999_999, 2_000_000} {
		require.Equal(t, model2[i], v2.Get(i), "index %d", i)
	}
}

func TestVectorTruncate(t *testing.T) {
	tests := []struct{ n, to, regrow int }{
		{n: 10, to: 5, regrow: 10},
		{n: 32, to: 31, regrow: 40},
		{n: 33, to: 32, regrow: 64},
		{n: 1025, to: 1, regrow: 2000},
		{n: 1025, to: 32, regrow: 1100},
		{n: 40000, to: 1024, regrow: 40000},
		{n: 40000, to: 1025, regrow: 33000},
		{n: 40000, to: 0, regrow: 100},
		{n: 5, to: 5, regrow: 6},
		{n: 5, to: 9, regrow: 6},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d-%d-%d", tc.n, tc.to, tc.regrow), func(t *testing.T) {
			model := make([]int, tc.n)
			e := Vector[int]{}.Edit()
			for i := range tc.n {
				model[i] = i + 1
				e.Set(i, i+1)
			}
			full := e.Done()
			fullModel := slices.Clone(model)

			e = full.Edit()
			e.Truncate(tc.to)
			if tc.to < len(model) {
				model = model[:tc.to]
			}
			require.Equal(t, len(model), e.Len())
			cut := e.Done()
			requireVector(t, model, cut)

			// Regrow: new slots must be zero, not the truncated values.
			e = cut.Edit()
			e.Set(tc.regrow-1, -1)
			for len(model) < tc.regrow {
				model = append(model, 0)
			}
			model[tc.regrow-1] = -1
			requireVector(t, model, e.Done())
			requireVector(t, fullModel, full)
		})
	}
}

func TestVectorEditorAfterDone(t *testing.T) {
	e := Vector[int]{}.Edit()
	e.Append(1)
	e.Append(2)
	v := e.Done()
	e.Set(0, 10)
	e.Append(3)
	e.Truncate(0)
	require.Equal(t, 2, e.Len())
	require.Equal(t, 1, e.Get(0))
	requireVector(t, []int{1, 2}, v)
	requireVector(t, []int{1, 2}, e.Done())
}

func TestVectorRangeStops(t *testing.T) {
	e := Vector[int]{}.Edit()
	for i := range 100 {
		e.Append(i)
	}
	v := e.Done()
	var seen []int
	v.Range(func(i, x int) bool {
		seen = append(seen, i)
		return i < 40
	})
	require.Len(t, seen, 41)
}

// TestVectorEditorReusesOwnNodes checks that nodes created by an editor are
// mutated in place: a second Set in the same leaf allocates nothing.
func TestVectorEditorReusesOwnNodes(t *testing.T) {
	e := Vector[int]{}.Edit()
	for i := range 5000 {
		e.Append(i)
	}
	v := e.Done()
	e = v.Edit()
	e.Set(100, -1) // copies the path once
	allocs := testing.AllocsPerRun(100, func() { e.Set(101, -2) })
	require.Zero(t, allocs)
	require.Equal(t, 101, v.Get(101))
}

// One editor's memory reused by EditInto, transaction after transaction:
// each transaction copies what it shares with the versions before it (a
// reused editor never writes into a node it built for an earlier version),
// and starting one allocates nothing.
func TestVectorEditInto(t *testing.T) {
	var e VectorEditor[int]
	Vector[int]{}.EditInto(&e)
	model := make([]int, 3000)
	for i := range model {
		e.Append(i)
		model[i] = i
	}
	var versions []Vector[int]
	var models [][]int
	v := e.Done()
	for round := range 50 {
		v.EditInto(&e)
		e.Set(round*37%len(model), -round)
		model[round*37%len(model)] = -round
		v = e.Done()
		versions, models = append(versions, v), append(models, slices.Clone(model))
	}
	for i := range versions {
		requireVector(t, models[i], versions[i], fmt.Sprint("version ", i))
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { v.EditInto(&e) }))
}

func TestVectorModel(t *testing.T) {
	for seed := range uint64(9) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			maxLen := []int{40, 1100, 2500}[seed%3]
			var v Vector[int]
			var model []int
			e := v.Edit()
			for step := range 1200 {
				switch op := rng.IntN(100); {
				case op < 50:
					i := 0
					if len(model) > 0 {
						i = rng.IntN(len(model))
					}
					x := rng.Int()
					e.Set(i, x)
					if i == len(model) {
						model = append(model, x)
					} else {
						model[i] = x
					}
				case op < 75:
					if len(model) >= maxLen {
						continue
					}
					i := len(model) + rng.IntN(min(70, maxLen-len(model)))
					x := rng.Int()
					e.Set(i, x)
					model = append(model, make([]int, i+1-len(model))...)
					model[i] = x
				case op < 80:
					to := rng.IntN(len(model) + 2)
					e.Truncate(to)
					if to < len(model) {
						model = model[:to]
					}
				case op < 90:
					// Publish and continue from the published version.
					v = e.Done()
					requireVector(t, model, v, fmt.Sprintf("step %d", step))
					e = v.Edit()
				default:
					i := rng.IntN(len(model) + 3)
					want := 0
					if i < len(model) {
						want = model[i]
					}
					require.Equal(t, want, e.Get(i), "step %d", step)
				}
				require.Equal(t, len(model), e.Len(), "step %d", step)
				for i, x := range model {
					if got := e.Get(i); got != x {
						require.Equal(t, x, got, "step %d index %d", step, i)
					}
				}
			}
			requireVector(t, model, e.Done())
		})
	}
}

// TestVectorVersionIndependence takes many versions, including branches
// edited from old versions, and checks at the end that every version still
// equals the model copy taken when it was published.
func TestVectorVersionIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	type version struct {
		v     Vector[int]
		model []int
	}
	versions := []version{{}}
	for range 300 {
		base := versions[len(versions)-1]
		if rng.IntN(4) == 0 {
			base = versions[rng.IntN(len(versions))] // branch from an old version
		}
		model := slices.Clone(base.model)
		e := base.v.Edit()
		for range 1 + rng.IntN(40) {
			switch op := rng.IntN(20); {
			case op == 0:
				to := rng.IntN(len(model) + 1)
				e.Truncate(to)
				model = model[:to]
			case op < 8 || len(model) == 0:
				x := rng.Int()
				e.Append(x)
				model = append(model, x)
			default:
				i, x := rng.IntN(len(model)), rng.Int()
				e.Set(i, x)
				model[i] = x
			}
		}
		versions = append(versions, version{e.Done(), model})
	}
	for i, ver := range versions {
		requireVector(t, ver.model, ver.v, fmt.Sprintf("version %d", i))
	}
}

// TestVectorConcurrentReaders runs readers on old and new versions while a
// writer builds new ones; run with -race.
func TestVectorConcurrentReaders(t *testing.T) {
	type published struct {
		v     Vector[int]
		model []int
	}
	check := func(p *published) error {
		if p.v.Len() != len(p.model) {
			return fmt.Errorf("len %d, want %d", p.v.Len(), len(p.model))
		}
		for j, x := range p.model {
			if got := p.v.Get(j); got != x {
				return fmt.Errorf("index %d = %d, want %d", j, got, x)
			}
		}
		return nil
	}
	cur := &published{}
	readWhilePublishing(t, cur, check, func(publish func(*published)) {
		rng := rand.New(rand.NewPCG(3, 3))
		for range 400 {
			model := slices.Clone(cur.model)
			e := cur.v.Edit()
			for range 16 {
				if len(model) < 2000 && rng.IntN(2) == 0 {
					e.Append(len(model))
					model = append(model, len(model))
				} else if len(model) > 0 {
					i := rng.IntN(len(model))
					e.Set(i, -i)
					model[i] = -i
				}
			}
			cur = &published{e.Done(), model}
			publish(cur)
		}
	})
}

func TestVectorGetNoAlloc(t *testing.T) {
	e := Vector[int]{}.Edit()
	for i := range 5000 {
		e.Append(i)
	}
	v := e.Done()
	var sink int
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 5000; i += 97 {
			sink += v.Get(i)
		}
	})
	require.Zero(t, allocs)
	_ = sink
}

func buildVector(n int) Vector[int] {
	e := Vector[int]{}.Edit()
	for i := range n {
		e.Append(i)
	}
	return e.Done()
}

func BenchmarkVectorGet(b *testing.B) {
	for _, n := range []int{5000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			v := buildVector(n)
			b.ReportAllocs()
			i, sink := 0, 0
			for b.Loop() {
				sink += v.Get(i)
				i = (i + 7919) % n
			}
			_ = sink
		})
	}
}

// BenchmarkVectorSet measures one Set published as its own version
// (Edit, Set, Done): the path copy.
func BenchmarkVectorSet(b *testing.B) {
	for _, n := range []int{5000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			v := buildVector(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e := v.Edit()
				e.Set(i, i)
				v = e.Done()
				i = (i + 7919) % n
			}
		})
	}
}

// BenchmarkVectorSetTransient measures Set within one long edit.
func BenchmarkVectorSetTransient(b *testing.B) {
	for _, n := range []int{5000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e := buildVector(n).Edit()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e.Set(i, i)
				i = (i + 7919) % n
			}
		})
	}
}

func BenchmarkVectorBatchEdit(b *testing.B) {
	const n = 50000
	for _, k := range []int{1, 16, 256} {
		b.Run(fmt.Sprint(k), func(b *testing.B) {
			v := buildVector(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e := v.Edit()
				for range k {
					e.Set(i, i)
					i = (i + 7919) % n
				}
				v = e.Done()
			}
		})
	}
}

// PrefetchLeaf only reads: on a committed vector and on an editor in the
// middle of a transient edit, at indexes in range, out of range and in
// zero subtrees of a sparse vector, the vector and what the editor builds
// are unchanged, and an absent leaf reads nothing.
func TestVectorPrefetchLeafOnlyReads(t *testing.T) {
	require.Zero(t, Vector[int]{}.PrefetchLeaf(0), "empty vector")
	e := Vector[int]{}.Edit()
	model := make([]int, 5000)
	for _, i := range []int{0, 1, 31, 32, 1023, 1024, 4999} { // sparse: zero subtrees between
		e.Set(i, i+1)
		model[i] = i + 1
	}
	v := e.Done()
	require.Zero(t, v.PrefetchLeaf(2000), "a zero subtree has no leaf")
	require.Zero(t, v.PrefetchLeaf(-1))
	require.Zero(t, v.PrefetchLeaf(5000))
	ed := v.Edit()
	for i := range model {
		_ = v.PrefetchLeaf(i) + ed.PrefetchLeaf(i)
		if i%7 == 0 {
			ed.Set(i, -i)
		}
	}
	requireVector(t, model, v)
	want := slices.Clone(model)
	for i := range want {
		if i%7 == 0 {
			want[i] = -i
		}
	}
	requireVector(t, want, ed.Done())
}

// A one-element edit of a published version copies one leaf and the narrow
// branches above it: for 5000 pointers (three levels), two 16-pointer
// branches (144 bytes each) and a 32-pointer leaf (288), 576 bytes, not
// three 32-pointer nodes (864 bytes with 32-wide branches).
func TestVectorPathCopyBytes(t *testing.T) {
	e := Vector[*int]{}.Edit()
	x := new(int)
	for range 5000 {
		e.Append(x)
	}
	v := e.Done()
	var ed VectorEditor[*int]
	const rounds = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range rounds {
		v.EditInto(&ed)
		ed.Set(i*37%5000, nil)
		v = ed.Done()
	}
	runtime.ReadMemStats(&after)
	perEdit := (after.TotalAlloc - before.TotalAlloc) / rounds
	require.LessOrEqual(t, perEdit, uint64(2*144+288+48), "bytes per one-element edit (a little slack for the runtime's own)")
	require.Equal(t, 3, vectorDepth(v), "as deep as with 32-wide branches: reads walk no more nodes")
	require.Equal(t, 4, vectorDepth(buildVector(50000)))
}

// vectorDepth returns the number of nodes on a root-to-leaf path.
func vectorDepth[T any](v Vector[T]) int {
	if v.root == nil {
		return 0
	}
	return int((v.shift-leafBits)/vecBits) + 2
}

// Lengths at the leaf and branch boundaries: every element reads back, the
// shape holds, and truncating to each boundary and growing again exposes
// zeros.
func TestVectorLeafBoundaries(t *testing.T) {
	for _, n := range []int{1, leafWidth - 1, leafWidth, leafWidth + 1, leafWidth * vecWidth, leafWidth*vecWidth + 1, leafWidth * vecWidth * vecWidth, leafWidth*vecWidth*vecWidth + 1, 40000} {
		v := buildVector(n)
		checkVector(t, v)
		for i := range n {
			require.Equal(t, i, v.Get(i), "n=%d i=%d", n, i)
		}
		for _, m := range []int{n / 2, n - 1, leafWidth, leafWidth + 1} {
			if m <= 0 || m >= n {
				continue
			}
			e := v.Edit()
			e.Truncate(m)
			e.Set(n-1, -1)
			w := e.Done()
			checkVector(t, w)
			for i := range n {
				want := 0
				switch {
				case i < m:
					want = i
				case i == n-1:
					want = -1
				}
				require.Equal(t, want, w.Get(i), "n=%d m=%d i=%d", n, m, i)
			}
			var diffs int
			DiffVectors(v, w, func(i int, x, y int) {
				diffs++
				require.Equal(t, v.Get(i), x)
				require.Equal(t, w.Get(i), y)
			})
			want := n - m // indices m..n-1 differ except those equal to 0 in v (index 0 is never among them)
			require.Equal(t, want, diffs, "n=%d m=%d", n, m)
		}
	}
}

// A Vector value is 16 bytes (a snapshot copies one per publication), and
// Set past MaxVectorLen does nothing rather than wrap the 32-bit length.
func TestVectorValueSize(t *testing.T) {
	require.Equal(t, uintptr(16), unsafe.Sizeof(Vector[*int]{}))
	e := buildVector(3).Edit()
	e.Set(MaxVectorLen, 7)
	e.Set(MaxVectorLen+1, 7)
	v := e.Done()
	require.Equal(t, 3, v.Len())
	require.Equal(t, 0, v.Get(MaxVectorLen))
}
