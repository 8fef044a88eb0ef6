package sim

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Sweep limits.
const (
	maxSweepRuns = 10_000
	// envJobIndex is set by a Kubernetes Indexed Job in each pod.
	envJobIndex = "JOB_COMPLETION_INDEX"
)

// sweepFlags are the flags of sweep mode, taken out of the arguments
// before the run flags are parsed.
var sweepFlags = map[string]bool{
	"sweep-seeds": true, "sweep-presets": true, "sweep-scenarios": true, "sweep-index": true, "out": true,
}

// sweepSpec is a plain value: what a sweep runs.
type sweepSpec struct {
	seeds     []int64  // nil: the seed of the flags (or scenario)
	presets   []string // at most one of presets and scenarios
	scenarios []string
	index     int    // -1: every combination
	indexSrc  string // where index came from: the flag or $JOB_COMPLETION_INDEX, for errors
	out       string
}

// sweepRun is one combination of a sweep, validated.
type sweepRun struct {
	name string // preset or scenario file name, or "default"
	seed int64
	cfg  Config
}

// SweepEntry is a plain value: one run in summary.json.
type SweepEntry struct {
	Index        int     `json:"index"`
	Name         string  `json:"name"`
	Seed         int64   `json:"seed"`
	File         string  `json:"file,omitempty"`
	PodsPerSec   float64 `json:"pods_per_second"`
	AttemptP99ms float64 `json:"attempt_p99_ms"`
	Digest       string  `json:"digest,omitempty"`
	Divergences  int     `json:"audit_divergences"`
	MidFailed    int     `json:"mid_run_audits_failed,omitempty"`
	Exit         int     `json:"exit"`
	Error        string  `json:"error,omitempty"`
}

// splitSweep takes the sweep flags out of args. It returns nil spec when
// none is given. Both -flag value and -flag=value forms are accepted.
func splitSweep(args []string) (*sweepSpec, []string, error) {
	raw := map[string]string{}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || !sweepFlags[name] {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, nil, bad(name, "needs a value")
			}
			i++
			val = args[i]
		}
		if _, dup := raw[name]; dup {
			return nil, nil, bad(name, "given twice")
		}
		raw[name] = val
	}
	if len(raw) == 0 {
		return nil, rest, nil
	}
	sp := &sweepSpec{index: -1, out: raw["out"]}
	if v, ok := raw["sweep-seeds"]; ok {
		seeds, err := parseSeeds(v)
		if err != nil {
			return nil, nil, err
		}
		sp.seeds = seeds
	}
	var err error
	if v, ok := raw["sweep-presets"]; ok {
		if sp.presets, err = parseList("sweep-presets", v); err != nil {
			return nil, nil, err
		}
	}
	if v, ok := raw["sweep-scenarios"]; ok {
		if sp.scenarios, err = parseList("sweep-scenarios", v); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case sp.seeds == nil && sp.presets == nil && sp.scenarios == nil:
		name := "out"
		if _, ok := raw["sweep-index"]; ok {
			name = "sweep-index"
		}
		return nil, nil, bad(name, "needs -sweep-seeds, -sweep-presets or -sweep-scenarios")
	case sp.presets != nil && sp.scenarios != nil:
		return nil, nil, bad("sweep-scenarios", "give -sweep-presets or -sweep-scenarios, not both")
	case sp.out == "":
		return nil, nil, bad("out", "a sweep needs -out DIR for its reports")
	}
	idx, fromFlag := raw["sweep-index"]
	src := "sweep-index"
	if !fromFlag {
		idx, fromFlag = os.LookupEnv(envJobIndex)
		src = "sweep-index (from $" + envJobIndex + ")"
	}
	if fromFlag {
		n, err := strconv.Atoi(strings.TrimSpace(idx))
		if err != nil || n < 0 {
			return nil, nil, bad(src, "must be a non-negative integer, got %q", idx)
		}
		sp.index, sp.indexSrc = n, src
	}
	return sp, rest, nil
}

