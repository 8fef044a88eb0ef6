//go:build !unix

package bench

import (
	"testing"
	"time"
)

// cpuMeter reports nothing where getrusage is missing.
type cpuMeter struct{}

func takeCPU() cpuMeter                       { return cpuMeter{} }
func (cpuMeter) report(b *testing.B, ops int) {}

// cpuSince returns 0: no CPU time is measured here.
func cpuSince(cpuMeter) time.Duration { return 0 }
