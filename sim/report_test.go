package sim

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A run shorter than 1 s (scheduling-basic-5000 schedules its pods in a
// fraction of a second) reports its throughput over one partial window,
// the whole run, not Average 0 over "0" windows (issue 28).
func TestShortRunThroughput(t *testing.T) {
	args := []string{"-preset", "scheduling-basic-5000", "-nodes", "200", "-pods", "2000", "-deterministic", "-json", "-"}
	code, rep, stderr := runJSON(t, args, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Less(t, rep.Timing.RunSeconds, 1.0, "the run is shorter than one window")
	tp := rep.DataItems[0]
	require.Equal(t, "SchedulingThroughput", tp.Labels["Metric"])
	require.Equal(t, "1", tp.Labels["Windows"])
	secs, err := strconv.ParseFloat(tp.Labels["WindowSeconds"], 64)
	require.NoError(t, err)
	require.InDelta(t, rep.Timing.RunSeconds, secs, 0.001)
	require.Positive(t, rep.Timing.PodsPerSecOverall)
	for _, k := range []string{"Average", "Perc50", "Perc99"} {
		require.InDelta(t, rep.Timing.PodsPerSecOverall, tp.Data[k], 1e-6*rep.Timing.PodsPerSecOverall, k)
	}
	require.Contains(t, stderr, "run shorter than 1 s: one partial window")
	require.Equal(t, []float64{400}, windowsOf([]int64{200}, 500*time.Millisecond, time.Second))
	require.Empty(t, windowsOf(nil, 0, time.Second))
}
