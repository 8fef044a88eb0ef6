package immutable

import (
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireMap checks m against model: length, every key, some absent keys,
// Range (each key once) and the trie invariants.
func requireMap(t testing.TB, model map[string]int, m Map[int], msg ...string) {
	t.Helper()
	require.Equal(t, len(model), m.Len(), msg)
	for k, want := range model {
		got, ok := m.Get(k)
		if !ok || got != want {
			require.Failf(t, "wrong entry", "key %q: got %d,%v want %d: %v", k, got, ok, want, fmt.Sprint(msg))
		}
	}
	for _, k := range []string{"", "absent", "k-1", "\x00"} {
		if _, in := model[k]; !in {
			_, ok := m.Get(k)
			require.False(t, ok, "absent key %q found: %v", k, fmt.Sprint(msg))
		}
	}
	seen := make(map[string]int, len(model))
	m.Range(func(k string, v int) bool {
		_, dup := seen[k]
		require.False(t, dup, "Range visited %q twice", k)
		seen[k] = v
		return true
	})
	require.Equal(t, model, seen, msg)
	checkMap(t, m)
}

// checkMap verifies the trie invariants: bitmaps match slice lengths, each
// entry sits in the slot its hash selects, hashes are the keys' hashes,
// collision nodes hold >= 2 keys of one hash, non-root nodes are canonical,
// and the entry count equals Len.
func checkMap(t testing.TB, m Map[int]) {
	t.Helper()
	if m.n == 0 {
		require.Nil(t, m.root, "empty map with a root")
		return
	}
	require.NotNil(t, m.root)
	count := 0
	var walk func(n *mnode[int], shift uint, prefix uint64, isRoot bool)
	walk = func(n *mnode[int], shift uint, prefix uint64, isRoot bool) {
		pmask := uint64(1)<<min(shift, 63) - 1
		if shift >= 64 {
			pmask = ^uint64(0)
		}
		for _, e := range n.entries {
			require.Equal(t, hashKey(e.key), e.hash, "stored hash of %q", e.key)
			require.Equal(t, prefix&pmask, e.hash&pmask, "key %q off its path", e.key)
		}
		count += len(n.entries)
		if shift >= 64 {
			require.Zero(t, n.datamap)
			require.Zero(t, n.nodemap)
			require.Empty(t, n.kids)
			require.GreaterOrEqual(t, len(n.entries), 2, "collision node")
			keys := map[string]bool{}
			for _, e := range n.entries {
				require.Equal(t, n.entries[0].hash, e.hash)
				require.False(t, keys[e.key], "duplicate key %q", e.key)
				keys[e.key] = true
			}
			return
		}
		require.Zero(t, n.datamap&n.nodemap, "slot both entry and child")
		require.Len(t, n.entries, bits.OnesCount32(n.datamap))
		require.Len(t, n.kids, bits.OnesCount32(n.nodemap))
		if !isRoot {
			require.True(t, len(n.entries) >= 2 || len(n.kids) >= 1, "non-canonical node")
		}
		i := 0
		for slot := range uint64(width) {
			if n.datamap&(1<<slot) != 0 {
				require.Equal(t, slot, (n.entries[i].hash>>shift)&levelMask, "entry slot")
				i++
			}
		}
		j := 0
		for slot := range uint64(width) {
			if n.nodemap&(1<<slot) != 0 {
				walk(n.kids[j], shift+levelBits, prefix|slot<<shift, false)
				j++
			}
		}
	}
	walk(m.root, 0, 0, true)
	require.Equal(t, m.n, count, "entry count")
}

// setHash replaces the key hash for the rest of the test.
func setHash(t *testing.T, h func(string) uint64) {
	old := hashHook
	hashHook = h
	t.Cleanup(func() { hashHook = old })
}

func TestMapZeroValue(t *testing.T) {
	var m Map[int]
	requireMap(t, map[string]int{}, m)
	e := m.Edit()
	require.False(t, e.Delete("x"))
	_, ok := e.Get("x")
	require.False(t, ok)
	requireMap(t, map[string]int{}, e.Done())
}

func TestMapBasic(t *testing.T) {
	e := Map[int]{}.Edit()
	e.Set("a", 1)
	e.Set("b", 2)
	e.Set("a", 3)
	require.Equal(t, 2, e.Len())
	v, ok := e.Get("a")
	require.True(t, ok)
	require.Equal(t, 3, v)
	m1 := e.Done()
	requireMap(t, map[string]int{"a": 3, "b": 2}, m1)

	e = m1.Edit()
	require.True(t, e.Delete("a"))
	require.False(t, e.Delete("a"))
	require.False(t, e.Delete("zzz"))
	e.Set("", 9)
	m2 := e.Done()
	requireMap(t, map[string]int{"b": 2, "": 9}, m2)
	requireMap(t, map[string]int{"a": 3, "b": 2}, m1)

	e = m2.Edit()
	require.True(t, e.Delete("b"))
	require.True(t, e.Delete(""))
	requireMap(t, map[string]int{}, e.Done())
}

func TestMapEditorAfterDone(t *testing.T) {
	e := Map[int]{}.Edit()
	e.Set("a", 1)
	m := e.Done()
	e.Set("b", 2)
	require.False(t, e.Delete("a"))
	require.Equal(t, 1, e.Len())
	v, ok := e.Get("a")
	require.True(t, ok)
	require.Equal(t, 1, v)
	requireMap(t, map[string]int{"a": 1}, m)
	requireMap(t, map[string]int{"a": 1}, e.Done())
}

func TestMapRange(t *testing.T) {
	e := Map[int]{}.Edit()
	model := map[string]int{}
	for i := range 3000 {
		k := "key-" + strconv.Itoa(i)
		e.Set(k, i)
		model[k] = i
	}
	m := e.Done()
	counts := map[string]int{}
	m.Range(func(k string, v int) bool {
		counts[k]++
		require.Equal(t, model[k], v)
		return true
	})
	require.Len(t, counts, len(model))
	for k, c := range counts {
		require.Equal(t, 1, c, "key %q", k)
	}
	// Early stop.
	calls := 0
	m.Range(func(string, int) bool {
		calls++
		return calls < 10
	})
	require.Equal(t, 10, calls)
}

// TestMapEditorReusesOwnNodes checks that nodes created by an editor are
// mutated in place: overwriting a key a second time allocates nothing.
func TestMapEditorReusesOwnNodes(t *testing.T) {
	e := Map[int]{}.Edit()
	for i := range 5000 {
		e.Set(strconv.Itoa(i), i)
	}
	m := e.Done()
	e = m.Edit()
	e.Set("17", -1) // copies the path once
	allocs := testing.AllocsPerRun(100, func() { e.Set("17", -2) })
	require.Zero(t, allocs)
	v, _ := m.Get("17")
	require.Equal(t, 17, v)
}

// MapEditor through EditInto: as TestVectorEditInto.
func TestMapEditInto(t *testing.T) {
	var e MapEditor[int]
	Map[int]{}.EditInto(&e)
	for i := range 3000 {
		e.Set(strconv.Itoa(i), i)
	}
	m := e.Done()
	var versions []Map[int]
	for round := range 50 {
		m.EditInto(&e)
		e.Set(strconv.Itoa(round*37), -round)
		e.Delete(strconv.Itoa(round*37 + 1))
		m = e.Done()
		versions = append(versions, m)
	}
	for i, m := range versions {
		for round := range 50 {
			_, ok := m.Get(strconv.Itoa(round*37 + 1))
			require.Equal(t, round > i, ok, "version %d key %d", i, round*37+1)
			v, _ := m.Get(strconv.Itoa(round * 37))
			want := round * 37
			if round <= i {
				want = -round
			}
			require.Equal(t, want, v, "version %d", i)
		}
		require.Equal(t, 3000-(i+1), m.Len())
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { m.EditInto(&e) }))
}

