package bench

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	upcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	upframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/schedcache/schedcache/kube/fwkadapter"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
	"github.com/schedcache/schedcache/workload"
)

// BenchmarkMutations measures upstream v1.37.2's snapshot mutations
// against schedcache's (kube/fwkadapter.Mutable over a fork), on the same
// cluster in the same process:
//
//   - op=preemption-dryrun: a mutation session of pod-group preemption
//     over 100 candidate nodes: StartMutations; on each candidate, remove
//     its first two pods (the victims), read the node back (what the
//     PreFilter extensions are handed), add the second one back (a
//     reprieve); EndMutations. Upstream's StartMutations deep-copies every
//     NodeInfo; schedcache's takes a fork point.
//   - op=podgroup-cycle: the pod-group scheduling cycle's snapshot
//     AssumePod of 100 pods on 100 nodes, each node read back after its
//     assume, then ForgetPod of the 100 in reverse order.
//
// Cluster: workload.Standard (5,000 nodes, 30 pods each); -bench.50k adds
// 50,000 nodes.
func BenchmarkMutations(b *testing.B) {
	for _, spec := range specs(true) {
		cl := workload.Build(spec)
		candidates := make([]string, 100)
		for i := range candidates {
			candidates[i] = cl.Nodes[(i*7919)%len(cl.Nodes)].Name
		}
		onNode := map[string][]*v1.Pod{}
		for _, p := range cl.Pods {
			onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], p)
		}
		r := workload.NewRand(17)
		group := make([]*v1.Pod, 100)
		for i := range group {
			group[i] = workload.NewPod(r, fmt.Sprintf("gang-%d", i), candidates[i])
		}
		lg := klog.Background()

		up := upcache.NewSnapshot(cl.Pods, cl.Nodes)
		upInfos := make([]*upframework.PodInfo, len(group))
		for i, p := range group {
			pi, err := upframework.NewPodInfo(p)
			if err != nil {
				b.Fatal(err)
			}
			upInfos[i] = pi
		}
		ours := snapshot.NewSnapshot(cl.Pods, cl.Nodes)
		m, err := fwkadapter.NewMutable(ours)
		if err != nil {
			b.Fatal(err)
		}
		ourInfos := make([]*fwkadapter.PodInfo, len(group))
		for i, p := range group {
			pi, err := nodeinfo.NewPodInfo(p)
			if err != nil {
				b.Fatal(err)
			}
			ourInfos[i] = fwkadapter.WrapPod(pi).(*fwkadapter.PodInfo)
		}
		ourVictims := map[string][2]*fwkadapter.PodInfo{}
		for _, n := range candidates {
			var v [2]*fwkadapter.PodInfo
			for k := range 2 {
				pi, err := nodeinfo.NewPodInfo(onNode[n][k])
				if err != nil {
					b.Fatal(err)
				}
				v[k] = fwkadapter.WrapPod(pi).(*fwkadapter.PodInfo)
			}
			ourVictims[n] = v
		}
		upVictims := map[string][2]*upframework.PodInfo{}
		for _, n := range candidates {
			var v [2]*upframework.PodInfo
			for k := range 2 {
				pi, err := upframework.NewPodInfo(onNode[n][k])
				if err != nil {
					b.Fatal(err)
				}
				v[k] = pi
			}
			upVictims[n] = v
		}

		type impl struct {
			name      string
			dryRun    func() error
			groupCycl func() error
		}
		impls := []impl{
			{name: Upstream,
				dryRun: func() error {
					if err := up.StartMutations(); err != nil {
						return err
					}
					for _, n := range candidates {
						v := upVictims[n]
						for _, pi := range v {
							if err := up.RemovePod(lg, pi.Pod, n); err != nil {
								return err
							}
						}
						if _, err := up.NodeInfos().Get(n); err != nil {
							return err
						}
						if err := up.AddPod(v[1], n); err != nil {
							return err
						}
					}
					return up.EndMutations()
				},
				groupCycl: func() error {
					for i, pi := range upInfos {
						if err := up.AssumePod(pi); err != nil {
							return err
						}
						if _, err := up.NodeInfos().Get(candidates[i]); err != nil {
							return err
						}
					}
					for i := len(group) - 1; i >= 0; i-- {
						if err := up.ForgetPod(lg, group[i]); err != nil {
							return err
						}
					}
					return nil
				}},
			{name: SchedCache,
				dryRun: func() error {
					if err := m.StartMutations(); err != nil {
						return err
					}
					for _, n := range candidates {
						v := ourVictims[n]
						for _, pi := range v {
							if err := m.RemovePod(lg, pi.GetPod(), n); err != nil {
								return err
							}
						}
						if _, err := m.NodeInfos().Get(n); err != nil {
							return err
						}
						if err := m.AddPod(v[1], n); err != nil {
							return err
						}
					}
					return m.EndMutations()
				},
				groupCycl: func() error {
					for i, pi := range ourInfos {
						if err := m.AssumePod(pi); err != nil {
							return err
						}
						if _, err := m.NodeInfos().Get(candidates[i]); err != nil {
							return err
						}
					}
					for i := len(group) - 1; i >= 0; i-- {
						if err := m.ForgetPod(lg, group[i]); err != nil {
							return err
						}
					}
					return nil
				}},
		}
		for _, op := range []string{"preemption-dryrun", "podgroup-cycle"} {
			for _, im := range impls {
				b.Run(fmt.Sprintf("op=%s/impl=%s/nodes=%s", op, im.name, sizeName(spec)), func(b *testing.B) {
					body := im.dryRun
					if op == "podgroup-cycle" {
						body = im.groupCycl
					}
					if err := body(); err != nil { // warm up, and check it works
						b.Fatal(err)
					}
					settleHeap()
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						if err := body(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
