package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// Why a pod went where it went (-explain, -explain-rate, -explain-top):
// for the attempts chosen, the node picker says which plugin rejected how
// many of the nodes it examined (with the first reason) and the top nodes
// by score, with each plugin's part. The JSON report lists them under
// "explanations"; the text report summarises them.

// Explainer is implemented by a NodePicker that explains its decisions.
// ExplainPick is Pick that also returns the decision's Explanation: it
// must make the same decision as Pick would, take the same draws from r
// and add the same rejections to rejected, so that explaining a run
// changes nothing of it (a deterministic run keeps its digest). It fills
// Examined, Feasible, Filtered and Top (every feasible node it scored, or
// at least the top best; the run sorts and cuts them); the run fills Pod,
// Node, Attempt and Scheduler. A NodePicker that is not an Explainer is
// explained by its pod and node only.
type Explainer interface {
	ExplainPick(ctx context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, r *rand.Rand, rejected []int64, top int) (string, Explanation, error)
}

// Explanation is a plain value: why one scheduling attempt chose its node.
type Explanation struct {
	Pod       string `json:"pod"`       // namespace/name
	Node      string `json:"node"`      // "" when no node fit
	Attempt   int64  `json:"attempt"`   // the attempt's ordinal in the run, from 1 (in the order of the picks)
	Scheduler int    `json:"scheduler"` // the scheduler that made it
	Examined  int    `json:"examined"`  // distinct nodes the picker examined
	Feasible  int    `json:"feasible"`  // of those, the nodes that passed every filter
	// Filtered: per plugin, the examined nodes it rejected (each node
	// counts for the first plugin that rejects it) and the first
	// reason it gave; most nodes first.
	Filtered []FilterCount `json:"filtered"`
	// Top: the best feasible nodes by total score, the chosen one first
	// among equals, at most -explain-top.
	Top []NodeScore `json:"top"`
}

// FilterCount is a plain value: the nodes one plugin rejected in one
// attempt, and the first reason it gave.
type FilterCount struct {
	Plugin string `json:"plugin"`
	Nodes  int64  `json:"nodes"`
	Reason string `json:"reason"`
}

// NodeScore is a plain value: a feasible node's total score and each
// score plugin's part of it (weighted, as summed).
type NodeScore struct {
	Node    string             `json:"node"`
	Score   float64            `json:"score"`
	Plugins map[string]float64 `json:"plugins"`
}

// AddRejection counts nodes rejected by plugin; the first reason given
// for the plugin is kept.
func (e *Explanation) AddRejection(plugin string, nodes int64, reason string) {
	for i := range e.Filtered {
		if e.Filtered[i].Plugin == plugin {
			e.Filtered[i].Nodes += nodes
			if e.Filtered[i].Reason == "" {
				e.Filtered[i].Reason = reason
			}
			return
		}
	}
	e.Filtered = append(e.Filtered, FilterCount{Plugin: plugin, Nodes: nodes, Reason: reason})
}

// normalise sorts Filtered (most nodes first, then by plugin) and Top
// (highest score first; among equals the chosen node, then by name), cuts
// Top to top entries and makes nil slices and maps empty, so that the
// JSON shape does not depend on the picker.
func (e *Explanation) normalise(top int) {
	if e.Filtered == nil {
		e.Filtered = []FilterCount{}
	}
	sort.SliceStable(e.Filtered, func(i, j int) bool {
		a, b := e.Filtered[i], e.Filtered[j]
		if a.Nodes != b.Nodes {
			return a.Nodes > b.Nodes
		}
		return a.Plugin < b.Plugin
	})
	if e.Top == nil {
		e.Top = []NodeScore{}
	}
	sort.SliceStable(e.Top, func(i, j int) bool {
		a, b := e.Top[i], e.Top[j]
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		if (a.Node == e.Node) != (b.Node == e.Node) {
			return a.Node == e.Node
		}
		return a.Node < b.Node
	})
	if len(e.Top) > top {
		e.Top = e.Top[:top:top]
	}
	for i := range e.Top {
		if e.Top[i].Plugins == nil {
			e.Top[i].Plugins = map[string]float64{}
		}
	}
}

