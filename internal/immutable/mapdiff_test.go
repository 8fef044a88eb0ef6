package immutable

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// DiffMaps reports exactly the keys whose values differ, against a plain
// comparison of the two versions' contents, over random edit histories.
func TestDiffMapsAgainstModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		var versions []Map[int64]
		var models []map[string]int64
		cur, model := Map[int64]{}, map[string]int64{}
		for step := 0; step < 60; step++ {
			e := cur.Edit()
			for range r.IntN(40) {
				k := fmt.Sprintf("k%d", r.IntN(300))
				if r.IntN(4) == 0 {
					e.Delete(k)
					delete(model, k)
				} else {
					v := int64(r.IntN(5))
					e.Set(k, v)
					model[k] = v
				}
			}
			cur = e.Done()
			snap := make(map[string]int64, len(model))
			for k, v := range model {
				snap[k] = v
			}
			versions, models = append(versions, cur), append(models, snap)
		}
		for i := 0; i < 40; i++ {
			a, b := r.IntN(len(versions)), r.IntN(len(versions))
			got := map[string][2]int64{}
			DiffMaps(versions[a], versions[b], func(k string, x, y int64) {
				if _, dup := got[k]; dup {
					t.Fatalf("seed %d: key %s reported twice", seed, k)
				}
				got[k] = [2]int64{x, y}
			})
			want := map[string][2]int64{}
			for k, x := range models[a] {
				if y, ok := models[b][k]; !ok || y != x {
					want[k] = [2]int64{x, models[b][k]}
				}
			}
			for k, y := range models[b] {
				if _, ok := models[a][k]; !ok {
					want[k] = [2]int64{0, y}
				}
			}
			// A key present in one version with the zero value and absent
			// from the other is reported (presence differs) with x == y:
			// the model records it the same way.
			if len(got) != len(want) {
				t.Fatalf("seed %d: versions %d/%d: got %d differences, want %d", seed, a, b, len(got), len(want))
			}
			for k, w := range want {
				if got[k] != w {
					t.Fatalf("seed %d: key %s: got %v, want %v", seed, k, got[k], w)
				}
			}
		}
	}
}

// Comparing two versions that differ in one key reads a path, not the map:
// a changed value allocates nothing; an added key, which reshapes at most
// the slots along its path, allocates a few small slices per level. The
// bound holds for every hash seed (the trie's shape depends on it).
func TestDiffMapsSkipsSharedSubtrees(t *testing.T) {
	e := Map[int64]{}.Edit()
	for i := range 100000 {
		e.Set(fmt.Sprint(i), int64(i))
	}
	a := e.Done()
	e = a.Edit()
	e.Set("17", -1)
	changed := e.Done()
	e = a.Edit()
	e.Set("new key", 5)
	added := e.Done()
	for _, tc := range []struct {
		name     string
		b        Map[int64]
		maxAlloc float64
	}{{"changed value", changed, 0}, {"added key", added, 32}} {
		calls := 0
		allocs := testing.AllocsPerRun(10, func() {
			calls = 0
			DiffMaps(a, tc.b, func(string, int64, int64) { calls++ })
		})
		if calls != 1 {
			t.Fatalf("%s: %d differences reported, want 1", tc.name, calls)
		}
		if allocs > tc.maxAlloc {
			t.Fatalf("%s: %.0f allocations for a one-key difference in 100,000 keys, want at most %.0f", tc.name, allocs, tc.maxAlloc)
		}
	}
}
