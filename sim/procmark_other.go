//go:build !unix

package sim

import "time"

// ProcessCPUTime is 0 where getrusage is missing: phases report no CPU
// time.
func ProcessCPUTime() time.Duration { return 0 }
