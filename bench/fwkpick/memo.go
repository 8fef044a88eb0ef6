package fwkpick

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/schedcache/schedcache/kube/fwkadapter"
	scfw "github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim"
)

// The memo: Filter verdicts and raw Score results kept per published
// NodeInfo, reused while the node and the cluster-wide inputs of the
// plugins are unchanged.
//
// A NodeInfo of a published snapshot never changes: a node that changes
// (a pod bound, an image count moved, a label edited) is published as a
// new NodeInfo. So for two pods that every plugin treats alike (upstream's
// pod signature, KEP-5598: "any two pods with the same signature should
// get the same feasibility and scoring for the same set of nodes in the
// same state"), a node whose NodeInfo is the same object gives the same
// Filter status and the same raw scores, provided the plugins read
// nothing of the rest of the cluster. Of the default profile's plugins,
// for a signed pod, these read the rest of the cluster:
//
//   - ImageLocality: the number of nodes (a node's image counts are in
//     its NodeInfo: a count that moves republishes the node);
//   - InterPodAffinity: the pods with affinity terms anywhere (Filter
//     against existing required anti-affinity, Score against existing
//     preferred terms): the nodes of HavePodsWithAffinityList, each as its
//     node object and its pods with affinity terms (affNode);
//   - VolumeRestrictions: whether the pod's claims are in use
//     (ReadWriteOncePod conflicts);
//   - PodTopologySpread: the whole cluster's counts, unless its PreFilter
//     skipped the pod.
//
// A table of results is kept per signature with those inputs as its
// fingerprint; a cycle whose fingerprint differs starts the table afresh,
// and a node whose NodeInfo differs from the one its entry was computed on
// is computed again. Nodes with nominated pods are always computed (the
// Filter of RunFilterPluginsWithNominatedPods counts them). The verdicts
// and scores used are thus exactly those the plugins would return: the
// cycle's outcome, node for node, is the one without the memo (tested:
// TestMemoSameDecisions).
//
// Upstream signs no pod of the default profile: PodTopologySpread refuses
// to sign when default constraints are configured (the system defaults
// are), so upstream's own batching (OpportunisticBatch) never engages
// under the default configuration. The memo signs with a second framework
// whose PodTopologySpread has no default constraints and then uses a
// signature only in cycles where PodTopologySpread's PreFilter and
// PreScore skipped the pod (no constraint applies to it, the defaults
// included), which is when its signature fragment is empty.
//
// The memo applies only to profiles made of the plugins analysed above
// (memoSafe); with any other plugin (an out-of-tree one, say) it is off
// for that profile.

// memoSafe are the plugins whose dependence on the cluster beyond the
// node the memo accounts for: DefaultPlugins and NodeDeclaredFeatures
// (its Filter reads the node's declared features against the pod's
// PreFilter requirements, which its signature fragment covers), which a
// configuration file's default profile runs.
var memoSafe = append(slices.Clone(DefaultPlugins), names.NodeDeclaredFeatures)

// The signatures remembered are bounded by the node entries their tables
// may hold together, memoMaxEntries (an entry is about 130 bytes: 128 MiB
// in all), and never fewer than memoMinTables: at 5,000 nodes about 200
// tables, at 50,000 about 20. The table used longest ago is dropped. A
// cluster's pods sign alike per workload (a Deployment's replicas), so a
// cluster of a few hundred workloads keeps every table at 5,000 nodes;
// the generator's standard pods (200 apps) did not fit the former fixed
// 32 and missed on nearly every node.
const (
	memoMaxEntries = 1 << 20
	memoMinTables  = 32
)

// memoMaxTables is the number of tables kept for numNodes nodes.
func memoMaxTables(numNodes int) int {
	return max(memoMinTables, memoMaxEntries/max(numNodes, 1))
}

