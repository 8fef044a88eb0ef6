// Package cachetest gives the module's tests the cache options that are
// not part of the public API: fault hooks. Test code only.
package cachetest

import (
	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/hooks"
)

// WithFaultHooks installs hooks that run on the token holder (the
// coordinator goroutine, or a caller running inline) before each
// operation, with the operation's name, and before each shard request,
// with the shard's index: for fault-injection tests. Either may be nil.
func WithFaultHooks(coordinator func(kind string), shard func(shardIdx int)) schedcache.Option {
	return hooks.FaultHooks(coordinator, shard).(schedcache.Option)
}
