package actor

import (
	"sync/atomic"
	"time"

	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// Local drives a Core and its shard Cores on the calling goroutine: the
// same flush protocol as the Coordinator without any goroutine or channel.
// Contract: not safe for concurrent use. It exists for deterministic tests
// and for measuring the cost of publication alone.
type Local struct {
	Core   *Core
	Shards []*shard.Core
	gen    atomic.Int64
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
// commits a snapshot, exactly as the Coordinator's flush does.
func (l *Local) Publish() (*snapshot.Snapshot, error) {
	c := l.Core
	if !c.Dirty() {
		return c.Last(), nil
	}
	muts := c.PendingMutations()
	c.BuildMeta()
	for i, s := range l.Shards {
		if len(muts[i]) == 0 {
			continue
		}
		if err := s.Apply(muts[i]); err != nil {
			c.ResetMutations()
			return nil, err
		}
		c.ApplyFrozen(s.Flush())
	}
	c.ResetMutations()
	return c.Commit(), nil
}
