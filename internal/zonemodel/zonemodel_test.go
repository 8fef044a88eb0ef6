package zonemodel

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The model's own behaviour, so that the tests relying on it rely on
// something checked: interleaving, duplicates per zone only, zone removal.
func TestModel(t *testing.T) {
	m := New()
	require.True(t, m.Add("a1", "A"))
	require.True(t, m.Add("b1", "B"))
	require.True(t, m.Add("a2", "A"))
	require.False(t, m.Add("a1", "A"), "a zone lists a name once")
	require.True(t, m.Add("a1", "B"), "another zone may list it again")
	require.Equal(t, []string{"a1", "b1", "a2", "a1"}, m.List())
	require.Equal(t, 4, m.Count())
	require.True(t, m.Lists("a1", "B"))
	require.False(t, m.Lists("b1", "A"), "listed in another zone only")
	require.False(t, m.Lists("a1", "C"), "no such zone")
	require.False(t, m.Remove("a1", "C"))
	require.True(t, m.Remove("b1", "B"))
	require.True(t, m.Remove("a1", "B"))
	require.Equal(t, []string{"A"}, m.Zones(), "an emptied zone leaves the order")
	require.Equal(t, []string{"a1", "a2"}, m.List())
	require.True(t, m.Add("b3", "B"))
	require.Equal(t, []string{"A", "B"}, m.Zones(), "a zone that comes back is last")
	require.Equal(t, []string{"a1", "b3", "a2"}, m.List())
}
