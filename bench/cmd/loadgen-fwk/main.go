// Command loadgen-fwk is cmd/loadgen with the node choice made by
// upstream's real scheduling framework: the in-tree Filter and Score
// plugins of kube-scheduler v1.37.2's default profile, run by upstream's
// framework runtime over schedcache snapshots (package fwkpick). It lives
// in the bench module because it imports k8s.io/kubernetes.
//
//	cd bench && go run ./cmd/loadgen-fwk -preset scheduling-basic-5000 -plugins default
//
// It takes every loadgen flag (docs/loadgen.md) and seven of its own:
//
//	-plugins default|P1,P2,...   the plugins to run (default: default)
//	-percentage-of-nodes-to-score N   upstream's setting; 0 adaptive (default 0)
//	-parallelism N               the framework's parallelism (default 16)
//	-config FILE                 a KubeSchedulerConfiguration (v1): its profiles,
//	                             percentageOfNodesToScore and parallelism; with
//	                             any of the three above it is refused
//	-memo on|off                 reuse verdicts and scores per NodeInfo (default on)
//	-carry on|off                carry InterPodAffinity's PreFilter state from
//	                             cycle to cycle (default on)
//	-feature-gates Name=bool,... kube-scheduler's feature gates (GenericWorkload=true:
//	                             gangs as PodGroups, upstream's GangScheduling)
//
// The report gains the picker's label and the nodes each plugin rejected;
// with loadgen's -explain N (or -explain-rate R), each explained pod's
// rejections by plugin and its top nodes' scores by plugin, from
// upstream's own Filter statuses and RunScorePlugins. The perf-* presets
// (multi-phase scheduler_perf workloads) run here too, with their
// constraints evaluated by the real plugins. Exit codes are loadgen's: 2
// for an invalid flag, its own included, and for a configuration file
// that does not decode, that upstream's validation refuses, or that
// names a plugin no registry has; 4 for a violated threshold.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/schedcache/schedcache/bench/fwkpick"
	"github.com/schedcache/schedcache/bench/schedconfig"
	"github.com/schedcache/schedcache/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, isTerminal(os.Stderr))
	stop()
	os.Exit(code)
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

const usage = `loadgen-fwk flags (besides loadgen's, below):
  -plugins string
    	"default" or a comma-separated subset of: %s (default "default")
  -percentage-of-nodes-to-score int
    	upstream's percentageOfNodesToScore: 0 adaptive, 1-100 fixed (default 0)
  -parallelism int
    	the framework's parallelism (filters and scores) (default 16)
  -config string
    	a KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1): its
    	profiles, percentageOfNodesToScore and parallelism; not with the three above
  -memo on|off
    	reuse Filter verdicts and raw scores per published NodeInfo for pods
    	of one signature (same decisions, less work) (default on)
  -carry on|off
    	carry InterPodAffinity's PreFilter state from one cycle to the next,
    	updated for the pods bound since (same decisions, less work) (default on)
  -feature-gates string
    	kube-scheduler's feature gates, Name=true|false,... (upstream's
    	gate registry: e.g. GenericWorkload=true adds GangScheduling to the
    	default profile and makes gangs PodGroup objects)
`

// ourFlags are the flags loadgen-fwk takes out of the arguments.
var ourFlags = []string{"plugins", "percentage-of-nodes-to-score", "parallelism", "config", "memo", "carry", "feature-gates"}

// splitArgs takes loadgen-fwk's own flags (-name value, -name=value, one
// or two dashes) out of args; the rest goes to loadgen. A flag given twice
// keeps its last value, as the flag package does.
func splitArgs(args []string) (ours map[string]string, rest []string, err error) {
	ours = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || !contains(ourFlags, name) {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("flag needs an argument: -%s", name)
			}
			i++
			val = args[i]
		}
		ours[name] = val
	}
	return ours, rest, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// parse turns loadgen-fwk's flags into the picker's configuration.
