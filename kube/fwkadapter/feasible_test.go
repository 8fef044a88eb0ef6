package fwkadapter

import "testing"

// NumFeasibleNodesToFind against upstream's table: fewer than 100 nodes
// all; adaptive 50% minus 1% per 125 nodes, at least 5%, at least 100.
func TestNumFeasibleNodesToFind(t *testing.T) {
	for _, tc := range []struct {
		pct  int32
		n    int
		want int
	}{
		{0, 10, 10}, {0, 99, 99}, {0, 100, 100}, {0, 1000, 420}, {0, 5000, 500},
		{0, 6000, 300}, {0, 50000, 2500}, {10, 500, 100}, {10, 5000, 500}, {100, 5000, 5000}, {1, 50000, 500},
	} {
		if got := NumFeasibleNodesToFind(tc.pct, tc.n); got != tc.want {
			t.Errorf("NumFeasibleNodesToFind(%d, %d) = %d, want %d", tc.pct, tc.n, got, tc.want)
		}
	}
}
