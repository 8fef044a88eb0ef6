package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/schedcache/schedcache/workload"
)

// Config is a plain value, copied freely and not shared between
// goroutines while written: one simulation. Validate checks it before any
// work is done.
type Config struct {
	Nodes, PodsPerNode int
	Seed               int64
	Duration           time.Duration
	Schedulers         int
	Sample             int
	ConfirmDelay       time.Duration
	FailRate           float64
	Shards             int
	// Deterministic runs the whole simulation on one goroutine in virtual
	// time (see det.go).
	Deterministic bool
	// DecisionTime is the virtual time one scheduling decision takes per
	// scheduler in deterministic mode.
	DecisionTime time.Duration
	// AuditEvery is the virtual interval of audits during a deterministic
	// run (0: only at the end).
	AuditEvery time.Duration
	// JSON is where the JSON report goes: "" none, "-" stdout, else a path.
	JSON string
	// Quiet turns progress off even on a terminal.
	Quiet bool
}

// Limits of the flags. They keep a run within what one machine can hold
// and what a person would mean; anything outside is refused, never clamped.
const (
	maxNodes       = 200_000
	maxInitialPods = 6_000_000
	maxSchedulers  = 1024
	maxShards      = 1024
	maxDuration    = 24 * time.Hour
	maxDecision    = time.Second
	maxAudits      = 10_000
)

// ErrUsage marks a configuration refused before any work (exit code 2).
var ErrUsage = errors.New("invalid configuration")

// UsageError is an immutable value naming the flag at fault; it wraps
// ErrUsage.
type UsageError struct {
	Flag string
	Msg  string
}

func (e *UsageError) Error() string { return fmt.Sprintf("-%s: %s", e.Flag, e.Msg) }
func (e *UsageError) Unwrap() error { return ErrUsage }

func bad(flag, format string, args ...any) error {
	return &UsageError{Flag: flag, Msg: fmt.Sprintf(format, args...)}
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
		DecisionTime: 250 * time.Microsecond,
	}
}

// Validate checks every field and returns the first fault as a
// *UsageError (wrapping ErrUsage), or nil.
func (c *Config) Validate() error {
	switch {
	case c.Nodes < 1:
		return bad("nodes", "must be at least 1, got %d", c.Nodes)
	case c.Nodes > maxNodes:
		return bad("nodes", "at most %d, got %d", maxNodes, c.Nodes)
	case c.PodsPerNode < 0:
		return bad("pods-per-node", "must not be negative, got %d", c.PodsPerNode)
	case c.PodsPerNode > workload.NodePods:
		return bad("pods-per-node", "%d exceeds the node pod capacity of the standard cluster (%d): the cluster would be over-full", c.PodsPerNode, workload.NodePods)
	case int64(c.Nodes)*int64(c.PodsPerNode) > maxInitialPods:
		return bad("pods-per-node", "%d nodes x %d pods = %d initial pods, more than the %d this tool holds", c.Nodes, c.PodsPerNode, int64(c.Nodes)*int64(c.PodsPerNode), maxInitialPods)
	case c.Duration <= 0:
		return bad("duration", "must be positive, got %v", c.Duration)
	case c.Duration > maxDuration:
		return bad("duration", "at most %v, got %v", maxDuration, c.Duration)
	case c.Schedulers < 1:
		return bad("schedulers", "must be at least 1, got %d", c.Schedulers)
	case c.Schedulers > maxSchedulers:
		return bad("schedulers", "at most %d, got %d", maxSchedulers, c.Schedulers)
	case c.Sample < 1:
		return bad("sample", "must be at least 1, got %d", c.Sample)
	case c.Sample > c.Nodes:
		return bad("sample", "%d is more than the %d nodes", c.Sample, c.Nodes)
	case c.ConfirmDelay < 0:
		return bad("confirm-delay", "must not be negative, got %v", c.ConfirmDelay)
	case c.ConfirmDelay >= c.Duration:
		return bad("confirm-delay", "%v must be shorter than -duration %v: no binding would be confirmed in the run", c.ConfirmDelay, c.Duration)
	case math.IsNaN(c.FailRate) || c.FailRate < 0 || c.FailRate > 1:
		return bad("fail-rate", "must be a fraction in [0, 1], got %v", c.FailRate)
	case c.Shards < 0:
		return bad("shards", "must not be negative (0: the default), got %d", c.Shards)
	case c.Shards > maxShards:
		return bad("shards", "at most %d, got %d", maxShards, c.Shards)
	case c.DecisionTime <= 0:
		return bad("decision-time", "must be positive, got %v", c.DecisionTime)
	case c.DecisionTime > maxDecision:
		return bad("decision-time", "at most %v, got %v", maxDecision, c.DecisionTime)
	case c.DecisionTime > c.Duration:
		return bad("decision-time", "%v is longer than -duration %v: no decision would be made", c.DecisionTime, c.Duration)
	case c.AuditEvery < 0:
		return bad("audit-every", "must not be negative (0: only at the end), got %v", c.AuditEvery)
	case c.AuditEvery > 0 && !c.Deterministic:
		return bad("audit-every", "needs -deterministic (a real-time run is audited at the end)")
	case c.AuditEvery > c.Duration:
		return bad("audit-every", "%v is longer than -duration %v", c.AuditEvery, c.Duration)
	case c.AuditEvery > 0 && c.Duration/c.AuditEvery > maxAudits:
		return bad("audit-every", "%v would audit %d times in -duration %v; at most %d", c.AuditEvery, c.Duration/c.AuditEvery, c.Duration, maxAudits)
	}
	return nil
}

