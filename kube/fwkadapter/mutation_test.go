package fwkadapter

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
)

// The tests of this file close gaps the mutation round of 2026-11-27 found
// (docs/mutation/round-2026-11-27.md): each fails with the plant its
// comment names (docs/mutation/plants.txt) and passes without it.

// The view's GetNonZeroRequested is the node's non-zero requests: a pod
// without a cpu or memory request counts upstream's defaults (100m,
// 200Mi) there and nothing in GetRequested, as upstream's NodeInfo (and
// MutableNodeInfo) aggregate it. Plant W01 (the view's non-zero requests
// built from Requested) shows the plain requests.
func TestViewNonZeroRequestedCountsDefaults(t *testing.T) {
	node := mkNode("n1")
	bare := mkPod("a", "n1")
	bare.Spec.Containers[0].Resources.Requests = nil
	cpuOnly := mkPod("b", "n1")
	cpuOnly.Spec.Containers[0].Resources.Requests = rl("cpu", "250m")
	st := nodeinfo.NewNodeState(nodeinfo.NextGeneration)
	st.SetNode(node)
	m := NewMutableNodeInfo(node)
	for _, p := range []*v1.Pod{bare, cpuOnly} {
		pi := podInfo(t, p)
		st.AddPod(pi)
		m.AddPodInfo(WrapPod(pi))
	}
	const mi = 1024 * 1024
	view := WrapNode(st.Freeze())
	if got, want := res(view.GetRequested()), [4]int64{250, 0, 0, 0}; got != want {
		t.Fatalf("GetRequested = %v, want %v", got, want)
	}
	want := [4]int64{100 + 250, 2 * 200 * mi, 0, 0}
	for name, got := range map[string][4]int64{
		"view":                    res(view.GetNonZeroRequested()),
		"view.Snapshot()":         res(view.Snapshot().GetNonZeroRequested()),
		"MutableNodeInfo (rules)": res(m.GetNonZeroRequested()),
	} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: GetNonZeroRequested = %v, want %v", name, got, want)
		}
	}
}
