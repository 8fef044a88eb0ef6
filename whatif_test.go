package schedcache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/framework"
)

// whatifCluster starts a cache holding nodes n0..n(nodes-1) in two zones
// and podsPerNode added pods on each.
func whatifCluster(t *testing.T, nodes, podsPerNode int) *schedcache.Cache {
	t.Helper()
	c, err := schedcache.New(context.Background(), schedcache.WithShards(2))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	logger := klog.Background()
	for i := 0; i < nodes; i++ {
		_, err := c.AddNode(logger, exampleNode(fmt.Sprintf("n%d", i), []string{"A", "B"}[i%2]))
		require.NoError(t, err)
		for j := 0; j < podsPerNode; j++ {
			require.NoError(t, c.AddPod(logger, examplePod(fmt.Sprintf("p%d-%d", i, j), fmt.Sprintf("n%d", i), "100m")))
		}
	}
	return c
}

// snapSum renders what a snapshot shows that forks could disturb: pods,
// node totals and generations, in list order.
func snapSum(s *schedcache.Snapshot) string {
	out := fmt.Sprint(s.Epoch(), s.PodCount(), s.NodeCount(), s.NumNodes(), "|")
	s.Range(func(_ int, ni *framework.NodeInfo) bool {
		out += fmt.Sprint(ni.NodeName(), ni.Generation(), ni.NumPods(), ni.Requested().MilliCPU, ";")
		return true
	})
	return out
}

// Many goroutines fork the published snapshot of a cache that keeps
// publishing, and change and revert their forks; every base they forked
// stays exactly as it was, and each fork sees its base plus its own
// changes only (run with -race).
func TestForkWhileCachePublishes(t *testing.T) {
	c := whatifCluster(t, 16, 2)
	logger := klog.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the cache keeps publishing
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := examplePod(fmt.Sprintf("churn-%d", i), fmt.Sprintf("n%d", i%16), "10m")
			if err := c.AssumePod(logger, p); err != nil {
				t.Error(err)
				return
			}
			if err := c.ForgetPod(logger, p); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const workers = 8
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			type held struct {
				s   *schedcache.Snapshot
				sum string
			}
			var bases []held
			for r := 0; r < rounds; r++ {
				base := c.Snapshot()
				bases = append(bases, held{base, snapSum(base)})
				f := base.Fork()
				for i := 0; i < 5; i++ {
					if err := f.AssumePod(examplePod(fmt.Sprintf("w%d-%d-%d", w, r, i), fmt.Sprintf("n%d", (w+i)%16), "1")); err != nil {
						errc <- err
						return
					}
				}
				p := f.Point()
				if err := f.AddNode(exampleNode(fmt.Sprintf("extra-%d", w), "C")); err != nil {
					errc <- err
					return
				}
				if got, want := f.Snapshot().NumNodes(), base.NumNodes()+1; got != want {
					errc <- fmt.Errorf("fork lists %d nodes, want %d", got, want)
					return
				}
				if err := f.RevertTo(p); err != nil {
					errc <- err
					return
				}
				if got, want := f.Snapshot().PodCount(), base.PodCount()+5; got != want {
					errc <- fmt.Errorf("fork holds %d pods, want %d", got, want)
					return
				}
			}
			for i, h := range bases {
				if got := snapSum(h.s); got != h.sum {
					errc <- fmt.Errorf("base %d changed:\n%s\n%s", i, h.sum, got)
					return
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		require.NoError(t, <-errc)
	}
	close(stop)
	wg.Wait()
}

var _ = v1.Pod{}