func TestMapGetNoAlloc(t *testing.T) {
	e := Map[int]{}.Edit()
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = "node-" + strconv.Itoa(i)
		e.Set(keys[i], i)
	}
	m := e.Done()
	sink := 0
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < len(keys); i += 97 {
			v, _ := m.Get(keys[i])
			sink += v
		}
		_, _ = m.Get("absent")
	})
	require.Zero(t, allocs)
	_ = sink
}

// mapOps runs random operations against model, checking the editor after
// every step and every key of the published version at every publication.
func mapOps(t *testing.T, rng *rand.Rand, steps, keySpace int) {
	t.Helper()
	key := func() string { return "k" + strconv.Itoa(rng.IntN(keySpace)) }
	model := map[string]int{}
	var m Map[int]
	e := m.Edit()
	for step := range steps {
		switch op := rng.IntN(100); {
		case op < 55:
			k, v := key(), rng.Int()
			e.Set(k, v)
			model[k] = v
		case op < 85:
			k := key()
			_, want := model[k]
			require.Equal(t, want, e.Delete(k), "step %d delete %q", step, k)
			delete(model, k)
		case op < 92:
			m = e.Done()
			requireMap(t, model, m, fmt.Sprintf("step %d", step))
			e = m.Edit()
		default:
			k := key()
			want, wantOK := model[k]
			got, ok := e.Get(k)
			require.Equal(t, wantOK, ok, "step %d get %q", step, k)
			require.Equal(t, want, got, "step %d get %q", step, k)
		}
		require.Equal(t, len(model), e.Len(), "step %d", step)
		for k, want := range model {
			got, ok := e.Get(k)
			if !ok || got != want {
				require.Failf(t, "wrong entry", "step %d key %q: got %d,%v want %d", step, k, got, ok, want)
			}
		}
	}
	requireMap(t, model, e.Done())
}

func TestMapModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 2))
			mapOps(t, rng, 1500, []int{8, 100, 1000, 3000}[seed%4])
		})
	}
}

// collisionHashes are hash functions that force collisions of every kind.
var collisionHashes = map[string]func(string) uint64{
	// Every key has the same full hash: a single collision node.
	"all equal": func(string) uint64 { return 0xdeadbeefcafef00d },
	// Four full hashes: collision nodes under one common branch.
	"four hashes": func(k string) uint64 {
		return uint64(len(k)%4) << 62
	},
	// Equal low 60 bits, differing top bits: deep chains ending in a split
	// at the last (4-bit) level.
	"deep prefix": func(k string) uint64 {
		return 0x0123456789abcde | uint64(maphash64(k)%3)<<60
	},
	// Few distinct values in the low bits only, so keys collide on
	// prefixes of every length and fully on some.
	"small space": func(k string) uint64 {
		h := maphash64(k)
		return (h % 7) | (h%5)<<20 | (h%3)<<63
	},
}

func maphash64(k string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(k); i++ {
		h ^= uint64(k[i])
		h *= 1099511628211
	}
	return h
}

func TestMapCollisions(t *testing.T) {
	for name, h := range collisionHashes {
		t.Run(name, func(t *testing.T) {
			setHash(t, h)
			for seed := range uint64(4) {
				rng := rand.New(rand.NewPCG(seed, 3))
				mapOps(t, rng, 800, []int{5, 40, 200, 200}[seed])
			}
		})
	}
}

func TestMapCollisionNodeShape(t *testing.T) {
	setHash(t, collisionHashes["all equal"])
	e := Map[int]{}.Edit()
	e.Set("a", 1)
	e.Set("b", 2)
	e.Set("c", 3)
	m := e.Done()
	requireMap(t, map[string]int{"a": 1, "b": 2, "c": 3}, m)
	// Descend to the collision node: 13 single-child levels.
	n := m.root
	depth := 0
	for len(n.kids) == 1 {
		n = n.kids[0]
		depth++
	}
	require.Equal(t, 13, depth)
	require.Len(t, n.entries, 3)

	// Deleting down to one key collapses the chain into the root.
	e = m.Edit()
	require.True(t, e.Delete("a"))
	require.True(t, e.Delete("c"))
	m2 := e.Done()
	requireMap(t, map[string]int{"b": 2}, m2)
	require.Empty(t, m2.root.kids)
	require.Len(t, m2.root.entries, 1)
	requireMap(t, map[string]int{"a": 1, "b": 2, "c": 3}, m)
}

