package schedcache_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
)

// Every method of a nil or zero-value *Cache answers ErrNotStarted (or its
// zero value) instead of panicking.
func TestNotStartedCache(t *testing.T) {
	pod, node := &v1.Pod{}, &v1.Node{}
	for name, c := range map[string]*schedcache.Cache{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			errs := map[string]error{
				"Close":           c.Close(),
				"Err":             c.Err(),
				"AssumePod":       c.AssumePod(upLog, pod),
				"FinishBinding":   c.FinishBinding(upLog, pod),
				"ForgetPod":       c.ForgetPod(upLog, pod),
				"AddPod":          c.AddPod(upLog, pod),
				"UpdatePod":       c.UpdatePod(upLog, pod, pod),
				"RemovePod":       c.RemovePod(upLog, pod),
				"RemoveNode":      c.RemoveNode(upLog, node),
				"Sync":            c.Sync(),
				"UpdateSnapshot":  c.UpdateSnapshot(upLog, schedcache.NewEmptySnapshot()),
				"AddPodAsync":     c.AddPodAsync(pod),
				"UpdatePodAsync":  c.UpdatePodAsync(pod, pod),
				"RemovePodAsync":  c.RemovePodAsync(pod),
				"AddNodeAsync":    c.AddNodeAsync(node),
				"UpdateNodeAsync": c.UpdateNodeAsync(node, node),
				"RemoveNodeAsync": c.RemoveNodeAsync(node),
			}
			_, errs["GetPod"] = c.GetPod(pod)
			_, errs["IsAssumedPod"] = c.IsAssumedPod(pod)
			_, errs["PodCount"] = c.PodCount()
			_, errs["AddNode"] = c.AddNode(upLog, node)
			_, errs["UpdateNode"] = c.UpdateNode(upLog, node, node)
			_, errs["GetNode"] = c.GetNode("n")
			_, errs["Dump"] = c.Dump()
			_, errs["BindPod"] = c.BindPod(&v1.Binding{})
			for m, err := range errs {
				require.ErrorIs(t, err, schedcache.ErrNotStarted, m)
			}
			require.Zero(t, c.NodeCount())
			require.Zero(t, c.Snapshot().NumNodes())
			require.Zero(t, c.Stats())
			select {
			case <-c.Done():
			default:
				t.Fatal("Done of a cache never started is not closed")
			}
		})
	}
}

// New names the option it refuses, and refuses a done context instead of
// returning a cache that refuses everything.
func TestNewRefusals(t *testing.T) {
	for _, tc := range []struct {
		opt  schedcache.Option
		name string
	}{
		{schedcache.WithShards(-1), "WithShards"}, {schedcache.WithTTL(-1), "WithTTL"}, {schedcache.WithPeriod(-1), "WithPeriod"},
		{schedcache.WithMailboxSize(-1), "WithMailboxSize"}, {schedcache.WithMaxBatch(-1), "WithMaxBatch"}, {schedcache.WithExpiryChunk(-1), "WithExpiryChunk"},
	} {
		c, err := schedcache.New(context.Background(), tc.opt)
		require.Nil(t, c)
		var oe *schedcache.OptionError
		require.ErrorAs(t, err, &oe)
		require.Equal(t, tc.name, oe.Option)
		require.Equal(t, "must not be negative", oe.Rule)
		require.ErrorIs(t, err, schedcache.ErrInvalidArgument)
		require.Contains(t, err.Error(), tc.name)
		require.Contains(t, err.Error(), oe.Rule)
	}
	// A nil Option is skipped, not called.
	c, err := schedcache.New(context.Background(), nil, schedcache.WithShards(1))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err = schedcache.New(ctx)
	require.Nil(t, c)
	require.ErrorIs(t, err, schedcache.ErrClosed)
	require.ErrorIs(t, err, context.Canceled)
}

// A nil or key-less pod's error names the operation, sync and async.
func TestPodErrorsNameTheOperation(t *testing.T) {
	c, err := schedcache.New(context.Background())
	require.NoError(t, err)
	defer c.Close()
	for op, err := range map[string]error{
		"AssumePod":     c.AssumePod(upLog, nil),
		"AddPod":        c.AddPodAsync(nil),
		"RemovePod":     c.RemovePod(upLog, nil),
		"FinishBinding": c.FinishBinding(upLog, &v1.Pod{}),
	} {
		var pe *schedcache.PodError
		require.ErrorAs(t, err, &pe, op)
		require.Equal(t, op, pe.Op)
		require.True(t, errors.Is(err, schedcache.ErrNilPod) || errors.Is(err, schedcache.ErrEmptyUID), "%s: %v", op, err)
		require.True(t, strings.HasPrefix(err.Error(), op), "%s: %v", op, err)
	}
}
