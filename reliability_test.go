package schedcache_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache"
)

// A second RemoveNode of a ghost (a removed node that still holds pods)
// keeps upstream's effects (the ghost's generation moves, it keeps its
// pods and stays out of snapshots) and fails with a NodeError naming the
// node that matches ErrNodeNotFound (and the tree's ErrNodeNotInZone);
// a second RemoveNode of a node fully deleted changes nothing and fails
// with ErrNodeNotFound alone.
func TestRemoveNodeTwice(t *testing.T) {
	for _, zone := range []string{"", "z1"} {
		t.Run("zone="+zone, func(t *testing.T) {
			c := newCache(t)
			g, n := node("ghost", zone), node("gone", zone)
			_, err := c.AddNode(logger, g)
			require.NoError(t, err)
			_, err = c.AddNode(logger, n)
			require.NoError(t, err)
			require.NoError(t, c.AddPod(logger, pod("p", "ghost", 100)))
			require.NoError(t, c.RemoveNode(logger, g))
			require.NoError(t, c.RemoveNode(logger, n))

			before, err := c.GetNode("ghost")
			require.NoError(t, err)
			require.Nil(t, before.Node())
			err = c.RemoveNode(logger, g)
			require.Error(t, err)
			require.ErrorIs(t, err, schedcache.ErrNodeNotFound)
			require.ErrorIs(t, err, schedcache.ErrNodeNotInZone)
			var ne *schedcache.NodeError
			require.True(t, errors.As(err, &ne), "%T %v", err, err)
			require.Equal(t, "ghost", ne.Name)
			require.Equal(t, "RemoveNode", ne.Op)
			after, err := c.GetNode("ghost")
			require.NoError(t, err)
			require.Greater(t, after.Generation(), before.Generation(), "upstream bumps the ghost's generation")
			require.Equal(t, 1, after.NumPods())
			require.Equal(t, int64(100), after.Requested().MilliCPU)
			require.Equal(t, 1, c.NodeCount())
			require.Equal(t, 0, c.Snapshot().NumNodes())

			err = c.RemoveNode(logger, n)
			require.ErrorIs(t, err, schedcache.ErrNodeNotFound)
			require.NotErrorIs(t, err, schedcache.ErrNodeNotInZone)
			ne = nil
			require.True(t, errors.As(err, &ne), "%T %v", err, err)
			require.Equal(t, "gone", ne.Name)
			require.Equal(t, 1, c.NodeCount())
			_, err = c.GetNode("gone")
			require.ErrorIs(t, err, schedcache.ErrNodeNotFound)

			// The ghost's last pod leaving deletes it, as upstream.
			require.NoError(t, c.RemovePod(logger, pod("p", "ghost", 100)))
			require.Equal(t, 0, c.NodeCount())
			err = c.RemoveNode(logger, g)
			require.ErrorIs(t, err, schedcache.ErrNodeNotFound)
			require.True(t, errors.As(err, &ne))
			require.Equal(t, "ghost", ne.Name)
		})
	}
}