// ExplainConfig is a plain value: which attempts are explained.
type ExplainConfig struct {
	First int     // -explain: the first N attempts
	Rate  float64 // -explain-rate: besides, each attempt's pod with this probability (from the seed and the pod's name)
	Top   int     // -explain-top: nodes listed by score (default 3)
}

// on says whether any attempt is explained.
func (c ExplainConfig) on() bool { return c.First > 0 || c.Rate > 0 }

// Limits of the explanation flags.
const (
	maxExplain    = 100_000 // -explain, and the explanations a run keeps
	maxExplainTop = 100
)

// explainFlags binds -explain, -explain-rate and -explain-top to cfg.
func explainFlags(fs *flag.FlagSet, cfg *Config) {
	fs.IntVar(&cfg.Explain.First, "explain", cfg.Explain.First, "explain the first N scheduling attempts in the JSON report: per plugin the nodes rejected, and the top nodes by score (0: none)")
	fs.Float64Var(&cfg.Explain.Rate, "explain-rate", cfg.Explain.Rate, "also explain each pod with this probability, in [0, 1] (the choice follows from -seed and the pod's name)")
	fs.IntVar(&cfg.Explain.Top, "explain-top", cfg.Explain.Top, "nodes an explanation lists by score, 1 to 100")
}

// validateExplain checks the explanation fields.
func (c *Config) validateExplain() error {
	e := c.Explain
	switch {
	case e.First < 0 || e.First > maxExplain:
		return bad("explain", "must be 0 to %d attempts, got %d", maxExplain, e.First)
	case math.IsNaN(e.Rate) || e.Rate < 0 || e.Rate > 1:
		return bad("explain-rate", "must be a fraction in [0, 1], got %v", e.Rate)
	case e.Top < 1 || e.Top > maxExplainTop:
		return bad("explain-top", "must be 1 to %d nodes, got %d", maxExplainTop, e.Top)
	}
	return nil
}

// explainState is a run's explanations: which attempts to explain and
// what was explained. Its counters are atomic (the schedulers of a
// real-time run share them); per[s] is owned by scheduler s until the
// schedulers stop, then by the run's main goroutine.
type explainState struct {
	cfg      ExplainConfig   // immutable
	seed     uint64          // immutable: the run's seed, mixed
	explains bool            // immutable: the picker's node pickers are Explainers
	attempts atomic.Int64    // atomic: the attempts made so far
	kept     atomic.Int64    // atomic: the explanations taken (kept or dropped)
	per      [][]Explanation // per[s] owned by scheduler s
}

// want says whether the attempt-th attempt, of pod, is explained, and
// reserves a place for it; false once maxExplain are kept.
func (x *explainState) want(attempt int64, pod string) bool {
	if attempt > int64(x.cfg.First) && !sampled(x.seed, pod, x.cfg.Rate) {
		return false
	}
	return x.kept.Add(1) <= maxExplain
}

// dropped is how many attempts chosen were not explained (over the cap).
func (x *explainState) dropped() int64 { return max(x.kept.Load()-maxExplain, 0) }

// sampled says whether pod is in the sample of rate: a hash of the seed
// and the pod's name, so that one seed explains the same pods.
func sampled(seed uint64, pod string, rate float64) bool {
	if rate <= 0 {
		return false
	}
	h := fnv.New64a()
	io.WriteString(h, pod)
	u := float64(splitmix(h.Sum64()^seed)>>11) / (1 << 53)
	return u < rate
}

