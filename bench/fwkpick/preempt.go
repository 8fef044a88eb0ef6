package fwkpick

// PostFilter: a NodePicker is a sim.Preemptor running upstream v1.37.2's
// DefaultPreemption (the default profile's PostFilter plugin, with its
// default arguments) through a fwkadapter.Mutable over the published
// snapshot, as kube-scheduler's schedulingCycle does after a cycle that
// found no node:
//
//   - Preempt rebuilds the failed cycle's diagnosis on the same snapshot:
//     PreFilter, then Filter (with nominated pods) on every node the
//     PreFilter result leaves, a PreFilter rejection or the nodes it
//     leaves out set as the absent nodes' status, as findNodesThatFitPod
//     does (the filters are pure functions of the snapshot, the pod and
//     the nominated pods, so the statuses are the failed cycle's); then
//     RunPostFilterPlugins with that NodeToStatus.
//   - DefaultPreemption's executor runs as upstream's, its API calls
//     answered by a fake clientset whose reactors record them: the pods
//     it deletes are the victims, the pods whose status.nominatedNodeName
//     it clears (lower-priority pods nominated to the chosen node) are
//     reported cleared. The simulator deletes the victims through its
//     own API server.
//   - Four things differ from a kube-scheduler, so that a deterministic
//     run stays deterministic: preemption is synchronous
//     (SchedulerAsyncPreemption off: the victims are known when
//     PostFilter returns); DefaultPreemption's dry run and actuation run
//     on the calling goroutine (upstream's run in parallel and stop once
//     enough candidates are found, so which candidates are found varies);
//     the potential nodes are listed in the snapshot's order (upstream
//     lists the nodes of its NodeToStatus map in the map's order); and
//     its two random choices, the offset of the dry run among the
//     potential nodes and the last tie among the best candidates (a map's
//     order upstream), are drawn from the scheduler's random source.
//     GenericWorkload's pod-group preemption is off (the simulator has
//     no PodGroup objects).
//   - The node picker keeps the nominated pods the simulator reports
//     (Nominate) in a PodNominator that both its frameworks read:
//     RunFilterPluginsWithNominatedPods counts them on their nodes, and a
//     pod with a nominated node tries that node first
//     (evaluateNominatedNode), taking it if it passes Filter.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	scfw "github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim"
)

// ErrPreemption is wrapped by the errors Preempt returns: the preemption
// framework could not be built, PostFilter failed with an error status,
// or it panicked.
var ErrPreemption = errors.New("fwkpick: preemption")

var _ sim.Preemptor = (*NodePicker)(nil)

// PreemptionRecord is a plain value: what one Preempt did (recorded when
// NodePicker.Record is on, for tests).
type PreemptionRecord struct {
	Pod     string
	Seed    uint64 // the random choices' seed (see PreemptionFactory)
	Node    string // the nominated node ("" none)
	Status  string // PostFilter's status (StatusString)
	Victims []string
	Cleared []string
}

// Nominate implements sim.Preemptor: the nominated pods Filter counts.
func (np *NodePicker) Nominate(pod *v1.Pod, node string) {
	if np == nil || np.nom == nil || pod == nil {
		return
	}
	np.nom.Set(pod, node)
}

// nominatedFirst is upstream's evaluateNominatedNode: a pod nominated to
// a node takes it if it passes Filter there; ok false: it does not (or
// the pod has no nominated node), and the cycle runs as usual.
func (np *NodePicker) nominatedFirst(ctx context.Context, published *schedcache.Snapshot, info *scfw.PodInfo) (node string, ok bool, err error) {
	if np == nil || np.fw == nil || np.done.Load() || published == nil || info == nil || info.Pod() == nil {
		return "", false, nil // the cycle reports it
	}
	pod := info.Pod()
	node = pod.Status.NominatedNodeName
	if node == "" {
		return "", false, nil
	}
	prof, err := np.p.profileFor(pod)
	if err != nil {
		return "", false, nil // the cycle reports it
	}
	fw := np.fws[prof]
	if err := np.snap.CopyFrom(published); err != nil {
		return "", false, err
	}
	ni, err := np.lister.NodeInfos().Get(node)
	if err != nil || ni == nil {
		return "", false, nil // gone
	}
	state := framework.NewCycleState()
	np.keepCycle(pod, prof, state)
	pre, st, _ := fw.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() || (!pre.AllNodes() && !pre.NodeNames.Has(node)) {
		return "", false, nil
	}
	st = fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
	if st.Code() == fwk.Error {
		return "", false, st.AsError()
	}
	return node, st.IsSuccess(), nil
}

