package bench

// The plugin mode of the simulator (fwkpick, cmd/loadgen-fwk): its
// decisions against a direct upstream framework run on upstream's own
// cache, its per-plugin rejection counts, and determinism through sim.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	upcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/bench/fwkpick"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	scfw "github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim"
	"github.com/schedcache/schedcache/workload"
)

type noNominator struct{}

func (noNominator) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (noNominator) DeleteNominatedPodIfExists(*v1.Pod)                            {}
func (noNominator) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo)          {}
func (noNominator) NominatedPodsForNode(string) []fwk.PodInfo                     { return nil }

// TestFwkPickerMatchesUpstream: for each incoming pod the picker (on
// schedcache's snapshot through fwkadapter) and a framework of the same
// profile built here on upstream's cache and snapshot must agree: the
// PreFilter verdict, the nodes examined (in the snapshot's order, from
// where the last cycle stopped, until numFeasibleNodesToFind feasible
// ones), every examined node's Filter status, and a chosen node with the
// highest total score. The pod is then assumed on that node in both
// caches, so the clusters evolve together. The cluster has tainted and
// cordoned nodes; pods from fwkPod (tolerations, affinities, spread, GPUs,
// ports, volumes).
//
// This is the per-decision fidelity check of the simulator's real-plugin
// mode, with the carry (bench/fwkpick/carry.go) on, whose service the
// constrained mix checks, and the memo (bench/fwkpick/memo.go) off and
// on: "varied"
// draws every pod afresh (few pods share a signature), "templates" copies
// four fwkPod templates (their inter-pod terms and spread dropped) round
// robin, with every 25th pod a fresh fwkPod given a required
// anti-affinity: most pods share a signature with one placed a few cycles
// before, so the memo serves most verdicts and scores, and each
// anti-affinity pod placed changes the affinity list, which must start
// the tables afresh (its counters are checked).
func TestFwkPickerMatchesUpstream(t *testing.T) {
	templates := func(r *rand.Rand, i int) *v1.Pod {
		if i%25 == 24 {
			p := fwkPod(r, i)
			if p.Spec.Affinity == nil {
				p.Spec.Affinity = &v1.Affinity{}
			}
			p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"anti": "x"}}, TopologyKey: v1.LabelHostname}}}
			return p
		}
		tr := rand.New(rand.NewPCG(uint64(i%4), 77))
		p := fwkPod(tr, i%4).DeepCopy()
		p.Name = fmt.Sprintf("tpl-%06d", i)
		p.UID = apitypes.UID(p.Name)
		if a := p.Spec.Affinity; a != nil {
			a.PodAffinity, a.PodAntiAffinity = nil, nil
		}
		p.Spec.TopologySpreadConstraints = nil
		return p
	}
	// Three templates whose pods repel each other per hostname and spread
	// per zone: unsigned, so the split (bench/fwkpick/split.go) keeps the
	// other plugins' verdicts and runs those two live.
	constrained := func(r *rand.Rand, i int) *v1.Pod {
		tr := rand.New(rand.NewPCG(uint64(i%3), 78))
		p := fwkPod(tr, i%3).DeepCopy()
		p.Name = fmt.Sprintf("con-%06d", i)
		p.UID = apitypes.UID(p.Name)
		p.Labels = map[string]string{"con": fmt.Sprint(i % 3)}
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"con": fmt.Sprint(i % 3)}}
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &v1.Affinity{}
		}
		p.Spec.Affinity.PodAffinity = nil
		p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: sel, TopologyKey: v1.LabelHostname}}}
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 3, TopologyKey: v1.LabelTopologyZone,
			WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: sel}}
		return p
	}
	for _, tc := range []struct {
		name  string
		memo  bool
		podAt func(r *rand.Rand, i int) *v1.Pod
	}{{"varied/memo-off", false, fwkPod}, {"varied/memo-on", true, fwkPod},
		{"templates/memo-off", false, templates}, {"templates/memo-on", true, templates},
		{"constrained/memo-off", false, constrained}, {"constrained/memo-on", true, constrained}} {
		t.Run(tc.name, func(t *testing.T) {
			st := testFwkPickerMatchesUpstream(t, tc.memo, tc.podAt, tc.podAt != nil && tc.name[0] == 'v', tc.name[0] == 'c')
			t.Logf("memo: %+v", st)
			if !tc.memo {
				if st != (fwkpick.MemoStats{}) {
					t.Fatalf("memo off, yet it counted %+v", st)
				}
				return
			}
			if st.Cycles == 0 || st.FilterMisses == 0 || st.ScoreMisses == 0 {
				t.Fatalf("memo on, yet it computed nothing: %+v", st)
			}
			if tc.name[0] == 't' && (st.FilterHits < st.FilterMisses || st.ScoreHits == 0 || st.Invalidations == 0) {
				t.Fatalf("templates: the memo served too little (%+v): want most verdicts reused and some tables invalidated", st)
			}
			if tc.name[0] == 'c' && (st.Unsigned == 0 || st.FilterHits < st.FilterMisses || st.ScoreHits == 0) {
				t.Fatalf("constrained: the split served too little (%+v): want unsigned pods with most kept verdicts reused", st)
			}
		})
	}
}

