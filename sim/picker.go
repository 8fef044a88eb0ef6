package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// Picker is the scheduler's node choice, pluggable: it makes one
// NodePicker per simulated scheduler of a run. The default is the
// least-allocated picker (LeastAllocated); cmd/loadgen-fwk in the bench
// module passes one that runs upstream's Filter and Score plugins.
//
// Contract: a run calls Name, Plugins and NewNodePicker from its main
// goroutine, before scheduling starts; a sweep calls them again for every
// run, so a Picker must make any number of NodePickers, one after another.
// Plugins returns the same list on every call, and never changes it.
type Picker interface {
	// Name labels the report ("least-allocated", "upstream-plugins").
	Name() string
	// Plugins names the rejection counters a NodePicker adds to: Pick's
	// rejected[i] counts for Plugins()[i]. Nil: the picker counts none.
	Plugins() []string
	// NewNodePicker returns the node picker of one simulated scheduler.
	// The run closes it when the run ends.
	NewNodePicker(ctx context.Context, cfg PickerConfig) (NodePicker, error)
}

// PickerConfig is a plain value: what a NodePicker knows of its run.
type PickerConfig struct {
	Scheduler     int  // the scheduler's index, 0 … Schedulers-1
	Schedulers    int  // how many schedulers the run has
	Sample        int  // -sample: nodes the least-allocated picker samples
	Nodes         int  // nodes in the cluster at start
	Deterministic bool // a deterministic run: decisions must depend on the inputs only
	// Cache is the run's cache, which the picker only reads (its pod
	// groups: upstream's PodGroupManager is the scheduler's cache); nil
	// outside a run.
	Cache *schedcache.Cache
}

// NodePicker chooses nodes for one simulated scheduler.
//
// Contract: used by one goroutine at a time (its scheduler's, or the event
// loop's in deterministic mode); never concurrently. Pick blocks for the
// decision only.
type NodePicker interface {
	// Pick returns the node chosen for pod on snap, a published snapshot
	// it must not change, or "" when no node fits. r is the scheduler's
	// random source, the only randomness a deterministic run allows.
	// Pick adds its rejections to rejected (len(rejected) ==
	// len(Picker.Plugins())): rejected[i] counts the nodes plugin i
	// rejected. An error stops the run.
	Pick(ctx context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, r *rand.Rand, rejected []int64) (string, error)
	// Close releases what the picker holds (goroutines included).
	Close() error
}

// ErrPicker is wrapped by the errors a run returns when its Picker breaks
// its contract.
var ErrPicker = errors.New("sim: picker")

// ErrAttempt is wrapped by an error of NodePicker.Pick that fails that
// one attempt, not the run: a plugin that panicked, a pod no profile of
// the picker schedules. The run counts such errors (Report.AttemptErrors)
// and settles the pod: in a phases scenario it is failed (a gang member
// fails its gang), without preemption; otherwise it is dropped as not
// placed, and is not counted as unschedulable.
var ErrAttempt = errors.New("sim: attempt failed")

// AttemptError is an error of Pick that fails the attempt alone (it
// wraps ErrAttempt and Err). Reason is a short label the report counts
// by ("plugin-panic", "no-profile"); "" counts as "error".
type AttemptError struct {
	Reason string
	Err    error
}

func (e *AttemptError) Error() string {
	return fmt.Sprintf("%v (%s): %v", ErrAttempt, e.reason(), e.Err)
}

// Unwrap gives ErrAttempt and the cause.
func (e *AttemptError) Unwrap() []error { return []error{ErrAttempt, e.Err} }

func (e *AttemptError) reason() string {
	if e.Reason == "" {
		return "error"
	}
	return e.Reason
}

// AttemptErrors is a plain value: the attempts a run's picker failed
// with an error wrapping ErrAttempt.
type AttemptErrors struct {
	Count    int64            `json:"count"`
	ByReason map[string]int64 `json:"by_reason"`
	// First holds the first messages (at most maxAttemptMessages; per
	// scheduler in order, then by scheduler), each "pod: error".
	First []string `json:"first"`
}