// ---- DefaultPreemption, made deterministic ----

// PreemptionFactory returns the registry factory of DefaultPreemption as
// the node pickers build it (see the comment at the top of preempt.go):
// synchronous, its dry run and actuation on the calling goroutine, its
// pods and PDBs read from podInformers (whose pod lister must hold the
// preemptor), and its two random choices drawn from *seed, which the
// caller sets before each PostFilter. built, if not nil, is handed the
// plugin. Tests build reference frameworks with it.
func PreemptionFactory(seed *uint64, podInformers informers.SharedInformerFactory, built func(*defaultpreemption.DefaultPreemption)) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
		fts.EnableAsyncPreemption = false
		fts.EnableGenericWorkload, fts.EnableCompositePodGroup = false, false
		pl, err := defaultpreemption.New(ctx, args, preemptHandle{Handle: fh, factory: podInformers}, fts)
		if err != nil {
			return nil, err
		}
		pl.Evaluator.Interface = detPreemption{DefaultPreemption: pl, seed: seed}
		if built != nil {
			built(pl)
		}
		return pl, nil
	}
}

// PreemptionInformers returns an informer factory holding what
// DefaultPreemption lists (the pods it re-reads, the PDBs: none), never
// started; add the preemptor to its pod informer's indexer.
func PreemptionInformers() informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	f.Core().V1().Pods().Informer()
	f.Policy().V1().PodDisruptionBudgets().Informer()
	return f
}

// preemptHandle is DefaultPreemption's view of its framework: sequential,
// with its own pods and PDBs.
type preemptHandle struct {
	fwk.Handle
	factory informers.SharedInformerFactory // immutable
}

func (h preemptHandle) Parallelizer() fwk.Parallelizer                         { return sequential{} }
func (h preemptHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }

// sequential is a fwk.Parallelizer running every piece on the calling
// goroutine, in order, until ctx is done. Stateless.
type sequential struct{}

func (sequential) Until(ctx context.Context, pieces int, do workqueue.DoWorkPieceFunc, _ string) {
	for i := 0; i < pieces && ctx.Err() == nil; i++ {
		do(i)
	}
}

// detPreemption is DefaultPreemption with its random choices drawn from
// *seed.
type detPreemption struct {
	*defaultpreemption.DefaultPreemption
	seed *uint64 // read during PostFilter; set by the caller before it
}

// GetOffsetAndNumCandidates: upstream's number of candidates, the offset
// from the seed.
func (d detPreemption) GetOffsetAndNumCandidates(n int32) (int32, int32) {
	_, num := d.DefaultPreemption.GetOffsetAndNumCandidates(n)
	if n <= 0 {
		return 0, num
	}
	return int32(*d.seed % uint64(n)), num
}

// OrderedScoreFuncs is pickOneNodeForPreemption's default ranking
// (fewest PDB violations, lowest highest victim priority, lowest sum of
// priorities, fewest victims, latest start among the highest-priority
// victims), then a last rank from the seed where upstream takes the first
// of the ties in a map's order.
func (d detPreemption) OrderedScoreFuncs(_ context.Context, m map[string]*extenderv1.Victims) []func(string) int64 {
	key := *d.seed
	return []func(string) int64{
		func(n string) int64 { return -m[n].NumPDBViolations },
		func(n string) int64 { return -int64(podPriority(m[n].Pods[0])) },
		func(n string) int64 {
			var sum int64
			for _, p := range m[n].Pods {
				sum += int64(podPriority(p)) + int64(math.MaxInt32+1)
			}
			return -sum
		},
		func(n string) int64 { return -int64(len(m[n].Pods)) },
		func(n string) int64 {
			t := util.GetEarliestPodStartTime(m[n])
			if t == nil {
				return math.MinInt64
			}
			return t.UnixNano()
		},
		func(n string) int64 { return int64(mix(key, n) >> 1) },
	}
}

