//go:build unix

package bench

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// minorFaults returns the process's page faults so far (takeCPU's reading).
func minorFaults(t *testing.T) int64 {
	m := takeCPU()
	if !m.ok {
		t.Fatal("getrusage failed")
	}
	return m.minflt
}

// TestSettleHeapMakesFreePagesResident checks what the benchmarks rely on:
// after every free page went back to the OS, allocating 64 MiB of small
// objects faults on most of its pages, and after settleHeap it does not.
// It fails if settleHeap leaves the pages it frees returned to the OS, or
// touches pages other than those the next allocations take.
func TestSettleHeapMakesFreePagesResident(t *testing.T) {
	const live, alloc = 256 << 20, 64 << 20 // the live heap sets the goal: ~2x live
	ballast := make([]byte, live)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1
	}
	faultsOf := func(settle bool) int64 {
		debug.FreeOSMemory()
		if settle {
			settleHeap()
		}
		objs := make([][]byte, 0, alloc/256)
		f0 := minorFaults(t)
		for range cap(objs) {
			objs = append(objs, make([]byte, 256))
		}
		f := minorFaults(t) - f0
		runtime.KeepAlive(objs)
		return f
	}
	pages := int64(alloc / 4096)
	// Up to three tries: the kernel's transparent huge pages and, under
	// the race detector, the shadow memory's own faults (about 6,000
	// here) move the counts from run to run; a settleHeap that left the
	// pages returned would fail all three.
	// Under the race detector its shadow memory's own faults (about
	// 6,000, whatever settleHeap does) stay in the settled count while
	// the cold one varies (16,000 to 48,000 here), so the bound is half
	// there, a quarter without it.
	most := int64(4)
	if raceEnabled {
		most = 2
	}
	var cold, settled int64
	for try := 1; try <= 3; try++ {
		cold, settled = faultsOf(false), faultsOf(true)
		t.Logf("try %d: faults allocating %d OS pages: %d after FreeOSMemory, %d after settleHeap", try, pages, cold, settled)
		if cold >= pages/2 && settled <= cold/most && (raceEnabled || settled <= pages/20) {
			break
		}
	}
	runtime.KeepAlive(ballast)
	if cold < pages/2 {
		t.Fatalf("after FreeOSMemory only %d faults for %d pages: the test no longer sees returned pages fault", cold, pages)
	}
	if settled > cold/most {
		t.Fatalf("after settleHeap %d faults, want at most 1/%d of the %d after FreeOSMemory", settled, most, cold)
	}
	// The race detector's shadow memory faults on its own (about 6,000 of
	// ~48,000 here), so the absolute bound holds only without it.
	if !raceEnabled && settled > pages/20 {
		t.Fatalf("after settleHeap %d faults for %d pages, want under %d", settled, pages, pages/20)
	}
}
