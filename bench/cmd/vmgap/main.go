// Command vmgap measures what the machine does to a running thread and to a
// goroutine hand-off, so that a benchmark run can record the conditions its
// figures were taken under.
//
// Spinners: each of -spinners goroutines is locked to its own OS thread and
// reads the monotonic clock in a loop for -d; an interval between two reads
// longer than -gap is time the thread was runnable and did not run (the
// hypervisor took the vCPU, or the kernel ran something else). It reports,
// per spinner, the number of such gaps, how many exceed 40 µs, their total
// and the share of the run they took.
//
// Ping-pong: two goroutines hand a token back and forth over unbuffered
// channels for -d; it reports the round trip's p50, p99, p99.9 and max. A
// round trip is two hand-offs between goroutines: what a synchronous call of
// schedcache pays when ops are queued (it goes through the mailbox and is
// answered by the coordinator's goroutine) and a mutex-based cache does not;
// on an idle cache the call runs inline, on the caller's goroutine.
//
//	go run ./cmd/vmgap                 # both, GOMAXPROCS spinners, 2 s each
//	go run ./cmd/vmgap -spinners 1 -pingpong=false
//
// On Linux it also prints the steal time /proc/stat reports over the run.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/schedcache/schedcache/internal/hist"
)

func main() {
	spinners := flag.Int("spinners", runtime.GOMAXPROCS(0), "spinning threads (0: none)")
	d := flag.Duration("d", 2*time.Second, "duration of each measurement")
	gap := flag.Duration("gap", 10*time.Microsecond, "shortest interval counted as a gap")
	pingpong := flag.Bool("pingpong", true, "measure goroutine hand-off round trips")
	flag.Parse()
	if err := run(os.Stdout, *spinners, *d, *gap, *pingpong); err != nil {
		fmt.Fprintln(os.Stderr, "vmgap:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, spinners int, d, gap time.Duration, pingpong bool) error {
	if spinners < 0 || d <= 0 || gap <= 0 {
		return fmt.Errorf("need spinners >= 0, d > 0, gap > 0 (got %d, %v, %v)", spinners, d, gap)
	}
	fmt.Fprintf(w, "vmgap: GOMAXPROCS=%d NumCPU=%d d=%v gap=%v\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), d, gap)
	if spinners > 0 {
		st0, stealOK := readSteal()
		res := spin(spinners, d, gap)
		st1, _ := readSteal()
		for i, r := range res {
			fmt.Fprintf(w, "spinner %d: %s\n", i, r.Summary(d))
		}
		if stealOK {
			fmt.Fprintf(w, "steal (/proc/stat, all CPUs): %v\n", time.Duration(st1-st0)*time.Second/time.Duration(clockTicks))
		}
	}
	if pingpong {
		h := pingPong(d)
		fmt.Fprintf(w, "ping-pong round trip: n=%d p50 %v p99 %v p99.9 %v max %v\n",
			h.Count(), h.Quantile(0.5), h.Quantile(0.99), h.Quantile(0.999), h.Max())
	}
	return nil
}

// Gaps summarises the intervals one spinner lost.
type Gaps struct {
	N     int           // intervals longer than the threshold
	Over  int           // of those, longer than 40 µs
	Total time.Duration // their sum
	Max   time.Duration
}

// Add counts one interval between two clock reads.
func (g *Gaps) Add(interval, threshold time.Duration) {
	if interval <= threshold {
		return
	}
	g.N++
	if interval > 40*time.Microsecond {
		g.Over++
	}
	g.Total += interval
	g.Max = max(g.Max, interval)
}

// Summary prints g for a run of length d.
func (g Gaps) Summary(d time.Duration) string {
	return fmt.Sprintf("%d gaps (%d > 40µs), %v in all (%.1f%% of %v), max %v",
		g.N, g.Over, g.Total.Round(100*time.Microsecond), 100*float64(g.Total)/float64(d), d, g.Max)
}

// spin runs n spinners for d and returns their gaps. It owns the spinner
// goroutines: each writes only its own Gaps and exits after d; spin waits
// for all of them.
func spin(n int, d, threshold time.Duration) []Gaps {
	res := make([]Gaps, n)
	var wg sync.WaitGroup
	for i := range res {
		wg.Add(1)
		go func(g *Gaps) {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := time.Now()
			prev := start
			for {
				now := time.Now()
				g.Add(now.Sub(prev), threshold)
				prev = now
				if now.Sub(start) >= d {
					return
				}
			}
		}(&res[i])
	}
	wg.Wait()
	return res
}

// pingPong times round trips to a partner goroutine for d. It owns the
// partner, which exits when ping is closed; pingPong waits for it.
func pingPong(d time.Duration) *hist.Histogram {
	ping, pong := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ping {
			pong <- struct{}{}
		}
	}()
	h := hist.New()
	for start := time.Now(); time.Since(start) < d; {
		t0 := time.Now()
		ping <- struct{}{}
		<-pong
		h.Record(time.Since(t0))
	}
	close(ping)
	<-done
	return h
}
