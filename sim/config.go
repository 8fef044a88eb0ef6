package sim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/schedcache/schedcache/sim/manifest"
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
	// Progress turns progress on even when stderr is not a terminal.
	Progress bool

	// InitialPods, when positive, is the total of bound pods at start,
	// spread evenly over the nodes; it replaces PodsPerNode (which then
	// holds the per-node ceiling the generator builds).
	InitialPods int
	// Zones: 0 keeps the generator's three zones (50/30/20%); N relabels
	// node i into zone-(i mod N).
	Zones int
	// Pods, when positive, stops the run once that many pods are
	// scheduled (Duration, when positive, still bounds it).
	Pods int64
	// Arrival is how pods arrive: closed (each scheduler draws a new pod
	// as soon as it is free), poisson (Rate pods/s) or burst (BurstSize
	// pods every BurstInterval).
	Arrival       string
	Rate          float64
	BurstSize     int
	BurstInterval time.Duration
	// KeepPods: the informer deletes no pod (the cluster grows by every
	// scheduled pod) instead of one old pod per confirmation.
	KeepPods bool
	// CSV is where the per-second time series goes ("" none).
	CSV string
	// SVG is where the plot of the time series goes ("" none).
	SVG string
	// Scenario names the scenario file or preset the run came from.
	Scenario string
	// Record is where a deterministic run writes its trace of cache calls
	// ("" none; see the trace package).
	Record string

	// Churn of the simulated API server (docs/loadgen.md, "Churn"): rates
	// are Poisson, per second of run time (virtual in deterministic mode).
	PodUpdateRate  float64       // delivered pods updated (a new version)
	PodDeleteRate  float64       // delivered pods deleted, beyond one per confirmation
	NodeAddRate    float64       // nodes added
	NodeRemoveRate float64       // nodes drained, then removed
	DrainRate      float64       // nodes drained (cordoned, pods evicted)
	DrainGrace     time.Duration // cordon to eviction, and eviction to removal
	DrainFor       time.Duration // a drained node is uncordoned after this (0: never)
	NotReadyRate   float64       // nodes going NotReady
	NotReadyFor    time.Duration // how long a node stays NotReady
	ZoneMoveRate   float64       // nodes whose zone label changes
	// ZoneOutageEvery: every this long, all nodes of one zone (in turn) go
	// NotReady for ZoneOutageFor.
	ZoneOutageEvery, ZoneOutageFor time.Duration

	// BindLatency is how long the simulated dispatcher takes per binding.
	BindLatency time.Duration
	// InformerJitter adds a uniform [0, jitter) to each watch event's
	// delay: events of different objects are reordered within it.
	InformerJitter time.Duration
	// DropEvery, DropFor: from DropEvery on, every DropEvery the informer
	// loses the events of a DropFor window, then relists.
	DropEvery, DropFor time.Duration

	// Readers take the latest snapshot and read ReadNodes random nodes in
	// a loop (W1); FullSnapshotEvery: a new reader takes a first complete
	// snapshot (UpdateSnapshot into an empty one) this often (W6).
	Readers           int
	ReadNodes         int
	FullSnapshotEvery time.Duration

	// AssumeTTL is the cache's assumed-pod TTL (0: never expire);
	// ExpiryPods pods are assumed at ExpiryAt with a binding that never
	// comes (W5).
	AssumeTTL  time.Duration
	ExpiryPods int
	ExpiryAt   time.Duration

	// origins says where the settings came from (the scenario, the
	// command line), for the errors that name them (blame.go); nil for a
	// Config not made by parseFlags. Shared, never changed once set.
	origins *origins

	// Shape is the cluster's node shape and pod mix (scenario fields
	// cluster.allocatable, images, labels, taints, unschedulable and
	// podMix); nil: the generator's standard shape. Shared, never
	// changed once set.
	Shape *workload.Shape

	// ClusterFrom lists the manifest files or directories the cluster is
	// loaded from instead of generated (-cluster-from, a scenario's
	// cluster.manifests; clusterfrom.go); Loaded is what they hold, read
	// by parseFlags. Loaded is shared, never changed once set: each run
	// copies its objects.
	ClusterFrom []string
	Loaded      *manifest.Cluster

	// Explain chooses the attempts explained in the report (explain.go);
	// Profile the profiles written and the pprof server (profile.go).
	Explain ExplainConfig
	Profile ProfileConfig

	// Phases is a phases scenario's plan (phases.go; nil: none), shared,
	// never changed once set; Scale sizes its counts (-scale, 1: as
	// written).
	Phases *phasePlan
	Scale  float64

	// Life is the pod lifecycle (lifecycle.go): how long bound pods run
	// before they complete. Shared, never changed once set.
	Life LifeConfig
	// Trace is -arrivals-from's trace (arrivals.go): with Arrival
	// "trace", pods arrive at its submit times.
	Trace TraceConfig
}

