package bench

import (
	"compress/gzip"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/sim/trace"
)

// replayFixture is a trace of a tiny deterministic loadgen run (20 nodes, 60
// pods at start, 10 ms of virtual time, 10% failed bindings: every call
// kind the simulator makes), made with
//
//	go run ./cmd/loadgen -deterministic -nodes 20 -pods-per-node 3 -duration 10ms \
//	    -confirm-delay 2ms -fail-rate 0.1 -sample 5 -seed 3 -quiet -record /tmp/t.jsonl
//	gzip -9n -c /tmp/t.jsonl > bench/testdata/replay-seed3.jsonl.gz
const replayFixture = "testdata/replay-seed3.jsonl.gz"

// replaySum is one Dump entry: its pod count and requested cpu/memory.
type replaySum struct {
	name             string
	pods             int
	milliCPU, memory int64
}

func totalsOf(pods, nodes int, sums []replaySum) trace.Totals {
	t := trace.Totals{Pods: pods, Nodes: nodes}
	for _, s := range sums {
		t.PerNode = append(t.PerNode, trace.NodeTotal{Name: s.name, Pods: s.pods, MilliCPU: s.milliCPU, Memory: s.memory})
	}
	t.SortNodes()
	return t
}

// upstreamTotals and schedTotals sum up a cache's Dump: counts from the
// cache, one NodeTotal per Dump entry.
func upstreamTotals(u *upstreamImpl) trace.Totals {
	d := u.Cache().Dump()
	var sums []replaySum
	for name, ni := range d.Nodes {
		req := ni.GetRequested()
		sums = append(sums, replaySum{name, len(ni.GetPods()), req.GetMilliCPU(), req.GetMemory()})
	}
	return totalsOf(u.PodCount(), u.NodeCount(), sums)
}

func schedTotals(t *testing.T, s *schedImpl) trace.Totals {
	d, err := s.Cache().Dump()
	require.NoError(t, err)
	var sums []replaySum
	for name, ni := range d.Nodes {
		req := ni.Requested()
		sums = append(sums, replaySum{name, ni.NumPods(), req.MilliCPU, req.Memory})
	}
	return totalsOf(s.PodCount(), s.NodeCount(), sums)
}

// upstreamTarget replays a trace on upstream: v1.37.2 has no
// FinishBinding, so the recorded calls do nothing and succeed, as
// schedcache's do without a TTL (the trace's runs used none).
type upstreamTarget struct{ *upstreamImpl }

func (upstreamTarget) FinishBinding(*v1.Pod) error { return nil }

// replayOn replays the fixture on tg and returns the result, each call's
// error-or-not, an added pod still in the cache at the end (the least
// UID) and the last pod removed (for the probes).
func replayOn(t *testing.T, tg trace.Target) (trace.Result, []bool, *v1.Pod, *v1.Pod) {
	t.Helper()
	f, err := os.Open(replayFixture)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var erred []bool
	var removed *v1.Pod
	live := map[string]*v1.Pod{}
	res, err := trace.ReplayFunc(context.Background(), tg, trace.NewReader(zr), func(i int, rec trace.Record, err error) {
		erred = append(erred, err != nil)
		switch rec.Op {
		case trace.AddPod:
			live[string(rec.Pod.UID)] = rec.Pod
		case trace.RemovePod:
			delete(live, string(rec.Pod.UID))
			removed = rec.Pod
		}
	})
	require.NoError(t, err)
	var added *v1.Pod
	for uid, p := range live {
		if added == nil || uid < string(added.UID) {
			added = p
		}
	}
	return res, erred, added, removed
}

// The same input on both caches: the recorded loadgen run replays on the
// upstream cache and on schedcache with every call's outcome (error or
// nil) as recorded and identical between the two, and the same final Dump
// totals (node and pod counts, per-node pods and requested cpu/memory),
// which are also the totals recorded at the end of the run. Then a few
// calls that must fail (a pod added twice, assumed while added, forgotten
// while not assumed, removed twice, an unknown node removed) fail on both.
func TestReplayTraceOnUpstream(t *testing.T) {
	up := newUpstream(Options{})
	defer up.Close()
	sc, err := newSchedCache(Options{})
	require.NoError(t, err)
	defer sc.Close()

	upRes, upErred, added, removed := replayOn(t, upstreamTarget{up})
	scRes, scErred, _, _ := replayOn(t, sc)
	require.Positive(t, upRes.Calls)
	require.Equal(t, upRes.Calls, scRes.Calls)
	require.Zero(t, upRes.Mismatches, "upstream: %v", upRes.Kept)
	require.Zero(t, scRes.Mismatches, "schedcache: %v", scRes.Kept)
	require.Equal(t, upErred, scErred)

	upTot, scTot := upstreamTotals(up), schedTotals(t, sc)
	require.Equal(t, upTot, scTot)
	require.NotNil(t, upRes.End)
	require.Empty(t, upRes.End.Diff(upTot, 0))
	require.Equal(t, 20, upTot.Nodes)
	require.Positive(t, upTot.Pods)

	require.NotNil(t, added)
	require.NotNil(t, removed)
	gone := &v1.Node{}
	gone.Name = "no-such-node"
	probes := []trace.Record{
		{Op: trace.AddPod, Pod: added},
		{Op: trace.AssumePod, Pod: added},
		{Op: trace.ForgetPod, Pod: added},
		{Op: trace.RemovePod, Pod: removed},
		{Op: trace.UpdatePod, OldPod: removed, Pod: removed},
		{Op: trace.RemoveNode, Node: gone},
	}
	for _, p := range probes {
		upErr, scErr := trace.Apply(upstreamTarget{up}, p), trace.Apply(sc, p)
		require.Error(t, upErr, "upstream %s", p.Op)
		require.Error(t, scErr, "schedcache %s", p.Op)
		require.Equal(t, upErr.Error(), scErr.Error(), "%s: error texts", p.Op)
	}
	require.Equal(t, upstreamTotals(up), schedTotals(t, sc), "the failed calls changed nothing")
	require.Equal(t, upTot, schedTotals(t, sc))
}
