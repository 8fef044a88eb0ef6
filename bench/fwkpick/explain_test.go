package fwkpick

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/schedcache/schedcache"
	scfw "github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim"
)

func cpuNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{v1.LabelHostname: name}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}}}
}

func cpuPod(name, node, cpu string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns-0", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("256Mi")}}}}}}
}

// An explanation of the real plugins: on 10 nodes of which 3 are full
// (3.9 of 4 CPUs requested), a pod asking for 1 CPU is refused by
// NodeResourcesFit on exactly those 3 ("Insufficient cpu"), every node is
// examined (fewer than 100: upstream examines them all), the 7 others are
// scored by the score plugins, each total the sum of the plugins' parts;
// and ExplainPick decides as Pick does, with the same rejections.
func TestExplainNamesNodeResourcesFit(t *testing.T) {
	ctx := context.Background()
	p, err := New(Config{Parallelism: 1})
	require.NoError(t, err)
	defer p.Close()
	c, err := schedcache.New(ctx)
	require.NoError(t, err)
	defer c.Close()
	full := map[string]bool{}
	for i := range 10 {
		n := cpuNode(fmt.Sprintf("node-%d", i))
		_, err := c.AddNode(klog.Background(), n)
		require.NoError(t, err)
		if i%3 == 0 && i > 0 {
			full[n.Name] = true
			require.NoError(t, c.AddPod(klog.Background(), cpuPod("big-"+n.Name, n.Name, "3900m")))
		}
	}
	require.Len(t, full, 3)
	info, err := scfw.NewPodInfo(cpuPod("new", "", "1"))
	require.NoError(t, err)

	np, err := p.NewFramework(ctx)
	require.NoError(t, err)
	defer np.Close()
	ref, err := p.NewFramework(ctx)
	require.NoError(t, err)
	defer ref.Close()
	rej, refRej := make([]int64, len(p.Plugins())), make([]int64, len(p.Plugins()))
	node, ex, err := np.ExplainPick(ctx, c.Snapshot(), info, rand.New(rand.NewPCG(1, 1)), rej, 3)
	require.NoError(t, err)
	refNode, err := ref.Pick(ctx, c.Snapshot(), info, rand.New(rand.NewPCG(1, 1)), refRej)
	require.NoError(t, err)
	require.Equal(t, refNode, node, "ExplainPick decides as Pick")
	require.Equal(t, refRej, rej, "ExplainPick rejects as Pick")
	require.NotEmpty(t, node)
	require.False(t, full[node])

	require.Equal(t, 10, ex.Examined)
	require.Equal(t, 7, ex.Feasible)
	require.Equal(t, []sim.FilterCount{{Plugin: names.NodeResourcesFit, Nodes: 3, Reason: "Insufficient cpu"}}, ex.Filtered)
	require.Equal(t, int64(3), rej[slices.Index(p.Plugins(), names.NodeResourcesFit)])
	require.Len(t, ex.Top, 7)
	for _, ns := range ex.Top {
		require.False(t, full[ns.Node], "a full node scored")
		require.Contains(t, ns.Plugins, names.NodeResourcesFit)
		require.Contains(t, ns.Plugins, names.NodeResourcesBalancedAllocation)
		sum := 0.0
		for _, s := range ns.Plugins {
			sum += s
		}
		require.Equal(t, ns.Score, sum, ns.Node)
	}
}

// Through sim: a deterministic run with the real plugins and -explain
// lists the explanations in the JSON report under upstream's plugin
// names, and explaining changes nothing of the run (the same digest).
func TestExplainThroughSim(t *testing.T) {
	run := func(extra ...string) sim.JSONReport {
		t.Helper()
		p, err := New(Config{Parallelism: 1})
		require.NoError(t, err)
		defer p.Close()
		args := append([]string{"-deterministic", "-nodes", "60", "-pods-per-node", "30", "-duration", "20ms", "-seed", "4",
			"-schedulers", "2", "-keep-pods", "-json", "-"}, extra...)
		var stdout, stderr bytes.Buffer
		code := sim.MainWith(context.Background(), args, &stdout, &stderr, false, sim.Options{Picker: p})
		require.Equal(t, 0, code, stderr.String())
		var rep sim.JSONReport
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
		return rep
	}
	plain := run()
	rep := run("-explain", "3")
	require.Equal(t, plain.Digest, rep.Digest, "explaining changed the run")
	require.Len(t, rep.Explanations, 3)
	for _, e := range rep.Explanations {
		require.NotEmpty(t, e.Node)
		require.Equal(t, e.Node, e.Top[0].Node)
		require.Contains(t, e.Top[0].Plugins, names.NodeResourcesBalancedAllocation)
		require.Positive(t, e.Examined)
		var rejected int64
		for _, f := range e.Filtered {
			require.Contains(t, DefaultPlugins, f.Plugin)
			rejected += f.Nodes
		}
		require.Equal(t, int64(e.Examined-e.Feasible), rejected)
	}
}
