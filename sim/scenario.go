package sim

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// Scenario is a plain value, owned by the goroutine that decoded it (no
// field is shared): a YAML file's cluster shape, workload, run length and
// arrivals. A field left out keeps the
// default (the flags' defaults). See docs/loadgen.md.
type Scenario struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Cluster     *ScenarioCluster  `json:"cluster"`
	Workload    *ScenarioWork     `json:"workload"`
	Run         *ScenarioRun      `json:"run"`
	Arrivals    *ScenarioArrival  `json:"arrivals"`
	Churn       *ScenarioChurn    `json:"churn"`
	Informer    *ScenarioInformer `json:"informer"`
	Readers     *ScenarioReaders  `json:"readers"`
	Expiry      *ScenarioExpiry   `json:"expiry"`
	// PodMix replaces the generator's pod by weighted templates.
	PodMix []ScenarioPodTemplate `json:"podMix"`
	// Phases run one op after another (phases.go); Thresholds apply to
	// each measured phase.
	Phases     []ScenarioPhase     `json:"phases"`
	Thresholds *ScenarioThresholds `json:"thresholds"`

	source    string     // the file or preset name
	setSample bool       // the file gives workload.sample
	doc       *yaml.Node // the file's top-level node, for the lines of its fields (nil: empty)
}

// ScenarioCluster is the cluster shape.
type ScenarioCluster struct {
	Nodes       *int   `json:"nodes"`
	PodsPerNode *int   `json:"podsPerNode"`
	InitialPods *int   `json:"initialPods"`
	Zones       *int   `json:"zones"`
	Seed        *int64 `json:"seed"`
	// The shape of the nodes (shape.go): nil or empty keeps the
	// generator's.
	Allocatable   *ScenarioAllocatable `json:"allocatable"`
	Images        *ScenarioImages      `json:"images"`
	Labels        []ScenarioLabel      `json:"labels"`
	Taints        []ScenarioTaint      `json:"taints"`
	Unschedulable *float64             `json:"unschedulable"`
	// Manifests load the cluster from Kubernetes manifests instead
	// (-cluster-from; clusterfrom.go): paths relative to the scenario
	// file's directory; not with nodes, podsPerNode, initialPods, zones.
	Manifests []string `json:"manifests"`
}

// ScenarioWork is the scheduling workload.
type ScenarioWork struct {
	Schedulers         *int     `json:"schedulers"`
	Sample             *int     `json:"sample"`
	BindingFailureRate *float64 `json:"bindingFailureRate"`
	ConfirmDelay       *string  `json:"confirmDelay"`
	DecisionTime       *string  `json:"decisionTime"`
	KeepPods           *bool    `json:"keepPods"`
	BindLatency        *string  `json:"bindLatency"`
	// RunFor and PodFailRate are every pod's lifecycle (lifecycle.go).
	RunFor      *ScenarioRunFor `json:"runFor"`
	PodFailRate *float64        `json:"podFailRate"`
}

// ScenarioChurn is the simulated API server's churn: rates per second.
type ScenarioChurn struct {
	PodUpdateRate   *float64 `json:"podUpdateRate"`
	PodDeleteRate   *float64 `json:"podDeleteRate"`
	NodeAddRate     *float64 `json:"nodeAddRate"`
	NodeRemoveRate  *float64 `json:"nodeRemoveRate"`
	DrainRate       *float64 `json:"drainRate"`
	DrainGrace      *string  `json:"drainGrace"`
	DrainFor        *string  `json:"drainFor"`
	NotReadyRate    *float64 `json:"notReadyRate"`
	NotReadyFor     *string  `json:"notReadyFor"`
	ZoneMoveRate    *float64 `json:"zoneMoveRate"`
	ZoneOutageEvery *string  `json:"zoneOutageEvery"`
	ZoneOutageFor   *string  `json:"zoneOutageFor"`
}

// ScenarioInformer is how the informer delivers: jitter, lost windows.
type ScenarioInformer struct {
	Jitter    *string `json:"jitter"`
	DropEvery *string `json:"dropEvery"`
	DropFor   *string `json:"dropFor"`
}

// ScenarioReaders are the snapshot readers (W1, W6).
type ScenarioReaders struct {
	Count             *int    `json:"count"`
	Nodes             *int    `json:"nodes"`
	FullSnapshotEvery *string `json:"fullSnapshotEvery"`
}

