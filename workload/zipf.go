package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Zipf is not safe for concurrent use (nor is its *rand.Rand). It draws
// integers in [0, n) with P(k) proportional to 1/(k+1)^s, so 0 is the most
// frequent (the hottest key). Any s >= 0 is allowed: 0 is uniform, and unlike
// math/rand/v2.Zipf, s <= 1 (as otter's benchmarks use) works.
type Zipf struct {
	r   *rand.Rand
	cdf []float64 // cdf[k] = P(X <= k); cdf[n-1] = 1
}

// NewZipf returns a Zipf generator over [0, n) with exponent s drawing from
// r. It takes O(n) time and memory. It panics if n < 1 or s is negative or
// not finite.
func NewZipf(r *rand.Rand, n int, s float64) *Zipf {
	if n < 1 || s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		panic(fmt.Sprintf("workload: invalid Zipf n=%d s=%v", n, s))
	}
	cdf := make([]float64, n)
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(float64(k+1), -s)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	cdf[n-1] = 1
	return &Zipf{r: r, cdf: cdf}
}

// Next returns the next value, in [0, N()).
func (z *Zipf) Next() int {
	u := z.r.Float64() // in [0, 1)
	lo, hi := 0, len(z.cdf)-1
	for lo < hi { // smallest k with cdf[k] > u
		mid := int(uint(lo+hi) >> 1)
		if z.cdf[mid] > u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// N returns the size of the range.
func (z *Zipf) N() int { return len(z.cdf) }