func parse(ours map[string]string) (fwkpick.Config, error) {
	var cfg fwkpick.Config
	if v, ok := ours["memo"]; ok {
		switch v {
		case "on":
		case "off":
			cfg.NoMemo = true
		default:
			return cfg, fmt.Errorf("-memo: want on or off, got %q", v)
		}
	}
	if v, ok := ours["carry"]; ok {
		switch v {
		case "on":
		case "off":
			cfg.NoCarry = true
		default:
			return cfg, fmt.Errorf("-carry: want on or off, got %q", v)
		}
	}
	if path, ok := ours["config"]; ok {
		for _, f := range ourFlags {
			if _, set := ours[f]; set && f != "config" && f != "memo" && f != "carry" && f != "feature-gates" {
				return cfg, fmt.Errorf("-config and -%s: the file sets the profiles, percentageOfNodesToScore and parallelism; give one or the other", f)
			}
		}
		if path == "" {
			return cfg, fmt.Errorf("-config: empty file name")
		}
		f, err := schedconfig.Read(path)
		if err != nil {
			return cfg, fmt.Errorf("-config: %w", err)
		}
		cfg.File = f
		return cfg, nil
	}
	pl := "default"
	if v, ok := ours["plugins"]; ok {
		pl = v
	}
	var err error
	if cfg.Plugins, err = fwkpick.ParsePlugins(pl); err != nil {
		return cfg, err
	}
	if v, ok := ours["percentage-of-nodes-to-score"]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 || n > 100 {
			return cfg, fmt.Errorf("-percentage-of-nodes-to-score: want 0 to 100, got %q", v)
		}
		cfg.PercentageOfNodesToScore = int32(n)
	}
	if v, ok := ours["parallelism"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			return cfg, fmt.Errorf("-parallelism: want 1 to 1024, got %q", v)
		}
		cfg.Parallelism = n
	}
	return cfg, nil
}

// run is the whole command; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	return runWith(ctx, args, stdout, stderr, tty, nil)
}

// runWith is run with out-of-tree plugins, registered as an embedder of
// kube-scheduler would (app.WithPlugin): -config's profiles enable them by
// name.
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool, outOfTree frameworkruntime.Registry) int {
	ours, rest, err := splitArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen-fwk:", err)
		return 2
	}
	for _, a := range rest {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			fmt.Fprintf(stderr, usage, strings.Join(fwkpick.DefaultPlugins, ","))
			break
		}
	}
	if v, ok := ours["feature-gates"]; ok {
		if err := setGates(v); err != nil {
			fmt.Fprintln(stderr, "loadgen-fwk: -feature-gates:", err)
			return 2
		}
	}
	cfg, err := parse(ours)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen-fwk:", err)
		return 2
	}
	cfg.OutOfTree = outOfTree
	p, err := fwkpick.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen-fwk:", err)
		return 2
	}
	defer p.Close()
	if cfg.File != nil {
		dropped := p.Dropped()
		for _, name := range p.SchedulerNames() {
			if d := dropped[name]; len(d) > 0 {
				fmt.Fprintf(stderr, "loadgen-fwk: -config %s: profile %q: left out, as the simulator does not model their objects: %s\n",
					cfg.File.Path, name, strings.Join(d, ", "))
			}
		}
	}
	return sim.MainWith(ctx, rest, stdout, stderr, tty, sim.Options{Picker: p})
}

// setGates sets kube-scheduler's feature gates from "Name=bool,...", as
// its --feature-gates flag: upstream's registry checks the names and
// values (an unknown gate, a locked one, a bad value is an error).
func setGates(v string) error {
	m := map[string]bool{}
	for _, kv := range strings.Split(v, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if !ok || err != nil {
			return fmt.Errorf("%q: want Name=true or Name=false", kv)
		}
		m[strings.TrimSpace(name)] = b
	}
	// Tried on a copy first: a refused SetFromMap keeps what it was
	// given, and every later call is refused with it.
	if err := utilfeature.DefaultMutableFeatureGate.DeepCopy().SetFromMap(m); err != nil {
		return err
	}
	return utilfeature.DefaultMutableFeatureGate.SetFromMap(m)
}
