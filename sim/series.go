package sim

import (
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/hist"
)

// arrival is a pod of an open-loop run waiting in the pending queue since
// at (virtual time since the start, or wall time since the start).
type arrival struct {
	pod *v1.Pod       // immutable until a scheduler takes it from the queue
	at  time.Duration // immutable
}

// windows accumulates per-second figures of a run. It is owned by one
// goroutine (the event loop, or one scheduler goroutine whose windows are
// merged once it has stopped).
type windows struct {
	sched []int64           // pods scheduled in window i
	lat   []*hist.Histogram // attempt latency of the pods scheduled in window i
	evs   []int64           // informer events in window i
}

func (w *windows) grow(i int) {
	for len(w.sched) <= i {
		w.sched = append(w.sched, 0)
		w.lat = append(w.lat, nil)
		w.evs = append(w.evs, 0)
	}
}

// scheduled counts one pod scheduled at t whose attempt took d.
func (w *windows) scheduled(t, d time.Duration) {
	i := int(t / time.Second)
	w.grow(i)
	w.sched[i]++
	if w.lat[i] == nil {
		w.lat[i] = hist.New()
	}
	w.lat[i].Record(d)
}

// events counts n informer events at t.
func (w *windows) events(t time.Duration, n int64) {
	i := int(t / time.Second)
	w.grow(i)
	w.evs[i] += n
}

// merge adds o into w.
func (w *windows) merge(o *windows) {
	w.grow(len(o.sched) - 1)
	for i := range o.sched {
		w.sched[i] += o.sched[i]
		w.evs[i] += o.evs[i]
		if o.lat[i] != nil {
			if w.lat[i] == nil {
				w.lat[i] = hist.New()
			}
			w.lat[i].Merge(o.lat[i])
		}
	}
}

// SeriesRow is a plain value, owned by the Report holding it: one 1 s window of the run (the last one may
// be partial: Seconds is then the end of the run).
type SeriesRow struct {
	Seconds    float64 // end of the window
	Scheduled  int64   // pods scheduled since the start
	PodsPerSec float64 // in this window
	Pending    int     // pending queue length at the end of the window
	Events     int64   // informer events in this window
	P50, P99   time.Duration
	WindowPods int64 // pods scheduled in this window
}

// series builds the rows of the windows up to elapsed; pending[i] is the
// queue length at the end of window i (missing: 0).
func (w *windows) series(elapsed time.Duration, pending []int) []SeriesRow {
	var rows []SeriesRow
	var total int64
	for i := 0; time.Duration(i)*time.Second < elapsed; i++ {
		end := min(time.Duration(i+1)*time.Second, elapsed)
		width := end - time.Duration(i)*time.Second
		r := SeriesRow{Seconds: end.Seconds()}
		if i < len(w.sched) {
			r.WindowPods, r.Events = w.sched[i], w.evs[i]
			if h := w.lat[i]; h != nil {
				r.P50, r.P99 = h.Quantile(0.5), h.Quantile(0.99)
			}
		}
		if i < len(pending) {
			r.Pending = pending[i]
		}
		total += r.WindowPods
		r.Scheduled = total
		r.PodsPerSec = float64(r.WindowPods) / width.Seconds()
		rows = append(rows, r)
	}
	return rows
}

// csvHeader is the first line of -csv.
const csvHeader = "time_s,scheduled,pods_per_s,pending,informer_events,attempt_p50_ms,attempt_p99_ms"

// WriteCSV writes the time series: a header and one row per window.
func (r *Report) WriteCSV(w io.Writer) error {
	if _, err := fmt.Fprintln(w, csvHeader); err != nil {
		return err
	}
	for _, s := range r.Series {
		if _, err := fmt.Fprintf(w, "%.3f,%d,%.1f,%d,%d,%.4f,%.4f\n", s.Seconds, s.Scheduled, s.PodsPerSec, s.Pending, s.Events, ms(s.P50), ms(s.P99)); err != nil {
			return err
		}
	}
	return nil
}
