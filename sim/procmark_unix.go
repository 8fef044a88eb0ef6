//go:build unix

package sim

import (
	"syscall"
	"time"
)

// ProcessCPUTime is the process's user and system CPU time so far (every
// goroutine); 0 when getrusage fails.
func ProcessCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
