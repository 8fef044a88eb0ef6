// Command scheduler runs the kube module's example: a fake cluster, the
// cache fed by informers, bindings through a simulated dispatcher, and
// the metrics read at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/schedcache/schedcache/kube/examples"
)

func main() {
	cfg := examples.Config{}
	flag.IntVar(&cfg.Nodes, "nodes", 4, "nodes in the fake cluster")
	flag.IntVar(&cfg.Pods, "pods", 20, "pending pods to schedule")
	flag.DurationVar(&cfg.Latency, "latency", time.Millisecond, "latency of each simulated binding")
	flag.Float64Var(&cfg.FailureRate, "failure-rate", 0.2, "probability that a simulated binding fails")
	flag.Int64Var(&cfg.Seed, "seed", 1, "seed of the simulated failures")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := examples.Run(ctx, os.Stdout, cfg, examples.FewestPods{}); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		cancel()
		os.Exit(1)
	}
}
