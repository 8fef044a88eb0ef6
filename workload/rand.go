package workload

import (
	"math/rand/v2"
	"strconv"
)

// NewRand returns a generator seeded from seed. Every function of this
// package that takes a seed derives its generators the same way.
func NewRand(seed int64) *rand.Rand {
	return rand.New(newPCG(seed, 0))
}

// newPCG returns a PCG source for stream number stream of seed. Seed and
// stream go through SplitMix64, so neighbouring seeds and streams give
// unrelated sequences.
func newPCG(seed int64, stream uint64) *rand.PCG {
	p := &rand.PCG{}
	seedPCG(p, seed, stream)
	return p
}

// seedPCG reseeds p as newPCG(seed, stream) would.
func seedPCG(p *rand.PCG, seed int64, stream uint64) {
	x := uint64(seed)
	y := splitmix64(&x) ^ stream
	a := splitmix64(&y)
	b := splitmix64(&y)
	p.Seed(a, b)
}

// splitmix64 advances *x and returns the next output of SplitMix64.
func splitmix64(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// indexName returns prefix followed by n in decimal, zero-padded to width.
func indexName(prefix string, n, width int) string {
	var buf [40]byte
	b := append(buf[:0], prefix...)
	digits := 1
	for v := n; v >= 10; v /= 10 {
		digits++
	}
	for ; digits < width; digits++ {
		b = append(b, '0')
	}
	return string(strconv.AppendUint(b, uint64(n), 10))
}