// MemoStats is a plain value: what the memo did over a picker's cycles.
type MemoStats struct {
	Cycles        int64 // cycles that used the memo
	Unsigned      int64 // cycles whose pod had no signature (or PodTopologySpread applied)
	FilterHits    int64 // Filter verdicts reused
	FilterMisses  int64 // Filter verdicts computed
	ScoreHits     int64 // raw scores reused
	ScoreMisses   int64 // raw scores computed
	Invalidations int64 // tables started afresh (fingerprint changed)
}

// Counters returns s as sim's picker counters.
func (s MemoStats) Counters() []sim.PickerCounter {
	return []sim.PickerCounter{
		{Name: "memo cycles", Value: s.Cycles}, {Name: "memo unsigned", Value: s.Unsigned},
		{Name: "filter hits", Value: s.FilterHits}, {Name: "filter misses", Value: s.FilterMisses},
		{Name: "score hits", Value: s.ScoreHits}, {Name: "score misses", Value: s.ScoreMisses},
		{Name: "memo invalidations", Value: s.Invalidations},
	}
}

// Add returns s + o.
func (s MemoStats) Add(o MemoStats) MemoStats {
	return MemoStats{s.Cycles + o.Cycles, s.Unsigned + o.Unsigned, s.FilterHits + o.FilterHits,
		s.FilterMisses + o.FilterMisses, s.ScoreHits + o.ScoreHits, s.ScoreMisses + o.ScoreMisses,
		s.Invalidations + o.Invalidations}
}

// memo is owned by its NodePicker's goroutine.
type memo struct {
	signer framework.Framework // immutable: signs pods (PodTopologySpread without default constraints)
	spread bool                // immutable: the profile runs PodTopologySpread
	// split: the memo of a split (split.go): it keeps the verdicts and
	// scores of the plugins other than InterPodAffinity and
	// PodTopologySpread (its signer's profile lacks them), which run live
	// every cycle; its fingerprint has no affinity list.
	split  bool                  // immutable
	tables map[string]*memoTable // by signature
	order  []string              // signatures, used longest ago first
	stats  MemoStats
}

// memoTable is the results for one signature, valid under its fingerprint.
type memoTable struct {
	numNodes int       // fingerprint: nodes in the snapshot
	aff      []affNode // fingerprint: HavePodsWithAffinityList's nodes and their pods with affinity
	claims   []bool    // fingerprint: whether each of the pod's claims is in use
	scoring  []string  // the score plugins not skipped when scores were kept
	// entries[i] is the results for the node at position i of the
	// cycle's node list when they were computed; its ni says on which
	// NodeInfo, so an entry is used only for that very NodeInfo
	// (positions that move only cost misses).
	entries []memoEntry
}

// affNode is what InterPodAffinity reads of a node of
// HavePodsWithAffinityList for a pod without inter-pod terms: the node
// object (its topology labels) and the pods with affinity terms on it
// (their terms, labels and namespaces), by identity: both are immutable
// and shared by every version of the node's NodeInfo that has them, so a
// binding of an unrelated pod on the node leaves its affNode unchanged.
type affNode struct {
	node *v1.Node
	pods []*scfw.PodInfo
}

// sameAff reports whether list's nodes are those of aff, in order.
func sameAff(aff []affNode, list []fwk.NodeInfo) bool {
	if len(aff) != len(list) {
		return false
	}
	for i, ni := range list {
		n := unwrap(ni)
		if n == nil || n.Node() != aff[i].node || n.NumPodsWithAffinity() != len(aff[i].pods) {
			return false
		}
		for j, p := range aff[i].pods {
			if n.PodWithAffinityAt(j) != p {
				return false
			}
		}
	}
	return true
}

// affOf returns list's affNodes, or false if a node is not schedcache's.
func affOf(list []fwk.NodeInfo) ([]affNode, bool) {
	out := make([]affNode, len(list))
	for i, ni := range list {
		n := unwrap(ni)
		if n == nil {
			return nil, false
		}
		out[i] = affNode{node: n.Node(), pods: n.PodsWithAffinity()}
	}
	return out, true
}

