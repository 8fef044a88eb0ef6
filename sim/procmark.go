package sim

import (
	"runtime/metrics"
	"time"
)

// procMark is a plain value: the process's CPU time and completed GC
// cycles at one moment, for a phase's span (phaseStat).
type procMark struct {
	cpu time.Duration
	gcs uint64
}

// markProc reads the process's CPU time and GC count now.
func markProc() procMark {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	var gcs uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		gcs = s[0].Value.Uint64()
	}
	return procMark{cpu: ProcessCPUTime(), gcs: gcs}
}
