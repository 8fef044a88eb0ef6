//go:build !unix

package bench

import "testing"

// cpuMeter reports nothing where getrusage is missing.
type cpuMeter struct{}

func takeCPU() cpuMeter                       { return cpuMeter{} }
func (cpuMeter) report(b *testing.B, ops int) {}
