package actor

import (
	"sync/atomic"
	"time"

	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// Local drives a Core and its shard Cores on the calling goroutine: the
// same Ready/Advance protocol as the Coordinator, without any goroutine or
// channel. Contract: not safe for concurrent use. It exists for
// deterministic tests and for measuring the cost of publication alone.
type Local struct {
	Core   *Core         // owned by the caller's goroutine
	Shards []*shard.Core // owned by the caller's goroutine
	gen    atomic.Int64  // atomic: the shards' generation source
}

// NewLocal returns a Local with nshards shards and the given TTL.
func NewLocal(nshards int, ttl time.Duration) *Local {
	l := &Local{Core: NewCore(nshards, ttl)}
	for i := 0; i < l.Core.Shards(); i++ {
		l.Shards = append(l.Shards, shard.NewCore(func() int64 { return l.gen.Add(1) }))
	}
	return l
}

// Publish delivers the pending mutations, freezes the changed entries and
// commits a snapshot, as the Coordinator's flush does; each shard applies
// its mutations when Advance asks for its frozen entries.
func (l *Local) Publish() (*snapshot.Snapshot, error) {
	var rd Ready
	var ok bool
	if err := guard(func() { rd, ok = l.Core.Ready() }); err != nil {
		return nil, err
	}
	if !ok {
		return l.Core.Last(), nil
	}
	return l.Core.Advance(rd, func(i int) ([]shard.Frozen, error) {
		s := l.Shards[i]
		if err := s.Apply(rd.Muts[i]); err != nil {
			return nil, err
		}
		return s.Flush(), nil
	})
}
