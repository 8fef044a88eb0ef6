package anchor

import (
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Upstream's own latency histograms, as scheduler_perf reads them.
const (
	attemptMetric   = "scheduler_scheduling_attempt_duration_seconds"   // algorithm and binding; result="scheduled" taken
	algorithmMetric = "scheduler_scheduling_algorithm_duration_seconds" // Filter and Score
)

// histogram is a cumulative histogram: counts[i] observations at most
// bounds[i]; the last bound is +Inf.
type histogram struct {
	bounds []float64
	counts []uint64
}

// gatherHistograms reads the named histograms from upstream's registry
// (process-wide: a run takes the difference of two readings), summing the
// series of each name (for the attempt histogram, the result="scheduled"
// series only). A histogram not found is left out.
func gatherHistograms() map[string]histogram {
	out := map[string]histogram{}
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if name != attemptMetric && name != algorithmMetric {
			continue
		}
		var h histogram
		for _, m := range mf.GetMetric() {
			if name == attemptMetric && label(m, "result") != "scheduled" {
				continue
			}
			hh := m.GetHistogram()
			if hh == nil {
				continue
			}
			if h.bounds == nil {
				for _, b := range hh.GetBucket() {
					h.bounds = append(h.bounds, b.GetUpperBound())
				}
				h.bounds = append(h.bounds, math.Inf(1))
				h.counts = make([]uint64, len(h.bounds))
			}
			if len(hh.GetBucket())+1 != len(h.bounds) {
				continue
			}
			for i, b := range hh.GetBucket() {
				h.counts[i] += b.GetCumulativeCount()
			}
			h.counts[len(h.counts)-1] += hh.GetSampleCount()
		}
		if h.bounds != nil {
			out[name] = h
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// since is h minus an earlier reading of the same histogram.
func (h histogram) since(earlier histogram) histogram {
	d := histogram{bounds: h.bounds, counts: make([]uint64, len(h.counts))}
	for i := range h.counts {
		d.counts[i] = h.counts[i]
		if len(earlier.counts) == len(h.counts) {
			d.counts[i] -= earlier.counts[i]
		}
	}
	return d
}

// count is the number of observations.
func (h histogram) count() uint64 {
	if len(h.counts) == 0 {
		return 0
	}
	return h.counts[len(h.counts)-1]
}

// quantile is Prometheus' histogram_quantile: linear interpolation within
// the bucket holding the q-th observation; the highest finite bound when
// it is in the +Inf bucket; 0 with no observation.
func (h histogram) quantile(q float64) time.Duration {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var lo float64
	var below uint64
	for i, c := range h.counts {
		if float64(c) >= rank {
			if math.IsInf(h.bounds[i], 1) {
				return seconds(lo)
			}
			v := lo
			if c > below {
				v += (h.bounds[i] - lo) * (rank - float64(below)) / float64(c-below)
			}
			return seconds(v)
		}
		lo, below = h.bounds[i], c
	}
	return seconds(lo)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
