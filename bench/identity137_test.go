package bench

// Issue 27, part 5: upstream v1.37.2's plugins decide identically on
// schedcache's snapshots (kube/fwkadapter) and on upstream's. Each side is
// a cache, the one snapshot object the framework gets as both its shared
// and its mutable lister (upstream's *Snapshot; a fwkadapter.Mutable), the
// cache as PodGroupManager, and upstream's in-tree plugins.
//
//   - TestIdentity137Preemption: DefaultPreemption's PostFilter, through
//     the framework: the filter verdicts it starts from, every candidate
//     of the dry run (victims and PDB violations, or the node's status),
//     the PostFilterResult, the status and the victims the executor is
//     handed.
//   - TestIdentity137PodGroupPreemption: DefaultPreemption's
//     PodGroupPostFilter (GenericWorkload): StartMutations, the victims'
//     RemovePod, a pod-group scheduling function over the mutated
//     snapshot (snapshot AssumePod/ForgetPod), the reprieves, EndMutations.
//   - TestIdentity137MutableSteps: the mutable lister alone under random
//     sequences of those calls, every lister answer compared after every
//     step.
//   - TestIdentity137GangScheduling: GangScheduling's PreEnqueue, Permit
//     (with the framework's waiting pods), PlacementFeasible and queueing
//     hints on pod groups and composites.
//
// Where upstream's snapshot behaves in ways that are easy to miss,
// TestIdentity137Minimal asks both the smallest question that shows it,
// and every test above checks it strictly:
//   - upstream's snapshot mutates the NodeInfos it handed out in place
//     (pod-group preemption's reprieves filter on the nodes listed at the
//     session's start): fwkadapter.Mutable's LiveNodeInfo handles read the
//     same;
//   - upstream's StartMutations zeroes every image's node count in the
//     session;
//   - a snapshot ForgetPod of a pod that shared a host port with another
//     pod of the node drops the port (UsedPorts is a set);
//   - pod-group listers a plugin keeps (PodGroups(), CompositePodGroups()
//     of the snapshot and of fwkadapter.CacheGroups) read the snapshot as
//     it is now: plugins built before the cluster is loaded (as the
//     scheduler builds them) see its pod groups.

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	uputil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/schedcache/schedcache/workload"
)

// i37Cases are the gate combinations of a test: short runs the first n.
func i37Cases(short int) []i37Gates {
	all := []i37Gates{
		{},
		{gw: true},
		{gw: true, cpg: true, fastPath: true},
		{gw: true, cpg: true},
		{gw: true, fastPath: true},
		{fastPath: true},
	}
	if testing.Short() {
		return all[:short]
	}
	return all
}

// ---- DefaultPreemption, PostFilter ----

// i37PodOutcome is what one side decided for one preemptor pod.
type i37PodOutcome struct {
	text      string                         // everything but the choice among tied candidates
	choice    string                         // nominated node, status and the victims handed to the executor
	nominated string                         // "" without one
	cands     map[string]*extenderv1.Victims // the dry run's candidates
	victims   []*v1.Pod                      // handed to the executor
}

// preemptPod runs a scheduling cycle's Filter and, as the scheduler does
// on failure, PostFilter for pod on s, and the evaluator's dry run over
// every potential node (offset 0, every node a candidate).
func (s *i37Side) preemptPod(t *testing.T, ctx context.Context, env *i37Env, pod *v1.Pod) i37PodOutcome {
	t.Helper()
	s.mustRefresh(t)
	var b strings.Builder
	state := framework.NewCycleState()
	m := framework.NewDefaultNodeToStatus()
	nodes, err := s.lister.NodeInfos().List()
	if err != nil {
		t.Fatalf("%s: List: %v", s.name, err)
	}
	pre, st, _ := s.fw.RunPreFilterPlugins(ctx, state, pod)
	fmt.Fprintf(&b, "prefilter %s\n", i37Status(st))
	if !st.IsSuccess() {
		m.SetAbsentNodesStatus(st)
	} else {
		if pre != nil && !pre.AllNodes() {
			m.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) PreFilter"))
		}
		verdicts := map[string]string{}
		for _, ni := range nodes {
			name := ni.Node().Name
			if pre != nil && !pre.AllNodes() && !pre.NodeNames.Has(name) {
				continue
			}
			st := s.fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
			if !st.IsSuccess() {
				m.Set(name, st)
			}
			verdicts[name] = i37Status(st)
		}
		for _, name := range slices.Sorted(maps.Keys(verdicts)) {
			fmt.Fprintf(&b, "filter %s %s\n", name, verdicts[name])
		}
	}
	out := i37PodOutcome{cands: map[string]*extenderv1.Victims{}}
	potential, err := m.NodesForStatusCode(s.lister.NodeInfos(), fwk.Unschedulable)
	if err != nil {
		t.Fatalf("%s: NodesForStatusCode: %v", s.name, err)
	}
	if len(potential) > 0 {
		pdbs, err := env.factory.Policy().V1().PodDisruptionBudgets().Lister().List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		cands, statuses, err := s.dp.Evaluator.DryRunPreemption(ctx, state, pod, potential, pdbs, 0, int32(len(potential)))
		fmt.Fprintf(&b, "dryrun err=%v\n", err)
		for _, c := range cands {
			out.cands[c.Name()] = c.Victims()
		}
		names := make([]string, len(potential))
		for i, ni := range potential {
			names[i] = ni.Node().Name
		}
		slices.Sort(names)
		for _, name := range names {
			if v, ok := out.cands[name]; ok {
				// Sorted: a pod group's pods come in its state's
				// ScheduledPods order, which is a map's upstream.
				fmt.Fprintf(&b, "candidate %s victims=%s pdb=%d\n", name, i37Keys(i37SortedPods(v.Pods)), v.NumPDBViolations)
			} else {
				fmt.Fprintf(&b, "no candidate %s %s\n", name, i37Status(statuses.Get(name)))
			}
		}
	}
	res, st := s.fw.RunPostFilterPlugins(ctx, state, pod, m)
	if res != nil && res.NominatingInfo != nil {
		out.nominated = res.NominatedNodeName
		out.choice = fmt.Sprintf("postfilter nominated=%q mode=%d ", res.NominatedNodeName, res.NominatingMode)
	} else {
		out.choice = "postfilter result=nil "
	}
	out.victims = s.victims.take()
	out.choice += fmt.Sprintf("status=%s victims=%s", i37Status(st), i37Keys(out.victims))
	out.text = b.String()
	return out
}

// i37TieKey is what pickOneNodeForPreemption ranks a candidate by, in
// order: PDB violations, highest victim priority, sum of priorities,
// number of victims, earliest start time among the highest-priority
// victims. Two candidates with the same key are a tie upstream breaks by
// map iteration order (at random, on both sides alike).
func i37TieKey(v *extenderv1.Victims) string {
	if v == nil || len(v.Pods) == 0 {
		return "<none>"
	}
	var sum int64
	for _, p := range v.Pods {
		sum += int64(podPriority37(p)) + int64(math.MaxInt32+1)
	}
	t := uputil.GetEarliestPodStartTime(v)
	return fmt.Sprintf("%d/%d/%d/%d/%v", v.NumPDBViolations, podPriority37(v.Pods[0]), sum, len(v.Pods), t)
}