// parseSeeds parses "1-8", "1,3,5" or a mix ("1-3,7").
func parseSeeds(v string) ([]int64, error) {
	var seeds []int64
	seen := map[int64]bool{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		lo, hi := part, part
		if i := strings.Index(part[min(1, len(part)):], "-"); i >= 0 { // a leading minus is a sign
			lo, hi = part[:i+1], part[i+2:]
		}
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		switch {
		case part == "" || err1 != nil || err2 != nil:
			return nil, bad("sweep-seeds", "want a range (1-8) or a comma list (1,3,5), got %q", v)
		case b < a:
			return nil, bad("sweep-seeds", "range %q runs backwards", part)
		case uint64(b)-uint64(a) >= maxSweepRuns || len(seeds)+int(b-a+1) > maxSweepRuns:
			return nil, bad("sweep-seeds", "at most %d seeds", maxSweepRuns)
		}
		for s := a; ; s++ {
			if seen[s] {
				return nil, bad("sweep-seeds", "seed %d given twice", s)
			}
			seen[s] = true
			seeds = append(seeds, s)
			if s == b {
				break
			}
		}
	}
	return seeds, nil
}

// parseList parses a comma list of distinct, non-empty names.
func parseList(name, v string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			return nil, bad(name, "empty item in %q", v)
		case seen[p]:
			return nil, bad(name, "%q given twice", p)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

// plan validates every combination of the sweep (parsing the run flags
// with each preset or scenario and seed) before any run starts. The order
// is scenario-major, seed-minor; it is what -sweep-index counts in.
func (sp *sweepSpec) plan(rest []string) ([]sweepRun, error) {
	set := map[string]bool{}
	probe := defaultConfig()
	fs := flagSet(&probe, io.Discard)
	fs.String("scenario", "", "")
	fs.String("preset", "", "")
	fs.Bool("list-presets", false, "")
	if err := fs.Parse(rest); err != nil {
		return nil, flagError(fs, err)
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case sp.seeds != nil && set["seed"]:
		return nil, bad("seed", "give -seed or -sweep-seeds, not both")
	case (sp.presets != nil || sp.scenarios != nil) && (set["preset"] || set["scenario"]):
		return nil, bad("preset", "give -preset/-scenario or -sweep-presets/-sweep-scenarios, not both")
	case set["json"] || set["csv"] || set["svg"]:
		return nil, bad("out", "a sweep writes its JSON reports to -out; -json, -csv and -svg are for one run")
	case set["list-presets"]:
		return nil, bad("list-presets", "not with a sweep")
	}
	type src struct{ name, flag, val string }
	var srcs []src
	switch {
	case sp.presets != nil:
		for _, p := range sp.presets {
			srcs = append(srcs, src{p, "-preset", p})
		}
	case sp.scenarios != nil:
		for _, f := range sp.scenarios {
			srcs = append(srcs, src{strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), "-scenario", f})
		}
	default:
		srcs = []src{{"default", "", ""}}
		if p := fs.Lookup("preset").Value.String(); p != "" {
			srcs[0].name = p
		} else if f := fs.Lookup("scenario").Value.String(); f != "" {
			srcs[0].name = strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		}
	}
	seeds := sp.seeds
	if seeds == nil {
		seeds = []int64{0} // placeholder: the seed of the flags
	}
	if len(srcs)*len(seeds) > maxSweepRuns {
		return nil, bad("sweep-seeds", "%d runs; at most %d", len(srcs)*len(seeds), maxSweepRuns)
	}
	names := map[string]bool{}
	for _, s := range srcs {
		if names[s.name] {
			return nil, bad("sweep-scenarios", "two scenarios named %q: their reports would collide", s.name)
		}
		names[s.name] = true
	}
	var runs []sweepRun
	for _, s := range srcs {
		for _, seed := range seeds {
			args := append([]string(nil), rest...)
			if s.flag != "" {
				args = append(args, s.flag, s.val)
			}
			if sp.seeds != nil {
				args = append(args, "-seed", strconv.FormatInt(seed, 10))
			}
			cfg, err := parseFlags(args, io.Discard)
			if err != nil {
				if sp.seeds != nil {
					return nil, fmt.Errorf("run %s seed %d: %w", s.name, seed, err)
				}
				return nil, fmt.Errorf("run %s: %w", s.name, err)
			}
			if cfg.Record != "" {
				return nil, bad("record", "not with a sweep (every run would write the same file)")
			}
			runs = append(runs, sweepRun{name: s.name, seed: cfg.Seed, cfg: cfg})
		}
	}
	if sp.index >= len(runs) {
		return nil, bad(sp.indexSrc, "%d is out of range: the sweep has %d runs (0 to %d)", sp.index, len(runs), len(runs)-1)
	}
	return runs, nil
}

