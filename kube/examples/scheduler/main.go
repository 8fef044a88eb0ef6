// Command scheduler runs the kube module's example: a fake cluster, the
// cache fed by informers, bindings through a simulated dispatcher, and
// the metrics read at the end. Pods that fit on no node stay pending and
// are reported. Run it from the repository root with
//
//	go -C kube run ./examples/scheduler -pods 100 -failure-rate 0.3
//
// (or cd kube && go run ./examples/scheduler: kube is a module of its
// own). Exit codes: 0 success, 1 the run failed, 2 invalid flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/schedcache/schedcache/kube/examples"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// usageHint ends the message of an invalid flag.
const usageHint = "run scheduler -h for usage"

// flagOf names the flag of each field of examples.Config.
var flagOf = map[string]string{"Nodes": "nodes", "Pods": "pods", "Latency": "latency", "FailureRate": "failure-rate", "Seed": "seed"}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command with args (without the program name); it returns
// the exit code and never exits the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := examples.Config{}
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a bad flag is one line, not the usage
	fs.IntVar(&cfg.Nodes, "nodes", 4, fmt.Sprintf("nodes in the fake cluster (4 CPUs, 16Gi, 110 pods each), 1 to %d", examples.MaxNodes))
	fs.IntVar(&cfg.Pods, "pods", 20, fmt.Sprintf("pending pods to schedule (100m CPU, 128Mi each), 0 to %d; those that fit on no node stay pending", examples.MaxPods))
	fs.DurationVar(&cfg.Latency, "latency", time.Millisecond, fmt.Sprintf("latency of each simulated binding, 0 to %v", examples.MaxLatency))
	fs.Float64Var(&cfg.FailureRate, "failure-rate", 0.2, "probability in [0, 1) that a simulated binding fails (the pod is forgotten and placed again)")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of the simulated failures")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "Usage: scheduler [flags]")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return exitOK
		}
		fmt.Fprintf(stderr, "scheduler: %s; %s\n", flagMessage(err), usageHint)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "scheduler: unexpected argument %q (flags only); %s\n", fs.Arg(0), usageHint)
		return exitUsage
	}
	if err := cfg.Validate(); err != nil {
		var ce *examples.ConfigError
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "scheduler: -%s: %s; %s\n", flagOf[ce.Field], ce.Msg, usageHint)
		} else {
			fmt.Fprintf(stderr, "scheduler: %v; %s\n", err, usageHint)
		}
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := examples.Run(ctx, stdout, cfg, examples.FewestPods{}); err != nil {
		fmt.Fprintln(stderr, "scheduler:", err)
		return exitFailed
	}
	return exitOK
}

// The flag package's parse errors.
var (
	flagBadValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): (.*)$`)
	flagUnknown  = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	flagNoValue  = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// flagMessage is a parse error of the flag package as "-flag: what".
func flagMessage(err error) string {
	msg := err.Error()
	if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("-%s: invalid value %q: %s", m[2], m[1], m[3])
	}
	if m := flagUnknown.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("-%s: no such flag", m[1])
	}
	if m := flagNoValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("-%s: needs a value", m[1])
	}
	return msg
}