// mix is a fixed hash of seed and s (FNV-1a, then a finaliser).
func mix(seed uint64, s string) uint64 {
	h := uint64(14695981039346656037) ^ seed
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

func podPriority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// OrderedStatuses is m whose NodesForStatusCode lists the nodes in the
// lister's order: upstream's lists the nodes m names in its map's order
// unless the absent nodes match, so that the dry run's offset would land
// in a random order.
func OrderedStatuses(m *framework.NodeToStatus) fwk.NodeToStatusReader { return orderedStatuses{m} }

type orderedStatuses struct{ *framework.NodeToStatus }

func (o orderedStatuses) NodesForStatusCode(l fwk.NodeInfoLister, code fwk.Code) ([]fwk.NodeInfo, error) {
	all, err := l.List()
	if err != nil {
		return nil, err
	}
	var out []fwk.NodeInfo
	for _, ni := range all {
		if o.Get(ni.Node().Name).Code() == code {
			out = append(out, ni)
		}
	}
	return out, nil
}

// ---- the preemption framework ----

// preemption is a NodePicker's PostFilter machinery, built on its first
// Preempt; owned by the node picker's goroutine but for capture, which
// the executor's calls fill under mu.
type preemption struct {
	none    bool // the profile has no PostFilter plugin: run preempts nothing
	fw      framework.Framework
	m       *fwkadapter.Mutable
	pods    cache.Indexer // the pods DefaultPreemption reads: the preemptor, while it runs
	seed    uint64        // read by detPreemption during PostFilter
	mu      sync.Mutex    // guards deleted, cleared
	deleted []string      // "namespace/name" of the pods the executor deleted
	cleared []string      // "namespace/name" of the pods whose nomination it cleared
}

// preemption returns np's preemption framework of profile prof,
// building it once: the profile's PreFilter, Filter, PreScore and Score
// plugins, and its PostFilter plugins with its arguments
// (DefaultPreemption made deterministic: PreemptionFactory). A profile
// without PostFilter plugins gets a preemption whose run preempts
// nothing.
func (np *NodePicker) preemption(ctx context.Context, prof int) (*preemption, error) {
	if np.pres == nil {
		np.pres = make([]*preemption, len(np.fws))
	}
	if np.pres[prof] != nil {
		return np.pres[prof], nil
	}
	p := np.p
	pp := p.profiles[prof]
	if len(pp.postFilter) == 0 {
		np.pres[prof] = &preemption{none: true}
		return np.pres[prof], nil
	}
	m, err := fwkadapter.NewMutable(schedcache.NewEmptySnapshot())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPreemption, err)
	}
	pre := &preemption{m: m}
	inf := PreemptionInformers()
	pre.pods = inf.Core().V1().Pods().Informer().GetIndexer()
	registry := frameworkruntime.Registry{}
	for k, v := range p.registry {
		registry[k] = v
	}
	registry[names.DefaultPreemption] = PreemptionFactory(&pre.seed, inf, nil)
	profile := pp.cfg.DeepCopy()
	profile.Plugins.PostFilter = config.PluginSet{Enabled: slices.Clone(pp.postFilter)}
	for _, pc := range pp.postArgs {
		profile.PluginConfig = append(profile.PluginConfig, *pc.DeepCopy())
	}
	if slices.ContainsFunc(pp.postFilter, func(pl config.Plugin) bool { return pl.Name == names.DefaultPreemption }) &&
		!slices.ContainsFunc(pp.postArgs, func(pc config.PluginConfig) bool { return pc.Name == names.DefaultPreemption }) {
		// A configuration without DefaultPreemption's arguments:
		// upstream's defaults, as its scheme would give them.
		def, err := latest.Default()
		if err != nil {
			return nil, fmt.Errorf("%w: upstream defaults: %v", ErrPreemption, err)
		}
		for _, pc := range def.Profiles[0].PluginConfig {
			if pc.Name == names.DefaultPreemption {
				profile.PluginConfig = append(profile.PluginConfig, pc)
			}
		}
	}
	cs := fake.NewClientset()
	cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		pre.mu.Lock()
		pre.deleted = append(pre.deleted, d.GetNamespace()+"/"+d.GetName())
		pre.mu.Unlock()
		return true, nil, nil
	})
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		var patch struct {
			Status map[string]json.RawMessage `json:"status"`
		}
		if pa.GetSubresource() == "status" && json.Unmarshal(pa.GetPatch(), &patch) == nil {
			if _, ok := patch.Status["nominatedNodeName"]; ok {
				pre.mu.Lock()
				pre.cleared = append(pre.cleared, pa.GetNamespace()+"/"+pa.GetName())
				pre.mu.Unlock()
			}
		}
		return true, &v1.Pod{}, nil
	})
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cancel() // see NewFramework: the default recorder is replaced
	pre.fw, err = frameworkruntime.NewFramework(fctx, registry, profile,
		frameworkruntime.WithSnapshotSharedLister(m),
		frameworkruntime.WithMutableSnapshotLister(m),
		frameworkruntime.WithInformerFactory(p.factory),
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithPodNominator(np.nom),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
		frameworkruntime.WithMetricsRecorder(np.rec),
		frameworkruntime.WithParallelism(p.par),
		frameworkruntime.WithLogger(klog.Background()),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: NewFramework: %v", ErrPreemption, err)
	}
	np.pres[prof] = pre
	return pre, nil
}

