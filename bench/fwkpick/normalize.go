package fwkpick

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// normalizer is the framework's NormalizeScores without its per-call maps:
// for each Score plugin not skipped, in the profile's order, the plugin's
// own NormalizeScore over the cycle's nodes, then the range check and the
// weights, as frameworkImpl.normalizeScores does. It calls the plugins'
// NormalizeScore on instances of its own, made by the same factories with
// the same arguments and handle: NormalizeScore reads only the scores and
// the cycle state (keyed by plugin name), never the instance's fields
// that differ between instances. TestMemoSameDecisions compares its
// totals with RunScorePlugins'.
//
// Owned by its NodePicker's goroutine.
type normalizer struct {
	plugins []normPlugin        // immutable: the profile's Score plugins, in order
	lists   []fwk.NodeScoreList // reused: per plugin run, the nodes' scores
	run     []int               // reused: indexes into plugins of the plugins not skipped
}

type normPlugin struct {
	name   string
	weight int64
	ext    fwk.ScoreExtensions // nil: no normalisation
}

// newNormalizer instantiates prof's Score plugins with registry and
// handle h, for their ScoreExtensions.
func newNormalizer(ctx context.Context, registry frameworkruntime.Registry,
	prof *config.KubeSchedulerProfile, score []config.Plugin, h fwk.Handle) (*normalizer, error) {
	args := map[string]runtime.Object{}
	for _, pc := range prof.PluginConfig {
		args[pc.Name] = pc.Args
	}
	n := &normalizer{}
	for _, pl := range score {
		f, ok := registry[pl.Name]
		if !ok {
			return nil, fmt.Errorf("%w: score plugin %q not in the registry", ErrConfig, pl.Name)
		}
		inst, err := f(ctx, args[pl.Name], h)
		if err != nil {
			return nil, fmt.Errorf("%w: score plugin %q: %v", ErrConfig, pl.Name, err)
		}
		sp, ok := inst.(fwk.ScorePlugin)
		if !ok {
			return nil, fmt.Errorf("%w: plugin %q is no Score plugin", ErrConfig, pl.Name)
		}
		n.plugins = append(n.plugins, normPlugin{name: pl.Name, weight: int64(pl.Weight), ext: sp.ScoreExtensions()})
	}
	return n, nil
}

// normalize fills scores[i].Scores and TotalScore from raw, the raw
// scores of the plugins not in the cycle's skip set in the profile's order,
// len(scores) rows of that many, as NormalizeScores does from RawScores.
//
// Without perPlugin only TotalScore is set (Scores stays nil): what a
// pick needs, without a slice per node.
func (n *normalizer) normalize(ctx context.Context, state fwk.CycleState, pod *v1.Pod, raw []int64, scores []fwk.NodePluginScores, perPlugin bool) error {
	skip := state.GetSkipScorePlugins()
	n.run = n.run[:0]
	for i, pl := range n.plugins {
		if !skip.Has(pl.name) {
			n.run = append(n.run, i)
		}
	}
	k := len(n.run)
	if k == 0 {
		for i := range scores {
			scores[i].Scores = make([]fwk.PluginScore, 0)
			scores[i].TotalScore = 0
		}
		return nil
	}
	if len(raw) != k*len(scores) {
		return fmt.Errorf("fwkpick: %d raw scores for %d nodes and %d plugins", len(raw), len(scores), k)
	}
	for len(n.lists) < k {
		n.lists = append(n.lists, nil)
	}
	for j := range k {
		n.lists[j] = slices.Grow(n.lists[j][:0], len(scores))[:len(scores)]
	}
	for i := range scores {
		row := raw[i*k : (i+1)*k]
		for j := range k {
			n.lists[j][i] = fwk.NodeScore{Name: scores[i].Name, Score: row[j]}
		}
	}
	for j, pi := range n.run {
		if ext := n.plugins[pi].ext; ext != nil {
			if st := ext.NormalizeScore(ctx, state, pod, n.lists[j]); !st.IsSuccess() {
				return fmt.Errorf("running Normalize on Score plugins: plugin %q failed with: %w", n.plugins[pi].name, st.AsError())
			}
		}
	}
	// One backing array per cycle: the per-node slices are handed out in
	// the result, so it is not reused.
	var flat []fwk.PluginScore
	if perPlugin {
		flat = make([]fwk.PluginScore, len(scores)*k)
	}
	for i := range scores {
		var row []fwk.PluginScore
		if perPlugin {
			row = flat[i*k : (i+1)*k : (i+1)*k]
		}
		var total int64
		for j, pi := range n.run {
			pl := &n.plugins[pi]
			score := n.lists[j][i].Score
			if score > fwk.MaxScore || score < fwk.MinScore {
				return fmt.Errorf("applying score defaultWeights on Score plugins: plugin %q returns an invalid score %v, it should in the range of [%v, %v] after normalizing",
					pl.name, score, fwk.MinScore, fwk.MaxScore)
			}
			w := score * pl.weight
			if perPlugin {
				row[j] = fwk.PluginScore{Name: pl.name, Score: w}
			}
			total += w
		}
		scores[i].Scores = row
		scores[i].TotalScore = total
	}
	return nil
}
