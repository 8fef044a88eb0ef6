//go:build unix

package bench

import (
	"syscall"
	"testing"
	"time"
)

// cpuMeter is the CPU time the whole process (the caller, the cache's
// goroutines, readers and the runtime) had used when it was taken, from
// getrusage. Contract: a value; take one before a timed region and call
// report after it, on the benchmark's goroutine.
type cpuMeter struct {
	user, sys time.Duration
	minflt    int64 // page faults served without I/O (first touches included)
	ok        bool
}

func takeCPU() cpuMeter {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuMeter{}
	}
	return cpuMeter{user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano()), minflt: ru.Minflt, ok: true}
}

// report adds cpu-ns/op (user plus system CPU time of the process since m,
// per op; above ns/op when more than one thread was busy) and sys-ns/op
// (the part spent in the kernel), and minflt/op (page faults per op: a
// page the runtime returned to the OS and allocates again faults on its
// first touch).
func (m cpuMeter) report(b *testing.B, ops int) {
	now := takeCPU()
	if !m.ok || !now.ok || ops <= 0 {
		return
	}
	user, sys := now.user-m.user, now.sys-m.sys
	b.ReportMetric(float64(user+sys)/float64(ops), "cpu-ns/op")
	b.ReportMetric(float64(sys)/float64(ops), "sys-ns/op")
	b.ReportMetric(float64(now.minflt-m.minflt)/float64(ops), "minflt/op")
}

// cpuSince returns the user plus system CPU time of the process since m
// (0 where getrusage failed).
func cpuSince(m cpuMeter) time.Duration {
	now := takeCPU()
	if !m.ok || !now.ok {
		return 0
	}
	return now.user - m.user + now.sys - m.sys
}