// unwrap returns ni's schedcache NodeInfo, or nil.
func unwrap(ni fwk.NodeInfo) *scfw.NodeInfo {
	if w, ok := ni.(*fwkadapter.NodeInfo); ok {
		return w.Unwrap()
	}
	return nil
}

// maxMemoScores bounds the Score plugins whose raw scores an entry keeps.
const maxMemoScores = 12

// memoEntry is one node's results, computed on ni.
type memoEntry struct {
	ni     fwk.NodeInfo
	status *fwk.Status // the Filter status (nil: feasible)
	scored bool        // raw holds the scores computed on ni
	raw    [maxMemoScores]int64
}

// memoCycle is the memo's view of one cycle: the table in use, or nil.
type memoCycle struct {
	t     *memoTable
	split bool // a split's table (split.go)
}

// newMemo builds the signing framework for profile cfg, which runs
// plugins (at PreFilter, Filter, PreScore or Score); nil when one of them
// is a plugin the memo does not know (memoSafe).
func newMemo(ctx context.Context, cfg *config.KubeSchedulerProfile, plugins []string, build func(ctx context.Context, prof *config.KubeSchedulerProfile) (framework.Framework, error)) (*memo, error) {
	for _, pl := range plugins {
		if !slices.Contains(memoSafe, pl) {
			return nil, nil
		}
	}
	prof := cfg.DeepCopy()
	if slices.Contains(plugins, names.PodTopologySpread) {
		if err := listDefaulting(prof); err != nil {
			return nil, err
		}
	}
	signer, err := build(ctx, prof)
	if err != nil {
		return nil, err
	}
	return &memo{signer: signer, spread: slices.Contains(plugins, names.PodTopologySpread), tables: map[string]*memoTable{}}, nil
}

// listDefaulting gives prof's PodTopologySpread no default constraints.
func listDefaulting(prof *config.KubeSchedulerProfile) error {
	for i, pc := range prof.PluginConfig {
		if pc.Name != names.PodTopologySpread {
			continue
		}
		args, ok := pc.Args.(*config.PodTopologySpreadArgs)
		if !ok {
			return fmt.Errorf("%w: PodTopologySpread args of type %T", ErrConfig, pc.Args)
		}
		a := args.DeepCopy()
		a.DefaultingType = config.ListDefaulting
		a.DefaultConstraints = nil
		prof.PluginConfig[i].Args = a
	}
	return nil
}

// begin returns the cycle's table for pod, or a zero memoCycle when the
// memo cannot serve this cycle. It runs after a successful PreFilter.
func (m *memo) begin(ctx context.Context, state fwk.CycleState, pod *v1.Pod, lister *fwkadapter.Lister, numNodes int) (memoCycle, error) {
	if m == nil {
		return memoCycle{}, nil
	}
	if !m.split && m.spread && !state.GetSkipFilterPlugins().Has(names.PodTopologySpread) {
		// PodTopologySpread filters this pod: its verdicts hang on the
		// whole cluster's counts.
		m.stats.Unsigned++
		return memoCycle{}, nil
	}
	sig := m.signer.SignPod(ctx, pod)
	if sig == nil {
		m.stats.Unsigned++
		return memoCycle{}, nil
	}
	var aff []fwk.NodeInfo
	if !m.split {
		var err error
		if aff, err = lister.NodeInfos().HavePodsWithAffinityList(); err != nil {
			return memoCycle{}, err
		}
	}
	claims := claimsInUse(pod, lister)
	key := string(sig)
	t := m.tables[key]
	switch {
	case t == nil:
		for len(m.order) >= memoMaxTables(numNodes) {
			delete(m.tables, m.order[0])
			m.order = m.order[1:]
		}
		t = &memoTable{}
		m.tables[key] = t
		m.order = append(m.order, key)
	default:
		m.touch(key)
		if t.numNodes != numNodes || !sameAff(t.aff, aff) || !slices.Equal(t.claims, claims) {
			m.stats.Invalidations++
			clear(t.entries)
			t.scoring = nil
		}
	}
	t.numNodes, t.claims = numNodes, claims
	if !sameAff(t.aff, aff) {
		a, ok := affOf(aff)
		if !ok {
			// A node not schedcache's: no fingerprint, no memo.
			delete(m.tables, key)
			m.order = slices.DeleteFunc(m.order, func(k string) bool { return k == key })
			m.stats.Unsigned++
			return memoCycle{}, nil
		}
		t.aff = a
	}
	m.stats.Cycles++
	return memoCycle{t: t, split: m.split}, nil
}

