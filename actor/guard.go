package actor

import (
	"runtime/debug"

	"github.com/schedcache/schedcache/shard"
)

// guard runs f and turns a panic into a *shard.PanicError of the
// coordinator, so that a bug in the core fails the cache instead of the
// process. It is the coordinator's one recover: the drivers run every core
// call that may panic through it (core.Advance runs its own steps through
// it, so that it keeps its promise to the shards when one panics).
func guard(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &shard.PanicError{Actor: "coordinator", Value: r, Stack: debug.Stack()}
		}
	}()
	f()
	return nil
}
