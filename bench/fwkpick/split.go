package fwkpick

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// The split memo: for pods that only InterPodAffinity or PodTopologySpread
// keep from signing (inter-pod terms, spread constraints), the other
// plugins' verdicts and scores are still those of a signature. A split
// keeps them per published NodeInfo as the memo does (memo.go), under a
// signature made without the two (its signer's profile lacks them, so
// their fragments, the pod's labels and constraints, are not in it), and
// runs InterPodAffinity and PodTopologySpread live every cycle on the
// cycle's own state (their PreFilter and PreScore are the framework's, run
// as before). The fingerprint needs no affinity list: the plugin reading
// it runs live.
//
// A node's verdict is RunFilterPlugins' loop (the profile's Filter
// plugins in order, skipping those PreFilter skipped, the first failure
// returned with its plugin set, a status other than Unschedulable turned
// into an error) run in two parts: the plugins before the first live one
// from the table, then the live ones. That is the same loop only when
// every plugin from the first live one on is live, which the default
// order has (…, VolumeRestrictions, PodTopologySpread, InterPodAffinity);
// another order turns the split off. A node's raw scores are its kept
// scores for the plugins not live and fresh ones for the live plugins
// (RunRawScorePlugins' per-plugin calls, in order); the normalizer then
// treats them as RunScorePlugins does. Nodes with nominated pods take the
// framework's RunFilterPluginsWithNominatedPods.
//
// The plugins are called on instances of the split's own, made by the
// same (guarded) factories with the same arguments and handle, as the
// normalizer's: a plugin reads its cycle state by a key of its package,
// whatever the instance.

// liveNames are the plugins a split runs every cycle.
var liveNames = []string{names.PodTopologySpread, names.InterPodAffinity}

// split is owned by its NodePicker's goroutine, its instances immutable.
type split struct {
	memo      *memo
	filters   []namedFilter // the profile's Filter plugins, in order
	firstLive int           // filters[firstLive:] are live, filters[:firstLive] kept
	scores    []namedScore  // the profile's Score plugins, in order
}

type namedFilter struct {
	name string
	pl   fwk.FilterPlugin
}

type namedScore struct {
	name string
	pl   fwk.ScorePlugin
	live bool
}

// newSplit returns the split for profile pr run by fw, or nil when the
// profile has no live plugin, a plugin the memo does not know, or a live
// Filter plugin before one that is not.
func newSplit(ctx context.Context, np *NodePicker, pr *profile, fw framework.Framework,
	build func(context.Context, *config.KubeSchedulerProfile) (framework.Framework, error)) (*split, error) {
	live := false
	for _, pl := range pr.plugins {
		if !slices.Contains(memoSafe, pl) {
			return nil, nil
		}
		live = live || slices.Contains(liveNames, pl)
	}
	if !live {
		return nil, nil
	}
	args := map[string]runtime.Object{}
	for _, pc := range pr.cfg.PluginConfig {
		args[pc.Name] = pc.Args
	}
	instance := func(name string) (fwk.Plugin, error) {
		f, ok := np.p.registry[name]
		if !ok {
			return nil, fmt.Errorf("%w: plugin %q not in the registry", ErrConfig, name)
		}
		pl, err := f(ctx, args[name], fw)
		if err != nil {
			return nil, fmt.Errorf("%w: plugin %q: %v", ErrConfig, name, err)
		}
		return pl, nil
	}
	s := &split{firstLive: -1}
	plugins := fw.ListPlugins()
	for i, c := range plugins.Filter.Enabled {
		isLive := slices.Contains(liveNames, c.Name)
		switch {
		case isLive && s.firstLive < 0:
			s.firstLive = i
		case !isLive && s.firstLive >= 0:
			return nil, nil // a kept plugin after a live one
		}
		pl, err := instance(c.Name)
		if err != nil {
			return nil, err
		}
		f, ok := pl.(fwk.FilterPlugin)
		if !ok {
			return nil, fmt.Errorf("%w: plugin %q is no Filter plugin", ErrConfig, c.Name)
		}
		s.filters = append(s.filters, namedFilter{c.Name, f})
	}
	if s.firstLive < 0 {
		s.firstLive = len(s.filters)
	}
	for _, c := range plugins.Score.Enabled {
		pl, err := instance(c.Name)
		if err != nil {
			return nil, err
		}
		sp, ok := pl.(fwk.ScorePlugin)
		if !ok {
			return nil, fmt.Errorf("%w: plugin %q is no Score plugin", ErrConfig, c.Name)
		}
		s.scores = append(s.scores, namedScore{c.Name, sp, slices.Contains(liveNames, c.Name)})
	}
	prof := pr.cfg.DeepCopy()
	for _, set := range []*config.PluginSet{&prof.Plugins.PreFilter, &prof.Plugins.Filter, &prof.Plugins.PreScore, &prof.Plugins.Score, &prof.Plugins.MultiPoint} {
		set.Enabled = slices.DeleteFunc(set.Enabled, func(p config.Plugin) bool { return slices.Contains(liveNames, p.Name) })
	}
	signer, err := build(ctx, prof)
	if err != nil {
		return nil, err
	}
	s.memo = &memo{signer: signer, split: true, tables: map[string]*memoTable{}}
	return s, nil
}

