package bench

// loadgen-fwk's PostFilter against upstream's: a perf-preemption-basic run
// with the plugin picker, every Preempt checked against DefaultPreemption
// run by a framework built here on upstream v1.37.2's own cache and
// snapshot, loaded with the same state.

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	upcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/bench/fwkpick"
	scfw "github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim"
)

// checkPicker is fwkpick's Picker whose node pickers check each
// PostFilter against upstream's (see checkNode). Contract: as the
// Picker's; the counters are guarded by mu.
type checkPicker struct {
	*fwkpick.Picker
	t   *testing.T                   // immutable
	rec *metrics.MetricAsyncRecorder // immutable: the reference frameworks' recorder
	mu  sync.Mutex                   // guards the counters
	// checked: PostFilters compared; nominated: of them, with a node.
	checked, nominated, victims int
}

func (c *checkPicker) NewNodePicker(ctx context.Context, _ sim.PickerConfig) (sim.NodePicker, error) {
	np, err := c.NewFramework(ctx)
	if err != nil {
		return nil, err
	}
	np.Record = true
	return &checkNode{NodePicker: np, c: c, nominated: map[types.UID]*v1.Pod{}}, nil
}

// checkNode is a node picker checking its PostFilters. Owned by its
// scheduler, as the NodePicker it wraps.
type checkNode struct {
	*fwkpick.NodePicker
	c         *checkPicker          // immutable
	nominated map[types.UID]*v1.Pod // the nominations it was told, for the reference
}

func (n *checkNode) Nominate(pod *v1.Pod, node string) {
	n.NodePicker.Nominate(pod, node)
	if node == "" {
		delete(n.nominated, pod.UID)
		return
	}
	cp := *pod
	cp.Status.NominatedNodeName = node
	n.nominated[pod.UID] = &cp
}

// Preempt runs fwkpick's PostFilter, then upstream's on the same state
// with the same seed, and compares them.
func (n *checkNode) Preempt(ctx context.Context, snap *schedcache.Snapshot, info *scfw.PodInfo, r *rand.Rand) (sim.Preemption, error) {
	out, err := n.NodePicker.Preempt(ctx, snap, info, r)
	if err != nil {
		return out, err
	}
	got := n.LastPreemption
	want := n.reference(ctx, snap, info.Pod(), got.Seed)
	if got.Node != want.node || got.Status != want.status || !slices.Equal(got.Victims, want.victims) || !slices.Equal(got.Cleared, want.cleared) {
		n.c.t.Errorf("pod %s, seed %d: fwkpick vs upstream:\n  node %q / %q\n  status %q / %q\n  victims %v / %v\n  cleared %v / %v",
			got.Pod, got.Seed, got.Node, want.node, got.Status, want.status, got.Victims, want.victims, got.Cleared, want.cleared)
	}
	if len(out.Victims) != len(got.Victims) || out.Node != got.Node {
		n.c.t.Errorf("pod %s: Preempt returned node %q and %d victims, its record %q and %v", got.Pod, out.Node, len(out.Victims), got.Node, got.Victims)
	}
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	n.c.checked++
	if out.Node != "" {
		n.c.nominated++
	}
	n.c.victims += len(out.Victims)
	return out, nil
}

// refOutcome is what upstream's PostFilter did.
type refOutcome struct {
	node, status     string
	victims, cleared []string
}

