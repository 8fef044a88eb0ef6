package workload

import "math/rand/v2"

// NewRand returns a generator seeded from seed, as used by every function of
// this package that takes a seed.
func NewRand(seed int64) *rand.Rand {
	return rand.New(newPCG(seed, 0))
}

// newPCG returns a PCG source for the independent stream number stream of
// seed. The two words are mixed so that neighbouring seeds and streams give
// unrelated sequences.
func newPCG(seed int64, stream uint64) *rand.PCG {
	a, b := streamSeeds(seed, stream)
	return rand.NewPCG(a, b)
}

func streamSeeds(seed int64, stream uint64) (uint64, uint64) {
	x := uint64(seed)
	a := splitmix64(&x)
	x ^= stream * 0xd1b54a32d192ed03
	b := splitmix64(&x)
	return a ^ splitmix64(&x), b
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
	var buf [32]byte
	b := append(buf[:0], prefix...)
	digits := 1
	for v := n; v >= 10; v /= 10 {
		digits++
	}
	for ; digits < width; digits++ {
		b = append(b, '0')
	}
	b = appendUint(b, uint64(n))
	return string(b)
}

func appendUint(b []byte, v uint64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}
