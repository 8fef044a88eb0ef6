package schedcache_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/workload"
)

var (
	stdOnce    sync.Once
	stdCluster *workload.Cluster
)

func standardCluster() *workload.Cluster {
	stdOnce.Do(func() { stdCluster = workload.Build(workload.Standard()) })
	return stdCluster
}

func loadedCache(b *testing.B, opts ...schedcache.Option) *schedcache.Cache {
	b.Helper()
	cl := standardCluster()
	c, err := schedcache.New(context.Background(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.Feed(c.AddNodeAsync, c.AddPodAsync); err != nil {
		b.Fatal(err)
	}
	if err := c.Sync(); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	return c
}

// BenchmarkCycle is one synchronous scheduling cycle on the loaded standard
// cluster: AssumePod, FinishBinding, AddPod (the confirmation), RemovePod.
func BenchmarkCycle(b *testing.B) {
	c := loadedCache(b)
	defer c.Close()
	cl := standardCluster()
	pods := make([]*podPair, 1024)
	for i := range pods {
		p := pod(fmt.Sprint("cycle-", i), cl.Nodes[(i*7919)%len(cl.Nodes)].Name, 100)
		pods[i] = &podPair{p}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := pods[i%len(pods)].p
		if err := c.AssumePod(logger, p); err != nil {
			b.Fatal(err)
		}
		if err := c.FinishBinding(logger, p); err != nil {
			b.Fatal(err)
		}
		if err := c.AddPod(logger, p); err != nil {
			b.Fatal(err)
		}
		if err := c.RemovePod(logger, p); err != nil {
			b.Fatal(err)
		}
	}
}

type podPair struct{ p *v1.Pod }
