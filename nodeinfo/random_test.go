package nodeinfo

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

// TestRandomNodeStateInvariants drives NodeStates with random pods and
// random add/remove/node/image sequences and checks, after every step, the
// section 7 invariants that concern one NodeInfo, plus that every earlier
// Freeze result is unchanged. (The module cannot import upstream; the same
// generator was also run differentially against k8s.io/kubernetes v1.35.4
// outside the module.)
func TestRandomNodeStateInvariants(t *testing.T) {
	rounds, steps := 300, 80
	if testing.Short() {
		rounds = 30
	}
	r := rand.New(rand.NewPCG(42, 7))
	next, last := counter()
	for round := range rounds {
		s := NewNodeState(next)
		var live []*PodInfo
		portModel := HostPortInfo{} // upstream's set semantics, replayed
		type frozenAt struct {
			n    *NodeInfo
			view nodeInfoView
		}
		var frozen []frozenAt
		prevGen := s.Generation()
		for step := range steps {
			ctx := fmt.Sprintf("round %d step %d", round, step)
			switch op := r.IntN(10); {
			case op < 5 || len(live) == 0:
				pod := genPod(r, fmt.Sprintf("r%d-s%d", round, step), []string{"ns1", "ns2"}[r.IntN(2)])
				p := mustPodInfo(t, pod)
				s.AddPod(p)
				live = append(live, p)
				for _, hp := range p.HostPorts() {
					portModel.Add(hp.IP, string(hp.Protocol), hp.Port)
				}
			case op < 8:
				j := r.IntN(len(live))
				p := live[j]
				live = append(live[:j], live[j+1:]...)
				require.NoError(t, s.RemovePod(p.Key(), p.HasAffinity(), p.HasRequiredAntiAffinity(), p.HasRequiredNonHostScopedAntiAffinity()), ctx)
				for _, hp := range p.HostPorts() {
					portModel.Remove(hp.IP, string(hp.Protocol), hp.Port)
				}
			case op == 8:
				if r.IntN(3) == 0 {
					s.ClearNode()
				} else {
					s.SetNode(mkNode("n", genList(r, 4)))
				}
			default:
				gen := s.Generation()
				err := s.RemovePod("absent", r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0)
				require.ErrorIs(t, err, ErrPodNotOnNode, ctx)
				require.Equal(t, gen, s.Generation(), ctx)
				s.SetImageStates(map[string]ImageStateSummary{fmt.Sprint(step): {Size: int64(step), NumNodes: 1}})
			}
			require.Equal(t, last(), s.Generation(), ctx)
			require.GreaterOrEqual(t, s.Generation(), prevGen, ctx)
			prevGen = s.Generation()

			n := s.Freeze()
			checkInvariants(t, ctx, n, live)
			require.Equal(t, portModel, n.UsedPorts(), ctx)
			if r.IntN(4) == 0 {
				frozen = append(frozen, frozenAt{n, viewOf(n)})
			}
		}
		for i, f := range frozen {
			require.Equal(t, f.view, viewOf(f.n), "round %d: frozen copy %d changed", round, i)
		}
	}
}

func checkInvariants(t *testing.T, ctx string, n *NodeInfo, live []*PodInfo) {
	t.Helper()
	require.Equal(t, len(live), n.NumPods(), ctx)

	// Pods is a permutation of live; sub-lists hold exactly the qualifying
	// pods (removals here pass the pod's own classification).
	want := map[string]bool{}
	var wantAff, wantAnti, wantNonHost []string
	var req Resource
	scalars := map[v1.ResourceName]int64{}
	var non0CPU, non0Mem int64
	pvcs := map[string]int{}
	ports := map[HostPort]int{}
	for _, p := range live {
		want[p.Key()] = true
		if p.HasAffinity() {
			wantAff = append(wantAff, p.Key())
		}
		if p.HasRequiredAntiAffinity() {
			wantAnti = append(wantAnti, p.Key())
		}
		if p.HasRequiredNonHostScopedAntiAffinity() {
			wantNonHost = append(wantNonHost, p.Key())
		}
		pr := p.Requests()
		req.MilliCPU += pr.MilliCPU
		req.Memory += pr.Memory
		req.EphemeralStorage += pr.EphemeralStorage
		for _, sq := range pr.Scalars() {
			scalars[sq.Name] += sq.Value
		}
		non0CPU += p.NonZeroCPU()
		non0Mem += p.NonZeroMemory()
		for _, k := range p.PVCKeys() {
			pvcs[k]++
		}
		for _, hp := range p.HostPorts() {
			ports[hp]++
		}
	}
	got := map[string]bool{}
	for _, p := range n.Pods() {
		got[p.Key()] = true
	}
	require.Equal(t, want, got, ctx)
	require.ElementsMatch(t, wantAff, keysOf(n.PodsWithAffinity()), ctx)
	require.ElementsMatch(t, wantAnti, keysOf(n.PodsWithRequiredAntiAffinity()), ctx)
	require.ElementsMatch(t, wantNonHost, keysOf(n.PodsWithRequiredNonHostScopedAntiAffinity()), ctx)
	require.Equal(t, len(wantNonHost), n.NumPodsWithRequiredNonHostScopedAntiAffinity(), ctx)
	if len(live) == 0 {
		require.Nil(t, n.Pods(), ctx)
	}
	if len(wantAff) == 0 {
		require.Nil(t, n.PodsWithAffinity(), ctx)
	}
	if len(wantAnti) == 0 {
		require.Nil(t, n.PodsWithRequiredAntiAffinity(), ctx)
	}
	if len(wantNonHost) == 0 {
		require.Nil(t, n.PodsWithRequiredNonHostScopedAntiAffinity(), ctx)
	}

	// Invariant 3: totals are sums; scalar keys may linger at zero.
	got3 := n.Requested()
	require.Equal(t, req.MilliCPU, got3.MilliCPU, ctx)
	require.Equal(t, req.Memory, got3.Memory, ctx)
	require.Equal(t, req.EphemeralStorage, got3.EphemeralStorage, ctx)
	require.Zero(t, got3.AllowedPodNumber, ctx)
	for name, v := range scalars {
		require.Equal(t, v, got3.Scalar(name), ctx)
		require.True(t, got3.HasScalar(name), ctx)
	}
	for _, sq := range got3.Scalars() {
		require.Equal(t, scalars[sq.Name], sq.Value, "%s: scalar %s", ctx, sq.Name)
	}
	require.Equal(t, Resource{MilliCPU: non0CPU, Memory: non0Mem}, n.NonZeroRequested(), ctx)

	// Invariant 5: PVC counts are the volume references.
	require.Equal(t, pvcs, n.PVCRefCounts(), ctx)

	// Invariant 6: used ports are a subset of the pods' ports. (A triple
	// once shared by two pods can go missing, so equality is checked by the
	// caller against a replay of upstream's set operations.)
	union := HostPortInfo{}
	for hp := range ports {
		union.Add(hp.IP, string(hp.Protocol), hp.Port)
	}
	used := n.UsedPorts()
	for ip, m := range used {
		for pp := range m {
			_, ok := union[ip][pp]
			require.True(t, ok, "%s: stray port %s %v", ctx, ip, pp)
		}
	}
}