// Preempt implements sim.Preemptor: DefaultPreemption's PostFilter for
// info's pod, which found no node on published (see the comment at the
// top of preempt.go). r gives the random choices' seed.
func (np *NodePicker) Preempt(ctx context.Context, published *schedcache.Snapshot, info *scfw.PodInfo, r *rand.Rand) (out sim.Preemption, err error) {
	if np == nil || np.fw == nil {
		return out, fmt.Errorf("%w: Preempt on a NodePicker not made by NewFramework", ErrConfig)
	}
	if np.done.Load() {
		return out, ErrClosed
	}
	if published == nil || info == nil || info.Pod() == nil || r == nil {
		return out, fmt.Errorf("%w: Preempt: nil snapshot, pod or random source", ErrPreemption)
	}
	defer func() {
		if v := recover(); v != nil {
			out, err = sim.Preemption{}, fmt.Errorf("%w: PostFilter of %s panicked: %v", ErrPreemption, info.Pod().Name, v)
		}
	}()
	prof, err := np.p.profileFor(info.Pod())
	if err != nil {
		return out, nil // no profile: the attempt failed already
	}
	pre, err := np.preemption(ctx, prof)
	if err != nil {
		return out, err
	}
	return pre.run(ctx, np, published, info.Pod(), r.Uint64())
}