// TestMapVersionIndependence takes many versions, including branches edited
// from old versions, and checks at the end that every version still equals
// the model copy taken when it was published.
func TestMapVersionIndependence(t *testing.T) {
	run := func(t *testing.T, keySpace int) {
		rng := rand.New(rand.NewPCG(11, uint64(keySpace)))
		type version struct {
			m     Map[int]
			model map[string]int
		}
		versions := []version{{model: map[string]int{}}}
		for range 300 {
			base := versions[len(versions)-1]
			if rng.IntN(4) == 0 {
				base = versions[rng.IntN(len(versions))] // branch from an old version
			}
			model := maps.Clone(base.model)
			e := base.m.Edit()
			for range 1 + rng.IntN(40) {
				k := "k" + strconv.Itoa(rng.IntN(keySpace))
				if rng.IntN(3) == 0 {
					e.Delete(k)
					delete(model, k)
				} else {
					v := rng.Int()
					e.Set(k, v)
					model[k] = v
				}
			}
			versions = append(versions, version{e.Done(), model})
		}
		for i, ver := range versions {
			requireMap(t, ver.model, ver.m, fmt.Sprintf("version %d", i))
		}
	}
	t.Run("maphash", func(t *testing.T) { run(t, 500) })
	t.Run("collisions", func(t *testing.T) {
		setHash(t, collisionHashes["small space"])
		run(t, 150)
	})
}

// TestMapConcurrentReaders runs readers on old and new versions while a
// writer builds new ones; run with -race.
func TestMapConcurrentReaders(t *testing.T) {
	type published struct {
		m     Map[int]
		model map[string]int
	}
	check := func(p *published) error {
		if p.m.Len() != len(p.model) {
			return fmt.Errorf("len %d, want %d", p.m.Len(), len(p.model))
		}
		for k, want := range p.model {
			if got, ok := p.m.Get(k); !ok || got != want {
				return fmt.Errorf("key %q = %d,%v, want %d", k, got, ok, want)
			}
		}
		n := 0
		p.m.Range(func(string, int) bool { n++; return true })
		if n != len(p.model) {
			return fmt.Errorf("Range visited %d, want %d", n, len(p.model))
		}
		return nil
	}
	cur := &published{model: map[string]int{}}
	readWhilePublishing(t, cur, check, func(publish func(*published)) {
		rng := rand.New(rand.NewPCG(5, 5))
		for range 400 {
			model := maps.Clone(cur.model)
			e := cur.m.Edit()
			for range 16 {
				k := "node-" + strconv.Itoa(rng.IntN(1500))
				if rng.IntN(4) == 0 {
					e.Delete(k)
					delete(model, k)
				} else {
					v := rng.Int()
					e.Set(k, v)
					model[k] = v
				}
			}
			cur = &published{e.Done(), model}
			publish(cur)
		}
	})
}

// readWhilePublishing runs 3 reader goroutines while write publishes new
// versions (publish makes a version the latest). Each reader checks, in a
// loop until write returns, the version it loaded first (reloaded every 8
// rounds) and the latest one; check returns what is wrong with a version,
// or nil. Every reader error fails t, and t fails if no read ran.
func readWhilePublishing[P any](t *testing.T, initial *P, check func(*P) error, write func(publish func(*P))) {
	var latest atomic.Pointer[P]
	latest.Store(initial)
	var done atomic.Bool
	var reads atomic.Int64
	var wg, started sync.WaitGroup
	errs := make(chan error, 3) // one per reader at most
	for r := range 3 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			first := latest.Load()
			for i := 0; !done.Load(); i++ {
				reads.Add(1)
				for _, p := range []*P{first, latest.Load()} {
					if err := check(p); err != nil {
						errs <- fmt.Errorf("reader %d: %w", r, err)
						return
					}
				}
				if i%8 == 0 {
					first = latest.Load()
				}
			}
		}()
	}
	started.Wait()
	write(latest.Store)
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Positive(t, reads.Load())
}

