package workload

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestZipfRange(t *testing.T) {
	for _, n := range []int{1, 2, 10, 5000} {
		for _, s := range []float64{0, 0.5, 0.99, 1, 1.2} {
			z := NewZipf(NewRand(1), n, s)
			require.Equal(t, n, z.N())
			for range 20000 {
				k := z.Next()
				require.True(t, k >= 0 && k < n, "n=%d s=%v: %d", n, s, k)
			}
		}
	}
}

func TestZipfDistribution(t *testing.T) {
	const n, draws = 1000, 200000
	z := NewZipf(NewRand(2), n, 1)
	counts := make([]int, n)
	for range draws {
		counts[z.Next()]++
	}
	h := 0.0
	for k := 1; k <= n; k++ {
		h += 1 / float64(k)
	}
	for _, k := range []int{0, 1, 9} {
		want := draws / (float64(k+1) * h)
		require.InDelta(t, want, counts[k], 5*math.Sqrt(want), "rank %d", k)
	}
	require.Greater(t, counts[0], counts[n-1]*100)

	u := NewZipf(NewRand(3), 10, 0)
	uc := make([]int, 10)
	for range 100000 {
		uc[u.Next()]++
	}
	for _, c := range uc {
		require.InDelta(t, 10000, c, 500)
	}
}

func TestZipfDeterministic(t *testing.T) {
	a, b := NewZipf(NewRand(4), 100, 1.1), NewZipf(NewRand(4), 100, 1.1)
	for range 1000 {
		require.Equal(t, a.Next(), b.Next())
	}
}

func TestZipfPanics(t *testing.T) {
	require.Panics(t, func() { NewZipf(NewRand(1), 0, 1) })
	require.Panics(t, func() { NewZipf(NewRand(1), 10, -1) })
	require.Panics(t, func() { NewZipf(NewRand(1), 10, math.NaN()) })
	require.Panics(t, func() { NewZipf(NewRand(1), 10, math.Inf(1)) })
}
