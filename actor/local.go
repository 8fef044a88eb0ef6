package actor

import (
	"sync/atomic"
	"time"

	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// local drives a core and its shard cores on the calling goroutine: the
// same Ready/Advance protocol as the Coordinator, without any goroutine or
// channel. Contract: not safe for concurrent use. It exists for
// deterministic tests and for measuring the cost of publication alone.
type local struct {
	core   *core         // owned by the caller's goroutine
	shards []*shard.Core // owned by the caller's goroutine
	gen    atomic.Int64  // atomic: the shards' generation source
}

// newLocal returns a local with nshards shards and the given TTL.
func newLocal(nshards int, ttl time.Duration) *local {
	l := &local{core: newCore(nshards, ttl)}
	for i := 0; i < l.core.Shards(); i++ {
		l.shards = append(l.shards, shard.NewCore(func() int64 { return l.gen.Add(1) }))
	}
	return l
}

// Publish delivers the pending mutations, freezes the changed entries and
// commits a snapshot, as the Coordinator's flush does; each shard applies
// its mutations when Advance asks for its frozen entries.
func (l *local) Publish() (*snapshot.Snapshot, error) {
	var rd ready
	var ok bool
	if err := guard(func() { rd, ok = l.core.Ready() }); err != nil {
		return nil, err
	}
	if !ok {
		return l.core.Last(), nil
	}
	return l.core.Advance(rd, func(i int) ([]shard.Frozen, error) {
		s := l.shards[i]
		if err := s.Apply(rd.Muts[i]); err != nil {
			return nil, err
		}
		return s.Flush(), nil
	})
}
