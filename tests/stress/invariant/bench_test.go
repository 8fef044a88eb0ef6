package invariant

import (
	"context"
	"testing"

	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/workload"
)

func BenchmarkCheck(b *testing.B) {
	cl := workload.Build(workload.ClusterSpec{Nodes: 500, PodsPerNode: 4, Seed: 3})
	c, _ := schedcache.New(context.Background(), schedcache.WithShards(3))
	defer c.Close()
	for _, n := range cl.Nodes {
		c.AddNode(klog.Background(), n)
	}
	for _, p := range cl.Pods {
		c.AddPod(klog.Background(), p)
	}
	s := c.Snapshot()
	b.Run("check", func(b *testing.B) {
		for range b.N {
			CheckSnapshot(s, Options{})
		}
	})
	b.Run("recompute", func(b *testing.B) {
		for range b.N {
			CheckSnapshot(s, Options{RecomputeRequests: true})
		}
	})
	b.Run("fp", func(b *testing.B) {
		for range b.N {
			Fingerprint(s)
		}
	})
}
