// Command loadgen simulates a large cluster against schedcache: it builds
// the standard cluster of docs/workloads.md from a seed, loads it through
// the asynchronous (informer-style) event path, then runs scheduler
// goroutines that schedule new pods on snapshots (least-allocated among
// sampled nodes, AssumePod, FinishBinding) while an informer goroutine
// confirms them with AddPod after a fixed delay and deletes old pods to
// keep the cluster at a steady size. It prints what it did.
//
// With no flags it runs the standard 5,000-node cluster for 5 seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

func main() {
	cfg := defaultConfig()
	flag.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "cluster nodes (5000 standard, 50000 for the -50k variant)")
	flag.IntVar(&cfg.PodsPerNode, "pods-per-node", cfg.PodsPerNode, "bound pods per node at start")
	flag.Int64Var(&cfg.Seed, "seed", cfg.Seed, "cluster and workload seed")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the scheduling phase runs")
	flag.IntVar(&cfg.Schedulers, "schedulers", cfg.Schedulers, "scheduler goroutines")
	flag.IntVar(&cfg.Sample, "sample", cfg.Sample, "nodes sampled per scheduling decision")
	flag.DurationVar(&cfg.ConfirmDelay, "confirm-delay", cfg.ConfirmDelay, "delay before the informer confirms a binding with AddPod")
	flag.Float64Var(&cfg.FailRate, "fail-rate", cfg.FailRate, "fraction of bindings that fail and are forgotten")
	flag.IntVar(&cfg.Shards, "shards", cfg.Shards, "shard goroutines (0: default)")
	flag.Parse()
	rep, err := run(context.Background(), cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	rep.Print(os.Stdout)
	if !rep.Consistent {
		os.Exit(2)
	}
}

func defaultConfig() Config {
	return Config{
		Nodes:        5000,
		PodsPerNode:  30,
		Seed:         1,
		Duration:     5 * time.Second,
		Schedulers:   4,
		Sample:       50,
		ConfirmDelay: time.Millisecond,
		FailRate:     0.01,
	}
}

// Print writes the report in a fixed, greppable layout.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "schedcache loadgen: %d nodes, %d pods at start, seed %d, GOMAXPROCS=%d, %d schedulers, %d shards, %s/%s\n",
		r.Config.Nodes, r.InitialPods, r.Config.Seed, runtime.GOMAXPROCS(0), r.Config.Schedulers, r.Shards, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "load:      %d nodes + %d pods in %v (%.0f events/s)\n", r.Config.Nodes, r.InitialPods, r.LoadTime.Round(time.Millisecond), r.LoadRate)
	fmt.Fprintf(w, "run:       %v\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "scheduled: %d pods (%.0f pods/s); forgotten %d (failed bindings %d, conflicts %d); unschedulable decisions %d\n",
		r.Scheduled, r.PodsPerSec, r.Forgotten, r.FailedBindings, r.Conflicts, r.Unschedulable)
	fmt.Fprintf(w, "events:    %d informer events (%.0f events/s): %d adds, %d removes, %d node updates\n",
		r.Events, r.EventsPerSec, r.Adds, r.Removes, r.NodeUpdates)
	fmt.Fprintf(w, "assume latency:        p50 %v  p99 %v  p99.9 %v  max %v\n", r.Assume.P50, r.Assume.P99, r.Assume.P999, r.Assume.Max)
	fmt.Fprintf(w, "snapshot read latency: p50 %v  p99 %v  p99.9 %v  max %v  (take + read %d nodes)\n", r.Read.P50, r.Read.P99, r.Read.P999, r.Read.Max, r.Config.Sample)
	fmt.Fprintf(w, "final:     %d pods, %d nodes in the cache; expected %d pods; async errors %d; consistent: %v\n",
		r.FinalPods, r.FinalNodes, r.ExpectedPods, r.AsyncErrors, r.Consistent)
}
