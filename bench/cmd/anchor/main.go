// Command anchor runs upstream's real kube-scheduler v1.37.2
// (pkg/scheduler.New and Run, fake client set, shared informers; package
// bench/anchor) on a scheduler_perf-shaped workload and reports its pods/s
// and its latency from pod creation to binding.
//
//	cd bench && go run ./cmd/anchor -workload basic -nodes 5000 -pods 10000 -json out.json
//
// Flags:
//
//	-workload basic|node-affinity|pod-anti-affinity|topology-spread|preemption|gang
//	-nodes N        nodes (default 5000)
//	-init-pods N    initial pods, scheduled before the measurement; -1 is
//	                scheduler_perf's ratio for the workload (default -1)
//	-pods N         measured pods (default 10000)
//	-config FILE    a KubeSchedulerConfiguration (default: kube-scheduler's
//	                defaults); upstream's validation refuses a bad one
//	-rate R         create the measured pods at R a second; 0 all at once
//	-timeout D      bound on the whole run (default 30m)
//	-json FILE      also write the result, the arguments and the load
//	                average as JSON
//	-cpuprofile FILE  write a CPU profile of the whole run
//
// It prints one line to stdout, and to stderr a warning when the window
// is under 10 s or saw fewer than 3 garbage collections (too short for
// figures). Exit status: 0 done; 1 the run failed (not every pod bound:
// the JSON is written all the same); 2 a bad flag or configuration.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/schedcache/schedcache/bench/anchor"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Output is the JSON file: the result and how it was made.
type Output struct {
	Args         []string      `json:"args"`
	Start        time.Time     `json:"start"`
	LoadAvgStart string        `json:"loadAvgStart,omitempty"` // /proc/loadavg
	LoadAvgEnd   string        `json:"loadAvgEnd,omitempty"`
	Error        string        `json:"error,omitempty"`
	Result       anchor.Result `json:"result"`
}

type flags struct {
	workload, config, jsonOut string
	cpuProfile                string
	nodes, initPods, pods     int
	rate                      float64
	timeout                   time.Duration
}

func parse(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("anchor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.workload, "workload", anchor.Basic, "the workload: "+strings.Join(anchor.Names, "|"))
	fs.IntVar(&f.nodes, "nodes", 5000, "nodes")
	fs.IntVar(&f.initPods, "init-pods", -1, "initial pods, scheduled before the measurement; -1 is scheduler_perf's ratio for the workload")
	fs.IntVar(&f.pods, "pods", 10000, "measured pods")
	fs.StringVar(&f.config, "config", "", "a KubeSchedulerConfiguration `file` (default: kube-scheduler's defaults)")
	fs.Float64Var(&f.rate, "rate", 0, "create the measured pods at this many a second; 0 all at once")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "bound on the whole run")
	fs.StringVar(&f.jsonOut, "json", "", "write the result as JSON to this `file`")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this `file`")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.rate < 0 {
		return f, fmt.Errorf("-rate: want 0 or more, got %v", f.rate)
	}
	if f.timeout <= 0 {
		return f, fmt.Errorf("-timeout: want a positive duration, got %v", f.timeout)
	}
	return f, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "anchor:", err)
		return 2
	}
	w, err := anchor.NewWorkload(f.workload, f.nodes, f.initPods, f.pods)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	opts := anchor.Options{Rate: f.rate, Timeout: f.timeout}
	if f.config != "" {
		if opts.Config, err = anchor.LoadConfigFile(f.config); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		opts.ConfigSource = f.config
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "anchor: -cpuprofile:", err)
			return 2
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintln(stderr, "anchor: -cpuprofile:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	out := Output{Args: args, Start: time.Now().UTC(), LoadAvgStart: loadAvg()}
	res, runErr := anchor.Run(ctx, w, opts)
	out.LoadAvgEnd, out.Result = loadAvg(), res
	if runErr != nil {
		out.Error = runErr.Error()
	}
	if errors.Is(runErr, anchor.ErrInvalidConfig) || errors.Is(runErr, anchor.ErrInvalidWorkload) {
		fmt.Fprintln(stderr, runErr)
		return 2
	}
	if res.Bound > 0 {
		fmt.Fprintln(stdout, anchor.Summary(res))
	}
	code := 0
	if runErr != nil {
		fmt.Fprintln(stderr, runErr)
		code = 1
	} else if res.Window < 10*time.Second || res.NumGC < 3 {
		fmt.Fprintf(stderr, "anchor: warning: a %s window with %d GCs is too short for figures (want 10 s and 3 GCs): raise -pods\n",
			res.Window.Round(time.Millisecond), res.NumGC)
	}
	if f.jsonOut != "" {
		b, err := json.MarshalIndent(out, "", "  ")
		if err == nil {
			err = os.WriteFile(f.jsonOut, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(stderr, "anchor: writing -json:", err)
			return 1
		}
	}
	return code
}
