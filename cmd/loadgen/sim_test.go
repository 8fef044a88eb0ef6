package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A short simulation schedules pods, confirms them through the event
// stream, and ends with the cache holding exactly the pods it should.
func TestRunSmall(t *testing.T) {
	cfg := defaultConfig()
	cfg.Nodes, cfg.PodsPerNode, cfg.Duration, cfg.Schedulers = 60, 10, 300*time.Millisecond, 2
	var progress bytes.Buffer
	rep, err := run(context.Background(), cfg, &progress)
	require.NoError(t, err)
	require.True(t, rep.Consistent, "final %d pods, expected %d, %d nodes, %d async errors", rep.FinalPods, rep.ExpectedPods, rep.FinalNodes, rep.AsyncErrors)
	require.Equal(t, 600, rep.InitialPods)
	require.Positive(t, rep.Scheduled)
	require.Equal(t, rep.Scheduled, rep.Adds, "every scheduled pod is confirmed by the informer")
	require.Equal(t, rep.Adds, rep.Removes)
	require.Equal(t, rep.InitialPods, rep.FinalPods, "one removal per confirmation keeps the size steady")
	require.Positive(t, rep.Assume.P50)
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"pods/s", "events/s", "assume latency", "snapshot read latency", "consistent: true", "GOMAXPROCS="} {
		require.True(t, strings.Contains(out.String(), want), "report lacks %q:\n%s", want, out.String())
	}
}
