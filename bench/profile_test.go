package bench

import (
	"flag"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"testing"
)

var flagTimedProfile = flag.String("bench.timedprofile", "", "profile each benchmark's timed region only (setup excluded): a CPU profile in `prefix`<sub-benchmark name>.cpu.prof, and heap profiles at its start and end in <...>.heap0.prof and <...>.heap1.prof (compare allocations with pprof -sample_index=alloc_space -diff_base heap0 heap1); unlike -test.cpuprofile, which covers the whole process")

var flagTimedTrace = flag.String("bench.timedtrace", "", "write an execution trace of each benchmark's timed region only (setup excluded) to `prefix`<sub-benchmark name>.trace, for go tool trace (scheduling delays between the actors); when a benchmark function runs more than once, the last run's trace is kept")

var profileNameRE = regexp.MustCompile(`[^A-Za-z0-9_.=-]+`)

// timedProfile starts the profiles of the timed region when
// -bench.timedprofile is set and returns the function that stops them; call
// it right after b.ResetTimer and defer the result. Without the flag both
// are no-ops. With the flag, the timer stops while the heap profiles are
// written, and stops for good when the returned function runs. When a
// benchmark function runs more than once (b.N = 1 first), the last run's
// profiles are kept.
func timedProfile(b *testing.B) func() {
	b.Helper()
	stopTrace := timedTrace(b)
	if *flagTimedProfile == "" {
		return stopTrace
	}
	prefix := *flagTimedProfile + profileNameRE.ReplaceAllString(b.Name(), "_")
	b.StopTimer()
	writeHeap(b, prefix+".heap0.prof")
	b.StartTimer()
	f, err := os.Create(prefix + ".cpu.prof")
	if err != nil {
		b.Fatalf("timed profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		b.Fatalf("timed profile: %v", err)
	}
	return func() {
		stopTrace()
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("timed profile: %v", err)
		}
		b.StopTimer()
		writeHeap(b, prefix+".heap1.prof")
	}
}

// timedTrace starts the execution trace of the timed region when
// -bench.timedtrace is set and returns the function that stops it (a no-op
// without the flag).
func timedTrace(b *testing.B) func() {
	b.Helper()
	if *flagTimedTrace == "" {
		return func() {}
	}
	f, err := os.Create(*flagTimedTrace + profileNameRE.ReplaceAllString(b.Name(), "_") + ".trace")
	if err != nil {
		b.Fatalf("timed trace: %v", err)
	}
	if err := trace.Start(f); err != nil {
		_ = f.Close()
		b.Fatalf("timed trace: %v", err)
	}
	return func() {
		trace.Stop()
		if err := f.Close(); err != nil {
			b.Errorf("timed trace: %v", err)
		}
	}
}

// writeHeap runs a GC, which publishes every allocation so far to the heap
// profile, and writes that profile to path. Call it with the timer stopped.
func writeHeap(b *testing.B, path string) {
	b.Helper()
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		b.Errorf("timed profile: %v", err)
		return
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Errorf("timed profile: %v", err)
	}
	if err := f.Close(); err != nil {
		b.Errorf("timed profile: %v", err)
	}
}
