//go:build !unix

package sim

import "time"

// cpuTime is 0 where getrusage is missing: phases report no CPU time.
func cpuTime() time.Duration { return 0 }