func podPriority37(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// i37Preemptor returns preemptor k: a pod that fits on no node (30 cores),
// of priority 25 or 35, with, by k, a host port and required
// anti-affinity, a zone selector (other zones are unresolvable), a
// nominated node holding a pod terminating by preemption (not eligible),
// preemptionPolicy Never (not eligible), or 50 cores (many victims).
func i37Preemptor(w *i37World, k int) *v1.Pod {
	p := workload.NewPod(w.r, fmt.Sprintf("preemptor-%d", k), "")
	i37Big(p, 30)
	prio := int32(35)
	switch k % 6 {
	case 0:
		prio = 25
	case 1:
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{HostPort: workload.HostPortMin + int32(k), ContainerPort: 80}}
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{workload.LabelApp: "app-001"}}, TopologyKey: v1.LabelHostname}}}}
	case 2:
		p.Spec.NodeSelector = map[string]string{v1.LabelTopologyZone: workload.ZoneB}
	case 3:
		p.Status.NominatedNodeName = w.terminating
	case 4:
		never := v1.PreemptNever
		p.Spec.PreemptionPolicy = &never
	case 5:
		i37Big(p, 50)
	}
	p.Spec.Priority = &prio
	return p
}

// applyPreemption makes the outcome happen in both caches: the victims
// leave and the preemptor is assumed on the nominated node.
func i37Apply(t *testing.T, pod *v1.Pod, o i37PodOutcome, sides ...*i37Side) {
	t.Helper()
	for _, s := range sides {
		for _, v := range o.victims {
			if err := s.cache.RemovePod(v); err != nil {
				t.Fatalf("%s: RemovePod %s: %v", s.name, i37Key(v), err)
			}
		}
		if o.nominated != "" {
			placed := pod.DeepCopy()
			placed.Spec.NodeName = o.nominated
			if err := s.cache.AssumePod(placed); err != nil {
				t.Fatalf("%s: AssumePod %s: %v", s.name, i37Key(placed), err)
			}
		}
	}
}

// TestIdentity137Preemption: for preemptors that fit nowhere, upstream's
// DefaultPreemption (PostFilter through the framework; the dry run on
// every potential node) gives the same filter verdicts, candidates,
// victims per candidate, PostFilterResult, status and actuated victims on
// a fwkadapter.Mutable as on upstream's snapshot, the cluster evolving by
// each outcome (victims removed, the preemptor assumed). Clusters of 150
// nodes (500 without -short) of pods of priorities 0 to 30, some
// terminating by preemption, PDBs, nominated pods; with GenericWorkload,
// pod groups of both disruption modes and priorities, and composites.
// The plugins are built once per case, after the cluster is loaded (see
// TestIdentity137StartupListers for plugins built before).
func TestIdentity137Preemption(t *testing.T) {
	nodes, preemptors := 150, 6
	if !testing.Short() {
		nodes, preemptors = 500, 12
	} else if raceEnabled {
		nodes = 60
	}
	for ci, g := range i37Cases(3) {
		t.Run(g.String(), func(t *testing.T) {
			i37SetGates(t, g)
			ctx, cancel := i37Context(t)
			defer cancel()
			w := i37BuildWorld(int64(100+ci), nodes, g)
			env := i37NewEnv(t, w)
			up, sc := i37NewSide(t, Upstream, g), i37NewSide(t, SchedCache, g)
			for _, s := range []*i37Side{up, sc} {
				s.load(t, w)
				s.mustRefresh(t)
				s.build(t, ctx, env)
			}
			stats := map[string]int{}
			for k := range preemptors {
				pod := i37Preemptor(w, k)
				env.addPod(t, pod)
				a := up.preemptPod(t, ctx, env, pod)
				b := sc.preemptPod(t, ctx, env, pod)
				if d := i37Diff(a.text, b.text, 6); len(d) > 0 {
					t.Fatalf("preemptor %d (%s): upstream vs schedcache:\n  %s", k, pod.Name, strings.Join(d, "\n  "))
				}
				if a.choice != b.choice {
					if a.nominated == "" || b.nominated == "" || i37TieKey(a.cands[a.nominated]) != i37TieKey(a.cands[b.nominated]) {
						t.Fatalf("preemptor %d (%s): upstream vs schedcache:\n  %s\n  %s", k, pod.Name, a.choice, b.choice)
					}
					stats["tie"]++
				}
				if a.nominated != "" {
					stats["nominated"]++
					stats["victims"] += len(a.victims)
				} else {
					stats["not-nominated"]++
				}
				for _, c := range a.cands {
					stats["candidates"]++
					stats["pdb-violating-candidates"] += b2i37(c.NumPDBViolations > 0)
					for _, v := range c.Pods {
						if v.Spec.SchedulingGroup != nil {
							stats["candidate-group-victims"]++
						}
					}
				}
				i37Apply(t, pod, a, up, sc)
			}
			t.Logf("%d nodes, %d preemptors identical: %v", len(w.nodes), preemptors, stats)
			if stats["nominated"] == 0 || stats["not-nominated"] == 0 {
				t.Errorf("expected both nominated preemptors and others: %v", stats)
			}
			if g.gw && stats["candidate-group-victims"] == 0 {
				t.Errorf("no pod-group member was a candidate's victim: %v", stats)
			}
		})
	}
}

// ---- DefaultPreemption, PodGroupPostFilter ----

// i37Assignment is a fwk.ProposedAssignment, as the scheduler's
// algorithmResult: the queued pod (no node), its PodInfo, the node, the
// pod's cycle state.
type i37Assignment struct {
	pod   *v1.Pod
	pi    fwk.PodInfo
	node  string
	state fwk.CycleState
}

func (a *i37Assignment) GetPod() *v1.Pod               { return a.pod }
func (a *i37Assignment) GetPodInfo() fwk.PodInfo       { return a.pi }
func (a *i37Assignment) GetNodeName() string           { return a.node }
func (a *i37Assignment) GetCycleState() fwk.CycleState { return a.state }

// scheduleOne is the scheduling algorithm for one pod: PreFilter, Filter
// (with nominated pods) on every node the snapshot lists now, PreScore
// and Score; the highest total wins, ties to the smaller name.
func (s *i37Side) scheduleOne(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (string, *fwk.Status) {
	pre, st, _ := s.fw.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() {
		return "", st
	}
	nodes, err := s.lister.NodeInfos().List()
	if err != nil {
		return "", fwk.AsStatus(err)
	}
	var feasible []fwk.NodeInfo
	for _, ni := range nodes {
		if pre != nil && !pre.AllNodes() && !pre.NodeNames.Has(ni.Node().Name) {
			continue
		}
		if s.fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return "", fwk.NewStatus(fwk.Unschedulable, "no feasible node")
	}
	if st := s.fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return "", st
	}
	scores, st := s.fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return "", st
	}
	best, bestScore := "", int64(0)
	for _, ns := range scores {
		if best == "" || ns.TotalScore > bestScore || (ns.TotalScore == bestScore && ns.Name < best) {
			best, bestScore = ns.Name, ns.TotalScore
		}
	}
	return best, nil
}