// Arrival modes.
const (
	arrClosed  = "closed"
	arrPoisson = "poisson"
	arrBurst   = "burst"
	arrTrace   = "trace" // -arrivals-from (arrivals.go)
)

// openLoop says whether pods arrive on their own schedule.
func (c *Config) openLoop() bool {
	return c.Arrival == arrPoisson || c.Arrival == arrBurst || c.Arrival == arrTrace
}

// limit is how long the run may last: Duration, or maxDuration in a
// pod-count run without one.
func (c *Config) limit() time.Duration {
	if c.Duration > 0 {
		return c.Duration
	}
	return maxDuration
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
	maxRate        = 10_000_000
	maxBurst       = 1_000_000
	maxPods        = 100_000_000
	maxZones       = 1000
	maxChurnRate   = 1_000_000
	maxReaders     = 1024
	maxReadNodes   = 10_000
	maxExpiryPods  = 1_000_000
	// queueCap bounds the pending queue of a real-time open-loop run: the
	// arrivals goroutine waits when it is full.
	queueCap = 1 << 16
	// detQueueMax bounds the pending queue of a deterministic open-loop
	// run (it has no back-pressure): reaching it stops the run.
	detQueueMax = 1 << 20
	// stallLimit ends a pod-count run in which no pod was scheduled for
	// this long (virtual or real): the cluster is full.
	stallLimit = 10 * time.Second
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
		Arrival:      arrClosed,
		DrainGrace:   100 * time.Millisecond,
		NotReadyFor:  time.Second,
		ReadNodes:    10,
		Explain:      ExplainConfig{Top: 3},
		Scale:        1,
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
	case c.InitialPods < 0:
		return bad("initial-pods", "must not be negative, got %d", c.InitialPods)
	case c.InitialPods > maxInitialPods:
		return bad("initial-pods", "at most %d, got %d", maxInitialPods, c.InitialPods)
	case int64(c.InitialPods) > int64(c.Nodes)*c.podCap():
		return bad("initial-pods", "%d pods exceed the pod capacity of %d nodes (%d each)", c.InitialPods, c.Nodes, c.podCap())
	case c.Zones < 0 || c.Zones > maxZones:
		return bad("zones", "must be 0 (the generator's three) to %d, got %d", maxZones, c.Zones)
	case c.Zones > c.Nodes:
		return bad("zones", "%d zones for %d nodes: some would be empty", c.Zones, c.Nodes)
	case c.PodsPerNode < 0:
		return bad("pods-per-node", "must not be negative, got %d", c.PodsPerNode)
	case int64(c.PodsPerNode) > c.podCap():
		return bad("pods-per-node", "%d exceeds the node pod capacity (%d): the cluster would be over-full", c.PodsPerNode, c.podCap())
	case int64(c.Nodes)*int64(c.PodsPerNode) > maxInitialPods:
		return bad("pods-per-node", "%d nodes x %d pods = %d initial pods, more than the %d this tool holds", c.Nodes, c.PodsPerNode, int64(c.Nodes)*int64(c.PodsPerNode), maxInitialPods)
	case c.Duration < 0:
		return bad("duration", "must not be negative, got %v", c.Duration)
	case c.Pods < 0:
		return bad("pods", "must not be negative, got %d", c.Pods)
	case c.Pods > maxPods:
		return bad("pods", "at most %d, got %d", maxPods, c.Pods)
	case c.Duration == 0 && c.Pods == 0 && c.Phases == nil && c.Arrival != arrTrace:
		return bad("duration", "the run needs a length: a positive -duration, -pods or -arrivals-from (all missing)")
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
	case c.ConfirmDelay >= c.limit():
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
	case c.DecisionTime > c.limit():
		return bad("decision-time", "%v is longer than -duration %v: no decision would be made", c.DecisionTime, c.Duration)
	case c.AuditEvery < 0:
		return bad("audit-every", "must not be negative (0: only at the end), got %v", c.AuditEvery)
	case c.Record != "" && !c.Deterministic:
		return bad("record", "needs -deterministic (only a deterministic run makes its cache calls in one order)")
	case c.AuditEvery > 0 && c.Duration == 0:
		return bad("audit-every", "needs a positive -duration")
	case c.AuditEvery > c.Duration:
		return bad("audit-every", "%v is longer than -duration %v", c.AuditEvery, c.Duration)
	case c.AuditEvery > 0 && c.Duration/c.AuditEvery > maxAudits:
		return bad("audit-every", "%v would audit %d times in -duration %v; at most %d", c.AuditEvery, c.Duration/c.AuditEvery, c.Duration, maxAudits)
	}
	if err := c.Shape.Validate(); err != nil {
		return bad("cluster", "%v", err)
	}
	if err := c.validatePhases(); err != nil {
		return err
	}
	if err := c.validateLoaded(); err != nil {
		return err
	}
	if err := c.validateArrivals(); err != nil {
		return err
	}
	if err := c.validateExplain(); err != nil {
		return err
	}
	if err := c.validateLifecycle(); err != nil {
		return err
	}
	return c.validateChurn()
}

