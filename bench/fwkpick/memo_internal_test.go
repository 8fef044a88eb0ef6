package fwkpick

import (
	"slices"
	"testing"
)

// The tables kept are bounded by their entries: many at a few nodes,
// never fewer than memoMinTables.
func TestMemoMaxTables(t *testing.T) {
	for _, tc := range []struct{ nodes, want int }{
		{0, memoMaxEntries}, {1, memoMaxEntries}, {5000, 209}, {50000, memoMinTables}, {10_000_000, memoMinTables},
	} {
		if got := memoMaxTables(tc.nodes); got != tc.want {
			t.Errorf("memoMaxTables(%d) = %d, want %d", tc.nodes, got, tc.want)
		}
	}
}

// touch makes a table the last used; eviction takes the one used longest ago.
func TestMemoTouch(t *testing.T) {
	m := &memo{order: []string{"a", "b", "c"}}
	m.touch("a")
	if want := []string{"b", "c", "a"}; !slices.Equal(m.order, want) {
		t.Fatalf("after touch(a): %v, want %v", m.order, want)
	}
	m.touch("a")
	m.touch("zz") // not kept: nothing moves
	if want := []string{"b", "c", "a"}; !slices.Equal(m.order, want) {
		t.Fatalf("after touch(a), touch(zz): %v, want %v", m.order, want)
	}
}
