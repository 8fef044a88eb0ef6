package sim

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

func explainNode(name string, cpu, memGi int64) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"zone": "a"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI), v1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI),
			v1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI)}}}
}

func explainPod(name, node string, cpu, memGi int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI), v1.ResourceMemory: *resource.NewQuantity(memGi<<30, resource.BinarySI)}}}}}}
}

// tinyCluster: n0 cordoned, n1 tainted dedicated=gpu:NoSchedule, n2 with
// 500m of CPU left, n3 with 2 CPU and 6 GiB left, n4 empty (4 CPU, 8 GiB).
func tinyCluster(t *testing.T) *schedcache.Cache {
	t.Helper()
	c, err := schedcache.New(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	nodes := []*v1.Node{explainNode("n0", 4000, 8), explainNode("n1", 4000, 8), explainNode("n2", 2000, 8), explainNode("n3", 4000, 8), explainNode("n4", 4000, 8)}
	nodes[0].Spec.Unschedulable = true
	nodes[1].Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	for _, n := range nodes {
		_, err := c.AddNode(klog.Background(), n)
		require.NoError(t, err)
	}
	require.NoError(t, c.AddPod(klog.Background(), explainPod("full", "n2", 1500, 1)))
	require.NoError(t, c.AddPod(klog.Background(), explainPod("half", "n3", 1000, 1)))
	return c
}

// The built-in picker explains itself on a tiny cluster, exactly: every
// node drawn is examined once, each rejection is blamed on the check
// upstream's plugins would blame, the feasible nodes are scored by their
// free CPU and memory fractions; and the explained pick makes the same
// decision with the same draws as the plain one.
func TestExplainLeastAllocatedTiny(t *testing.T) {
	c := tinyCluster(t)
	snap := c.Snapshot()
	info, err := nodeinfo.NewPodInfo(explainPod("new", "", 1000, 1))
	require.NoError(t, err)
	r1, r2 := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	node, e := pickExplained(r1, snap, info, 200) // 200 draws of 5 nodes: every node drawn
	require.Equal(t, pick(r2, snap, info, 200), node)
	require.Equal(t, r2.Uint64(), r1.Uint64(), "the explained pick takes the same draws")
	require.Equal(t, "n4", node)
	e.Node = node
	e.normalise(3)
	require.Equal(t, 5, e.Examined)
	require.Equal(t, 2, e.Feasible)
	require.Equal(t, []FilterCount{
		{"NodeResourcesFit", 1, "Insufficient cpu"},
		{"NodeUnschedulable", 1, "node(s) were unschedulable"},
		{"TaintToleration", 1, "node(s) had untolerated taint {dedicated: gpu}"},
	}, e.Filtered)
	// n4: (3000/4000 + 7/8) * 50 = 81.25; n3: (2000/4000 + 6/8) * 50 = 62.5.
	require.Equal(t, []NodeScore{
		{"n4", 81.25, map[string]float64{"LeastAllocated": 81.25}},
		{"n3", 62.5, map[string]float64{"LeastAllocated": 62.5}},
	}, e.Top)
	e.normalise(1)
	require.Len(t, e.Top, 1)

	// A pod that fits nowhere: no node, every examined node rejected.
	big, err := nodeinfo.NewPodInfo(explainPod("big", "", 8000, 1))
	require.NoError(t, err)
	node, e = pickExplained(rand.New(rand.NewPCG(1, 2)), snap, big, 200)
	require.Empty(t, node)
	require.Equal(t, 0, e.Feasible)
	var rejected int64
	for _, f := range e.Filtered {
		rejected += f.Nodes
	}
	require.Equal(t, int64(5), rejected)
}

// whyNotFit blames a node exactly when fits refuses it, in upstream's
// plugin order (a cordoned and tainted node is NodeUnschedulable's).
func TestWhyNotFitAgreesWithFits(t *testing.T) {
	cordoned := explainNode("a", 1000, 1)
	cordoned.Spec.Unschedulable = true
	cordoned.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoExecute}}
	tainted := explainNode("b", 1000, 1)
	tainted.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}, {Key: "p", Effect: v1.TaintEffectPreferNoSchedule}}
	plain := explainNode("c", 1000, 1)
	soft := explainNode("d", 1000, 1)
	soft.Spec.Taints = []v1.Taint{{Key: "p", Effect: v1.TaintEffectPreferNoSchedule}}
	selecting := explainPod("s", "", 1, 0)
	selecting.Spec.NodeSelector = map[string]string{"zone": "b"}
	tolerating := explainPod("t", "", 1, 0)
	tolerating.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	want := map[string]string{"a/p": "NodeUnschedulable", "b/p": "TaintToleration", "c/p": "", "d/p": "",
		"a/s": "NodeUnschedulable", "b/s": "TaintToleration", "c/s": "NodeAffinity", "d/s": "NodeAffinity",
		"a/t": "", "b/t": "", "c/t": "", "d/t": ""}
	for _, n := range []*v1.Node{cordoned, tainted, plain, soft} {
		for name, p := range map[string]*v1.Pod{"p": explainPod("p", "", 1, 0), "s": selecting, "t": tolerating} {
			plugin, reason := whyNotFit(p, n)
			require.Equal(t, want[n.Name+"/"+name], plugin, "%s/%s", n.Name, name)
			require.Equal(t, fits(p, n), plugin == "", "%s/%s: fits and whyNotFit disagree", n.Name, name)
			require.Equal(t, plugin == "", reason == "")
		}
	}
}