// pgSchedulingFunc is the pod-group scheduling algorithm the scheduler
// hands PodGroupPostFilter (podGroupSchedulingDefaultAlgorithm, without
// placements): PlacementFeasible, then each unscheduled pod scheduled on
// the snapshot as it is, assumed in the snapshot (AssumePod of upstream's
// PodInfo) and reserved, PlacementFeasible after each; at the end every
// assumed pod is unreserved and forgotten, last first. trace gets every
// decision.
func (s *i37Side) pgSchedulingFunc(pgInfo *framework.PodGroupInfo, trace *strings.Builder) fwk.PodGroupSchedulingFunc {
	return func(ctx context.Context) (_ *fwk.PodGroupAssignments, status *fwk.Status) {
		var undo []func()
		defer func() {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
			fmt.Fprintf(trace, "  => %s\n", i37Status(status))
		}()
		pgState, err := s.lister.PodGroupStates().Get(pgInfo.Namespace, pgInfo.Name)
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		progress := framework.PlacementProgress{Remaining: len(pgInfo.UnscheduledPods), Scheduled: pgState.ScheduledPodsCount()}
		pgCycle := framework.NewCycleState()
		placement := framework.NewCycleState()
		placement.SetPodGroupSchedulingCycle(pgCycle)
		status = s.fw.RunPlacementFeasiblePlugins(ctx, placement, pgInfo, progress)
		fmt.Fprintf(trace, "  feasible %+v %s\n", progress, i37Status(status))
		if status.IsError() || status.Code() == fwk.Unschedulable {
			return &fwk.PodGroupAssignments{}, fwk.NewStatus(fwk.Unschedulable, status.Reasons()...)
		}
		var out []fwk.ProposedAssignment
		for _, pod := range pgInfo.UnscheduledPods {
			state := framework.NewCycleState()
			state.SetPodGroupSchedulingCycle(pgCycle)
			state.SetPlacementCycleState(placement)
			node, st := s.scheduleOne(ctx, state, pod)
			fmt.Fprintf(trace, "  pod %s -> %q %s\n", i37Key(pod), node, i37Status(st))
			progress.Remaining--
			if st.IsSuccess() {
				assumed := pod.DeepCopy()
				assumed.Spec.NodeName = node
				pi, err := framework.NewPodInfo(assumed)
				if err != nil {
					return nil, fwk.AsStatus(err)
				}
				if err := s.snapAssume(pi); err != nil {
					return nil, fwk.AsStatus(fmt.Errorf("snapshot AssumePod: %w", err))
				}
				undo = append(undo, func() {
					if err := s.snapForget(assumed); err != nil {
						fmt.Fprintf(trace, "  snapshot ForgetPod %s: %v\n", i37Key(assumed), err)
					}
				})
				if rst := s.fw.RunReservePluginsReserve(ctx, state, assumed, node); !rst.IsSuccess() {
					return nil, rst
				}
				undo = append(undo, func() { s.fw.RunReservePluginsUnreserve(ctx, state, assumed, node) })
				qpi, err := framework.NewPodInfo(pod)
				if err != nil {
					return nil, fwk.AsStatus(err)
				}
				out = append(out, &i37Assignment{pod: pod, pi: qpi, node: node, state: state})
				progress.Scheduled++
			}
			status = s.fw.RunPlacementFeasiblePlugins(ctx, placement, pgInfo, progress)
			if status.IsError() || status.Code() == fwk.Unschedulable {
				break
			}
		}
		if status.IsWait() || status.IsError() || (status.IsSuccess() && len(out) == 0) {
			status = fwk.NewStatus(fwk.Unschedulable, status.Reasons()...)
		}
		return &fwk.PodGroupAssignments{ProposedAssignments: out}, status
	}
}

// i37Gang is a preemptor pod group and its unscheduled members.
type i37Gang struct {
	pg      *schedulingv1beta1.PodGroup
	members []*v1.Pod
}

// i37Gangs returns the world's preemptor groups, in its first namespace:
// gang-k of priority 35, gang MinCount its member count (3 or 4), members
// of 24 cores (one fits in a node's free space only after preemption);
// for k%4 == 2 of priority 25 with its first member nominated to a node
// holding a pod terminating by preemption (an ongoing preemption), for
// k%4 == 3 with a member of preemptionPolicy Never.
func i37Gangs(w *i37World, n int) []i37Gang {
	ns := w.pods[0].Namespace
	var out []i37Gang
	for k := range n {
		pg := i37PodGroup(ns, i37GroupSpec{name: fmt.Sprintf("gang-%d", k), priority: i32p(35), minCount: int32(3 + k%2)}, false)
		if k%4 == 2 {
			pg.Spec.Priority = i32p(25)
		}
		g := i37Gang{pg: pg}
		for i := range 3 + k%2 {
			p := workload.NewPod(w.r, fmt.Sprintf("gang-%d-%d", k, i), "")
			p.Namespace = ns
			i37Big(p, 24)
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: strPtr37(pg.Name)}
			g.members = append(g.members, p)
		}
		switch k % 4 {
		case 2:
			g.members[0].Status.NominatedNodeName = w.terminating
		case 3:
			never := v1.PreemptNever
			g.members[1].Spec.PreemptionPolicy = &never
		}
		out = append(out, g)
	}
	return out
}

// i37GroupOutcome is what one side decided for one preemptor group.
type i37GroupOutcome struct {
	// text is the scheduling function's every decision (it runs once, on
	// the snapshot without every potential victim) and whether the
	// snapshot reads as before once the session ended.
	text string
	// result is the outcome after the reprieves: status, nominations,
	// victims.
	result    string
	victims   []*v1.Pod
	nominated map[string]string // pod name -> node
}

// preemptGroup runs PodGroupPostFilter for g on s and checks that the
// snapshot reads the same afterwards.
func (s *i37Side) preemptGroup(t *testing.T, ctx context.Context, g i37Gang) i37GroupOutcome {
	t.Helper()
	s.mustRefresh(t)
	before := i37Fingerprint(s.lister)
	pgInfo := &framework.PodGroupInfo{Namespace: g.pg.Namespace, Name: g.pg.Name, Type: fwk.PodGroupKeyType, UnscheduledPods: g.members, PodGroup: g.pg}
	var tr, b strings.Builder
	res, st := s.fw.RunPodGroupPostFilterPlugins(ctx, framework.NewCycleState(), pgInfo, s.pgSchedulingFunc(pgInfo, &tr))
	out := i37GroupOutcome{victims: s.victims.take(), nominated: map[string]string{}}
	fmt.Fprintf(&b, "status %s\n", i37Status(st))
	if res != nil {
		for _, k := range slices.SortedFunc(maps.Keys(res.NominatingInfos), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
			ni := res.NominatingInfos[k]
			fmt.Fprintf(&b, "nominate %s -> %q mode=%d\n", k, ni.NominatedNodeName, ni.NominatingMode)
			out.nominated[k.Name] = ni.NominatedNodeName
		}
	} else {
		b.WriteString("result nil\n")
	}
	fmt.Fprintf(&b, "victims %s\n", i37Keys(out.victims))
	if after := i37Fingerprint(s.lister); after != before {
		fmt.Fprintf(&tr, "snapshot changed by the session:\n%s", strings.Join(i37Diff(before, after, 5), "\n"))
	}
	out.text, out.result = tr.String(), b.String()
	return out
}

// i37Fingerprint renders what a preemption session must leave as it was:
// every node's pod count and requests.
func i37Fingerprint(l fwk.SharedLister) string {
	var b strings.Builder
	list, err := l.NodeInfos().List()
	fmt.Fprintf(&b, "list err=%v\n", err)
	for _, ni := range i37ByName(list) {
		fmt.Fprintf(&b, "%s pods=%d req=%s\n", ni.Node().Name, len(ni.GetPods()), i37Res(ni.GetRequested()))
	}
	return b.String()
}