// splitmix is SplitMix64's finaliser: a well-mixed 64-bit hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// explainName is how an explanation names a pod: namespace/name.
func explainName(p *v1.Pod) string {
	if p.Namespace == "" {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

// pick is scheduler s's decision for info on snap with its node picker,
// explained when the attempt is chosen (-explain, -explain-rate).
//
// An error wrapping ErrAttempt is counted in scheduler s's log and
// returned: the caller settles the pod (isAttemptError) and goes on.
func (sp *schedPickers) pick(ctx context.Context, s int, snap *schedcache.Snapshot, info *nodeinfo.PodInfo, r *rand.Rand) (string, error) {
	node, err := sp.pickExplained(ctx, s, snap, info, r)
	if err != nil && errors.Is(err, ErrAttempt) {
		sp.failed[s].add(explainName(info.Pod()), err)
	}
	return node, err
}

// isAttemptError says whether a pick's error fails the attempt alone.
func isAttemptError(err error) bool { return errors.Is(err, ErrAttempt) }

// pickExplained is pick without the attempt errors' log.
func (sp *schedPickers) pickExplained(ctx context.Context, s int, snap *schedcache.Snapshot, info *nodeinfo.PodInfo, r *rand.Rand) (string, error) {
	np, rej := sp.pickers[s], sp.rejected[s]
	x := sp.explain
	if x == nil {
		return np.Pick(ctx, snap, info, r, rej)
	}
	attempt := x.attempts.Add(1)
	key := explainName(info.Pod())
	if !x.want(attempt, key) {
		return np.Pick(ctx, snap, info, r, rej)
	}
	var e Explanation
	var node string
	var err error
	if ex, ok := np.(Explainer); ok {
		node, e, err = ex.ExplainPick(ctx, snap, info, r, rej, x.cfg.Top)
	} else {
		node, err = np.Pick(ctx, snap, info, r, rej)
	}
	if err != nil {
		return "", err
	}
	e.Pod, e.Node, e.Attempt, e.Scheduler = key, node, attempt, s
	e.normalise(x.cfg.Top)
	x.per[s] = append(x.per[s], e)
	return node, nil
}

// explanations returns the run's explanations in attempt order. The
// schedulers must have stopped.
func (x *explainState) explanations() []Explanation {
	var out []Explanation
	for _, es := range x.per {
		out = append(out, es...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Attempt < out[j].Attempt })
	if out == nil {
		out = []Explanation{}
	}
	return out
}

// ExplainPick implements Explainer: pick, explained. Its "plugins" are
// named after upstream's for the checks it makes: NodeUnschedulable
// (cordoned), TaintToleration (NoSchedule and NoExecute taints),
// NodeAffinity (the node selector) and NodeResourcesFit (CPU, memory and
// pod count); its score, LeastAllocated, is the mean of the free CPU and
// memory fractions left after the pod, times 100.
func (p leastAllocated) ExplainPick(_ context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, r *rand.Rand, _ []int64, _ int) (string, Explanation, error) {
	node, e := pickExplained(r, snap, pod, p.sample)
	return node, e, nil
}

// leastAllocatedScore is the name of the least-allocated picker's score.
const leastAllocatedScore = "LeastAllocated"

// pickExplained is pick with its explanation: the same draws from r, the
// same decision. Each distinct node drawn is examined once.
func pickExplained(r *rand.Rand, snap *schedcache.Snapshot, info *nodeinfo.PodInfo, sample int) (string, Explanation) {
	var e Explanation
	n := snap.NumNodes()
	if n == 0 {
		return "", e
	}
	want := info.Requests()
	pod := info.Pod()
	best, bestScore := "", -1.0
	seen := make(map[int]bool, min(sample, n))
	for i := 0; i < sample; i++ {
		idx := r.IntN(n)
		ni := snap.At(idx)
		first := !seen[idx]
		seen[idx] = true
		if !fits(pod, ni.Node()) {
			if first {
				plugin, reason := whyNotFit(pod, ni.Node())
				e.AddRejection(plugin, 1, reason)
			}
			continue
		}
		req, alloc := ni.Requested(), ni.Allocatable()
		freeCPU := alloc.MilliCPU - req.MilliCPU - want.MilliCPU
		freeMem := alloc.Memory - req.Memory - want.Memory
		if freeCPU < 0 || freeMem < 0 || int64(ni.NumPods()) >= alloc.AllowedPodNumber {
			if first {
				e.AddRejection("NodeResourcesFit", 1, insufficient(int64(ni.NumPods()) >= alloc.AllowedPodNumber, freeCPU < 0, freeMem < 0))
			}
			continue
		}
		score := float64(freeCPU)/float64(alloc.MilliCPU) + float64(freeMem)/float64(alloc.Memory)
		if first {
			s := math.Round(score*50*1000) / 1000
			e.Feasible++
			e.Top = append(e.Top, NodeScore{Node: ni.Node().Name, Score: s, Plugins: map[string]float64{leastAllocatedScore: s}})
		}
		if score > bestScore {
			best, bestScore = ni.Node().Name, score
		}
	}
	e.Examined = len(seen)
	return best, e
}

// insufficient is upstream NodeResourcesFit's reasons, in its order.
func insufficient(pods, cpu, mem bool) string {
	var rs []string
	if pods {
		rs = append(rs, "Too many pods")
	}
	if cpu {
		rs = append(rs, "Insufficient cpu")
	}
	if mem {
		rs = append(rs, "Insufficient memory")
	}
	return strings.Join(rs, ", ")
}

// whyNotFit names the check of fits that rejects pod on n, in the order
// of upstream's filter plugins (NodeUnschedulable, TaintToleration,
// NodeAffinity), with upstream's reason; "" when pod fits n.
func whyNotFit(pod *v1.Pod, n *v1.Node) (plugin, reason string) {
	if n.Spec.Unschedulable && !tolerates(pod.Spec.Tolerations, &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}) {
		return "NodeUnschedulable", "node(s) were unschedulable"
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if (t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute) && !tolerates(pod.Spec.Tolerations, t) {
			return "TaintToleration", fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)
		}
	}
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return "NodeAffinity", "node(s) didn't match Pod's node affinity/selector"
		}
	}
	return "", ""
}