// parseFlags parses args (without the program name) into a validated
// Config. Errors wrap ErrUsage; flag.ErrHelp is returned as is for -h.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "cluster nodes, 1 to 200000 (5000 standard, 50000 for the -50k variant)")
	fs.IntVar(&cfg.PodsPerNode, "pods-per-node", cfg.PodsPerNode, "bound pods per node at start, 0 to 110 (the node pod capacity)")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "cluster and workload seed")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the scheduling phase runs (virtual time with -deterministic)")
	fs.IntVar(&cfg.Schedulers, "schedulers", cfg.Schedulers, "scheduler goroutines (virtual schedulers with -deterministic), 1 to 1024")
	fs.IntVar(&cfg.Sample, "sample", cfg.Sample, "nodes sampled per scheduling decision, 1 to -nodes (default 50, or -nodes if fewer)")
	fs.DurationVar(&cfg.ConfirmDelay, "confirm-delay", cfg.ConfirmDelay, "delay before the informer confirms a binding with AddPod, shorter than -duration")
	fs.Float64Var(&cfg.FailRate, "fail-rate", cfg.FailRate, "fraction of bindings that fail and are forgotten, in [0, 1]")
	fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "shard goroutines (0: the cache's default)")
	fs.BoolVar(&cfg.Deterministic, "deterministic", cfg.Deterministic, "virtual time on one goroutine: one seed reproduces the run event for event (digest in the report)")
	fs.DurationVar(&cfg.DecisionTime, "decision-time", cfg.DecisionTime, "virtual time of one scheduling decision with -deterministic")
	fs.DurationVar(&cfg.AuditEvery, "audit-every", cfg.AuditEvery, "with -deterministic, also audit the cache every this much virtual time (0: only at the end)")
	fs.StringVar(&cfg.JSON, "json", cfg.JSON, "write the JSON report to this path (- for stdout, the text report then goes to stderr)")
	fs.BoolVar(&cfg.Quiet, "quiet", cfg.Quiet, "no progress lines, even on a terminal")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["sample"] && cfg.Nodes >= 1 && cfg.Sample > cfg.Nodes {
		cfg.Sample = cfg.Nodes // the default sample never exceeds a small cluster
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%w: unexpected argument %q (loadgen takes flags only)", ErrUsage, fs.Arg(0))
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}