func explainArgs(extra ...string) []string {
	return append([]string{"-deterministic", "-nodes", "40", "-pods-per-node", "34", "-duration", "100ms",
		"-seed", "3", "-sample", "8", "-keep-pods", "-json", "-"}, extra...)
}

// -explain N: the JSON report lists the first N attempts, in order, in
// the documented shape; the text report (stderr with -json -) sums them.
func TestExplainJSON(t *testing.T) {
	code, rep, stderr := runJSON(t, explainArgs("-explain", "5", "-explain-top", "2"), hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Len(t, rep.Explanations, 5)
	for i, e := range rep.Explanations {
		require.Equal(t, int64(i+1), e.Attempt)
		require.True(t, strings.HasPrefix(e.Pod, "ns-"), e.Pod)
		require.GreaterOrEqual(t, e.Scheduler, 0)
		require.NotNil(t, e.Filtered)
		require.NotNil(t, e.Top)
		require.LessOrEqual(t, len(e.Top), 2)
		require.LessOrEqual(t, e.Feasible, e.Examined)
		require.LessOrEqual(t, e.Examined, 8)
		var rejected int64
		for _, f := range e.Filtered {
			require.Contains(t, []string{"NodeResourcesFit", "NodeUnschedulable", "TaintToleration", "NodeAffinity"}, f.Plugin)
			require.NotEmpty(t, f.Reason)
			rejected += f.Nodes
		}
		require.Equal(t, int64(e.Examined-e.Feasible), rejected)
		if e.Node != "" {
			require.Equal(t, e.Node, e.Top[0].Node, "the chosen node heads the top")
			require.Contains(t, e.Top[0].Plugins, "LeastAllocated")
		} else {
			require.Empty(t, e.Top)
		}
	}
	require.Contains(t, stderr, "explain:   5 attempts explained")
	require.Contains(t, stderr, "  #1 ns-")

	// The raw shape: the keys the docs give.
	var stdout, errb bytes.Buffer
	require.Equal(t, exitOK, realMain(context.Background(), explainArgs("-explain", "1"), &stdout, &errb, false, hooks{}))
	for _, key := range []string{`"explanations": [`, `"pod": `, `"node": `, `"attempt": 1`, `"filtered": [`, `"top": [`, `"plugins": {`, `"score": `} {
		require.Contains(t, stdout.String(), key)
	}
	// Without -explain: no explanations, no text line.
	code, rep, stderr = runJSON(t, explainArgs(), hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, rep.Explanations)
	require.NotContains(t, stderr, "explain:")
}

// Explaining changes nothing of a deterministic run (the same digest),
// and one seed explains the same attempts the same way; the sample
// follows the seed and the pods' names.
func TestExplainDeterministic(t *testing.T) {
	_, plain, _ := runJSON(t, explainArgs(), hooks{})
	code, a, stderr := runJSON(t, explainArgs("-explain-rate", "0.2", "-explain", "2"), hooks{})
	require.Equal(t, exitOK, code, stderr)
	_, b, _ := runJSON(t, explainArgs("-explain-rate", "0.2", "-explain", "2"), hooks{})
	require.Equal(t, plain.Digest, a.Digest, "explaining changed the run")
	require.Equal(t, a.Explanations, b.Explanations)
	attempts := a.Counts.Scheduled + a.Counts.Unschedulable + a.Counts.FailedBindings + a.Counts.Conflicts
	require.Greater(t, len(a.Explanations), 2)
	require.Less(t, int64(len(a.Explanations)), attempts/2, "a sample of 0.2")
	require.Equal(t, int64(1), a.Explanations[0].Attempt)
	require.Equal(t, int64(2), a.Explanations[1].Attempt)
	for _, e := range a.Explanations[2:] {
		require.True(t, sampled(splitmix(3), e.Pod, 0.2), e.Pod)
	}
	_, c, _ := runJSON(t, explainArgs("-explain-rate", "1"), hooks{})
	require.Equal(t, plain.Digest, c.Digest)
	require.Equal(t, attempts, int64(len(c.Explanations)), "a rate of 1 explains every attempt")
}

// A real-time run explains too (attempts numbered across schedulers, in
// order); a picker that is no Explainer gives the pod and node only, and
// the text report says so.
func TestExplainRealtimeAndPlainPicker(t *testing.T) {
	code, rep, stderr := runJSON(t, []string{"-nodes", "40", "-pods-per-node", "10", "-duration", "100ms", "-schedulers", "3", "-explain", "4", "-json", "-"}, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Len(t, rep.Explanations, 4)
	for i, e := range rep.Explanations {
		require.Equal(t, int64(i+1), e.Attempt)
		require.NotEmpty(t, e.Top)
	}
	code, rep, stderr = runJSON(t, []string{"-deterministic", "-nodes", "20", "-pods-per-node", "2", "-duration", "50ms", "-explain", "2", "-json", "-"}, hooks{picker: &firstFit{}})
	require.Equal(t, exitOK, code, stderr)
	require.Len(t, rep.Explanations, 2)
	require.NotEmpty(t, rep.Explanations[0].Node)
	require.Empty(t, rep.Explanations[0].Filtered)
	require.Contains(t, stderr, "the first-fit picker does not explain its decisions")
}

// Bad explanation flags are refused before any work: exit 2, one line
// naming the flag.
func TestExplainFlags(t *testing.T) {
	for _, c := range []struct{ args []string }{
		{[]string{"-explain", "-1"}}, {[]string{"-explain", fmt.Sprint(maxExplain + 1)}}, {[]string{"-explain", "x"}},
		{[]string{"-explain-rate", "1.5"}}, {[]string{"-explain-rate", "-0.1"}}, {[]string{"-explain-rate", "NaN"}},
		{[]string{"-explain-top", "0"}}, {[]string{"-explain-top", "101"}},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(context.Background(), c.args, &stdout, &stderr, false, hooks{})
		require.Equal(t, exitUsage, code, "%v: %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.args[0], "%v", c.args)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%v: %q", c.args, stderr.String())
		require.Empty(t, stdout.String())
	}
}