var benchSizes = []int{5000, 50000, 150000}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("node-%06d", i)
	}
	return keys
}

func buildMap(keys []string) Map[int] {
	e := Map[int]{}.Edit()
	for i, k := range keys {
		e.Set(k, i)
	}
	return e.Done()
}

func BenchmarkMapGet(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			keys := benchKeys(n)
			m := buildMap(keys)
			b.ReportAllocs()
			i, sink := 0, 0
			for b.Loop() {
				v, _ := m.Get(keys[i])
				sink += v
				i = (i + 7919) % n
			}
			_ = sink
		})
	}
}

// BenchmarkGoMapGet is the built-in map baseline for BenchmarkMapGet.
func BenchmarkGoMapGet(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			keys := benchKeys(n)
			m := make(map[string]int, n)
			for i, k := range keys {
				m[k] = i
			}
			b.ReportAllocs()
			i, sink := 0, 0
			for b.Loop() {
				sink += m[keys[i]]
				i = (i + 7919) % n
			}
			_ = sink
		})
	}
}

// BenchmarkMapSet measures one Set of an existing key published as its own
// version (Edit, Set, Done): the path copy.
func BenchmarkMapSet(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			keys := benchKeys(n)
			m := buildMap(keys)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e := m.Edit()
				e.Set(keys[i], i)
				m = e.Done()
				i = (i + 7919) % n
			}
		})
	}
}

// BenchmarkMapSetTransient measures Set of an existing key within one long
// edit.
func BenchmarkMapSetTransient(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			keys := benchKeys(n)
			e := buildMap(keys).Edit()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e.Set(keys[i], i)
				i = (i + 7919) % n
			}
		})
	}
}

// BenchmarkMapBatchEdit measures an edit of k existing keys of a 50,000-key
// map, then Done.
func BenchmarkMapBatchEdit(b *testing.B) {
	const n = 50000
	keys := benchKeys(n)
	for _, k := range []int{1, 16, 256} {
		b.Run(fmt.Sprint(k), func(b *testing.B) {
			m := buildMap(keys)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e := m.Edit()
				for range k {
					e.Set(keys[i], i)
					i = (i + 7919) % n
				}
				m = e.Done()
			}
		})
	}
}

// BenchmarkMapBatchInsertDelete measures an edit inserting and deleting k
// keys of a 50,000-key map, then Done.
func BenchmarkMapBatchInsertDelete(b *testing.B) {
	const n = 50000
	keys := benchKeys(n + 256)
	for _, k := range []int{1, 16, 256} {
		b.Run(fmt.Sprint(k), func(b *testing.B) {
			m := buildMap(keys[:n])
			b.ReportAllocs()
			for b.Loop() {
				e := m.Edit()
				for _, key := range keys[n : n+k] {
					e.Set(key, 1)
				}
				for _, key := range keys[n : n+k] {
					e.Delete(key)
				}
				m = e.Done()
			}
		})
	}
}

