package nodelists

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBuildSkipsNamesWithoutNode(t *testing.T) {
	hasNode := map[int32]bool{0: true, 1: false, 2: true, 3: true}
	order, skipped := Build(nil, []int32{2, -1, 1, 0, 3, 2}, func(id int32) bool { return hasNode[id] })
	require.Equal(t, []int32{2, 0, 3, 2}, order, "order kept, a name listed twice kept twice")
	require.True(t, skipped)
	order, skipped = Build(make([]int32, 0, 4), []int32{0, 3}, func(id int32) bool { return hasNode[id] })
	require.Equal(t, []int32{0, 3}, order)
	require.False(t, skipped)
	// In place, as the callers use it.
	ids := []int32{3, 1, 0}
	order, _ = Build(ids[:0], ids, func(id int32) bool { return hasNode[id] })
	require.Equal(t, []int32{3, 0}, order)
}

func TestCheckAndRecount(t *testing.T) {
	require.NoError(t, Check(3, 3, 9, 9))
	err := Check(2, 3, 4, 5)
	var ie *InconsistentListError
	require.ErrorAs(t, err, &ie)
	require.ErrorIs(t, err, ErrInconsistentList)
	require.Equal(t, InconsistentListError{ListLen: 2, TreeNodes: 3, MapLen: 4, CacheEntries: 5}, *ie)
	require.Equal(t, "snapshot state is not consistent, length of NodeInfoList=2 not equal to length of nodes in tree=3 , length of NodeInfoMap=4, length of nodes in cache=5, trying to recover", err.Error())

	same, changed := Recount(err, 4, 5)
	require.False(t, changed)
	require.Same(t, err, same)
	moved, changed := Recount(err, 6, 7)
	require.True(t, changed)
	require.Equal(t, &InconsistentListError{ListLen: 2, TreeNodes: 3, MapLen: 6, CacheEntries: 7}, moved)
	require.Equal(t, InconsistentListError{ListLen: 2, TreeNodes: 3, MapLen: 4, CacheEntries: 5}, *ie, "the old error is never written")
	other := errors.New("other")
	got, changed := Recount(other, 1, 1)
	require.False(t, changed)
	require.Same(t, other, got)
	got, changed = Recount(nil, 1, 1)
	require.False(t, changed)
	require.NoError(t, got)
}

func TestAffinityKeepsListOrder(t *testing.T) {
	flags := map[int32][3]bool{5: {true, false, false}, 1: {true, true, true}, 7: {false, true, false}, 2: {false, false, false}, 4: {true, true, true}, 3: {false, false, true}}
	aff, anti, nonHost := Affinity([]int32{5, 2, 4, 1, 7, 3}, func(id int32) (bool, bool, bool) { f := flags[id]; return f[0], f[1], f[2] }, nil, []int32{99}, []int32{98})
	require.Equal(t, []int32{5, 4, 1}, aff)
	require.Equal(t, []int32{99, 4, 1, 7}, anti, "appends to the buffers given")
	require.Equal(t, []int32{98, 4, 1, 3}, nonHost, "appends to the buffers given")
}

// UsePVC against a simple model: a claim is used while its count is
// positive; entered and left mark the crossings, for any delta.
func TestUsePVCModel(t *testing.T) {
	c := MapCounts{}
	model := map[string]int{}
	steps := []struct {
		claim string
		delta int32
	}{{"a", 1}, {"a", 1}, {"b", 1}, {"a", -1}, {"a", -1}, {"b", -1}, {"a", 1}, {"c", -1}, {"d", 3}, {"d", -2}, {"d", -1}, {"e", 2}, {"e", -5}}
	for i, st := range steps {
		before := model[st.claim] > 0
		model[st.claim] += int(st.delta)
		if model[st.claim] <= 0 {
			delete(model, st.claim)
		}
		after := model[st.claim] > 0
		entered, left := UsePVC(c, st.claim, st.delta)
		require.Equal(t, !before && after, entered, "step %d", i)
		require.Equal(t, before && !after, left, "step %d: left when the count goes down to 0", i)
		n, ok := c.Get(st.claim)
		require.Equal(t, model[st.claim] > 0, ok, "step %d", i)
		require.EqualValues(t, model[st.claim], n, "step %d", i)
	}
	require.True(t, c.Delete("a"))
	require.False(t, c.Delete("a"))
}