// validateChurn checks the churn, binding, informer, reader and expiry
// fields.
func (c *Config) validateChurn() error {
	for _, r := range []struct {
		flag string
		v    float64
	}{{"pod-update-rate", c.PodUpdateRate}, {"pod-delete-rate", c.PodDeleteRate}, {"node-add-rate", c.NodeAddRate},
		{"node-remove-rate", c.NodeRemoveRate}, {"drain-rate", c.DrainRate}, {"not-ready-rate", c.NotReadyRate}, {"zone-move-rate", c.ZoneMoveRate}} {
		if math.IsNaN(r.v) || r.v < 0 || r.v > maxChurnRate {
			return bad(r.flag, "must be a rate in [0, %d] per second, got %v", maxChurnRate, r.v)
		}
	}
	lim := c.limit()
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"drain-grace", c.DrainGrace}, {"drain-for", c.DrainFor}, {"not-ready-for", c.NotReadyFor}, {"zone-outage-every", c.ZoneOutageEvery},
		{"zone-outage-for", c.ZoneOutageFor}, {"bind-latency", c.BindLatency}, {"informer-jitter", c.InformerJitter},
		{"drop-every", c.DropEvery}, {"drop-for", c.DropFor}, {"full-snapshot-every", c.FullSnapshotEvery}, {"assume-ttl", c.AssumeTTL}, {"expiry-at", c.ExpiryAt}} {
		if d.v < 0 {
			return bad(d.flag, "must not be negative, got %v", d.v)
		}
		if d.v > maxDuration {
			return bad(d.flag, "at most %v, got %v", maxDuration, d.v)
		}
	}
	switch {
	case c.BindLatency >= lim:
		return bad("bind-latency", "%v must be shorter than the run (%v)", c.BindLatency, lim)
	case c.InformerJitter >= lim:
		return bad("informer-jitter", "%v must be shorter than the run (%v)", c.InformerJitter, lim)
	case (c.DrainRate > 0 || c.NodeRemoveRate > 0) && c.DrainGrace == 0:
		return bad("drain-grace", "must be positive with -drain-rate or -node-remove-rate")
	case c.NotReadyRate > 0 && c.NotReadyFor == 0:
		return bad("not-ready-for", "must be positive with -not-ready-rate")
	case c.ZoneOutageFor > 0 && c.ZoneOutageEvery == 0:
		return bad("zone-outage-for", "needs -zone-outage-every")
	case c.ZoneOutageEvery > 0 && c.ZoneOutageFor == 0:
		return bad("zone-outage-for", "must be positive with -zone-outage-every")
	case c.ZoneOutageEvery > 0 && c.ZoneOutageFor >= c.ZoneOutageEvery:
		return bad("zone-outage-for", "%v must be shorter than -zone-outage-every %v (one zone is out at a time)", c.ZoneOutageFor, c.ZoneOutageEvery)
	case c.ZoneOutageEvery > 0 && c.Zones == 1:
		return bad("zone-outage-every", "needs more than one zone (-zones 1 would take the whole cluster out)")
	case c.DropFor > 0 && c.DropEvery == 0:
		return bad("drop-for", "needs -drop-every")
	case c.DropEvery > 0 && c.DropFor == 0:
		return bad("drop-for", "must be positive with -drop-every")
	case c.DropEvery > 0 && c.DropFor >= c.DropEvery:
		return bad("drop-for", "%v must be shorter than -drop-every %v", c.DropFor, c.DropEvery)
	case c.Readers < 0 || c.Readers > maxReaders:
		return bad("readers", "must be 0 to %d, got %d", maxReaders, c.Readers)
	case c.ReadNodes < 1 || c.ReadNodes > maxReadNodes:
		return bad("read-nodes", "must be 1 to %d, got %d", maxReadNodes, c.ReadNodes)
	case c.Readers > 0 && c.Deterministic:
		return bad("readers", "needs real time (a deterministic run has one goroutine)")
	case c.FullSnapshotEvery > 0 && c.Deterministic:
		return bad("full-snapshot-every", "needs real time (a deterministic run has one goroutine)")
	case c.AssumeTTL > 0 && c.Deterministic:
		return bad("assume-ttl", "needs real time (the virtual clock has no timers, nothing would expire)")
	case c.ExpiryPods < 0 || c.ExpiryPods > maxExpiryPods:
		return bad("expiry-pods", "must be 0 to %d, got %d", maxExpiryPods, c.ExpiryPods)
	case c.ExpiryPods > 0 && c.AssumeTTL == 0:
		return bad("expiry-pods", "needs -assume-ttl (without a TTL the pods never expire)")
	case c.ExpiryAt > 0 && c.ExpiryPods == 0:
		return bad("expiry-at", "needs -expiry-pods")
	case c.ExpiryAt >= lim:
		return bad("expiry-at", "%v is not within the run (%v)", c.ExpiryAt, lim)
	}
	return nil
}