// TestIdentity137PodGroupPreemption: with GenericWorkload (and
// CompositePodGroup in one case), upstream's DefaultPreemption
// PodGroupPostFilter, through the framework, on a fwkadapter.Mutable and on
// upstream's snapshot: the scheduling function's every decision (it runs
// inside the mutation session, on the snapshot without every potential
// victim, and assumes and forgets pods in it) and the outcome after the
// reprieves (status, nominations, victims: the reprieves filter on the
// NodeInfos the evaluator listed at the session's start, which upstream
// mutates in place) must be identical, and the snapshot must read as
// before once the session ends. The cluster evolves by upstream's
// outcomes in both caches (victims removed, members assumed on their
// nominated nodes). The profile includes ImageLocality, whose scores read
// 0 in a session upstream (StartMutations zeroes the images' node
// counts).
func TestIdentity137PodGroupPreemption(t *testing.T) {
	nodes, gangs := 120, 4
	if !testing.Short() {
		nodes, gangs = 400, 8
	} else if raceEnabled {
		nodes = 80
	}
	for ci, g := range i37Cases(3) {
		if !g.gw {
			continue
		}
		t.Run(g.String(), func(t *testing.T) {
			i37SetGates(t, g)
			ctx, cancel := i37Context(t)
			defer cancel()
			w := i37BuildWorld(int64(200+ci), nodes, g)
			gs := i37Gangs(w, gangs)
			for _, gg := range gs {
				w.groups = append(w.groups, gg.pg)
				w.pending = append(w.pending, gg.members...)
			}
			env := i37NewEnv(t, w)
			up, sc := i37NewSide(t, Upstream, g), i37NewSide(t, SchedCache, g)
			for _, s := range []*i37Side{up, sc} {
				s.load(t, w)
				s.mustRefresh(t)
				s.build(t, ctx, env)
			}
			stats := map[string]int{}
			for k, gg := range gs {
				a := up.preemptGroup(t, ctx, gg)
				b := sc.preemptGroup(t, ctx, gg)
				if d := i37Diff(a.text, b.text, 6); len(d) > 0 {
					t.Fatalf("group %d (%s): upstream vs schedcache:\n  %s", k, gg.pg.Name, strings.Join(d, "\n  "))
				}
				if d := i37Diff(a.result, b.result, 4); len(d) > 0 {
					t.Fatalf("group %d (%s): outcome after the reprieves, upstream vs schedcache:\n  %s", k, gg.pg.Name, strings.Join(d, "\n  "))
				}
				stats["assignments"] += strings.Count(a.text, "-> \"node-")
				stats["victims"] += len(a.victims)
				stats["nominated"] += len(a.nominated)
				for _, s := range []*i37Side{up, sc} {
					for _, v := range a.victims {
						if err := s.cache.RemovePod(v); err != nil {
							t.Fatalf("%s: RemovePod %s: %v", s.name, i37Key(v), err)
						}
					}
					for _, m := range gg.members {
						if node := a.nominated[m.Name]; node != "" && len(a.victims) > 0 {
							placed := m.DeepCopy()
							placed.Spec.NodeName = node
							if err := s.cache.AssumePod(placed); err != nil {
								t.Fatalf("%s: AssumePod %s: %v", s.name, i37Key(placed), err)
							}
						}
					}
				}
			}
			t.Logf("%d nodes, %d groups: scheduling functions identical: %v", len(w.nodes), gangs, stats)
			if stats["assignments"] == 0 || stats["victims"] == 0 {
				t.Errorf("the preemption was not exercised: %v", stats)
			}
		})
	}
}

// ---- the mutable lister alone ----

// i37ByName returns list sorted by node name.
func i37ByName(list []fwk.NodeInfo) []fwk.NodeInfo {
	out := slices.Clone(list)
	slices.SortFunc(out, func(a, b fwk.NodeInfo) int { return strings.Compare(a.Node().Name, b.Node().Name) })
	return out
}

func i37Res(r fwk.Resource) string {
	return fmt.Sprintf("cpu=%d mem=%d eph=%d pods=%d scalar=%v", r.GetMilliCPU(), r.GetMemory(), r.GetEphemeralStorage(), r.GetAllowedPodNumber(), r.GetScalarResources())
}

func i37PodInfoKeys(pis []fwk.PodInfo) string {
	keys := make([]string, len(pis))
	for i, pi := range pis {
		keys[i] = i37Key(pi.GetPod())
	}
	slices.Sort(keys)
	return "[" + strings.Join(keys, " ") + "]"
}

// i37Node renders everything a plugin reads of a NodeInfo but its
// generation (documented: a mutated node's is a fork generation) and the
// order of its pod lists.
func i37Node(ni fwk.NodeInfo) string {
	if ni == nil {
		return "<nil>"
	}
	name := "<no node>"
	if ni.Node() != nil {
		name = ni.Node().Name
	}
	var ports []string
	for ip, pp := range ni.GetUsedPorts() {
		for p := range pp {
			ports = append(ports, fmt.Sprintf("%s/%s/%d", ip, p.Protocol, p.Port))
		}
	}
	slices.Sort(ports)
	return fmt.Sprintf("%s pods=%s aff=%s anti=%s nonhost=%s req={%s} nonzero={%s} alloc={%s} ports=%v pvc=%v",
		name, i37PodInfoKeys(ni.GetPods()), i37PodInfoKeys(ni.GetPodsWithAffinity()), i37PodInfoKeys(ni.GetPodsWithRequiredAntiAffinity()),
		i37PodInfoKeys(ni.GetPodsWithRequiredNonHostScopedAntiAffinity()), i37Res(ni.GetRequested()), i37Res(ni.GetNonZeroRequested()),
		i37Res(ni.GetAllocatable()), ports, ni.GetPVCRefCounts())
}

// i37Images renders a NodeInfo's image summaries (what ImageLocality
// reads): their number and the sums of their sizes and node counts.
func i37Images(ni fwk.NodeInfo) string {
	var size int64
	var nodes int
	for _, is := range ni.GetImageStates() {
		size += is.Size
		nodes += is.NumNodes
	}
	return fmt.Sprintf("images %s n=%d size=%d numNodes=%d", ni.Node().Name, len(ni.GetImageStates()), size, nodes)
}

func i37Names(list []fwk.NodeInfo, err error) string {
	names := make([]string, len(list))
	for i, ni := range list {
		names[i] = ni.Node().Name
	}
	slices.Sort(names)
	return fmt.Sprintf("%v err=%v", names, err)
}

// i37Query is what i37View asks a lister besides its nodes.
type i37Query struct {
	claims     []string
	groups     []types.NamespacedName
	composites []types.NamespacedName
}

// i37View renders every answer of l: the node list (in order), every
// node, the affinity lists (as sets: upstream's order after a removal is
// a swap-remove's), an unknown node, the claims, the pod-group and
// composite states and objects and their roots.
func i37View(l fwk.SharedLister, q i37Query) string {
	var b strings.Builder
	list, err := l.NodeInfos().List()
	order := make([]string, len(list))
	for i, ni := range list {
		order[i] = ni.Node().Name
	}
	fmt.Fprintf(&b, "list %v err=%v\n", order, err)
	for _, ni := range i37ByName(list) {
		b.WriteString(i37Node(ni))
		b.WriteByte('\n')
		b.WriteString(i37Images(ni))
		b.WriteByte('\n')
		got, err := l.NodeInfos().Get(ni.Node().Name)
		if err != nil || i37Node(got) != i37Node(ni) {
			fmt.Fprintf(&b, "  Get differs from List: %v\n", err)
		}
	}
	fmt.Fprintf(&b, "affinity %s\n", i37Names(l.NodeInfos().HavePodsWithAffinityList()))
	fmt.Fprintf(&b, "anti %s\n", i37Names(l.NodeInfos().HavePodsWithRequiredAntiAffinityList()))
	fmt.Fprintf(&b, "nonhost %s\n", i37Names(l.NodeInfos().HavePodsWithRequiredNonHostScopedAntiAffinityList()))
	_, err = l.NodeInfos().Get("no-such-node")
	fmt.Fprintf(&b, "unknown node: %v\n", err)
	for _, c := range q.claims {
		fmt.Fprintf(&b, "claim %s used=%t\n", c, l.StorageInfos().IsPVCUsedByPods(c))
	}
	pgm, _ := l.(fwk.PodGroupManager)
	for _, k := range q.groups {
		s, err := l.PodGroupStates().Get(k.Namespace, k.Name)
		if err != nil {
			fmt.Fprintf(&b, "group %s: %v\n", k, err)
		} else {
			fmt.Fprintf(&b, "group %s all=%d/%d unsched=%v assumed=%v assigned=%v scheduled=%s/%d\n", k, len(s.AllPods()), s.AllPodsCount(),
				slices.Sorted(maps.Keys(s.UnscheduledPods())), slices.Sorted(maps.Keys(s.AssumedPods())), slices.Sorted(maps.Keys(s.AssignedPods())),
				i37Keys(i37SortedPods(s.ScheduledPods())), s.ScheduledPodsCount())
		}
		pg, err := l.PodGroups().Get(k.Namespace, k.Name)
		fmt.Fprintf(&b, "  object %s err=%v\n", i37ObjName(pg), err)
		if pgm != nil {
			root, ok, err := pgm.GetRootKeyForGroup(fwk.PodGroupKey(k.Namespace, k.Name))
			fmt.Fprintf(&b, "  root %v %t %v\n", root, ok, err)
		}
	}
	for _, k := range q.composites {
		s, err := l.CompositePodGroupStates().Get(k.Namespace, k.Name)
		if err != nil {
			fmt.Fprintf(&b, "composite %s: %v\n", k, err)
		} else {
			ch := s.GetChildren()
			keys := make([]string, len(ch))
			for i, c := range ch {
				keys[i] = c.String()
			}
			slices.Sort(keys)
			fmt.Fprintf(&b, "composite %s children=%v\n", k, keys)
		}
		c, err := l.CompositePodGroups().Get(k.Namespace, k.Name)
		name := "<nil>"
		if c != nil {
			name = c.Namespace + "/" + c.Name
		}
		fmt.Fprintf(&b, "  object %s err=%v\n", name, err)
	}
	return b.String()
}

