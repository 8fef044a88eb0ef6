package bench

import (
	"flag"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"testing"
)

var flagTimedProfile = flag.String("bench.timedprofile", "", "profile each benchmark's timed region only (setup excluded): a CPU profile in `prefix`<sub-benchmark name>.cpu.prof, and heap profiles at its start and end in <...>.heap0.prof and <...>.heap1.prof (compare allocations with pprof -sample_index=alloc_space -diff_base heap0 heap1); unlike -test.cpuprofile, which covers the whole process")

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
	if *flagTimedProfile == "" {
		return func() {}
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
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("timed profile: %v", err)
		}
		b.StopTimer()
		writeHeap(b, prefix+".heap1.prof")
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