// maxAttemptMessages bounds AttemptErrors.First.
const maxAttemptMessages = 5

// attemptLog is one scheduler's failed attempts.
type attemptLog struct {
	n        int64
	byReason map[string]int64
	first    []string
}

// add counts err, an error wrapping ErrAttempt, for pod.
func (l *attemptLog) add(pod string, err error) {
	reason := "error"
	if ae := (*AttemptError)(nil); errors.As(err, &ae) {
		reason = ae.reason()
	}
	l.n++
	if l.byReason == nil {
		l.byReason = map[string]int64{}
	}
	l.byReason[reason]++
	if len(l.first) < maxAttemptMessages {
		l.first = append(l.first, pod+": "+err.Error())
	}
}

// Options is a plain value: what MainWith adds to the command.
type Options struct {
	// Picker chooses nodes; nil: LeastAllocated.
	Picker Picker
}

// MainWith is Main with opts: a program that chooses nodes its own way
// (cmd/loadgen-fwk in the bench module) runs the whole command with it.
func MainWith(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool, opts Options) int {
	return realMain(ctx, args, stdout, stderr, tty, hooks{picker: opts.Picker})
}

// LeastAllocated is stateless and safe for concurrent use, as are its
// node pickers: the default picker, the least-allocated node among
// -sample random nodes that fit the pod's CPU, memory and pod count. It
// counts no rejections.
type LeastAllocated struct{}

func (LeastAllocated) Name() string      { return "least-allocated" }
func (LeastAllocated) Plugins() []string { return nil }
func (LeastAllocated) NewNodePicker(_ context.Context, cfg PickerConfig) (NodePicker, error) {
	if cfg.Sample < 1 {
		return nil, fmt.Errorf("%w: least-allocated: sample %d < 1", ErrPicker, cfg.Sample)
	}
	return leastAllocated{sample: cfg.Sample}, nil
}

type leastAllocated struct {
	sample int // immutable
}

func (p leastAllocated) Pick(_ context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, r *rand.Rand, _ []int64) (string, error) {
	return pick(r, snap, pod, p.sample), nil
}
func (leastAllocated) Close() error { return nil }

// PluginCount is a plain value: the rejections of one plugin in a run.
type PluginCount struct {
	Plugin string `json:"plugin"`
	Nodes  int64  `json:"nodes"`
}

// schedPickers is the run's node pickers, one per scheduler, with their
// rejection counters (rejected[s] owned by scheduler s until the run
// joins them).
type schedPickers struct {
	name     string        // immutable
	plugins  []string      // immutable
	pickers  []NodePicker  // pickers[s] used by scheduler s; closed by the run's main goroutine
	rejected [][]int64     // rejected[s] owned by scheduler s until the schedulers stop
	failed   []attemptLog  // failed[s] owned by scheduler s until the schedulers stop
	explain  *explainState // nil: no attempt is explained (explain.go)
}

// newPickers makes the node pickers of a run of cfg with p (nil:
// LeastAllocated). On error it closes what it made.
func newPickers(ctx context.Context, p Picker, cfg Config, c *schedcache.Cache) (*schedPickers, error) {
	if p == nil {
		p = LeastAllocated{}
	}
	sp := &schedPickers{name: p.Name(), plugins: append([]string(nil), p.Plugins()...)}
	for s := 0; s < cfg.Schedulers; s++ {
		np, err := p.NewNodePicker(ctx, PickerConfig{Scheduler: s, Schedulers: cfg.Schedulers, Sample: cfg.Sample, Nodes: cfg.Nodes, Deterministic: cfg.Deterministic, Cache: c})
		if err == nil && np == nil {
			err = fmt.Errorf("%w: %s: NewNodePicker returned nil", ErrPicker, sp.name)
		}
		if err != nil {
			sp.close()
			return nil, err
		}
		sp.pickers = append(sp.pickers, np)
		sp.rejected = append(sp.rejected, make([]int64, len(sp.plugins)))
	}
	sp.failed = make([]attemptLog, cfg.Schedulers)
	if cfg.Explain.on() {
		_, explains := sp.pickers[0].(Explainer)
		sp.explain = &explainState{cfg: cfg.Explain, seed: splitmix(uint64(cfg.Seed)), explains: explains,
			per: make([][]Explanation, cfg.Schedulers)}
	}
	return sp, nil
}