func i37ObjName(pg *schedulingv1beta1.PodGroup) string {
	if pg == nil {
		return "<nil>"
	}
	return pg.Namespace + "/" + pg.Name
}

func i37SortedPods(ps []*v1.Pod) []*v1.Pod {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b *v1.Pod) int { return strings.Compare(i37Key(a), i37Key(b)) })
	return out
}

// i37Stepper drives both listers through the same random calls.
type i37Stepper struct {
	t       *testing.T
	r       *rand.Rand
	up, sc  *i37Side
	q       i37Query
	nodes   []string
	session bool
	// held are the NodeInfos each side listed when its session started,
	// by name: the pod-group preemption keeps them (its domain) and reads
	// them after its mutations.
	held    [2]map[string]fwk.NodeInfo
	assumed []*v1.Pod   // snapshot-assumed, oldest first
	removed []i37Placed // removed in the session, to add back
	fresh   int
	log     []string
	// texts holds, by call, the first refusal both made in other words.
	texts map[string]string
}

// i37Placed is a pod and the node a snapshot holds it on (a pod added
// with AddPod may name no node in its spec).
type i37Placed struct {
	pod  *v1.Pod
	node string
}

// pods returns the pods upstream's snapshot holds now, sorted.
func (st *i37Stepper) pods() []i37Placed {
	list, _ := st.up.lister.NodeInfos().List()
	var out []i37Placed
	for _, ni := range list {
		for _, pi := range ni.GetPods() {
			out = append(out, i37Placed{pi.GetPod(), ni.Node().Name})
		}
	}
	slices.SortFunc(out, func(a, b i37Placed) int { return strings.Compare(i37Key(a.pod), i37Key(b.pod)) })
	return out
}

// both runs op on each side's lister and compares the errors.
func (st *i37Stepper) both(what string, op func(s *i37Side) error) {
	st.t.Helper()
	st.log = append(st.log, what)
	ea, eb := op(st.up), op(st.sc)
	if (ea == nil) != (eb == nil) {
		st.fail(fmt.Sprintf("%s: error %v vs %v", what, ea, eb))
	}
	if ea != nil && ea.Error() != eb.Error() {
		kind, _, _ := strings.Cut(what, " ")
		if _, ok := st.texts[kind]; !ok {
			st.texts[kind] = fmt.Sprintf("%s: %q vs %q", what, ea, eb)
		}
	}
}

func (st *i37Stepper) fail(msg string) {
	st.t.Helper()
	tail := st.log[max(0, len(st.log)-12):]
	st.t.Fatalf("step %d: %s\n  last calls:\n    %s", len(st.log), msg, strings.Join(tail, "\n    "))
}

// compare compares every answer of the two listers, and the NodeInfos
// held since the session's start.
func (st *i37Stepper) compare() {
	st.t.Helper()
	a, b := i37View(st.up.lister, st.q), i37View(st.sc.lister, st.q)
	if a != b {
		st.fail("listers differ:\n  " + strings.Join(i37Diff(a, b, 6), "\n  "))
	}
	if !st.session {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(st.held[0])) {
		x, y := i37Node(st.held[0][name]), i37Node(st.held[1][name])
		if x == y {
			continue
		}
		st.fail(fmt.Sprintf("the NodeInfo of %s listed at StartMutations, read now:\n    upstream:   %s\n    schedcache: %s", name, x, y))
	}
}

func (st *i37Stepper) step() {
	st.t.Helper()
	r := st.r
	if len(st.assumed) > 0 {
		// Upstream's contract for snapshot AssumePod and ForgetPod: last
		// in, first out, and no other mutation in between.
		if r.IntN(3) == 0 && len(st.assumed) < 6 {
			st.assume()
		} else {
			st.forgetLast()
		}
		st.compare()
		return
	}
	pods := st.pods()
	switch x := r.IntN(100); {
	case x < 8:
		st.both("StartMutations", func(s *i37Side) error { return s.lister.StartMutations() })
		if !st.session {
			st.session = true
			for i, s := range []*i37Side{st.up, st.sc} {
				list, _ := s.lister.NodeInfos().List()
				st.held[i] = map[string]fwk.NodeInfo{}
				for _, ni := range list[:min(len(list), 8)] {
					st.held[i][ni.Node().Name] = ni
				}
				for _, p := range pods[:min(len(pods), 40)] {
					if ni, err := s.lister.NodeInfos().Get(p.node); err == nil {
						st.held[i][p.node] = ni
					}
				}
			}
		}
	case x < 14:
		st.both("EndMutations", func(s *i37Side) error { return s.lister.EndMutations() })
		st.session, st.held, st.removed = false, [2]map[string]fwk.NodeInfo{}, nil
	case x < 45 && len(pods) > 0:
		p := pods[r.IntN(len(pods))]
		node := p.node
		if r.IntN(20) == 0 {
			node = st.nodes[r.IntN(len(st.nodes))] // maybe another node's: refused
		}
		st.both(fmt.Sprintf("RemovePod %s from %s", i37Key(p.pod), node), func(s *i37Side) error { return s.lister.RemovePod(i37Log, p.pod, node) })
		if st.session && node == p.node {
			st.removed = append(st.removed, p)
		}
	case x < 70 && st.session && len(st.removed) > 0:
		// Add back a victim, with upstream's PodInfo (the reprieve hands
		// the lister's own or, for a pod group's, upstream's).
		i := r.IntN(len(st.removed))
		p := st.removed[i]
		st.removed = slices.Delete(st.removed, i, i+1)
		pi, err := framework.NewPodInfo(p.pod)
		if err != nil {
			st.t.Fatal(err)
		}
		st.both(fmt.Sprintf("AddPod %s to %s", i37Key(p.pod), p.node), func(s *i37Side) error { return s.lister.AddPod(pi, p.node) })
	case x < 85:
		// A new pod, unscheduled (as a preemptor's queued PodInfo: no node
		// in its spec) or naming its node, maybe a pod-group member.
		p := st.newPod("")
		node := st.nodes[r.IntN(len(st.nodes))]
		if r.IntN(2) == 0 {
			p.Spec.NodeName = node
		}
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			st.t.Fatal(err)
		}
		st.both(fmt.Sprintf("AddPod new %s (spec node %q) to %s", i37Key(p), p.Spec.NodeName, node), func(s *i37Side) error { return s.lister.AddPod(pi, node) })
	default:
		st.assume()
	}
	st.compare()
}

