package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/framework"
	"github.com/schedcache/schedcache/workload"
)

func imgFingerprint(t *testing.T, cl *workload.Cluster, opts ...schedcache.Option) map[string]string {
	ctx := context.Background()
	c, err := schedcache.New(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, n := range cl.Nodes {
		if err := c.AddNodeAsync(n); err != nil {
			t.Fatal(err)
		}
		if i%97 == 0 {
			runtime.Gosched()
		}
	}
	c.Sync()
	out := map[string]string{}
	c.Snapshot().Range(func(_ int, ni *framework.NodeInfo) bool {
		out[ni.Node().Name] = fmt.Sprint(ni.ImageStates())
		return true
	})
	return out
}

func TestTmpImages(t *testing.T) {
	cl := workload.Build(workload.ClusterSpec{Nodes: 5000, PodsPerNode: 1, Seed: 1})
	a := imgFingerprint(t, cl)
	for _, mb := range []int{1, 7, 64, 1000} {
		b := imgFingerprint(t, cl, schedcache.WithMaxBatch(mb))
		da := 0
		for k := range a {
			if a[k] != b[k] {
				da++
			}
		}
		t.Logf("maxbatch %d: %d nodes differ", mb, da)
	}
}