func testFwkPickerMatchesUpstream(t *testing.T, memo bool, podAt func(r *rand.Rand, i int) *v1.Pod, checkPlugins, checkCarry bool) fwkpick.MemoStats {
	spec, pods := workload.ClusterSpec{Nodes: 120, PodsPerNode: 30, Seed: 2}, 200
	if !testing.Short() {
		spec, pods = workload.ClusterSpec{Nodes: 1000, PodsPerNode: 30, Seed: 2}, 1000
	}
	ctx, cancel := fwkContext(t)
	defer cancel()
	nodes, existing := fwkCluster(spec)
	for i := range nodes {
		if i%13 == 6 {
			cp := *nodes[i]
			cp.Spec.Unschedulable = true
			nodes[i] = &cp
		}
	}
	up, err := NewImpl(Upstream, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	sc, err := NewImpl(SchedCache, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, impl := range []Impl{up, sc} {
		for _, n := range nodes {
			if err := impl.AddNode(n); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range existing {
			if err := impl.AddPod(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	picker, err := fwkpick.New(fwkpick.Config{NoMemo: !memo})
	if err != nil {
		t.Fatal(err)
	}
	defer picker.Close()
	np, err := picker.NewFramework(ctx)
	if err != nil {
		t.Fatal(err)
	}
	np.Record = true

	// The reference: upstream's framework on upstream's snapshot.
	logger := klog.Background()
	upSnap := upcache.NewEmptySnapshot()
	profile, registry := picker.Profile()
	stop := make(chan struct{})
	rec := metrics.NewMetricsAsyncRecorder(10, 10*time.Millisecond, stop)
	defer func() { close(stop); <-rec.IsStoppedCh }()
	ref, err := frameworkruntime.NewFramework(ctx, registry, profile,
		frameworkruntime.WithSnapshotSharedLister(upSnap),
		frameworkruntime.WithInformerFactory(picker.Informers()),
		frameworkruntime.WithClientSet(fake.NewClientset()),
		frameworkruntime.WithPodNominator(noNominator{}),
		frameworkruntime.WithMetricsRecorder(rec),
		frameworkruntime.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	upCache := up.(*upstreamImpl).Cache()
	scCache := sc.(*schedImpl).Cache()

	rej := make([]int64, len(picker.Plugins()))
	r := rand.New(rand.NewPCG(5, 5))
	tie := rand.New(rand.NewPCG(6, 6))
	next, rejectedNodes, examined, scheduled := 0, int64(0), 0, 0
	for i := range pods {
		pod := podAt(r, i)
		info, err := scfw.NewPodInfo(pod)
		if err != nil {
			t.Fatal(err)
		}
		published := scCache.Snapshot()
		best, err := np.Pick(ctx, published, info, tie, rej)
		if err != nil {
			t.Fatalf("pod %d: Pick: %v", i, err)
		}
		d := np.Last
		if d.Best != best {
			t.Fatalf("pod %d: Pick returned %q, recorded %q", i, best, d.Best)
		}
		if err := upCache.UpdateSnapshot(logger, upSnap); err != nil {
			t.Fatal(err)
		}
		all, _ := upSnap.NodeInfos().List()
		// Same node order on both sides (zone round-robin).
		scl, _ := fwkadapter.NewLister(published)
		scAll, _ := scl.NodeInfos().List()
		if len(all) != len(scAll) {
			t.Fatalf("pod %d: %d vs %d nodes", i, len(all), len(scAll))
		}
		for k := range all {
			if all[k].Node().Name != scAll[k].Node().Name {
				t.Fatalf("pod %d: node %d is %s upstream, %s in schedcache", i, k, all[k].Node().Name, scAll[k].Node().Name)
			}
		}
		state := framework.NewCycleState()
		pre, st, _ := ref.RunPreFilterPlugins(ctx, state, pod)
		if got := fwkpick.StatusString(st); got != d.PreFilter {
			t.Fatalf("pod %d: PreFilter %q, upstream %q", i, d.PreFilter, got)
		}
		if !st.IsSuccess() {
			rejectedNodes += int64(len(all))
			continue
		}
		list := all
		if !pre.AllNodes() {
			list = nil
			for _, ni := range all {
				if pre.NodeNames.Has(ni.Node().Name) {
					list = append(list, ni)
				}
			}
			rejectedNodes += int64(len(all) - len(list))
		}
		if d.Start != next%len(list) {
			t.Fatalf("pod %d: started at %d, want %d", i, d.Start, next%len(list))
		}
		toFind := picker.NumFeasibleNodesToFind(len(list))
		var feasible []fwk.NodeInfo
		for k, name := range d.Processed {
			ni := list[(d.Start+k)%len(list)]
			if ni.Node().Name != name {
				t.Fatalf("pod %d: examined %s at step %d, want %s", i, name, k, ni.Node().Name)
			}
			want := fwkpick.StatusString(ref.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni))
			if want != d.Statuses[k] {
				t.Fatalf("pod %d node %s: filter status %q, upstream %q", i, name, d.Statuses[k], want)
			}
			if want == "" {
				feasible = append(feasible, ni)
			} else {
				rejectedNodes++
			}
		}
		if len(feasible) != toFind && len(d.Processed) != len(list) {
			t.Fatalf("pod %d: stopped after %d nodes with %d feasible, want %d or every node", i, len(d.Processed), len(feasible), toFind)
		}
		if len(feasible) == toFind && d.Statuses[len(d.Statuses)-1] != "" {
			t.Fatalf("pod %d: examined nodes past the last feasible one", i)
		}
		next += len(d.Processed)
		examined += len(d.Processed)
		switch len(feasible) {
		case 0:
			if best != "" {
				t.Fatalf("pod %d: no node feasible, chose %s", i, best)
			}
			continue
		case 1:
			if best != feasible[0].Node().Name {
				t.Fatalf("pod %d: chose %s, the one feasible node is %s", i, best, feasible[0].Node().Name)
			}
		default:
			if st := ref.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
				t.Fatalf("pod %d: PreScore: %v", i, st)
			}
			scores, st := ref.RunScorePlugins(ctx, state, pod, feasible)
			if !st.IsSuccess() {
				t.Fatalf("pod %d: Score: %v", i, st)
			}
			top, chosen := int64(-1), int64(-1)
			for _, ns := range scores {
				top = max(top, ns.TotalScore)
				if ns.Name == best {
					chosen = ns.TotalScore
				}
			}
			if chosen != top || d.BestScore != top {
				t.Fatalf("pod %d: chose %s scoring %d (recorded %d), upstream's best score %d", i, best, chosen, d.BestScore, top)
			}
		}
		placed := pod.DeepCopy()
		placed.Spec.NodeName = best
		for _, impl := range []Impl{up, sc} {
			if err := impl.AssumePod(placed); err != nil {
				t.Fatal(err)
			}
		}
		scheduled++
	}
	var sum int64
	counts := map[string]int64{}
	for k, p := range picker.Plugins() {
		sum += rej[k]
		counts[p] = rej[k]
	}
	if sum != rejectedNodes {
		t.Fatalf("rejection counters sum to %d, upstream rejected %d nodes", sum, rejectedNodes)
	}
	for _, p := range []string{names.NodeUnschedulable, names.TaintToleration, names.NodeResourcesFit, names.NodeAffinity, names.InterPodAffinity} {
		if checkPlugins && counts[p] == 0 {
			t.Errorf("no node rejected by %s: %v", p, counts)
		}
	}
	if examined <= pods*picker.NumFeasibleNodesToFind(len(nodes))/2 || scheduled == 0 {
		t.Fatalf("examined %d nodes for %d pods, scheduled %d: the cycles did little", examined, pods, scheduled)
	}
	t.Logf("%d pods, %d scheduled, %d nodes examined; rejections %v", pods, scheduled, examined, counts)
	if cs := np.CarryStats(); checkCarry && (cs.Hits == 0 || cs.PodUpdates == 0) {
		t.Fatalf("constrained: the carry served nothing: %+v", cs)
	} else {
		t.Logf("carry: %+v", cs)
	}
	return np.MemoStats()
}

// rejCluster is 40 nodes of scheduler_perf's node shape (4 CPUs, 32 Gi,
// 110 pods): node i is cordoned if i%5 == 1, tainted NoSchedule if
// i%5 == 2, full (a bound pod requests 3.95 of its 4 CPUs) if i%5 == 3.
func rejCluster(t *testing.T, ctx context.Context) *schedcache.Cache {
	c, err := schedcache.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logger := klog.Background()
	for i := range 40 {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n-%02d", i), Labels: map[string]string{v1.LabelHostname: fmt.Sprintf("n-%02d", i)}},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}}}
		switch i % 5 {
		case 1:
			n.Spec.Unschedulable = true
		case 2:
			n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
		}
		if _, err := c.AddNode(logger, n); err != nil {
			t.Fatal(err)
		}
		if i%5 == 3 {
			if err := c.AddPod(logger, basicPod(fmt.Sprintf("big-%d", i), n.Name, "3950m")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

// basicPod is scheduler_perf's pod-default shape with cpu requested.
func basicPod(name, node, cpu string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns-0", UID: apitypes.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: node, SchedulerName: v1.DefaultSchedulerName, Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("500Mi")}}}}}}
}

// TestFwkPickerRejections: on a cluster where 8 nodes are cordoned, 8
// tainted and 8 full, every pod (no tolerations) examines all 40 nodes
// (fewer than 100) and the counters say exactly which plugin rejected
// them: NodeUnschedulable 8, TaintToleration 8, NodeResourcesFit 8 per
// pod, every other plugin 0. A pod whose node affinity names one node
// (a PreFilterResult) adds the 39 others to NodeAffinity.
func TestFwkPickerRejections(t *testing.T) {
	ctx, cancel := fwkContext(t)
	defer cancel()
	c := rejCluster(t, ctx)
	defer c.Close()
	picker, err := fwkpick.New(fwkpick.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer picker.Close()
	np, err := picker.NewNodePicker(ctx, sim.PickerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rej := make([]int64, len(picker.Plugins()))
	r := rand.New(rand.NewPCG(1, 1))
	const pods = 5
	for i := range pods {
		info, err := scfw.NewPodInfo(basicPod(fmt.Sprintf("p-%d", i), "", "100m"))
		if err != nil {
			t.Fatal(err)
		}
		best, err := np.Pick(ctx, c.Snapshot(), info, r, rej)
		if err != nil || best == "" {
			t.Fatalf("pod %d: %q, %v", i, best, err)
		}
		if k := best[len(best)-2:]; k[1] != '0' && k[1] != '4' && k[1] != '5' && k[1] != '9' {
			t.Fatalf("pod %d placed on %s, a cordoned, tainted or full node", i, best)
		}
	}
	pinned := basicPod("pinned", "", "100m")
	pinned.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n-00"}}}}}}}}
	info, err := scfw.NewPodInfo(pinned)
	if err != nil {
		t.Fatal(err)
	}
	if best, err := np.Pick(ctx, c.Snapshot(), info, r, rej); err != nil || best != "n-00" {
		t.Fatalf("pinned pod: %q, %v", best, err)
	}
	want := map[string]int64{names.NodeUnschedulable: 8 * pods, names.TaintToleration: 8 * pods, names.NodeResourcesFit: 8 * pods, names.NodeAffinity: 39}
	for k, p := range picker.Plugins() {
		if rej[k] != want[p] {
			t.Errorf("%s rejected %d nodes, want %d", p, rej[k], want[p])
		}
	}
	if len(picker.Plugins()) != len(fwkpick.DefaultPlugins) {
		t.Fatalf("plugins %v", picker.Plugins())
	}
	if err := np.Close(); err != nil {
		t.Fatal(err)
	}
}

// fwkSimRun runs the simulator through sim.MainWith with the plugin
// picker on 100 nodes of 10 pods with 2 schedulers and returns its JSON
// report.
func fwkSimRun(t *testing.T, cfg fwkpick.Config, args ...string) *sim.JSONReport {
	t.Helper()
	return fwkSimRunArgs(t, cfg, append([]string{"-nodes", "100", "-pods-per-node", "10", "-schedulers", "2"}, args...)...)
}

// fwkSimRunArgs is fwkSimRun with args only (a preset, say).
func fwkSimRunArgs(t *testing.T, cfg fwkpick.Config, args ...string) *sim.JSONReport {
	t.Helper()
	picker, err := fwkpick.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer picker.Close()
	var stdout, stderr bytes.Buffer
	base := []string{"-json", "-", "-quiet"}
	code := sim.MainWith(context.Background(), append(base, args...), &stdout, &stderr, false, sim.Options{Picker: picker})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep sim.JSONReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	return &rep
}

func rejections(rep *sim.JSONReport) map[string]float64 {
	for _, it := range rep.DataItems {
		if it.Labels["Metric"] == "PluginRejections" {
			return it.Data
		}
	}
	return nil
}

// TestFwkPickerDeterministic: the simulator's deterministic mode with the
// plugin picker gives the same digest, counts and rejections twice; the
// least-allocated picker on the same seed another digest (the plugins
// decided); filtering on one goroutine (parallelism 1) gives the same run
// as on the parallelizer; a real-time run schedules and stays consistent.
func TestFwkPickerDeterministic(t *testing.T) {
	args := []string{"-deterministic", "-duration", "60ms", "-seed", "4"}
	a := fwkSimRun(t, fwkpick.Config{}, args...)
	b := fwkSimRun(t, fwkpick.Config{}, args...)
	seq := fwkSimRun(t, fwkpick.Config{Parallelism: 1}, args...)
	for _, o := range []*sim.JSONReport{b, seq} {
		if a.Digest == "" || a.Digest != o.Digest {
			t.Fatalf("digests %q and %q", a.Digest, o.Digest)
		}
		if a.Counts != o.Counts || !mapsEqualF(rejections(a), rejections(o)) {
			t.Fatalf("counts or rejections differ: %+v %v vs %+v %v", a.Counts, rejections(a), o.Counts, rejections(o))
		}
	}
	if a.Picker != fwkpick.Name || a.Counts.Scheduled == 0 || !a.Consistent {
		t.Fatalf("picker %q, %d scheduled, consistent %v", a.Picker, a.Counts.Scheduled, a.Consistent)
	}
	if rejections(a)[names.InterPodAffinity] == 0 {
		t.Fatalf("no InterPodAffinity rejection in %v", rejections(a))
	}
	var stdout bytes.Buffer
	base := []string{"-nodes", "100", "-pods-per-node", "10", "-schedulers", "2", "-json", "-", "-quiet"}
	if code := sim.Main(context.Background(), append(base, args...), &stdout, &bytes.Buffer{}, false); code != 0 {
		t.Fatalf("least-allocated: exit %d", code)
	}
	var la sim.JSONReport
	if err := json.Unmarshal(stdout.Bytes(), &la); err != nil {
		t.Fatal(err)
	}
	if la.Digest == a.Digest || la.Picker != "least-allocated" {
		t.Fatalf("least-allocated run: digest %q picker %q", la.Digest, la.Picker)
	}
	rt := fwkSimRun(t, fwkpick.Config{}, "-duration", "100ms")
	if rt.Counts.Scheduled == 0 || !rt.Consistent || len(rejections(rt)) != len(fwkpick.DefaultPlugins) {
		t.Fatalf("real time: %+v, rejections %v", rt.Counts, rejections(rt))
	}
}

func mapsEqualF(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if b[k] != a[k] {
			return false
		}
	}
	return true
}

// BenchmarkSchedulingBasic is scheduler_perf's SchedulingBasic
// 5000Nodes_10000Pods with its own templates, in process: 5,000 nodes of
// makeBaseNode's shape (4 CPUs, 32 Gi, 110 pods, no labels but the
// hostname), 1,000 pods scheduled first (untimed), then one measured pod
// of pod-default.yaml's shape (pause, 100m CPU, 500 Mi, container port
// 80) per iteration: NewPodInfo, a scheduling cycle on the cache's latest
// snapshot, AssumePod and AddPod (the informer's confirmation, at once;
// v1.37's scheduler has no FinishBinding). Run it with -benchtime=10000x for the case's
// 10,000 pods. pods/s is the figure to set against scheduler_perf's
// SchedulingThroughput (see docs/loadgen.md for what differs); cpu-ns/op
// (the whole process's CPU time per pod) is less sensitive to a shared
// machine.
func BenchmarkSchedulingBasic(b *testing.B) {
	mk := map[string]func(ctx context.Context) (sim.NodePicker, func(), error){
		"least-allocated": func(ctx context.Context) (sim.NodePicker, func(), error) {
			np, err := sim.LeastAllocated{}.NewNodePicker(ctx, sim.PickerConfig{Sample: 50})
			return np, func() {}, err
		},
		fwkpick.Name: func(ctx context.Context) (sim.NodePicker, func(), error) {
			p, err := fwkpick.New(fwkpick.Config{})
			if err != nil {
				return nil, nil, err
			}
			np, err := p.NewNodePicker(ctx, sim.PickerConfig{})
			return np, func() { p.Close() }, err
		},
	}
	for _, name := range []string{"least-allocated", fwkpick.Name} {
		b.Run("picker="+name+"/nodes=5000", func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			logger := klog.Background()
			np, done, err := mk[name](ctx) // before the nodes: fwkpick.New enables fwkadapter's views
			if err != nil {
				b.Fatal(err)
			}
			defer done()
			defer np.Close()
			c, err := schedcache.New(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for i := range 5000 {
				n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i), Labels: map[string]string{v1.LabelHostname: fmt.Sprintf("node-%04d", i)}},
					Status: v1.NodeStatus{
						Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")},
						Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
				if _, err := c.AddNode(logger, n); err != nil {
					b.Fatal(err)
				}
			}
			r := rand.New(rand.NewPCG(1, 1))
			rej := make([]int64, len(fwkpick.DefaultPlugins))
			seq := 0
			schedule := func() {
				pod := basicPod(fmt.Sprintf("pod-%06d", seq), "", "100m")
				pod.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}}
				seq++
				info, err := scfw.NewPodInfo(pod)
				if err != nil {
					b.Fatal(err)
				}
				best, err := np.Pick(ctx, c.Snapshot(), info, r, rej)
				if err != nil || best == "" {
					b.Fatalf("pick: %q, %v", best, err)
				}
				pod.Spec.NodeName = best
				if err := c.AssumePod(logger, pod); err != nil {
					b.Fatal(err)
				}
				if err := c.AddPod(logger, pod); err != nil {
					b.Fatal(err)
				}
			}
			for range 1000 {
				schedule()
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := takeCPU()
			start := time.Now()
			for range b.N {
				schedule()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pods/s")
			cpu.report(b, b.N)
		})
	}
}

// Misuse gives typed errors, never a panic: a zero NodePicker, Pick after
// Close, nil arguments, a counter slice of the wrong length, a node
// picker from a closed Picker, and New with bad settings.
func TestFwkPickerErrors(t *testing.T) {
	ctx := context.Background()
	info, err := scfw.NewPodInfo(basicPod("e", "", "100m"))
	if err != nil {
		t.Fatal(err)
	}
	snap := schedcache.NewEmptySnapshot()
	r := rand.New(rand.NewPCG(1, 1))
	var zero fwkpick.NodePicker
	if _, err := zero.Pick(ctx, snap, info, r, nil); !errors.Is(err, fwkpick.ErrConfig) {
		t.Fatalf("zero NodePicker: %v", err)
	}
	if err := zero.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := fwkpick.New(fwkpick.Config{})
	if err != nil {
		t.Fatal(err)
	}
	np, err := p.NewFramework(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rej := make([]int64, len(p.Plugins()))
	if _, err := np.Pick(ctx, nil, info, r, rej); err == nil {
		t.Fatal("nil snapshot accepted")
	}
	if _, err := np.Pick(ctx, snap, info, r, rej[:1]); err == nil {
		t.Fatal("short counter slice accepted")
	}
	if best, err := np.Pick(ctx, snap, info, r, rej); err != nil || best != "" {
		t.Fatalf("empty snapshot: %q, %v", best, err)
	}
	if err := p.Close(); err != nil { // closes np too
		t.Fatal(err)
	}
	if _, err := np.Pick(ctx, snap, info, r, rej); !errors.Is(err, fwkpick.ErrClosed) {
		t.Fatalf("Pick after Close: %v", err)
	}
	if _, err := p.NewFramework(ctx); !errors.Is(err, fwkpick.ErrClosed) {
		t.Fatalf("NewFramework after Close: %v", err)
	}
	for _, cfg := range []fwkpick.Config{{Plugins: []string{"Nope"}}, {Plugins: []string{}}, {PercentageOfNodesToScore: 101}, {Parallelism: -1}} {
		if _, err := fwkpick.New(cfg); !errors.Is(err, fwkpick.ErrConfig) {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}

// TestFwkPickerTaintsAffinityPreset: on the taints-affinity preset (small)
// the plugin mode sees what the cluster shape and pod mix create: cordoned
// nodes (NodeUnschedulable), NoSchedule and NoExecute taints
// (TaintToleration) and node selectors (NodeAffinity) reject nodes, and
// the run stays consistent. On the standard shape the same run has no
// such rejections: the counts come from the shape.
func TestFwkPickerTaintsAffinityPreset(t *testing.T) {
	args := []string{"-preset", "taints-affinity", "-nodes", "100", "-pods-per-node", "5", "-schedulers", "2", "-deterministic", "-duration", "40ms"}
	rep := fwkSimRun(t, fwkpick.Config{}, args...)
	rej := rejections(rep)
	if rep.Counts.Scheduled == 0 || !rep.Consistent {
		t.Fatalf("%d scheduled, consistent %v", rep.Counts.Scheduled, rep.Consistent)
	}
	t.Logf("%d pods scheduled; nodes rejected: %v", rep.Counts.Scheduled, rej)
	for _, p := range []string{names.NodeUnschedulable, names.TaintToleration, names.NodeAffinity} {
		if rej[p] == 0 {
			t.Errorf("no %s rejection in %v", p, rej)
		}
	}
	std := rejections(fwkSimRun(t, fwkpick.Config{}, "-deterministic", "-duration", "40ms"))
	for _, p := range []string{names.NodeUnschedulable, names.TaintToleration, names.NodeAffinity} {
		if std[p] != 0 {
			t.Errorf("standard shape: %s rejected %v nodes", p, std[p])
		}
	}
}

// TestFwkPickerCarrySameRun: the carry (fwkpick/carry.go: InterPodAffinity's
// and PodTopologySpread's PreFilter state advanced from cycle to cycle,
// InterPodAffinity's PreScore on the contributing nodes) changes no
// decision: the same digest, counts and rejections with it off and on,
// with the memo on and off, on the scheduler_perf presets with inter-pod
// terms and spread constraints (scaled down), on a scenario whose pods
// repeat such terms while pods are deleted and updated and nodes change
// (testdata/carry-scenario.yaml: zone moves, NotReady, drains, nodes
// added), and on a generated workload; and the carry served cycles
// (its counters, in the report), probing contributing nodes in the
// scenario.
func TestFwkPickerCarrySameRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		noMemo bool
		args   []string
	}{
		{"perf-pod-anti-affinity", false, []string{"-preset", "perf-pod-anti-affinity", "-scale", "0.03"}},
		{"perf-topology-spreading", false, []string{"-preset", "perf-topology-spreading", "-scale", "0.03"}},
		{"scenario", false, []string{"-scenario", "testdata/carry-scenario.yaml"}},
		{"scenario-memo-off", true, []string{"-scenario", "testdata/carry-scenario.yaml"}},
		{"generated", false, []string{"-nodes", "100", "-pods-per-node", "10", "-schedulers", "2", "-deterministic", "-duration", "60ms", "-seed", "9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off := fwkSimRunArgs(t, fwkpick.Config{NoMemo: tc.noMemo, NoCarry: true}, tc.args...)
			on := fwkSimRunArgs(t, fwkpick.Config{NoMemo: tc.noMemo}, tc.args...)
			if off.Digest == "" || off.Digest != on.Digest {
				t.Fatalf("digest carry off %q, on %q", off.Digest, on.Digest)
			}
			if off.Counts != on.Counts || !mapsEqualF(rejections(off), rejections(on)) {
				t.Fatalf("counts or rejections differ: %+v %v vs %+v %v", off.Counts, rejections(off), on.Counts, rejections(on))
			}
			got := map[string]int64{}
			for _, c := range off.PickerCounters {
				if strings.HasPrefix(c.Name, "carry") {
					t.Fatalf("carry off, counters %v", off.PickerCounters)
				}
			}
			for _, c := range on.PickerCounters {
				got[c.Name] = c.Value
			}
			if tc.name != "generated" && (got["carry hits"] == 0 || got["carry pod updates"] == 0 || on.Counts.Scheduled == 0) {
				t.Fatalf("carry on served nothing: %v, %d scheduled", on.PickerCounters, on.Counts.Scheduled)
			}
			if strings.HasPrefix(tc.name, "scenario") && (got["carry score hits"] == 0 || got["carry probes"] <= got["carry score hits"]) {
				t.Fatalf("carry on probed no contributing node: %v", on.PickerCounters)
			}
			t.Logf("%d scheduled; %v", on.Counts.Scheduled, on.PickerCounters)
		})
	}
}

// TestFwkPickerMemoSameRun: the memo (and its split, for the pods with
// inter-pod terms or spread constraints) changes no decision: deterministic
// runs of the scheduler_perf presets (scaled down) and of a generated
// workload (varied pods, images, affinities; two schedulers) give the
// same digest, counts and rejections with the memo off and on, and the
// memo served verdicts in the presets (its counters, in the report); the
// generated pods rarely share a signature, so there it mostly computes.
func TestFwkPickerMemoSameRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"perf-scheduling-basic", []string{"-preset", "perf-scheduling-basic", "-scale", "0.05"}},
		{"perf-node-affinity", []string{"-preset", "perf-node-affinity", "-scale", "0.03"}},
		{"perf-topology-spreading", []string{"-preset", "perf-topology-spreading", "-scale", "0.03"}},
		{"perf-pod-anti-affinity", []string{"-preset", "perf-pod-anti-affinity", "-scale", "0.03"}},
		{"generated", []string{"-nodes", "100", "-pods-per-node", "10", "-schedulers", "2", "-deterministic", "-duration", "60ms", "-seed", "9"}},
		// The generator's standard pods of 200 apps: 200 signatures, more
		// than a fixed 32 tables could hold.
		{"scheduling-basic-5000", []string{"-preset", "scheduling-basic-5000", "-nodes", "1000", "-initial-pods", "0", "-pods", "1000", "-deterministic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off := fwkSimRunArgs(t, fwkpick.Config{NoMemo: true}, tc.args...)
			on := fwkSimRunArgs(t, fwkpick.Config{}, tc.args...)
			if off.Digest == "" || off.Digest != on.Digest {
				t.Fatalf("digest memo off %q, on %q", off.Digest, on.Digest)
			}
			if off.Counts != on.Counts || !mapsEqualF(rejections(off), rejections(on)) {
				t.Fatalf("counts or rejections differ: %+v %v vs %+v %v", off.Counts, rejections(off), on.Counts, rejections(on))
			}
			for _, c := range off.PickerCounters {
				if strings.HasPrefix(c.Name, "memo") || strings.Contains(c.Name, "filter") || strings.HasPrefix(c.Name, "score") {
					t.Fatalf("memo off, counters %v", off.PickerCounters)
				}
			}
			got := map[string]int64{}
			for _, c := range on.PickerCounters {
				got[c.Name] = c.Value
			}
			if (got["filter hits"] == 0 && tc.name != "generated") || got["memo cycles"] == 0 || on.Counts.Scheduled == 0 {
				t.Fatalf("memo on served nothing: %v, %d scheduled", on.PickerCounters, on.Counts.Scheduled)
			}
			// 1,000 pods of 200 signatures on 1,000 nodes: every table's
			// first cycle misses (about 200 x 420 of 420,000 verdicts);
			// with 32 tables used first-in first-out 7% were reused.
			if h, m := got["filter hits"], got["filter misses"]; tc.name == "scheduling-basic-5000" && 10*h < 3*(h+m) {
				t.Fatalf("200 apps' signatures: filter hits %d, misses %d: want at least 30%% reused", h, m)
			}
			t.Logf("%d scheduled; memo %v", on.Counts.Scheduled, on.PickerCounters)
		})
	}
}
