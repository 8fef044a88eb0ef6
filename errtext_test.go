package schedcache_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
)

// Where upstream v1.37.2's cache refuses a call, the error reads as
// upstream's (pkg/scheduler/backend/cache/cache.go), word for word, and
// still matches the typed sentinel.
func TestUpstreamErrorTexts(t *testing.T) {
	c := newCache(t)
	lg := klog.Background()
	n1 := &v1.Node{}
	n1.Name = "n1"
	_, err := c.AddNode(lg, n1)
	require.NoError(t, err)

	assumed := upPod("a", "ns", "uid-a", "n1")
	added := upPod("b", "ns", "uid-b", "n1")
	absent := upPod("c", "ns", "uid-c", "n1")
	require.NoError(t, c.AssumePod(lg, assumed))
	require.NoError(t, c.AddPod(lg, added))
	moved := upPod("a", "ns", "uid-a", "n2")

	for _, tc := range []struct {
		name string
		err  error
		want string
		is   error
	}{
		{"AssumePod of a cached pod", c.AssumePod(lg, added), "pod uid-b(ns/b) is in the cache, so can't be assumed", schedcache.ErrPodAlreadyCached},
		{"ForgetPod naming another node", c.ForgetPod(lg, moved), "pod uid-a(ns/a) was assumed on n2 but assigned to n1", schedcache.ErrPodNodeMismatch},
		{"ForgetPod of an added pod", c.ForgetPod(lg, added), "pod uid-b(ns/b) is not assumed, so it cannot be removed or forgotten", schedcache.ErrPodNotAssumed},
		{"AddPod of an added pod", c.AddPod(lg, added), "pod uid-b(ns/b) was already in added state", schedcache.ErrPodAlreadyAdded},
		{"UpdatePod of an absent pod", c.UpdatePod(lg, absent, absent), "pod uid-c(ns/c) is not added to scheduler cache, so cannot be updated", schedcache.ErrPodNotFound},
		{"UpdatePod of an assumed pod", c.UpdatePod(lg, assumed, assumed), "assumed pod uid-a(ns/a) should not be updated", schedcache.ErrPodAssumed},
		{"RemovePod of an absent pod", c.RemovePod(lg, absent), "pod uid-c(ns/c) is not found in scheduler cache, so cannot be removed from it", schedcache.ErrPodNotFound},
		{"RemoveNode of an unknown node", c.RemoveNode(lg, &v1.Node{}), "node  is not found", schedcache.ErrNodeNotFound},
	} {
		require.EqualError(t, tc.err, tc.want, tc.name)
		require.True(t, errors.Is(tc.err, tc.is), "%s: errors.Is(%v)", tc.name, tc.is)
	}
	_, err = c.GetPod(absent)
	require.EqualError(t, err, "pod uid-c(ns/c) does not exist in scheduler cache")
	_, err = c.GetNode("n9")
	require.EqualError(t, err, "node n9 does not exist in scheduler cache")
	// A pod without a namespace is named as klog.KObj names it.
	bare := upPod("d", "", "uid-d", "n1")
	require.EqualError(t, c.RemovePod(lg, bare), "pod uid-d(d) is not found in scheduler cache, so cannot be removed from it")
}