// run is one PostFilter of pod on published with seed.
func (pre *preemption) run(ctx context.Context, np *NodePicker, published *schedcache.Snapshot, pod *v1.Pod, seed uint64) (sim.Preemption, error) {
	var out sim.Preemption
	if pre.none {
		return out, nil
	}
	logger := klog.Background()
	if _, err := pre.m.Reset(logger, published); err != nil {
		return out, fmt.Errorf("%w: %v", ErrPreemption, err)
	}
	statuses, feasible, err := pre.diagnose(ctx, pod)
	if err != nil || feasible {
		return out, err // a node fits: nothing to preempt
	}
	if err := pre.pods.Add(pod); err != nil {
		return out, fmt.Errorf("%w: %v", ErrPreemption, err)
	}
	defer func() { _ = pre.pods.Delete(pod) }() // an indexer of plain objects: no error
	pre.seed = seed
	pre.mu.Lock()
	pre.deleted, pre.cleared = pre.deleted[:0], pre.cleared[:0]
	pre.mu.Unlock()
	res, st := pre.fw.RunPostFilterPlugins(ctx, statuses.state, pod, OrderedStatuses(statuses.m))
	pre.mu.Lock()
	deleted, cleared := slices.Clone(pre.deleted), slices.Clone(pre.cleared)
	pre.mu.Unlock()
	slices.Sort(deleted)
	slices.Sort(cleared)
	if np.Record {
		np.LastPreemption = PreemptionRecord{Pod: pod.Namespace + "/" + pod.Name, Seed: seed, Status: StatusString(st), Victims: deleted, Cleared: cleared}
	}
	if st.Code() == fwk.Error {
		return out, fmt.Errorf("%w: PostFilter of %s: %v", ErrPreemption, pod.Name, st.AsError())
	}
	if res == nil || res.NominatingInfo == nil || res.Mode() != fwk.ModeOverride {
		return out, nil // the nomination is kept
	}
	out.Node = res.NominatedNodeName
	out.Clear = out.Node == ""
	if np.Record {
		np.LastPreemption.Node = out.Node
	}
	if out.Node != "" {
		ni, err := published.Get(out.Node)
		if err != nil || ni == nil {
			return sim.Preemption{}, fmt.Errorf("%w: PostFilter of %s nominated %q, not in the snapshot", ErrPreemption, pod.Name, out.Node)
		}
		for _, key := range deleted {
			v := podOn(ni, key)
			if v == nil {
				return sim.Preemption{}, fmt.Errorf("%w: PostFilter of %s deleted %s, not on node %s", ErrPreemption, pod.Name, key, out.Node)
			}
			out.Victims = append(out.Victims, v)
		}
	}
	for _, key := range cleared {
		if p := np.nom.Pod(key); p != nil {
			out.Cleared = append(out.Cleared, p)
		}
	}
	return out, nil
}

// podOn returns the pod "namespace/name" on ni, or nil.
func podOn(ni *scfw.NodeInfo, key string) *v1.Pod {
	for k := 0; k < ni.NumPods(); k++ {
		p := ni.PodAt(k).Pod()
		if p.Namespace+"/"+p.Name == key {
			return p
		}
	}
	return nil
}

// diagnosis is a failed cycle's state and node statuses.
type diagnosis struct {
	state fwk.CycleState
	m     *framework.NodeToStatus
}

// diagnose runs the failed cycle's PreFilter and Filter on the Mutable;
// feasible: some node passes (nothing to preempt).
func (pre *preemption) diagnose(ctx context.Context, pod *v1.Pod) (diagnosis, bool, error) {
	d := diagnosis{state: framework.NewCycleState(), m: framework.NewDefaultNodeToStatus()}
	preRes, st, unsched := pre.fw.RunPreFilterPlugins(ctx, d.state, pod)
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return d, false, fmt.Errorf("%w: PreFilter of %s: %v", ErrPreemption, pod.Name, st.AsError())
		}
		d.m.SetAbsentNodesStatus(st)
		return d, false, nil
	}
	all, err := pre.m.NodeInfos().List()
	if err != nil {
		return d, false, fmt.Errorf("%w: %v", ErrPreemption, err)
	}
	nodes := all
	if !preRes.AllNodes() {
		nodes = nil
		for _, ni := range all {
			if preRes.NodeNames.Has(ni.Node().Name) {
				nodes = append(nodes, ni)
			}
		}
		ps := unsched.UnsortedList()
		slices.Sort(ps)
		d.m.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", ps)))
	}
	statuses := make([]*fwk.Status, len(nodes))
	pre.fw.Parallelizer().Until(ctx, len(nodes), func(i int) {
		statuses[i] = pre.fw.RunFilterPluginsWithNominatedPods(ctx, d.state, pod, nodes[i])
	}, "Filter")
	for i, st := range statuses {
		switch {
		case st.IsSuccess():
			return d, true, nil
		case st.Code() == fwk.Error:
			return d, false, fmt.Errorf("%w: Filter of %s: %v", ErrPreemption, pod.Name, st.AsError())
		}
		d.m.Set(nodes[i].Node().Name, st)
	}
	return d, false, nil
}
