package snapbuild_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/snapbuild"
	"github.com/schedcache/schedcache/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Importing package snapshot registers its builder: New returns one whose
// commits are snapshots; a fold queue served on a goroutine folds for it
// and stops on Close.
func TestRegisteredBuilder(t *testing.T) {
	b := snapbuild.New[*snapshot.Snapshot]()
	require.Equal(t, 0, b.Last().NumNodes())
	q := snapbuild.NewFoldQueue()
	done := make(chan struct{})
	go func() { defer close(done); q.Serve() }()
	b.SetFoldQueue(q)
	b.SetPod("p", nil, true)
	b.FoldPods()
	s := b.Commit(1, 0, 1)
	require.Same(t, s, b.Last())
	require.Equal(t, 1, s.PodCount())
	e, ok := s.Pod("p")
	require.True(t, ok)
	require.True(t, e.Assumed)
	q.Close()
	<-done
}

// New with another snapshot type than the registered one is a programming
// error of the module: it panics, naming the package.
func TestNewWrongType(t *testing.T) {
	require.PanicsWithValue(t, "snapbuild: no builder registered for this snapshot type",
		func() { snapbuild.New[int]() })
}