// touch moves key, a table's signature, to the end of m.order: used last.
func (m *memo) touch(key string) {
	n := len(m.order)
	if n > 0 && m.order[n-1] == key {
		return
	}
	if i := slices.Index(m.order, key); i >= 0 {
		copy(m.order[i:], m.order[i+1:])
		m.order[n-1] = key
	}
}

// claimsInUse reports, for each PersistentVolumeClaim volume of pod in
// order, whether a pod already uses the claim.
func claimsInUse(pod *v1.Pod, lister *fwkadapter.Lister) []bool {
	var out []bool
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		out = append(out, lister.StorageInfos().IsPVCUsedByPods(pod.Namespace+"/"+vol.PersistentVolumeClaim.ClaimName))
	}
	return out
}

// entry returns the entry of position i for ni, or nil.
func (c memoCycle) entry(i int, ni fwk.NodeInfo) *memoEntry {
	if c.t == nil || i >= len(c.t.entries) {
		return nil
	}
	if e := &c.t.entries[i]; e.ni == ni {
		return e
	}
	return nil
}

// filter returns the kept verdict for ni at position i, if any.
func (c memoCycle) filter(i int, ni fwk.NodeInfo) (*fwk.Status, bool) {
	if e := c.entry(i, ni); e != nil {
		return e.status, true
	}
	return nil, false
}

// keepFilter records the verdict of ni at position i of a list of n
// nodes; an entry for another NodeInfo is replaced, scores included.
func (c memoCycle) keepFilter(i, n int, ni fwk.NodeInfo, st *fwk.Status) {
	if c.t == nil {
		return
	}
	if len(c.t.entries) < n {
		c.t.entries = slices.Grow(c.t.entries, n-len(c.t.entries))[:n]
	}
	e := &c.t.entries[i]
	if e.ni != ni {
		*e = memoEntry{ni: ni}
	}
	e.status = st
}

// startScoring returns the cycle's view for scoring: none when
// PodTopologySpread scores this pod (its scores hang on the whole
// cluster's counts) or more plugins score than an entry keeps. It checks
// the score plugins this cycle runs against those the kept scores were
// computed with; a change drops the kept scores.
func (c memoCycle) startScoring(scoring []string) memoCycle {
	if c.t == nil {
		return c
	}
	if (!c.split && slices.Contains(scoring, names.PodTopologySpread)) || len(scoring) > maxMemoScores {
		return memoCycle{}
	}
	if slices.Equal(c.t.scoring, scoring) {
		return c
	}
	for i := range c.t.entries {
		c.t.entries[i].scored = false
	}
	c.t.scoring = slices.Clone(scoring)
	return c
}

// score returns the kept raw scores of ni at position i, if any.
func (c memoCycle) score(i int, ni fwk.NodeInfo) (*[maxMemoScores]int64, bool) {
	if e := c.entry(i, ni); e != nil && e.scored {
		return &e.raw, true
	}
	return nil, false
}

// keepScore records the raw scores of ni at position i, computed with the
// table's scoring plugins, in their order.
func (c memoCycle) keepScore(i int, ni fwk.NodeInfo, raw []int64) {
	if e := c.entry(i, ni); e != nil {
		copy(e.raw[:], raw)
		e.scored = true
	}
}
