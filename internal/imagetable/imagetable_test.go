package imagetable

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/immutable"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNilTableIsEmpty(t *testing.T) {
	var tab *Table[int]
	v, ok := tab.Get("x")
	require.False(t, ok)
	require.Zero(t, v)
	require.Zero(t, tab.Map().Len())
	require.Zero(t, tab.Strays().Len())
}

func TestTableHoldsItsVersion(t *testing.T) {
	ed := immutable.Map[int]{}.Edit()
	ed.Set("a", 1)
	m := ed.Done()
	sed := immutable.Map[[]string]{}.Edit()
	sed.Set("n1", []string{"b"})
	tab := New(m, sed.Done())
	v, ok := tab.Get("a")
	require.True(t, ok)
	require.Equal(t, 1, v)
	// A later version shares structure and leaves this one as it was.
	ed2 := tab.Map().Edit()
	ed2.Set("a", 2)
	next := New(ed2.Done(), tab.Strays())
	v, _ = tab.Get("a")
	require.Equal(t, 1, v)
	v, _ = next.Get("a")
	require.Equal(t, 2, v)
	got, ok := next.Strays().Get("n1")
	require.True(t, ok)
	require.Equal(t, []string{"b"}, got)
}
