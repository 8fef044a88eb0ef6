package bind_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/bind"
)

// The tests of this file close gaps the mutation round of 2026-11-27 found
// (docs/mutation/round-2026-11-27.md): each fails with the plant its
// comment names (docs/mutation/plants.txt) and passes without it.

// A successful binding ends with FinishBinding, as upstream's scheduleOne:
// the assumed pod then expires after the cache's TTL unless the informer
// confirms it. Plant B02 (no FinishBinding) leaves it assumed for good.
// In a synctest bubble: the TTL passes on the fake clock.
func TestBinderFinishesBinding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		sim, err := bind.NewSim(bind.SimOptions{})
		require.NoError(t, err)
		sim.Run()
		defer sim.Close()
		d, err := bind.NewDispatcher(sim)
		require.NoError(t, err)
		c, err := schedcache.New(ctx, schedcache.WithDispatcher(d), schedcache.WithTTL(time.Minute))
		require.NoError(t, err)
		defer func() { require.NoError(t, c.Close()) }()
		_, err = c.AddNode(logger, mkNode("n"))
		require.NoError(t, err)

		b := bind.NewBinder(c, logger)
		p := mkPod("p")
		require.NoError(t, b.Bind(ctx, bind.Placement{Pod: p, Node: "n"}))
		require.Equal(t, int64(1), b.Counts().Bound)
		assumed, err := c.IsAssumedPod(p)
		require.NoError(t, err)
		require.True(t, assumed, "bound, not confirmed yet")

		time.Sleep(2 * time.Minute)
		synctest.Wait()
		_, ok := c.Snapshot().Pod(string(p.UID))
		require.False(t, ok, "the binding finished: the assumed pod expired after the TTL")
	})
}
