package sim

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
)

// placement counts where the scheduled pods of a run landed.
type placement struct {
	checked     int // scheduled pods on a node at the end
	wrong       []string
	onDedicated int // pods tolerating dedicated=gpu on a node tainted with it
	onCordoned  int // pods tolerating everything on a cordoned node
	onSSD       int // pods selecting disktype=ssd
}

// allowed says, independently of the picker's code, whether pod may sit on
// n: every label it selects is on n; n is not cordoned unless the pod
// tolerates node.kubernetes.io/unschedulable; every NoSchedule or
// NoExecute taint of n is tolerated.
func allowed(pod *v1.Pod, n *v1.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	taints := n.Spec.Taints
	if n.Spec.Unschedulable {
		taints = append([]v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}}, taints...)
	}
	for i := range taints {
		if taints[i].Effect == v1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range pod.Spec.Tolerations {
			ok = ok || pod.Spec.Tolerations[j].ToleratesTaint(klog.Background(), &taints[i], false)
		}
		if !ok {
			return false
		}
	}
	return true
}

func checkPlacement(truth *Truth) placement {
	var pl placement
	truth.pods.Range(func(uid string, r podRecord) bool {
		if r.Node == "" || !strings.HasPrefix(uid, "sched-") {
			return true // pending, or an initial pod (placed by the generator)
		}
		nr, ok := truth.nodes.Load(r.Node)
		if !ok {
			pl.wrong = append(pl.wrong, uid+" on a missing node "+r.Node)
			return true
		}
		n := nr.Node
		pl.checked++
		if !allowed(r.Pod, n) {
			pl.wrong = append(pl.wrong, uid+" on "+n.Name)
		}
		for _, t := range r.Pod.Spec.Tolerations {
			if t.Key == "dedicated" {
				for _, nt := range n.Spec.Taints {
					if nt.Key == "dedicated" {
						pl.onDedicated++
					}
				}
			}
			if t.Key == "" && n.Spec.Unschedulable {
				pl.onCordoned++
			}
		}
		if r.Pod.Spec.NodeSelector["disktype"] == "ssd" {
			pl.onSSD++
		}
		return true
	})
	return pl
}

// The taints-affinity preset, small: the least-allocated picker puts every
// scheduled pod on a node it tolerates and selects, and uses the nodes a
// pod's tolerations open to it; the audit finds no divergence.
func TestTaintsAffinityPreset(t *testing.T) {
	for _, det := range []bool{true, false} {
		args := []string{"-preset", "taints-affinity", "-nodes", "400", "-pods-per-node", "5", "-keep-pods", "-schedulers", "2"}
		if det {
			args = append(args, "-deterministic", "-duration", "300ms")
		} else {
			args = append(args, "-duration", "300ms")
		}
		cfg, err := parseFlags(args, io.Discard)
		require.NoError(t, err)
		require.NotNil(t, cfg.Shape)
		var pl placement
		rep, err := run(context.Background(), cfg, nil, hooks{beforeAudit: func(_ *schedcache.Cache, truth *Truth) { pl = checkPlacement(truth) }})
		require.NoError(t, err)
		require.True(t, rep.Consistent, "audit %+v", rep.Audit)
		require.Zero(t, rep.Audit.Divergences)
		require.Positive(t, rep.Scheduled)
		require.Positive(t, pl.checked)
		require.Zero(t, len(pl.wrong), "pods on nodes they do not tolerate or select, such as %v", pl.wrong[:min(5, len(pl.wrong))])
		require.Positive(t, pl.onDedicated, "tolerations open tainted nodes (det %v)", det)
		require.Positive(t, pl.onCordoned, "tolerating everything opens cordoned nodes (det %v)", det)
		require.Positive(t, pl.onSSD)
	}
}

// Without the tolerations and selectors in the picker, the preset's pods
// land where they must not: the check above can fail.
func TestPlacementCheckCatches(t *testing.T) {
	cordoned := &v1.Node{}
	cordoned.Spec.Unschedulable = true
	tainted := &v1.Node{}
	tainted.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	soft := &v1.Node{}
	soft.Spec.Taints = []v1.Taint{{Key: "spot", Effect: v1.TaintEffectPreferNoSchedule}}
	ssd := &v1.Node{}
	ssd.Labels = map[string]string{"disktype": "ssd"}
	plain := &v1.Pod{}
	sel := &v1.Pod{}
	sel.Spec.NodeSelector = map[string]string{"disktype": "ssd"}
	tol := &v1.Pod{}
	tol.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	all := &v1.Pod{}
	all.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	for _, c := range []struct {
		pod  *v1.Pod
		node *v1.Node
		want bool
	}{
		{plain, cordoned, false}, {plain, tainted, false}, {plain, soft, true}, {plain, ssd, true},
		{sel, ssd, true}, {sel, soft, false},
		{tol, tainted, true}, {tol, cordoned, false},
		{all, cordoned, true}, {all, tainted, true},
	} {
		require.Equal(t, c.want, allowed(c.pod, c.node), "%+v on %+v", c.pod.Spec, c.node.Spec)
		require.Equal(t, c.want, fits(c.pod, c.node), "the picker's check: %+v on %+v", c.pod.Spec, c.node.Spec)
	}
}

// The shape under churn: nodes added with the shape's rules, drains of
// nodes cordoned from the start (one unschedulable taint, never two),
// NotReady; the run stays consistent. (Failed before the drain dropped
// the cordon taint it found: 5 nodes carried it twice.)
func TestShapeUnderChurn(t *testing.T) {
	cfg, err := parseFlags([]string{"-preset", "taints-affinity", "-nodes", "300", "-pods-per-node", "5", "-duration", "500ms", "-deterministic",
		"-drain-rate", "200", "-node-add-rate", "40", "-node-remove-rate", "5", "-not-ready-rate", "10"}, io.Discard)
	require.NoError(t, err)
	var dup []string
	rep, err := run(context.Background(), cfg, nil, hooks{beforeAudit: func(_ *schedcache.Cache, truth *Truth) {
		truth.nodes.Range(func(name string, r nodeRecord) bool {
			seen := map[v1.Taint]bool{}
			for _, tn := range r.Node.Spec.Taints {
				if seen[tn] {
					dup = append(dup, name)
				}
				seen[tn] = true
			}
			return true
		})
	}})
	require.NoError(t, err)
	require.True(t, rep.Consistent, "audit %+v", rep.Audit)
	require.Positive(t, rep.Churn.NodeAdds)
	require.Positive(t, rep.Churn.Drains)
	require.Empty(t, dup, "nodes with a taint twice")
}
