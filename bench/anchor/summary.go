package anchor

import (
	"fmt"
	"time"
)

// Summary is res on one line: the workload and its size, pods/s, the
// latencies, the window and the garbage collections in it.
func Summary(res Result) string {
	return fmt.Sprintf("anchor %s %s: %d nodes, %d initial, %d/%d pods bound: %.1f pods/s, "+
		"latency p50 %s p90 %s p99 %s max %s, attempt p50 %s p99 %s, window %s (create %s, CPU %s, %.1f pods/CPU-s), "+
		"%d GCs (pause %s), setup %s, %d pods deleted (preemption), GOMAXPROCS %d",
		KubernetesVersion, res.Workload, res.Nodes, res.InitPods, res.Bound, res.Pods, res.PodsPerSecond,
		round(res.P50), round(res.P90), round(res.P99), round(res.Max), round(res.AttemptP50), round(res.AttemptP99),
		round(res.Window), round(res.CreateTime), round(res.CPUTime), res.PodsPerCPUSecond,
		res.NumGC, round(res.GCPause), round(res.Setup), res.Deleted, res.GOMAXPROCS)
}

// round shortens d for reading: three significant figures or so.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}