// printExplanations writes the text report's summary of the
// explanations: their count, the rejections summed by plugin, and the
// first few, one line each.
func (r *Report) printExplanations(w io.Writer) {
	if !r.Config.Explain.on() {
		return
	}
	placed := 0
	var sum Explanation
	for _, e := range r.Explanations {
		if e.Node != "" {
			placed++
		}
		for _, f := range e.Filtered {
			sum.AddRejection(f.Plugin, f.Nodes, f.Reason)
		}
	}
	sum.normalise(1)
	attempts := "attempts"
	if len(r.Explanations) == 1 {
		attempts = "attempt"
	}
	fmt.Fprintf(w, "explain:   %d %s explained (%d placed, %d unschedulable)", len(r.Explanations), attempts, placed, len(r.Explanations)-placed)
	if r.ExplanationsDropped > 0 {
		fmt.Fprintf(w, ", %d more chosen but not kept (at most %d)", r.ExplanationsDropped, maxExplain)
	}
	if r.ExplainNote != "" {
		fmt.Fprintf(w, "; %s", r.ExplainNote)
	}
	if len(sum.Filtered) > 0 {
		parts := make([]string, len(sum.Filtered))
		for i, f := range sum.Filtered {
			parts[i] = fmt.Sprintf("%s %d (%s)", f.Plugin, f.Nodes, f.Reason)
		}
		fmt.Fprintf(w, "; nodes rejected, all explained: %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	const lines = 3
	for i, e := range r.Explanations {
		if i == lines {
			fmt.Fprintf(w, "  … %d more in the JSON report (explanations)\n", len(r.Explanations)-lines)
			break
		}
		fmt.Fprintf(w, "  #%d %s -> %s\n", e.Attempt, e.Pod, e.line())
	}
}

// line is an explanation in one line, after its pod.
func (e Explanation) line() string {
	var b strings.Builder
	if e.Node == "" {
		b.WriteString("no node")
	} else {
		b.WriteString(e.Node)
	}
	fmt.Fprintf(&b, "; %d nodes examined, %d feasible", e.Examined, e.Feasible)
	for _, f := range e.Filtered {
		fmt.Fprintf(&b, "; %s rejected %d (%s)", f.Plugin, f.Nodes, f.Reason)
	}
	if len(e.Top) > 0 {
		parts := make([]string, len(e.Top))
		for i, t := range e.Top {
			parts[i] = fmt.Sprintf("%s %g", t.Node, t.Score)
		}
		fmt.Fprintf(&b, "; top: %s", strings.Join(parts, ", "))
	}
	return b.String()
}
