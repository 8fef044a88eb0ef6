// Package hooks carries what package schedcache lends its own test
// packages without exporting it: the root fills each variable from its
// init, and internal/cachetest wraps them with their real types. Nothing
// outside this module can import it.
package hooks

// FaultHooks returns a schedcache.Option (as any: this package cannot
// import the root) that runs coordinator before each operation the token
// holder applies, with the operation's name, and shard before each shard
// request, with the shard's index. Set by package schedcache's init.
var FaultHooks func(coordinator func(kind string), shard func(shardIdx int)) any

// ActorFaults sets the fault hooks of o, an *actor.Options (as any: this
// package cannot import actor): op runs before each operation with its
// name, shard before each shard request with the shard's index. Set by
// package actor's init.
var ActorFaults func(o any, op func(kind string), shard func(shardIdx int))
