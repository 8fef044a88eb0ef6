// Package hist is a log-linear latency histogram (HDR-style, about 1.6%
// relative precision) with O(1) recording and no allocation after New.
package hist

import (
	"math"
	"math/bits"
	"time"
)

const (
	subBits = 6 // 64 linear sub-buckets per power of two
	sub     = 1 << subBits
	nb      = (64 - subBits + 1) * sub
)

// Histogram records durations. Contract: not safe for concurrent use; give
// each goroutine its own and Merge them afterwards.
type Histogram struct {
	counts [nb]uint64
	n      uint64
	sum    float64
	max    int64
	min    int64
}

// New returns an empty histogram.
func New() *Histogram { return &Histogram{min: math.MaxInt64} }

func index(v int64) int {
	if v < sub {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	e := bits.Len64(uint64(v)) - subBits - 1 // v >> e is in [sub, 2*sub)
	return (e+1)*sub + int(uint64(v)>>uint(e)) - sub
}

// lowest value of bucket i.
func lower(i int) int64 {
	if i < sub {
		return int64(i)
	}
	e := i/sub - 1
	m := int64(i%sub + sub)
	return m << uint(e)
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	h.counts[index(v)]++
	h.n++
	h.sum += float64(v)
	if v > h.max {
		h.max = v
	}
	if v < h.min {
		h.min = v
	}
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	if o.max > h.max {
		h.max = o.max
	}
	if o.min < h.min {
		h.min = o.min
	}
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest sample (exact).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the mean sample.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the q-quantile (0 <= q <= 1): the lower bound of the
// bucket holding it, capped by the exact maximum.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			v := lower(i)
			if v > h.max {
				v = h.max
			}
			if v < h.min {
				v = h.min
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}