// runFilters is RunFilterPlugins' loop over filters.
func runFilters(ctx context.Context, filters []namedFilter, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	skip := state.GetSkipFilterPlugins()
	for _, f := range filters {
		if skip.Has(f.name) {
			continue
		}
		if st := f.pl.Filter(ctx, state, pod, ni); !st.IsSuccess() {
			if !st.IsRejected() {
				st = fwk.AsStatus(fmt.Errorf("running %q filter plugin: %w", f.name, st.AsError()))
			}
			st.SetPlugin(f.name)
			return st
		}
	}
	return nil
}

// kept is the verdict of the plugins before the first live one.
func (s *split) kept(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	return runFilters(ctx, s.filters[:s.firstLive], state, pod, ni)
}

// live is the verdict of the live plugins.
func (s *split) live(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	return runFilters(ctx, s.filters[s.firstLive:], state, pod, ni)
}

// rawScores writes into row the raw scores of the scoring plugins
// (those not skipped, in order) that are live (keptToo: all of them).
func (s *split) rawScores(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo, scoring []int, row []int64, keptToo bool) error {
	for k, i := range scoring {
		sc := s.scores[i]
		if !sc.live && !keptToo {
			continue
		}
		v, st := sc.pl.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			return fmt.Errorf("running Score plugins: plugin %q failed with: %w", sc.name, st.AsError())
		}
		row[k] = v
	}
	return nil
}

// splitFilter writes into statuses the verdicts of the nodes at positions
// from, from+1, … (mod len(nodes)) for a split cycle mc: the kept part
// from mc's table or computed (and then kept), the live part computed, on
// the parallelizer; a node with nominated pods takes the framework's
// RunFilterPluginsWithNominatedPods.
func (np *NodePicker) splitFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, from int, statuses []*fwk.Status, mc memoCycle) {
	sp, n := np.run.split, len(statuses)
	if cap(np.kept) < n {
		np.kept = make([]keptVerdict, n)
	}
	kept := np.kept[:n]
	work := func(i int) {
		pos := (from + i) % len(nodes)
		ni := nodes[pos]
		kept[i] = keptVerdict{}
		if np.hasNominated(ni) {
			statuses[i] = np.fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
			return
		}
		st, ok := mc.filter(pos, ni)
		if !ok {
			st = sp.kept(ctx, state, pod, ni)
			kept[i] = keptVerdict{computed: true, st: st}
		}
		if st.IsSuccess() {
			st = sp.live(ctx, state, pod, ni)
		}
		statuses[i] = st
	}
	if np.p.par == 1 || n == 1 {
		for i := range n {
			work(i)
		}
	} else {
		np.fw.Parallelizer().Until(ctx, n, work, metrics.Filter)
	}
	for i := range kept {
		if !kept[i].computed {
			sp.memo.stats.FilterHits++
			continue
		}
		sp.memo.stats.FilterMisses++
		if kept[i].st.Code() != fwk.Error {
			pos := (from + i) % len(nodes)
			mc.keepFilter(pos, len(nodes), nodes[pos], kept[i].st)
		}
		kept[i] = keptVerdict{}
	}
}

// keptVerdict is a split node's kept-part verdict computed this cycle.
type keptVerdict struct {
	computed bool
	st       *fwk.Status
}

// splitScore is score for a split cycle: each node's kept raw scores from
// mc's table or computed (then kept), its live plugins' computed, on the
// parallelizer; then the normalizer.
func (np *NodePicker) splitScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, feasible []fwk.NodeInfo, pos []int, mc memoCycle, perPlugin bool) ([]fwk.NodePluginScores, error) {
	sp := np.run.split
	idx := np.scoringIdx[:0]
	for i, sc := range sp.scores {
		if slices.Contains(np.scoring, sc.name) {
			idx = append(idx, i)
		}
	}
	np.scoringIdx = idx
	k := len(idx)
	if k != len(np.scoring) {
		return nil, fmt.Errorf("fwkpick: split scores %d of the %d scoring plugins %v", k, len(np.scoring), np.scoring)
	}
	raw := slices.Grow(np.raw[:0], len(feasible)*k)[:len(feasible)*k]
	np.raw = raw
	computed := make([]bool, len(feasible))
	errs := make([]error, len(feasible))
	work := func(i int) {
		row := raw[i*k : (i+1)*k]
		r, ok := mc.score(pos[i], feasible[i])
		if ok {
			copy(row, r[:k])
		}
		computed[i] = !ok
		errs[i] = sp.rawScores(ctx, state, pod, feasible[i], idx, row, !ok)
	}
	if np.p.par == 1 || len(feasible) <= 1 {
		for i := range feasible {
			work(i)
		}
	} else {
		np.fw.Parallelizer().Until(ctx, len(feasible), work, metrics.Score)
	}
	for i := range feasible {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if computed[i] {
			sp.memo.stats.ScoreMisses++
			mc.keepScore(pos[i], feasible[i], raw[i*k:(i+1)*k])
		} else {
			sp.memo.stats.ScoreHits++
		}
	}
	return np.totals(ctx, state, pod, feasible, raw, perPlugin)
}
