package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schedcache/schedcache/kube/examples"
)

// Upstream's NodeResourcesFit plugin, through kube/fwkadapter, scores a
// what-if fork exactly as it would the cluster the fork describes: pods
// assumed in the fork make their node look busier, a node added in the
// fork (a scale-up, Cluster Autoscaler style) becomes a candidate, and the
// cache's own snapshot is never affected.
func TestFitPlacerOnFork(t *testing.T) {
	ctx, placer, c := fitFixture(t)
	base := c.Snapshot()

	f := base.Fork()
	require.NoError(t, f.AssumePod(fitPod("w1", "1500m", "b")))
	got, err := placer.Place(ctx, f.Snapshot(), fitPod("p", "500m", ""))
	require.NoError(t, err)
	require.Equal(t, "a", got, "in the fork b is busier than a")
	got, err = placer.Place(ctx, base, fitPod("p", "500m", ""))
	require.NoError(t, err)
	require.Equal(t, "b", got, "the base is unchanged")

	// Fill both nodes in a nested fork: nothing fits; a new node does.
	f.Fork()
	require.NoError(t, f.AssumePod(fitPod("w2", "1", "a")))
	_, err = placer.Place(ctx, f.Snapshot(), fitPod("p", "1", ""))
	require.ErrorIs(t, err, examples.ErrNoNode)
	require.NoError(t, f.AddNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Status: fitNode("new").Status}))
	got, err = placer.Place(ctx, f.Snapshot(), fitPod("p", "1", ""))
	require.NoError(t, err)
	require.Equal(t, "new", got)
	require.NoError(t, f.Revert())
	got, err = placer.Place(ctx, f.Snapshot(), fitPod("p", "500m", ""))
	require.NoError(t, err)
	require.Equal(t, "a", got, "reverted to the first what-if")
	require.Equal(t, 1, c.Snapshot().PodCount())
}
