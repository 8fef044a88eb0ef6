package actor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache/shard"
)

// Advance asks every shard with mutations for its frozen entries, in
// order, even after one failed, so that a driver receives every reply it
// is owed; the failure is returned and nothing is committed.
func TestAdvanceAsksEveryShardAfterAFailure(t *testing.T) {
	l := newLocal(3, 0)
	for i := range 30 {
		l.core.AddNode(testNode(fmt.Sprint("n", i), "z"))
	}
	rd, ok := l.core.Ready()
	require.True(t, ok)
	var want []int
	for i, m := range rd.Muts {
		if len(m) > 0 {
			want = append(want, i)
		}
	}
	require.Len(t, want, 3, "30 nodes should touch every shard")
	before := l.core.Last()
	boom := errors.New("boom")
	var asked []int
	snap, err := l.core.Advance(rd, func(i int) ([]shard.Frozen, error) {
		asked = append(asked, i)
		if i == want[0] {
			return nil, boom
		}
		return nil, nil
	})
	require.ErrorIs(t, err, boom)
	require.Nil(t, snap)
	require.Equal(t, want, asked)
	require.Same(t, before, l.core.Last(), "a failed epoch must not be committed")
}

// A panic inside Advance's own steps (here: a core whose builder is gone)
// becomes a *shard.PanicError of the coordinator, and every shard is still
// asked.
func TestAdvanceTurnsPanicIntoError(t *testing.T) {
	l := newLocal(2, 0)
	for i := range 20 {
		l.core.AddNode(testNode(fmt.Sprint("n", i), "z"))
	}
	rd, ok := l.core.Ready()
	require.True(t, ok)
	l.core.builder = nil
	asked := 0
	_, err := l.core.Advance(rd, func(i int) ([]shard.Frozen, error) {
		asked++
		return nil, nil
	})
	var pe *shard.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "coordinator", pe.Actor)
	require.Equal(t, 2, asked)
}