// TestMapBranchesDoNotShareCapacity edits two branches of a version in which
// a node's entries were emptied but kept their array: both branches insert
// into that node, and neither may see the other's entry.
func TestMapBranchesDoNotShareCapacity(t *testing.T) {
	hashes := map[string]uint64{"a": 1, "b": 2, "c1": 3, "c2": 3 | 1<<5, "x": 4, "y": 5}
	setHash(t, func(k string) uint64 { return hashes[k] })
	e := Map[int]{}.Edit()
	for _, k := range []string{"a", "b", "c1", "c2"} {
		e.Set(k, 1)
	}
	require.True(t, e.Delete("a"))
	require.True(t, e.Delete("b"))
	base := e.Done()
	require.Empty(t, base.root.entries)
	require.Len(t, base.root.kids, 1)

	e1, e2 := base.Edit(), base.Edit()
	e1.Set("x", 10)
	e2.Set("y", 20)
	m1, m2 := e1.Done(), e2.Done()
	requireMap(t, map[string]int{"c1": 1, "c2": 1}, base)
	requireMap(t, map[string]int{"c1": 1, "c2": 1, "x": 10}, m1)
	requireMap(t, map[string]int{"c1": 1, "c2": 1, "y": 20}, m2)
}

// TestConcurrentEditors edits one version of each type from several
// goroutines at once; run with -race.
func TestConcurrentEditors(t *testing.T) {
	me := Map[int]{}.Edit()
	ve := Vector[int]{}.Edit()
	for i := range 2000 {
		me.Set(strconv.Itoa(i), i)
		ve.Append(i)
	}
	m, v := me.Done(), ve.Done()
	var wg sync.WaitGroup
	results := make([]struct {
		m Map[int]
		v Vector[int]
	}, 4)
	for g := range results {
		wg.Go(func() {
			me, ve := m.Edit(), v.Edit()
			for i := g; i < 2000; i += 3 {
				me.Set(strconv.Itoa(i), -g)
				ve.Set(i, -g)
			}
			results[g].m, results[g].v = me.Done(), ve.Done()
		})
	}
	wg.Wait()
	for g, r := range results {
		for i := range 2000 {
			want := i
			if i >= g && (i-g)%3 == 0 {
				want = -g
			}
			got, _ := r.m.Get(strconv.Itoa(i))
			require.Equal(t, want, got, "map %d key %d", g, i)
			require.Equal(t, want, r.v.Get(i), "vector %d index %d", g, i)
		}
	}
	for i := range 2000 {
		got, _ := m.Get(strconv.Itoa(i))
		require.Equal(t, i, got)
		require.Equal(t, i, v.Get(i))
	}
}

// Prefetch only reads: in the middle of a transient edit, over present and
// absent keys, more keys than PrefetchMax, and keys whose paths end in
// collision nodes, the editor goes on to build exactly what an editor that
// never prefetched builds. An empty or finished editor reads nothing.
func TestMapEditorPrefetchOnlyReads(t *testing.T) {
	require.Zero(t, Map[int]{}.Edit().Prefetch([]string{"a"}), "empty editor")
	for name, h := range map[string]func(string) uint64{"maphash": nil, "deep prefix": collisionHashes["deep prefix"], "four hashes": collisionHashes["four hashes"]} {
		t.Run(name, func(t *testing.T) {
			if h != nil {
				setHash(t, h)
			}
			rng := rand.New(rand.NewPCG(7, 7))
			model := map[string]int{}
			var base Map[int]
			for range 3 { // versions shared with the editors below
				e := base.Edit()
				for range 700 {
					k := fmt.Sprint("k", rng.IntN(3000))
					e.Set(k, len(k))
					model[k] = len(k)
				}
				base = e.Done()
			}
			var keys []string
			for i := range 3 * PrefetchMax {
				keys = append(keys, fmt.Sprint("k", rng.IntN(3000)), fmt.Sprint("absent", i))
			}
			with, without := base.Edit(), base.Edit()
			for i, k := range keys {
				if i%50 == 0 {
					require.NotPanics(t, func() { _ = with.Prefetch(keys[i:]) })
				}
				if i%3 == 0 {
					with.Delete(k)
					without.Delete(k)
					delete(model, k)
				} else {
					with.Set(k, i)
					without.Set(k, i)
					model[k] = i
				}
			}
			got := with.Done()
			requireMap(t, model, got)
			requireMap(t, model, without.Done())
			require.Zero(t, with.Prefetch(keys), "a finished editor reads nothing")
		})
	}
}