// newPod returns a new pod on node, a member of a random group half the
// time.
func (st *i37Stepper) newPod(node string) *v1.Pod {
	p := workload.NewPod(st.r, fmt.Sprintf("step-%d", st.fresh), node)
	st.fresh++
	if len(st.q.groups) > 0 && st.r.IntN(2) == 0 {
		k := st.q.groups[st.r.IntN(len(st.q.groups))]
		p.Namespace = k.Namespace
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: strPtr37(k.Name)}
	}
	return p
}

// assume is the pod-group cycle's snapshot AssumePod, of upstream's
// PodInfo, in or out of a session. The pod keeps its host ports: one it
// shares with a pod on the node is gone after its ForgetPod, as upstream's
// (TestIdentity137Minimal/shared-port-forget).
func (st *i37Stepper) assume() {
	st.t.Helper()
	p := st.newPod(st.nodes[st.r.IntN(len(st.nodes))])
	pi, err := framework.NewPodInfo(p)
	if err != nil {
		st.t.Fatal(err)
	}
	st.both(fmt.Sprintf("AssumePod %s on %s", i37Key(p), p.Spec.NodeName), func(s *i37Side) error { return s.snapAssume(pi) })
	st.assumed = append(st.assumed, p)
}

func (st *i37Stepper) forgetLast() {
	st.t.Helper()
	p := st.assumed[len(st.assumed)-1]
	st.assumed = st.assumed[:len(st.assumed)-1]
	st.both(fmt.Sprintf("ForgetPod %s", i37Key(p)), func(s *i37Side) error { return s.snapForget(p) })
}

// TestIdentity137MutableSteps: fwkadapter.Mutable and upstream's snapshot,
// refreshed from caches loaded with the same cluster (pod groups and
// composites by the gates), answer the same after every step of random
// sequences of the calls pod-group preemption and the pod-group cycle
// make: StartMutations, RemovePod (of victims, and from a wrong node),
// AddPod (victims back, with upstream's PodInfo; new pods, with or
// without their node in the spec), snapshot AssumePod and ForgetPod
// (last in, first out, forgotten before the session ends), EndMutations;
// every lister answer is compared after every step (nodes, pods, requests,
// ports, PVC counts, affinity lists, claims, pod-group and composite
// states and objects, roots), and so are the NodeInfos listed when the
// session started, which pod-group preemption keeps and reads after its
// mutations.
func TestIdentity137MutableSteps(t *testing.T) {
	steps := 300
	if !testing.Short() {
		steps = 3000
	} else if raceEnabled {
		steps = 100
	}
	for ci, g := range i37Cases(3) {
		t.Run(g.String(), func(t *testing.T) {
			i37SetGates(t, g)
			w := i37BuildWorld(int64(300+ci), 30, g)
			up, sc := i37NewSide(t, Upstream, g), i37NewSide(t, SchedCache, g)
			for _, s := range []*i37Side{up, sc} {
				s.load(t, w)
				s.mustRefresh(t)
			}
			st := &i37Stepper{t: t, r: rand.New(rand.NewPCG(uint64(ci), 3)), up: up, sc: sc, texts: map[string]string{}}
			for _, n := range w.nodes {
				st.nodes = append(st.nodes, n.Name)
			}
			nss := map[string]bool{}
			claims := map[string]bool{}
			for _, p := range w.pods {
				nss[p.Namespace] = true
				for _, v := range p.Spec.Volumes {
					if v.PersistentVolumeClaim != nil {
						claims[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName] = true
					}
				}
			}
			st.q.claims = slices.Sorted(maps.Keys(claims))
			if g.gw {
				for _, ns := range slices.Sorted(maps.Keys(nss))[:2] {
					for _, gs := range i37GroupSpecs {
						st.q.groups = append(st.q.groups, types.NamespacedName{Namespace: ns, Name: gs.name})
					}
					for _, cs := range i37CompositeSpecs {
						st.q.composites = append(st.q.composites, types.NamespacedName{Namespace: ns, Name: cs.name})
					}
				}
			}
			st.compare()
			for range steps {
				st.step()
			}
			t.Logf("%d steps: every lister answer identical", steps)
			for _, k := range slices.Sorted(maps.Keys(st.texts)) {
				t.Logf("both refused, in other words: %s", st.texts[k])
			}
		})
	}
}

// ---- GangScheduling ----

// i37GangWorld is a small cluster with pod groups g0..g5 in one namespace
// and their members in every state: g0 gang, g1 basic, g2 gang under
// composite c0, g3 gang under c1 (under c0), g4 gang under a missing
// composite, g5 without an object; c0 needs 2 ready children, c1 one.
type i37GangWorld struct {
	nodes      []*v1.Node
	groups     []*schedulingv1beta1.PodGroup
	composites []*schedulingv1alpha3.CompositePodGroup
	members    []*v1.Pod // every member, in creation order
	state      map[string]string
	others     []*v1.Pod // pods that are not members of these groups
}

const i37GangNS = "gangs"

func i37BuildGangWorld(r *rand.Rand) *i37GangWorld {
	c := workload.Build(workload.ClusterSpec{Nodes: 16, PodsPerNode: 0, Seed: 7})
	w := &i37GangWorld{nodes: c.Nodes, state: map[string]string{}}
	parents := []string{"", "", "c0", "c1", "c-missing"}
	for i, parent := range parents {
		pg := &schedulingv1beta1.PodGroup{}
		pg.Namespace, pg.Name = i37GangNS, fmt.Sprintf("g%d", i)
		pg.UID = types.UID("uid-" + pg.Name)
		if i == 1 {
			pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
		} else {
			pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(1 + r.IntN(5))}
		}
		if parent != "" {
			pg.Spec.ParentCompositePodGroupName = strPtr37(parent)
		}
		w.groups = append(w.groups, pg)
	}
	for i, parent := range []string{"", "c0"} {
		cpg := &schedulingv1alpha3.CompositePodGroup{}
		cpg.Namespace, cpg.Name = i37GangNS, fmt.Sprintf("c%d", i)
		cpg.UID = types.UID("uid-" + cpg.Name)
		cpg.Spec.SchedulingPolicy.Gang = &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: int32(2 - i)}
		if parent != "" {
			cpg.Spec.ParentCompositePodGroupName = strPtr37(parent)
		}
		w.composites = append(w.composites, cpg)
	}
	for g := range 6 {
		for i := range r.IntN(7) {
			p := workload.NewPod(r, fmt.Sprintf("g%d-m%d", g, i), "")
			p.Namespace = i37GangNS
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: strPtr37(fmt.Sprintf("g%d", g))}
			w.state[p.Name] = []string{"unscheduled", "assumed", "assigned"}[r.IntN(3)]
			if w.state[p.Name] != "unscheduled" {
				p.Spec.NodeName = w.nodes[r.IntN(len(w.nodes))].Name
			}
			w.members = append(w.members, p)
		}
	}
	loner := workload.NewPod(r, "loner", "")
	other := workload.NewPod(r, "elsewhere", "")
	other.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: strPtr37("g0")} // g0 of another namespace
	w.others = []*v1.Pod{loner, other}
	return w
}

// gang returns the GangScheduling plugin instance of s's framework.
func (s *i37Side) gang(t *testing.T) interface {
	fwk.PreEnqueuePlugin
	fwk.EnqueueExtensions
} {
	t.Helper()
	for _, p := range s.fw.PreEnqueuePlugins() {
		if p.Name() == names.GangScheduling {
			if g, ok := p.(interface {
				fwk.PreEnqueuePlugin
				fwk.EnqueueExtensions
			}); ok {
				return g
			}
		}
	}
	t.Fatalf("%s: no GangScheduling plugin", s.name)
	return nil
}

