package actor

import "time"

func durationOf(n int64) time.Duration { return time.Duration(n) }
