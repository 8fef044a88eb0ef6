package fwkpick

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	scfw "github.com/schedcache/schedcache/nodeinfo"
)

// Nominations: a pod nominated to a node is counted there by Filter for
// the other pods (not of a higher priority), tries its own node first,
// and is forgotten with Nominate(pod, ""). Preempt: a pod of a higher
// priority that fits nowhere gets a node and the victims DefaultPreemption
// deleted there, the lowest-priority pods first; one of priority 0 gets
// none; the choice follows the scheduler's random source alone.
func TestNominateAndPreempt(t *testing.T) {
	ctx := context.Background()
	logger := klog.Background()
	p, err := New(Config{Parallelism: 2})
	require.NoError(t, err)
	defer p.Close()
	c, err := schedcache.New(ctx)
	require.NoError(t, err)
	defer c.Close()
	for _, n := range []string{"node-0", "node-1"} {
		_, err := c.AddNode(logger, cpuNode(n))
		require.NoError(t, err)
	}
	np, err := p.NewFramework(ctx)
	require.NoError(t, err)
	defer np.Close()
	pick := func(pod string, cpu string, prio int32, nominated string) string {
		t.Helper()
		pp := cpuPod(pod, "", cpu)
		pp.Spec.Priority = &prio
		pp.Status.NominatedNodeName = nominated
		info, err := scfw.NewPodInfo(pp)
		require.NoError(t, err)
		node, err := np.Pick(ctx, c.Snapshot(), info, rand.New(rand.NewPCG(1, 1)), make([]int64, len(p.Plugins())))
		require.NoError(t, err)
		return node
	}
	// 3 of node-0's 4 CPUs nominated: a 2-CPU pod goes to node-1, both
	// times (the tie of two empty nodes is broken by the random source
	// otherwise).
	held := cpuPod("held", "", "3")
	prio := int32(10)
	held.Spec.Priority = &prio
	np.Nominate(held, "node-0")
	require.Equal(t, "node-1", pick("b", "2", 0, ""))
	require.Equal(t, "node-1", pick("b", "2", 0, ""))
	require.Equal(t, "node-0", pick("held", "3", 10, "node-0"), "the nominated pod takes its node first")
	np.Nominate(held, "")
	require.Empty(t, np.nom.NominatedPodsForNode("node-0"))

	// Fill both nodes with pods of priorities 1 and 2, then preempt. The
	// victims have one start time, as bound pods do in the simulator:
	// upstream reads the wall clock for a pod without one
	// (util.GetPodStartTime), which would decide the tie between the two
	// nodes by the moment each was ranked, not by the seed.
	started := metav1.Unix(1_700_000_000, 0)
	for _, n := range []string{"node-0", "node-1"} {
		for k, prio := range []int32{1, 2} {
			v := cpuPod(n+"-v"+string(rune('a'+k)), n, "2")
			v.Status.StartTime = &started
			v.Spec.Priority = &prio
			require.NoError(t, c.AddPod(logger, v))
		}
	}
	np.Record = true
	pre := func(cpu string, prio int32, seed uint64) ([]string, string) {
		t.Helper()
		pp := cpuPod("pre", "", cpu)
		pp.Spec.Priority = &prio
		info, err := scfw.NewPodInfo(pp)
		require.NoError(t, err)
		require.Empty(t, pick("pre", cpu, prio, ""), "fits nowhere")
		out, err := np.Preempt(ctx, c.Snapshot(), info, rand.New(rand.NewPCG(seed, 1)))
		require.NoError(t, err)
		var vs []string
		for _, v := range out.Victims {
			vs = append(vs, v.Name)
		}
		return vs, out.Node
	}
	vs, node := pre("2", 10, 1)
	require.Equal(t, []string{node + "-va"}, vs, "the priority-1 pod of the chosen node")
	require.Equal(t, np.LastPreemption.Node, node)
	again, node2 := pre("2", 10, 1)
	require.Equal(t, node, node2, "the same seed, the same choice")
	require.Equal(t, vs, again)
	vs, node = pre("4", 10, 1)
	require.Equal(t, []string{node + "-va", node + "-vb"}, vs)
	vs, node = pre("2", 0, 1)
	require.Empty(t, vs, "no pod of a lower priority")
	require.Empty(t, node)
}