// gangPhase renders what GangScheduling answers now on s: PreEnqueue of
// every pod, PlacementFeasible of every group (progress from the
// snapshot's states), and every queueing hint for every pod and event.
func (s *i37Side) gangPhase(t *testing.T, ctx context.Context, w *i37GangWorld, pods []*v1.Pod) string {
	t.Helper()
	var b strings.Builder
	gp := s.gang(t)
	for _, p := range pods {
		fmt.Fprintf(&b, "preenqueue %s %s\n", p.Name, i37Status(gp.PreEnqueue(ctx, p)))
	}
	for _, pg := range w.groups {
		st, err := s.lister.PodGroupStates().Get(pg.Namespace, pg.Name)
		if err != nil {
			fmt.Fprintf(&b, "state %s: %v\n", pg.Name, err)
			continue
		}
		unsched := slices.Sorted(maps.Keys(st.UnscheduledPods()))
		var up []*v1.Pod
		for _, name := range unsched {
			up = append(up, st.UnscheduledPods()[name])
		}
		pgInfo := &framework.PodGroupInfo{Namespace: pg.Namespace, Name: pg.Name, Type: fwk.PodGroupKeyType, UnscheduledPods: up, PodGroup: pg}
		for _, extra := range []int{0, 1} {
			progress := framework.PlacementProgress{Remaining: len(up), Scheduled: st.ScheduledPodsCount() + extra}
			fmt.Fprintf(&b, "feasible %s %+v %s\n", pg.Name, progress, i37Status(s.fw.RunPlacementFeasiblePlugins(ctx, framework.NewCycleState(), pgInfo, progress)))
		}
	}
	events, err := gp.EventsToRegister(ctx)
	if err != nil {
		t.Fatalf("%s: EventsToRegister: %v", s.name, err)
	}
	type change struct {
		what     string
		old, new any
	}
	var changes []change
	for _, m := range w.members[:min(len(w.members), 6)] {
		changes = append(changes, change{"pod " + m.Name, nil, m})
	}
	for _, pg := range w.groups {
		changes = append(changes, change{"group " + pg.Name, nil, pg})
		if pg.Spec.SchedulingPolicy.Gang != nil {
			down := pg.DeepCopy()
			down.Spec.SchedulingPolicy.Gang.MinCount--
			changes = append(changes, change{"group- " + pg.Name, pg, down})
		}
	}
	for _, c := range w.composites {
		changes = append(changes, change{"composite " + c.Name, nil, c})
	}
	for _, ev := range events {
		if ev.QueueingHintFn == nil {
			continue
		}
		for _, p := range pods {
			for _, c := range changes {
				if (ev.Event.Resource == fwk.PodGroup) != strings.HasPrefix(c.what, "group") ||
					(ev.Event.Resource == fwk.CompositePodGroup) != strings.HasPrefix(c.what, "composite") ||
					(ev.Event.ActionType == fwk.Update) != (c.old != nil) {
					continue
				}
				h, err := ev.QueueingHintFn(i37Log, p, c.old, c.new)
				fmt.Fprintf(&b, "hint %s %s %s: %v %v\n", ev.Event.Label(), p.Name, c.what, h, err)
			}
		}
	}
	return b.String()
}