// reference runs upstream's DefaultPreemption for pod on a cache and
// snapshot of upstream's loaded with snap's nodes and pods (in snap's
// order), the nominations n was told, and the same seed.
func (n *checkNode) reference(ctx context.Context, snap *schedcache.Snapshot, pod *v1.Pod, seed uint64) refOutcome {
	t := n.c.t
	logger := klog.Background()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	uc := upcache.New(cctx, nil, false, false)
	for i := 0; i < snap.NumNodes(); i++ {
		ni := snap.At(i)
		uc.AddNode(logger, ni.Node())
		for k := 0; k < ni.NumPods(); k++ {
			if err := uc.AddPod(logger, ni.PodAt(k).Pod()); err != nil {
				t.Fatalf("upstream AddPod: %v", err)
			}
		}
	}
	us := upcache.NewEmptySnapshot()
	if err := uc.UpdateSnapshot(logger, us); err != nil {
		t.Fatal(err)
	}
	nom := &i37Nominator{byNode: map[string][]fwk.PodInfo{}}
	for _, p := range n.nominated {
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		nom.byNode[p.Status.NominatedNodeName] = append(nom.byNode[p.Status.NominatedNodeName], pi)
	}
	var mu sync.Mutex
	var victims, cleared []string
	inf := fwkpick.PreemptionInformers()
	if err := inf.Core().V1().Pods().Informer().GetIndexer().Add(pod); err != nil {
		t.Fatal(err)
	}
	profile, registry := n.c.Profile()
	registry[names.DefaultPreemption] = fwkpick.PreemptionFactory(&seed, inf, func(pl *defaultpreemption.DefaultPreemption) {
		pl.Executor.PreemptPod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, v *v1.Pod, _ string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			victims = append(victims, v.Namespace+"/"+v.Name)
			return false, nil
		}
	})
	def, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range def.Profiles[0].PluginConfig {
		if pc.Name == names.DefaultPreemption {
			profile.PluginConfig = append(profile.PluginConfig, pc)
		}
	}
	profile.Plugins.MultiPoint.Enabled = append(profile.Plugins.MultiPoint.Enabled, config.Plugin{Name: names.DefaultPreemption})
	cs := fake.NewClientset()
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		cleared = append(cleared, a.GetNamespace()+"/"+a.(k8stesting.PatchAction).GetName())
		return true, &v1.Pod{}, nil
	})
	done, stop := context.WithCancel(ctx)
	stop() // the default recorder is replaced
	fw, err := frameworkruntime.NewFramework(done, registry, profile,
		frameworkruntime.WithSnapshotSharedLister(us),
		frameworkruntime.WithMutableSnapshotLister(us),
		frameworkruntime.WithInformerFactory(n.c.Informers()),
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithPodNominator(nom),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
		frameworkruntime.WithMetricsRecorder(n.c.rec),
		frameworkruntime.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	// The failed cycle's diagnosis, as findNodesThatFitPod makes it.
	state := framework.NewCycleState()
	m := framework.NewDefaultNodeToStatus()
	pre, st, _ := fw.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() {
		m.SetAbsentNodesStatus(st)
	} else {
		if !pre.AllNodes() {
			t.Fatalf("the preset's pods have no PreFilter result: %v", pre)
		}
		nodes, err := us.NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		for _, ni := range nodes {
			if st := fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni); !st.IsSuccess() {
				m.Set(ni.Node().Name, st)
			}
		}
	}
	res, st := fw.RunPostFilterPlugins(ctx, state, pod, fwkpick.OrderedStatuses(m))
	out := refOutcome{status: fwkpick.StatusString(st)}
	if res != nil && res.NominatingInfo != nil {
		out.node = res.NominatedNodeName
	}
	mu.Lock()
	out.victims, out.cleared = victims, cleared
	mu.Unlock()
	slices.Sort(out.victims)
	slices.Sort(out.cleared)
	return out
}

// TestPreemptionMatchesUpstream: loadgen-fwk's perf-preemption-basic (at
// -scale 0.01: 50 nodes, 200 low-priority pods, 50 high-priority pods
// that each fit only by preempting; 0.1 without -short, where the dry
// run shortlists 100 of 500 nodes from a random offset) runs upstream's
// DefaultPreemption for every measured pod through fwkpick; each
// PostFilter's nominated node, status, victims and cleared nominations
// equal those of upstream's own PostFilter, given the same seed, on
// upstream's cache loaded with the same state and nominations. The
// victims are deleted, the pods bound, and two runs give one digest.
func TestPreemptionMatchesUpstream(t *testing.T) {
	scale, pods := "0.01", 50
	if !testing.Short() {
		scale, pods = "0.1", 500
	}
	ctx, cancel := fwkContext(t)
	defer cancel()
	run := func(check bool) *sim.JSONReport {
		p, err := fwkpick.New(fwkpick.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var picker sim.Picker = p
		var cp *checkPicker
		if check {
			stop := make(chan struct{})
			rec := metrics.NewMetricsAsyncRecorder(10, 10*time.Millisecond, stop)
			defer func() { close(stop); <-rec.IsStoppedCh }()
			cp = &checkPicker{Picker: p, t: t, rec: rec}
			picker = cp
		}
		var stdout, stderr bytes.Buffer
		args := []string{"-preset", "perf-preemption-basic", "-scale", scale, "-json", "-", "-quiet"}
		if code := sim.MainWith(ctx, args, &stdout, &stderr, false, sim.Options{Picker: picker}); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var rep sim.JSONReport
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if check {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			t.Logf("%d PostFilters compared, %d nominated a node, %d victims", cp.checked, cp.nominated, cp.victims)
			if cp.nominated != pods || cp.victims != 4*pods {
				t.Errorf("want %d preemptions of 4 victims each: %d PostFilters, %d nominated, %d victims", pods, cp.checked, cp.nominated, cp.victims)
			}
		}
		return &rep
	}
	a := run(true)
	var m *sim.JSONPhase
	for i := range a.Phases {
		if a.Phases[i].Name == "measure" {
			m = &a.Phases[i]
		}
	}
	if m == nil || m.Scheduled != int64(pods) || m.Preemptions != int64(pods) || m.Victims != int64(4*pods) || !a.Consistent {
		t.Fatalf("measured phase %+v, consistent %v", m, a.Consistent)
	}
	if b := run(false); b.Digest != a.Digest {
		t.Fatalf("digests differ: %s, %s", a.Digest, b.Digest)
	}
}