// fileName is the report file of one run.
func (r sweepRun) fileName() string {
	return fmt.Sprintf("%s-seed%d.json", r.name, r.seed)
}

// runSweep runs every combination (or the -sweep-index one) one after
// another, each with its own cache, closed before the next starts.
func runSweep(ctx context.Context, sp *sweepSpec, rest []string, stdout, stderr io.Writer, tty bool, h hooks) int {
	runs, err := sp.plan(rest)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return exitUsage
	}
	if err := os.MkdirAll(sp.out, 0o755); err != nil {
		fmt.Fprintln(stderr, "loadgen: -out:", err)
		return exitUsage
	}
	// The profiles cover the whole sweep (every run has the same flags).
	profOuts := &outputs{}
	defer profOuts.abort() // a no-op once committed
	prof, err := startProfiles(runs[0].cfg.Profile, profOuts, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		if errors.Is(err, ErrUsage) {
			return exitUsage
		}
		return exitFailed
	}
	defer prof.stop() // a no-op once stopped
	first, last := 0, len(runs)
	summary := "summary.json"
	if sp.index >= 0 {
		first, last = sp.index, sp.index+1
		summary = fmt.Sprintf("summary-%d.json", sp.index)
	}
	var entries []SweepEntry
	worst := exitOK
	for i := first; i < last; i++ {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "loadgen: sweep interrupted")
			worst = exitFailed
			break
		}
		e := sweepOne(ctx, i, runs[i], sp.out, stderr, tty, h)
		entries = append(entries, e)
		line := fmt.Sprintf("run %d/%d %s seed=%d: %.0f pods/s, attempt p99 %.3fms, %d divergences",
			i+1, len(runs), e.Name, e.Seed, e.PodsPerSec, e.AttemptP99ms, e.Divergences)
		if e.Digest != "" {
			line += ", digest " + e.Digest
		}
		line += fmt.Sprintf(", exit %d", e.Exit)
		if e.Error != "" {
			line += ": " + e.Error
		}
		fmt.Fprintln(stdout, line)
		worst = worseExit(worst, e.Exit)
	}
	b, err := json.MarshalIndent(struct {
		Runs  int          `json:"runs"`
		Total int          `json:"sweep_runs"`
		Items []SweepEntry `json:"items"`
	}{len(entries), len(runs), entries}, "", "  ")
	if err == nil {
		err = writeFile(filepath.Join(sp.out, summary), func(w io.Writer) error {
			_, err := w.Write(append(b, '\n'))
			return err
		})
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: -out:", err)
		return exitFailed
	}
	if err := prof.stop(); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return exitFailed
	}
	if err := profOuts.commit(); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return exitFailed
	}
	return worst
}

// worseExit orders the exit codes of runs: failed over divergence over
// violated thresholds over ok.
func worseExit(a, b int) int {
	rank := func(c int) int {
		switch c {
		case exitOK:
			return 0
		case exitThresholds:
			return 1
		case exitDivergence:
			return 2
		default:
			return 3
		}
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// sweepOne runs one combination and writes its JSON report.
func sweepOne(ctx context.Context, i int, r sweepRun, out string, stderr io.Writer, tty bool, h hooks) SweepEntry {
	e := SweepEntry{Index: i, Name: r.name, Seed: r.seed}
	rep, err := run(ctx, r.cfg, progressWriter(stderr, tty, r.cfg), h)
	if err != nil {
		e.Exit, e.Error = exitFailed, err.Error()
		if errors.Is(err, ErrUsage) {
			e.Exit = exitUsage
		}
		return e
	}
	e.PodsPerSec, e.AttemptP99ms, e.Digest = rep.PodsPerSec, ms(rep.Attempt.P99), rep.Digest
	e.Divergences, e.MidFailed = rep.Audit.Divergences, rep.MidAudits.Failed
	switch {
	case !rep.Consistent:
		e.Exit = exitDivergence
	case len(rep.violations()) > 0 && rep.Stopped != "interrupted":
		e.Exit, e.Error = exitThresholds, "thresholds violated: "+strings.Join(rep.violations(), "; ")
	}
	e.File = r.fileName()
	if err := writeFile(filepath.Join(out, e.File), rep.WriteJSON); err != nil {
		e.Exit, e.Error = exitFailed, err.Error()
	}
	return e
}