// permitWaiting renders the framework's waiting pods and the plugins each
// still waits for.
func (s *i37Side) permitWaiting() string {
	var out []string
	s.fw.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		out = append(out, fmt.Sprintf("%s%v", wp.GetPod().Name, slices.Sorted(slices.Values(wp.GetPendingPlugins()))))
	})
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestIdentity137GangScheduling: GangScheduling (GenericWorkload on,
// CompositePodGroup on in half the cases) answers the same with
// schedcache's cache (fwkadapter.CacheGroups) and Mutable snapshot as with
// upstream's, on random pod groups and composites (gang and basic
// policies, a missing parent, a group without an object) with members
// unscheduled, assumed and assigned in counts below, at and above
// MinCount: PreEnqueue of every pod, PlacementFeasible of every group,
// the queueing hints; then each unscheduled member goes through a
// scheduling cycle (cache AssumePod, Permit through the framework, a
// waiting pod when told to wait): Permit's status and wait, the pods it
// activates and the waiting pods it allows; then some assumed members are
// forgotten and everything is asked again. The frameworks are built
// before the cache is loaded, as the scheduler builds them.
func TestIdentity137GangScheduling(t *testing.T) {
	cases := 8
	if !testing.Short() {
		cases = 60
	}
	seen := map[string]int{}
	defer func() {
		t.Logf("permits over all cases: %v", seen)
		if !t.Failed() && (seen["wait"] == 0 || seen["allowed"] == 0 || seen["success"] == 0) {
			t.Errorf("Permit did not both wait, allow waiting pods and succeed: %v", seen)
		}
	}()
	for ci := range cases {
		g := i37Gates{gw: true, cpg: ci%2 == 1}
		t.Run(fmt.Sprintf("%d/%s", ci, g), func(t *testing.T) {
			i37SetGates(t, g)
			ctx, cancel := i37Context(t)
			defer cancel()
			r := rand.New(rand.NewPCG(uint64(ci), 27))
			w := i37BuildGangWorld(r)
			env := i37NewEnv(t, &i37World{})
			up, sc := i37NewSide(t, Upstream, g), i37NewSide(t, SchedCache, g)
			sides := []*i37Side{up, sc}
			for _, s := range sides {
				s.build(t, ctx, env)
				for _, c := range w.composites {
					if err := s.cache.AddCompositePodGroup(c); err != nil {
						t.Fatal(err)
					}
				}
				for _, pg := range w.groups {
					if err := s.cache.AddPodGroup(pg); err != nil {
						t.Fatal(err)
					}
				}
				for _, n := range w.nodes {
					if err := s.cache.AddNode(n); err != nil {
						t.Fatal(err)
					}
				}
				for _, p := range w.members {
					var err error
					switch w.state[p.Name] {
					case "unscheduled":
						err = s.cache.AddPodGroupMember(p)
					case "assumed":
						err = s.cache.AssumePod(p)
					case "assigned":
						err = s.cache.AddPod(p)
					}
					if err != nil {
						t.Fatalf("%s: %s %s: %v", s.name, w.state[p.Name], p.Name, err)
					}
				}
			}
			defer func() {
				for _, s := range sides {
					for _, p := range w.members {
						s.fw.RejectWaitingPod(p.UID)
					}
				}
			}()
			pods := append(slices.Clone(w.members), w.others...)
			compare := func(what string, f func(s *i37Side) string) {
				t.Helper()
				a, b := f(up), f(sc)
				if d := i37Diff(a, b, 6); len(d) > 0 {
					t.Fatalf("%s: upstream vs schedcache:\n  %s", what, strings.Join(d, "\n  "))
				}
			}
			phase := func(s *i37Side) string { s.mustRefresh(t); return s.gangPhase(t, ctx, w, pods) }
			compare("initial", phase)
			permits := 0
			var assumed []*v1.Pod
			for _, p := range w.members {
				if w.state[p.Name] != "unscheduled" {
					continue
				}
				placed := p.DeepCopy()
				placed.Spec.NodeName = w.nodes[r.IntN(len(w.nodes))].Name
				assumed = append(assumed, placed)
				compare("permit "+p.Name, func(s *i37Side) string {
					s.mustRefresh(t)
					if err := s.cache.AssumePod(placed); err != nil {
						t.Fatalf("%s: AssumePod %s: %v", s.name, p.Name, err)
					}
					wait, st := s.fw.RunPermitPlugins(ctx, framework.NewCycleState(), placed, placed.Spec.NodeName)
					if st.IsWait() {
						s.fw.AddWaitingPod(placed, wait)
					}
					waiting := s.permitWaiting()
					if s == up {
						seen["wait"] += b2i37(st.IsWait())
						seen["success"] += b2i37(st.IsSuccess())
						seen["allowed"] += strings.Count(waiting, "[]")
					}
					return fmt.Sprintf("permit %s wait=%v\nactivated %s\nwaiting %s\n", i37Status(st), wait, s.activated.take(), waiting)
				})
				permits++
			}
			for i, p := range assumed {
				if i%3 != 0 {
					continue
				}
				compare("forget "+p.Name, func(s *i37Side) string {
					s.fw.RejectWaitingPod(p.UID)
					return fmt.Sprint(s.cache.ForgetPod(p))
				})
			}
			compare("after forgets", phase)
			t.Logf("%d members (%v), %d permits identical", len(w.members), i37Count(w.state), permits)
		})
	}
}

func b2i37(b bool) int {
	if b {
		return 1
	}
	return 0
}

func i37Count(m map[string]string) map[string]int {
	out := map[string]int{}
	for _, v := range m {
		out[v]++
	}
	return out
}

// ---- plugins built before the cluster is loaded ----

// TestIdentity137StartupListers: as the scheduler does, the plugins are
// built when the snapshot is still empty, and then the cluster (with pod
// groups) is loaded and the snapshot refreshed. DefaultPreemption's
// evaluator keeps the PodGroups and CompositePodGroups listers of the
// snapshot it was built with (NewEvaluator, New): they must read the
// snapshot as it is now, as upstream's do.
func TestIdentity137StartupListers(t *testing.T) {
	g := i37Gates{gw: true}
	i37SetGates(t, g)
	ctx, cancel := i37Context(t)
	defer cancel()
	w := i37BuildWorld(400, 60, g)
	env := i37NewEnv(t, w)
	up, sc := i37NewSide(t, Upstream, g), i37NewSide(t, SchedCache, g)
	for _, s := range []*i37Side{up, sc} {
		s.mustRefresh(t)
		s.build(t, ctx, env)
		s.load(t, w)
	}
	pod := i37Preemptor(w, 0)
	env.addPod(t, pod)
	a := up.preemptPod(t, ctx, env, pod)
	b := sc.preemptPod(t, ctx, env, pod)
	if d := i37Diff(a.text+a.choice, b.text+b.choice, 6); len(d) > 0 {
		t.Fatalf("upstream vs schedcache:\n  %s", strings.Join(d, "\n  "))
	}
}

// TestIdentity137Minimal: the smallest questions that show upstream's
// snapshot behaviours that are easy to miss (see the file's comment).
// Each asks upstream's snapshot (or cache) and schedcache's the same
// question.
func TestIdentity137Minimal(t *testing.T) {
	// world: two nodes with two pods each; the first pod is a member of
	// pod group pg-0 (DisruptionMode All) of its namespace.
	world := func(g i37Gates) *i37World {
		c := workload.Build(workload.ClusterSpec{Nodes: 2, PodsPerNode: 2, Seed: 1})
		w := &i37World{nodes: c.Nodes, pods: c.Pods}
		if g.gw {
			p := c.Pods[0].DeepCopy()
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: strPtr37("pg-0")}
			w.pods[0] = p
			w.groups = []*schedulingv1beta1.PodGroup{i37PodGroup(p.Namespace, i37GroupSpecs[0], false)}
		}
		return w
	}
	both := func(t *testing.T, g i37Gates, load bool, ask func(s *i37Side) string) {
		t.Helper()
		i37SetGates(t, g)
		w := world(g)
		var got [2]string
		for i, name := range []string{Upstream, SchedCache} {
			s := i37NewSide(t, name, g)
			if load {
				s.load(t, w)
				s.mustRefresh(t)
			}
			got[i] = ask(s)
		}
		if got[0] != got[1] {
			t.Errorf("upstream:   %s\nschedcache: %s", got[0], got[1])
		}
	}
	// A NodeInfo the lister handed out before a mutation in a session
	// (pod-group preemption lists the nodes once, removes the victims,
	// then runs the filters on the NodeInfos it listed): upstream mutates
	// it in place; schedcache's handle reads the session's state.
	t.Run("held-nodeinfo", func(t *testing.T) {
		both(t, i37Gates{}, true, func(s *i37Side) string {
			if err := s.lister.StartMutations(); err != nil {
				return err.Error()
			}
			ni, err := s.lister.NodeInfos().Get("node-00000")
			if err != nil {
				return err.Error()
			}
			victim := ni.GetPods()[0].GetPod()
			if err := s.lister.RemovePod(i37Log, victim, "node-00000"); err != nil {
				return err.Error()
			}
			now, _ := s.lister.NodeInfos().Get("node-00000")
			return fmt.Sprintf("after RemovePod: held NodeInfo has %d pods, Get has %d", len(ni.GetPods()), len(now.GetPods()))
		})
	})
	// Upstream's StartMutations copies its snapshot's NodeInfos with
	// NodeInfo.Snapshot(), whose image summaries take NumNodes from the
	// Nodes set the snapshot's own copies no longer have: every image's
	// node count reads 0 in a session (ImageLocality scores 0).
	t.Run("image-counts", func(t *testing.T) {
		both(t, i37Gates{}, true, func(s *i37Side) string {
			if err := s.lister.StartMutations(); err != nil {
				return err.Error()
			}
			ni, err := s.lister.NodeInfos().Get("node-00000")
			if err != nil {
				return err.Error()
			}
			return i37Images(ni)
		})
	})
	// Upstream's UsedPorts is a set (upstream-semantics 4.6): a snapshot
	// AssumePod of a pod sharing a host port with a pod on the node, then
	// its ForgetPod, removes the port although the other pod still uses
	// it.
	t.Run("shared-port-forget", func(t *testing.T) {
		both(t, i37Gates{}, true, func(s *i37Side) string {
			ni, err := s.lister.NodeInfos().Get("node-00000")
			if err != nil {
				return err.Error()
			}
			owner := ni.GetPods()[0].GetPod().DeepCopy()
			p := owner.DeepCopy()
			p.Name, p.UID = "sharer", "sharer"
			p.Spec.Containers = []v1.Container{{Name: "c", Image: "img", Ports: []v1.ContainerPort{{HostPort: 8427, ContainerPort: 80}}}}
			// The owner gets the same port first, through the cache.
			owner.Spec.Containers = p.Spec.Containers
			owner.Name, owner.UID = "owner", "owner"
			if err := s.cache.AddPod(owner); err != nil {
				return err.Error()
			}
			s.mustRefresh(t)
			pi, err := framework.NewPodInfo(p)
			if err != nil {
				return err.Error()
			}
			if err := s.snapAssume(pi); err != nil {
				return err.Error()
			}
			if err := s.snapForget(p); err != nil {
				return err.Error()
			}
			now, _ := s.lister.NodeInfos().Get("node-00000")
			return fmt.Sprintf("after AssumePod and ForgetPod of a pod sharing port 8427: used ports %v", now.GetUsedPorts())
		})
	})
	// The PodGroups lister a plugin keeps (DefaultPreemption's New and
	// NewEvaluator take it once) reads the snapshot as it is now.
	t.Run("kept-podgroups-lister", func(t *testing.T) {
		g := i37Gates{gw: true}
		w := world(g)
		both(t, g, false, func(s *i37Side) string {
			kept := s.lister.PodGroups()
			keptManager := s.pgm.PodGroups()
			s.load(t, w)
			s.mustRefresh(t)
			pg := w.groups[0]
			_, err := kept.Get(pg.Namespace, pg.Name)
			_, errManager := keptManager.Get(pg.Namespace, pg.Name)
			return fmt.Sprintf("snapshot lister kept: %v; cache lister kept: %v", err, errManager)
		})
	})
}