// close closes every node picker and returns the first error.
func (sp *schedPickers) close() error {
	var first error
	for _, np := range sp.pickers {
		if err := np.Close(); err != nil && first == nil {
			first = err
		}
	}
	sp.pickers = nil
	return first
}

// report writes the picker's label and the summed rejections, in
// Plugins() order, into rep. The schedulers must have stopped.
func (sp *schedPickers) report(rep *Report) {
	rep.Picker = sp.name
	rep.PickerCounters = sp.counters()
	rep.AttemptErrors = nil
	for _, l := range sp.failed {
		if l.n == 0 {
			continue
		}
		if rep.AttemptErrors == nil {
			rep.AttemptErrors = &AttemptErrors{ByReason: map[string]int64{}, First: []string{}}
		}
		a := rep.AttemptErrors
		a.Count += l.n
		for r, n := range l.byReason {
			a.ByReason[r] += n
		}
		for _, m := range l.first {
			if len(a.First) < maxAttemptMessages {
				a.First = append(a.First, m)
			}
		}
	}
	if x := sp.explain; x != nil {
		rep.Explanations, rep.ExplanationsDropped = x.explanations(), x.dropped()
		if !x.explains {
			rep.ExplainNote = fmt.Sprintf("the %s picker does not explain its decisions: pod and node only", sp.name)
		}
	}
	if len(sp.plugins) == 0 {
		return
	}
	rep.Rejections = make([]PluginCount, len(sp.plugins))
	for i, name := range sp.plugins {
		rep.Rejections[i].Plugin = name
		for _, r := range sp.rejected {
			rep.Rejections[i].Nodes += r[i]
		}
	}
}

// rejectionsItem is the scheduler_perf-style data item of the rejections,
// or false when the picker counts none.
func (r *Report) rejectionsItem() (DataItem, bool) {
	if len(r.Rejections) == 0 {
		return DataItem{}, false
	}
	d := make(map[string]float64, len(r.Rejections))
	for _, c := range r.Rejections {
		d[c.Plugin] = float64(c.Nodes)
	}
	return DataItem{Data: d, Unit: "nodes", Labels: map[string]string{"Metric": "PluginRejections", "Picker": r.Picker}}, true
}

// printPicker writes the picker line of the text report.
func (r *Report) printPicker(w io.Writer) {
	if r.Picker == "" {
		return
	}
	fmt.Fprintf(w, "picker:    %s", r.Picker)
	if len(r.Rejections) > 0 {
		parts := make([]string, len(r.Rejections))
		for i, c := range r.Rejections {
			parts[i] = fmt.Sprintf("%s %d", c.Plugin, c.Nodes)
		}
		fmt.Fprintf(w, "; nodes rejected by plugin: %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	if a := r.AttemptErrors; a != nil {
		reasons := make([]string, 0, len(a.ByReason))
		for k := range a.ByReason {
			reasons = append(reasons, k)
		}
		sort.Strings(reasons)
		parts := make([]string, len(reasons))
		for i, k := range reasons {
			parts[i] = fmt.Sprintf("%s %d", k, a.ByReason[k])
		}
		fmt.Fprintf(w, "attempt errors: %d attempts failed by the picker (%s), pods not placed; first: %s\n",
			a.Count, strings.Join(parts, ", "), strings.Join(a.First, "; "))
	}
}