// ScenarioExpiry is the assumed-pod TTL and the expiry storm (W5).
type ScenarioExpiry struct {
	TTL  *string `json:"ttl"`
	Pods *int    `json:"pods"`
	At   *string `json:"at"`
}

// ScenarioRun is the run length: a duration, a pod count, or both
// (whichever comes first).
type ScenarioRun struct {
	Duration   *string `json:"duration"`
	Pods       *int64  `json:"pods"`
	AuditEvery *string `json:"auditEvery"`
}

// ScenarioArrival is how pods arrive.
type ScenarioArrival struct {
	Mode          string   `json:"mode"`
	Rate          *float64 `json:"rate"`
	BurstSize     *int     `json:"burstSize"`
	BurstInterval *string  `json:"burstInterval"`
	// From is a trace of arrivals (arrivals.go), relative to the
	// scenario's directory; Speed divides its submit times.
	From  *string  `json:"from"`
	Speed *float64 `json:"speed"`
}

//go:embed scenarios/*.yaml
var presetFS embed.FS

// maxScenarioBytes bounds a scenario file.
const maxScenarioBytes = 1 << 20

// ScenarioError is an immutable value naming the scenario, the line and
// the field at fault; it wraps ErrUsage. It reads "FILE:LINE: FIELD: MSG"
// ("scenario FILE: FIELD: MSG" when the line is unknown).
type ScenarioError struct {
	Source, Field, Msg string
	// Line is the line of the field in the file (1-based; 0: unknown).
	Line int
}

func (e *ScenarioError) Error() string {
	where := "scenario " + e.Source
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.Source, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", where, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Field, e.Msg)
}
func (e *ScenarioError) Unwrap() error { return ErrUsage }

func loadScenarioFile(p string) (*Scenario, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, bad("scenario", "%v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxScenarioBytes+1))
	if err != nil {
		return nil, bad("scenario", "%v", err)
	}
	if len(b) > maxScenarioBytes {
		return nil, &ScenarioError{Source: p, Msg: fmt.Sprintf("larger than %d bytes", maxScenarioBytes)}
	}
	return parseScenario(p, b)
}

// presetNames lists the embedded scenarios, sorted.
func presetNames() []string {
	ents, _ := fs.ReadDir(presetFS, "scenarios")
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func loadPreset(name string) (*Scenario, error) {
	b, err := presetFS.ReadFile(path.Join("scenarios", name+".yaml"))
	if err != nil || strings.ContainsAny(name, "/\\") {
		return nil, bad("preset", "unknown preset %q (have: %s)", name, strings.Join(presetNames(), ", "))
	}
	return parseScenario("preset "+name, b)
}

// parseScenario decodes strictly: an unknown or repeated field, a value
// of the wrong kind, NaN or an infinity is an error naming its line and
// field path (scenariopos.go).
func parseScenario(source string, b []byte) (*Scenario, error) {
	root, err := parseNodes(source, b)
	if err != nil {
		return nil, err
	}
	if ne := checkNode(root, reflect.TypeFor[Scenario](), ""); ne != nil {
		return nil, &ScenarioError{Source: source, Line: ne.line, Field: ne.field, Msg: ne.what}
	}
	var sc Scenario
	if err := sigsyaml.UnmarshalStrict(b, &sc); err != nil {
		// What checkNode lets through (a number too large for its field).
		e := &ScenarioError{Source: source, Msg: err.Error()}
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			e.Field, e.Msg = te.Field, fmt.Sprintf("want %v, got %s", te.Type, te.Value)
			e.Line, _ = nodeLine(root, te.Field)
		default:
			for _, p := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: "} {
				e.Msg = strings.TrimPrefix(e.Msg, p)
			}
			if m := yamlLineError.FindStringSubmatch(e.Msg); m != nil {
				e.Line, _ = strconv.Atoi(m[1])
				e.Msg = m[2]
			}
		}
		return nil, e
	}
	sc.source, sc.doc = source, root
	if sc.Run == nil && !sc.hasPhases() {
		return nil, &ScenarioError{Source: source, Field: "run", Msg: "missing: a scenario needs run.duration or run.pods (or phases)"}
	}
	return &sc, nil
}

// errorAt is a *ScenarioError about field, with its line when the file
// gives it (or the line of its deepest part the file gives).
func (sc *Scenario) errorAt(field, format string, args ...any) *ScenarioError {
	line, _ := nodeLine(sc.doc, field)
	return &ScenarioError{Source: sc.source, Field: field, Msg: fmt.Sprintf(format, args...), Line: line}
}