func (c *Config) validateArrivals() error {
	switch c.Arrival {
	case arrClosed:
		switch {
		case c.Rate != 0:
			return bad("rate", "only with -arrival poisson (arrivals are closed-loop)")
		case c.BurstSize != 0 || c.BurstInterval != 0:
			return bad("burst-size", "-burst-size and -burst-interval only with -arrival burst")
		}
	case arrPoisson:
		switch {
		case math.IsNaN(c.Rate) || c.Rate <= 0:
			return bad("rate", "must be a positive rate in pods/s, got %v", c.Rate)
		case c.Rate > maxRate:
			return bad("rate", "at most %d pods/s, got %v", maxRate, c.Rate)
		case c.BurstSize != 0 || c.BurstInterval != 0:
			return bad("burst-size", "-burst-size and -burst-interval only with -arrival burst")
		}
	case arrBurst:
		switch {
		case c.BurstSize < 1:
			return bad("burst-size", "must be at least 1, got %d", c.BurstSize)
		case c.BurstSize > maxBurst:
			return bad("burst-size", "at most %d, got %d", maxBurst, c.BurstSize)
		case c.BurstInterval <= 0:
			return bad("burst-interval", "must be positive, got %v", c.BurstInterval)
		case c.BurstInterval > c.limit():
			return bad("burst-interval", "%v is longer than the run", c.BurstInterval)
		case c.Rate != 0:
			return bad("rate", "only with -arrival poisson")
		}
	case arrTrace:
		if err := c.validateTrace(); err != nil {
			return err
		}
	default:
		return bad("arrival", "must be closed, poisson or burst, got %q", c.Arrival)
	}
	return nil
}

