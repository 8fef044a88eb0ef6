package metrics_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/metrics"
	"github.com/schedcache/schedcache/workload"
)

var (
	stdOnce    sync.Once
	stdCluster *workload.Cluster
)

// BenchmarkCycleWithScraper is the root module's BenchmarkCycle (one
// synchronous AssumePod, FinishBinding, AddPod, RemovePod on the loaded
// standard 5,000-node cluster) with nothing reading the metrics, with a
// goroutine gathering a registry holding the Collector in a tight loop
// (the worst case: at GOMAXPROCS=2 it also takes a CPU from the cache's
// goroutines), with one gathering every millisecond, and with a tight loop
// of Cache.Stats alone. The spin-loop scraper reads nothing: it is the
// cost of losing a CPU to a busy goroutine, to tell it from the cost of
// the reads.
func BenchmarkCycleWithScraper(b *testing.B) {
	stdOnce.Do(func() { stdCluster = workload.Build(workload.Standard()) })
	cl := stdCluster
	c, err := schedcache.New(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := cl.Feed(c.AddNodeAsync, c.AddPodAsync); err != nil {
		b.Fatal(err)
	}
	if err := c.Sync(); err != nil {
		b.Fatal(err)
	}
	col, err := metrics.NewCollector(c)
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	pods := make([]*v1.Pod, 1024)
	for i := range pods {
		p := mkPod(fmt.Sprint("cycle-", i), cl.Nodes[(i*7919)%len(cl.Nodes)].Name)
		pods[i] = p
	}
	spin := 0 // the spin-loop scraper's work: touches nothing of the cache
	gather := func() {
		if _, err := reg.Gather(); err != nil {
			panic(err)
		}
	}
	for _, sc := range []struct {
		name   string
		scrape func()
		every  time.Duration
	}{
		{"scraper=none", nil, 0},
		{"scraper=gather-loop", gather, 0},
		{"scraper=gather-1ms", gather, time.Millisecond},
		{"scraper=stats-loop", func() { _ = c.Stats() }, 0},
		{"scraper=spin-loop", func() { spin++ }, 0},
	} {
		b.Run(fmt.Sprintf("%s/GOMAXPROCS=%d", sc.name, runtime.GOMAXPROCS(0)), func(b *testing.B) {
			stop, done := make(chan struct{}), make(chan struct{})
			scrapes := 0
			if sc.scrape != nil {
				go func() { // owned by this sub-benchmark: stopped and waited below
					defer close(done)
					var tick <-chan time.Time
					if sc.every > 0 {
						t := time.NewTicker(sc.every)
						defer t.Stop()
						tick = t.C
					}
					for {
						select {
						case <-stop:
							return
						default:
						}
						if tick != nil {
							select {
							case <-stop:
								return
							case <-tick:
							}
						}
						sc.scrape()
						scrapes++
					}
				}()
			} else {
				close(done)
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := pods[i%len(pods)]
				if err := c.AssumePod(logger, p); err != nil {
					b.Fatal(err)
				}
				if err := c.FinishBinding(logger, p); err != nil {
					b.Fatal(err)
				}
				if err := c.AddPod(logger, p); err != nil {
					b.Fatal(err)
				}
				if err := c.RemovePod(logger, p); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(stop)
			<-done
			if sc.scrape != nil {
				b.ReportMetric(float64(scrapes)/b.Elapsed().Seconds(), "scrapes/s")
			}
		})
	}
}

// BenchmarkCollect is the cost of one scrape of the collector.
func BenchmarkCollect(b *testing.B) {
	c, err := schedcache.New(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	col, _ := metrics.NewCollector(c)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
