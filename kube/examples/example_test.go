package examples_test

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/kube/examples"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

// Every pod is bound (failed bindings are forgotten and placed again),
// confirmed by the informer, and the metrics and comparer agree.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := examples.Config{Nodes: 4, Pods: 8, FailureRate: 0}
	if err := examples.Run(ctx, os.Stdout, cfg, examples.FewestPods{}); err != nil {
		panic(err)
	}
	// Output:
	// scheduled 8 pods on 4 nodes: 0 bindings failed and were forgotten
	//   node-0: 2 pods, 200m CPU requested
	//   node-1: 2 pods, 200m CPU requested
	//   node-2: 2 pods, 200m CPU requested
	//   node-3: 2 pods, 200m CPU requested
	// cache agrees with the informers: true
	// schedcache_bindings_total{result="bound"} 8
	// schedcache_bindings_total{result="forgotten"} 0
	// schedcache_bindings_total{result="refused"} 0
	// scheduler_cache_size{type="assumed_pods"} 0
	// scheduler_cache_size{type="nodes"} 4
	// scheduler_cache_size{type="pods"} 8
}

// With failing bindings, the failed ones are forgotten and retried; the
// end state is the same.
func TestRunWithFailures(t *testing.T) {
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, examples.Run(ctx, &out, examples.Config{Nodes: 3, Pods: 12, FailureRate: 0.5, Seed: 3}, examples.FewestPods{}))
	s := out.String()
	require.Contains(t, s, "cache agrees with the informers: true")
	require.Contains(t, s, `scheduler_cache_size{type="pods"} 12`)
	require.Contains(t, s, `scheduler_cache_size{type="assumed_pods"} 0`)
	require.NotContains(t, s, "12 pods on 3 nodes: 0 bindings failed", "seed 3 at rate 0.5 fails some bindings")
	require.Contains(t, s, `schedcache_bindings_total{result="bound"} 12`)
}

// An invalid Config is a *ConfigError naming the field, before any work:
// no panic for a negative pod count, no NaN or out-of-range failure rate
// (issue 28).
func TestConfigValidate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		cfg   examples.Config
		field string
	}{
		{examples.Config{Nodes: 4, Pods: -5}, "Pods"},
		{examples.Config{Nodes: 0, Pods: 5}, "Nodes"},
		{examples.Config{Nodes: examples.MaxNodes + 1, Pods: 5}, "Nodes"},
		{examples.Config{Nodes: 4, Pods: 5, FailureRate: math.NaN()}, "FailureRate"},
		{examples.Config{Nodes: 4, Pods: 5, FailureRate: 2}, "FailureRate"},
		{examples.Config{Nodes: 4, Pods: 5, FailureRate: 1}, "FailureRate"},
		{examples.Config{Nodes: 4, Pods: 5, FailureRate: -0.1}, "FailureRate"},
		{examples.Config{Nodes: 4, Pods: 5, Latency: -time.Second}, "Latency"},
	} {
		var out strings.Builder
		err := examples.Run(ctx, &out, tc.cfg, examples.FewestPods{})
		require.ErrorIs(t, err, examples.ErrInvalidConfig, "%+v", tc.cfg)
		var ce *examples.ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, tc.field, ce.Field)
		require.Empty(t, out.String())
	}
	require.NoError(t, examples.Config{Nodes: 1, Pods: 0, FailureRate: 0.99}.Validate())
}

// Pods go only where they fit: 2 nodes of 4 CPUs hold 40 pods of 100m
// each; the others stay pending and are reported (issue 28: 1,000 pods
// went on one 110-pod node).
func TestRunRespectsCapacity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	require.NoError(t, examples.Run(ctx, &out, examples.Config{Nodes: 2, Pods: 100}, examples.FewestPods{}))
	s := out.String()
	require.Contains(t, s, "scheduled 80 of 100 pods on 2 nodes: 0 bindings failed and were forgotten; 20 pods stay pending: no node fits them")
	require.Contains(t, s, "node-0: 40 pods, 4000m CPU requested")
	require.Contains(t, s, "node-1: 40 pods, 4000m CPU requested")
	require.Contains(t, s, "cache agrees with the informers: true")
	require.Contains(t, s, `scheduler_cache_size{type="pods"} 80`)
}