// flagSet binds every flag to a field of cfg.
func flagSet(cfg *Config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "cluster nodes, 1 to 200000 (5000 standard, 50000 for the -50k variant)")
	fs.IntVar(&cfg.PodsPerNode, "pods-per-node", cfg.PodsPerNode, "bound pods per node at start, 0 to 110 (the node pod capacity)")
	fs.IntVar(&cfg.InitialPods, "initial-pods", cfg.InitialPods, "bound pods at start in total, spread evenly (replaces -pods-per-node when positive)")
	fs.IntVar(&cfg.Zones, "zones", cfg.Zones, "zones: 0 keeps the generator's three (50/30/20%), N spreads the nodes round-robin over N")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "cluster and workload seed")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the scheduling phase runs (virtual time with -deterministic); 0 with -pods: until they are scheduled; 0 with -arrivals-from: until the trace is done")
	fs.Int64Var(&cfg.Pods, "pods", cfg.Pods, "stop once this many pods are scheduled (0: no pod count)")
	fs.IntVar(&cfg.Schedulers, "schedulers", cfg.Schedulers, "scheduler goroutines (virtual schedulers with -deterministic), 1 to 1024")
	fs.IntVar(&cfg.Sample, "sample", cfg.Sample, "nodes sampled per scheduling decision, 1 to -nodes (default 50, or -nodes if fewer)")
	fs.DurationVar(&cfg.ConfirmDelay, "confirm-delay", cfg.ConfirmDelay, "delay before the informer confirms a binding with AddPod, shorter than -duration")
	fs.Float64Var(&cfg.FailRate, "fail-rate", cfg.FailRate, "fraction of bindings that fail and are forgotten, in [0, 1]")
	fs.BoolVar(&cfg.KeepPods, "keep-pods", cfg.KeepPods, "the informer deletes no pod: the cluster grows by every scheduled pod (default: one old pod deleted per confirmation)")
	fs.StringVar(&cfg.Arrival, "arrival", cfg.Arrival, "pod arrivals: closed (loop), poisson (-rate) or burst (-burst-size every -burst-interval)")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "Poisson arrival rate in pods/s (-arrival poisson)")
	fs.IntVar(&cfg.BurstSize, "burst-size", cfg.BurstSize, "pods per burst (-arrival burst)")
	fs.DurationVar(&cfg.BurstInterval, "burst-interval", cfg.BurstInterval, "time between bursts (-arrival burst)")
	fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "shard goroutines (0: the cache's default)")
	fs.BoolVar(&cfg.Deterministic, "deterministic", cfg.Deterministic, "virtual time on one goroutine: one seed reproduces the run event for event (digest in the report)")
	fs.DurationVar(&cfg.DecisionTime, "decision-time", cfg.DecisionTime, "virtual time of one scheduling decision with -deterministic")
	fs.DurationVar(&cfg.AuditEvery, "audit-every", cfg.AuditEvery, "also audit the cache every this much (virtual with -deterministic) time; real time pauses the run for it (0: only at the end)")
	fs.StringVar(&cfg.JSON, "json", cfg.JSON, "write the JSON report to this path (- for stdout, the text report then goes to stderr)")
	fs.StringVar(&cfg.CSV, "csv", cfg.CSV, "write a time series, one row per 1 s window, to this path (- for stdout)")
	fs.StringVar(&cfg.SVG, "svg", cfg.SVG, "write an SVG plot of the 1 s windows (throughput, attempt latency p50/p99) to this path (- for stdout)")
	fs.BoolVar(&cfg.Quiet, "quiet", cfg.Quiet, "no progress lines, even on a terminal")
	fs.BoolVar(&cfg.Progress, "progress", cfg.Progress, "progress lines on stderr even when it is not a terminal (a Job's log); -quiet wins")
	fs.Float64Var(&cfg.PodUpdateRate, "pod-update-rate", cfg.PodUpdateRate, "churn: pod updates per second (UpdatePod with a new version)")
	fs.Float64Var(&cfg.PodDeleteRate, "pod-delete-rate", cfg.PodDeleteRate, "churn: pod deletions per second, beyond one per confirmation")
	fs.Float64Var(&cfg.NodeAddRate, "node-add-rate", cfg.NodeAddRate, "churn: nodes added per second")
	fs.Float64Var(&cfg.NodeRemoveRate, "node-remove-rate", cfg.NodeRemoveRate, "churn: nodes drained and removed per second")
	fs.Float64Var(&cfg.DrainRate, "drain-rate", cfg.DrainRate, "churn: nodes drained (cordoned, pods evicted) per second")
	fs.DurationVar(&cfg.DrainGrace, "drain-grace", cfg.DrainGrace, "churn: cordon to eviction, and eviction to removal")
	fs.DurationVar(&cfg.DrainFor, "drain-for", cfg.DrainFor, "churn: a drained node is uncordoned after this (0: stays cordoned)")
	fs.Float64Var(&cfg.NotReadyRate, "not-ready-rate", cfg.NotReadyRate, "churn: nodes going NotReady per second (condition and taint, via UpdateNode)")
	fs.DurationVar(&cfg.NotReadyFor, "not-ready-for", cfg.NotReadyFor, "churn: how long a node stays NotReady")
	fs.Float64Var(&cfg.ZoneMoveRate, "zone-move-rate", cfg.ZoneMoveRate, "churn: nodes changing zone per second")
	fs.DurationVar(&cfg.ZoneOutageEvery, "zone-outage-every", cfg.ZoneOutageEvery, "churn: every this long all nodes of one zone go NotReady (0: none)")
	fs.DurationVar(&cfg.ZoneOutageFor, "zone-outage-for", cfg.ZoneOutageFor, "churn: how long a zone outage lasts")
	fs.DurationVar(&cfg.BindLatency, "bind-latency", cfg.BindLatency, "time the simulated dispatcher takes per binding (BindPod)")
	fs.DurationVar(&cfg.InformerJitter, "informer-jitter", cfg.InformerJitter, "extra uniform watch delay in [0, this): reorders events of different objects")
	fs.DurationVar(&cfg.DropEvery, "drop-every", cfg.DropEvery, "the informer loses a window of events this often, then relists (0: never)")
	fs.DurationVar(&cfg.DropFor, "drop-for", cfg.DropFor, "how long each lost window lasts")
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "reader goroutines taking snapshots and reading -read-nodes nodes in a loop (W1)")
	fs.IntVar(&cfg.ReadNodes, "read-nodes", cfg.ReadNodes, "nodes a reader reads per snapshot")
	fs.DurationVar(&cfg.FullSnapshotEvery, "full-snapshot-every", cfg.FullSnapshotEvery, "a new reader takes a first full snapshot this often (W6; 0: never)")
	fs.DurationVar(&cfg.AssumeTTL, "assume-ttl", cfg.AssumeTTL, "the cache's assumed-pod TTL (0: never expire)")
	fs.IntVar(&cfg.ExpiryPods, "expiry-pods", cfg.ExpiryPods, "expiry storm (W5): pods assumed at -expiry-at whose binding never comes")
	fs.DurationVar(&cfg.ExpiryAt, "expiry-at", cfg.ExpiryAt, "when the expiry storm happens")
	fs.Float64Var(&cfg.Scale, "scale", cfg.Scale, "a phases scenario at this size: its createNodes, createPods and deletePods counts times this, in (0, 100]")
	fs.StringVar(&cfg.Record, "record", cfg.Record, "with -deterministic, write every cache call (JSON Lines trace) to this path; -replay PATH replays one")
	fs.Func("cluster-from", "load the cluster from Kubernetes manifests: comma list of files or directories (YAML or JSON, Lists, ---, gzip; nodes and pods, others skipped)", func(s string) (err error) {
		cfg.ClusterFrom, err = splitPaths(s)
		return err
	})
	explainFlags(fs, cfg)
	profileFlags(fs, cfg)
	lifecycleFlags(fs, cfg)
	arrivalFlags(fs, cfg)
	return fs
}