// apply writes the scenario over cfg and validates the result, naming
// the scenario's fields in errors.
func (sc *Scenario) apply(cfg *Config) error {
	fail := func(field, format string, args ...any) error {
		return sc.errorAt(field, format, args...)
	}
	dur := func(field string, s *string, dst *time.Duration) error {
		if s == nil {
			return nil
		}
		d, err := time.ParseDuration(*s)
		if err != nil {
			return fail(field, "not a duration (like 5s, 250us): %q", *s)
		}
		*dst = d
		return nil
	}
	if c := sc.Cluster; c != nil {
		if c.PodsPerNode != nil && c.InitialPods != nil {
			return fail("cluster", "give podsPerNode or initialPods, not both")
		}
		setInt(&cfg.Nodes, c.Nodes)
		setInt(&cfg.PodsPerNode, c.PodsPerNode)
		setInt(&cfg.InitialPods, c.InitialPods)
		setInt(&cfg.Zones, c.Zones)
		if c.Seed != nil {
			cfg.Seed = *c.Seed
		}
		if len(c.Manifests) > 0 {
			if err := sc.applyManifests(cfg, fail); err != nil {
				return err
			}
		}
	}
	shape, err := shapeOf(sc.Cluster, sc.PodMix)
	if err != nil {
		var ue *UsageError
		errors.As(err, &ue)
		return fail(ue.Flag, "%s", ue.Msg)
	}
	cfg.Shape = shape
	if err := sc.applyLife(cfg); err != nil {
		return err
	}
	if w := sc.Workload; w != nil {
		setInt(&cfg.Schedulers, w.Schedulers)
		setInt(&cfg.Sample, w.Sample)
		sc.setSample = w.Sample != nil
		if w.KeepPods != nil {
			cfg.KeepPods = *w.KeepPods
		}
		if w.BindingFailureRate != nil {
			cfg.FailRate = *w.BindingFailureRate
		}
		if err := dur("workload.confirmDelay", w.ConfirmDelay, &cfg.ConfirmDelay); err != nil {
			return err
		}
		if err := dur("workload.decisionTime", w.DecisionTime, &cfg.DecisionTime); err != nil {
			return err
		}
		if err := dur("workload.bindLatency", w.BindLatency, &cfg.BindLatency); err != nil {
			return err
		}
	}
	setF := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	if ch := sc.Churn; ch != nil {
		setF(&cfg.PodUpdateRate, ch.PodUpdateRate)
		setF(&cfg.PodDeleteRate, ch.PodDeleteRate)
		setF(&cfg.NodeAddRate, ch.NodeAddRate)
		setF(&cfg.NodeRemoveRate, ch.NodeRemoveRate)
		setF(&cfg.DrainRate, ch.DrainRate)
		setF(&cfg.NotReadyRate, ch.NotReadyRate)
		setF(&cfg.ZoneMoveRate, ch.ZoneMoveRate)
		for _, d := range []struct {
			field string
			s     *string
			dst   *time.Duration
		}{{"churn.drainGrace", ch.DrainGrace, &cfg.DrainGrace}, {"churn.drainFor", ch.DrainFor, &cfg.DrainFor},
			{"churn.notReadyFor", ch.NotReadyFor, &cfg.NotReadyFor}, {"churn.zoneOutageEvery", ch.ZoneOutageEvery, &cfg.ZoneOutageEvery},
			{"churn.zoneOutageFor", ch.ZoneOutageFor, &cfg.ZoneOutageFor}} {
			if err := dur(d.field, d.s, d.dst); err != nil {
				return err
			}
		}
	}
	if in := sc.Informer; in != nil {
		for _, d := range []struct {
			field string
			s     *string
			dst   *time.Duration
		}{{"informer.jitter", in.Jitter, &cfg.InformerJitter}, {"informer.dropEvery", in.DropEvery, &cfg.DropEvery}, {"informer.dropFor", in.DropFor, &cfg.DropFor}} {
			if err := dur(d.field, d.s, d.dst); err != nil {
				return err
			}
		}
	}
	if rd := sc.Readers; rd != nil {
		setInt(&cfg.Readers, rd.Count)
		setInt(&cfg.ReadNodes, rd.Nodes)
		if err := dur("readers.fullSnapshotEvery", rd.FullSnapshotEvery, &cfg.FullSnapshotEvery); err != nil {
			return err
		}
	}
	if ex := sc.Expiry; ex != nil {
		setInt(&cfg.ExpiryPods, ex.Pods)
		if err := dur("expiry.ttl", ex.TTL, &cfg.AssumeTTL); err != nil {
			return err
		}
		if err := dur("expiry.at", ex.At, &cfg.ExpiryAt); err != nil {
			return err
		}
	}
	cfg.Duration, cfg.Pods = 0, 0
	if r := sc.Run; r != nil {
		if err := dur("run.duration", r.Duration, &cfg.Duration); err != nil {
			return err
		}
		if r.Pods != nil {
			cfg.Pods = *r.Pods
		}
		if err := dur("run.auditEvery", r.AuditEvery, &cfg.AuditEvery); err != nil {
			return err
		}
	}
	if a := sc.Arrivals; a != nil {
		if a.Mode == "" && a.From == nil {
			return fail("arrivals.mode", "missing: closed, poisson or burst")
		}
		if a.Mode != "" {
			cfg.Arrival = a.Mode
		}
		if err := sc.applyTrace(cfg); err != nil {
			return err
		}
		if a.Rate != nil {
			cfg.Rate = *a.Rate
		}
		setInt(&cfg.BurstSize, a.BurstSize)
		if err := dur("arrivals.burstInterval", a.BurstInterval, &cfg.BurstInterval); err != nil {
			return err
		}
	}
	if err := sc.applyPhases(cfg); err != nil {
		return err
	}
	if !sc.setSample && cfg.Sample > cfg.Nodes && cfg.Nodes >= 1 {
		cfg.Sample = cfg.Nodes
	}
	// The scenario alone is valid: a flag fixing it is not enough.
	cfg.origins = &origins{sc: sc}
	if err := cfg.Validate(); err != nil {
		return cfg.blame(err)
	}
	cfg.Scenario = sc.source
	return nil
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

// scenarioField maps a flag to the scenario field that sets it.
var scenarioField = map[string]string{
	"nodes":               "cluster.nodes",
	"pods-per-node":       "cluster.podsPerNode",
	"initial-pods":        "cluster.initialPods",
	"zones":               "cluster.zones",
	"seed":                "cluster.seed",
	"schedulers":          "workload.schedulers",
	"sample":              "workload.sample",
	"fail-rate":           "workload.bindingFailureRate",
	"confirm-delay":       "workload.confirmDelay",
	"decision-time":       "workload.decisionTime",
	"keep-pods":           "workload.keepPods",
	"duration":            "run.duration",
	"pods":                "run.pods",
	"arrival":             "arrivals.mode",
	"rate":                "arrivals.rate",
	"burst-size":          "arrivals.burstSize",
	"burst-interval":      "arrivals.burstInterval",
	"shards":              "shards",
	"audit-every":         "run.auditEvery",
	"bind-latency":        "workload.bindLatency",
	"pod-update-rate":     "churn.podUpdateRate",
	"pod-delete-rate":     "churn.podDeleteRate",
	"node-add-rate":       "churn.nodeAddRate",
	"node-remove-rate":    "churn.nodeRemoveRate",
	"drain-rate":          "churn.drainRate",
	"drain-grace":         "churn.drainGrace",
	"drain-for":           "churn.drainFor",
	"not-ready-rate":      "churn.notReadyRate",
	"not-ready-for":       "churn.notReadyFor",
	"zone-move-rate":      "churn.zoneMoveRate",
	"zone-outage-every":   "churn.zoneOutageEvery",
	"zone-outage-for":     "churn.zoneOutageFor",
	"informer-jitter":     "informer.jitter",
	"drop-every":          "informer.dropEvery",
	"drop-for":            "informer.dropFor",
	"readers":             "readers.count",
	"read-nodes":          "readers.nodes",
	"full-snapshot-every": "readers.fullSnapshotEvery",
	"assume-ttl":          "expiry.ttl",
	"expiry-pods":         "expiry.pods",
	"expiry-at":           "expiry.at",
	"pod-duration":        "workload.runFor",
	"pod-fail-rate":       "workload.podFailRate",
	"arrivals-from":       "arrivals.from",
	"arrivals-speed":      "arrivals.speed",
}

// listPresets prints every preset with its description.
func listPresets(w io.Writer) {
	for _, n := range presetNames() {
		sc, err := loadPreset(n)
		if err != nil {
			fmt.Fprintf(w, "%-24s invalid: %v\n", n, err)
			continue
		}
		fmt.Fprintf(w, "%-24s %s\n", n, strings.Join(strings.Fields(sc.Description), " "))
	}
}