// cliOnly are the flags that select a scenario; they are parsed first.
type cliOnly struct {
	scenario, preset string
	listPresets      bool
}

// parseFlags parses args (without the program name) into a validated
// Config. A scenario file (-scenario) or preset (-preset) replaces the
// defaults; flags given explicitly override it. Errors wrap ErrUsage;
// flag.ErrHelp is returned as is for -h. errListPresets asks the caller
// to list the presets.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := defaultConfig()
	var co cliOnly
	fs := flagSet(&cfg, stderr)
	fs.StringVar(&co.scenario, "scenario", "", "a scenario YAML file (see docs/loadgen.md); flags given explicitly override it")
	fs.StringVar(&co.preset, "preset", "", "a built-in scenario (-list-presets lists them)")
	fs.BoolVar(&co.listPresets, "list-presets", false, "list the built-in scenarios and exit")
	// The sweep flags are taken out of the arguments before (sweep.go);
	// they are declared here for -h only.
	fs.String("sweep-seeds", "", "sweep mode: run each seed of a range (1-8) or comma list (1,3,5); needs -out")
	fs.String("sweep-presets", "", "sweep mode: run each preset of a comma list (times each seed)")
	fs.String("sweep-scenarios", "", "sweep mode: run each scenario file of a comma list (times each seed)")
	fs.String("out", "", "sweep mode: directory of the JSON reports and summary.json")
	fs.String("sweep-index", "", "sweep mode: run only combination N (default: $JOB_COMPLETION_INDEX, else all)")
	fs.SetOutput(io.Discard) // a bad flag is one line (flagError), not the usage
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "Usage: loadgen [flags]; docs/loadgen.md describes every flag, scenario field and exit code.")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return cfg, err
		}
		return cfg, flagError(fs, err)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%w: unexpected argument %q (loadgen takes flags only); %s", ErrUsage, fs.Arg(0), usageHint)
	}
	if co.listPresets {
		return cfg, errListPresets
	}
	set := map[string]bool{}
	given := map[string]string{} // the flags given, for errors (blame.go)
	fs.Visit(func(f *flag.Flag) { set[f.Name], given[f.Name] = true, f.Value.String() })
	var sc *Scenario
	if co.scenario != "" || co.preset != "" {
		var err error
		switch {
		case co.scenario != "" && co.preset != "":
			return cfg, bad("preset", "give -scenario or -preset, not both")
		case co.scenario != "":
			sc, err = loadScenarioFile(co.scenario)
		default:
			sc, err = loadPreset(co.preset)
		}
		if err != nil {
			return cfg, err
		}
		base := defaultConfig()
		if err := sc.apply(&base); err != nil {
			return cfg, err
		}
		// The flags given explicitly override the file: parse them again
		// on top of it.
		cfg = base
		fs2 := flagSet(&cfg, io.Discard)
		fs2.String("scenario", "", "")
		fs2.String("preset", "", "")
		fs2.Bool("list-presets", false, "")
		if err := fs2.Parse(args); err != nil {
			return cfg, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		if sc.setSample {
			set["sample"] = true
		}
	}
	if err := cfg.clusterFromFlags(set); err != nil {
		return cfg, err
	}
	if err := cfg.phaseFlags(set); err != nil {
		return cfg, err
	}
	if err := cfg.traceFlags(set); err != nil {
		return cfg, err
	}
	if set["pods-per-node"] && set["initial-pods"] {
		return cfg, bad("initial-pods", "give -initial-pods or -pods-per-node, not both")
	}
	if set["pods-per-node"] {
		cfg.InitialPods = 0 // the flag replaces the file's total
	}
	if !set["sample"] && cfg.Nodes >= 1 && cfg.Sample > cfg.Nodes {
		cfg.Sample = cfg.Nodes // the default sample never exceeds a small cluster
	}
	if cfg.InitialPods > 0 {
		cfg.PodsPerNode = 0 // the total replaces the per-node count
	}
	cfg.origins = &origins{sc: sc, flags: given}
	if err := cfg.Validate(); err != nil {
		return cfg, cfg.blame(err)
	}
	return cfg, nil
}

// errListPresets is returned by parseFlags for -list-presets.
var errListPresets = errors.New("list presets")
