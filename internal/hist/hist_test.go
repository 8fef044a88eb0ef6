package hist

import (
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIndexLowerRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, 63, 64, 65, 127, 128, 129, 1000, 123456, 1 << 40, 1<<62 + 12345} {
		i := index(v)
		require.LessOrEqual(t, lower(i), v, "v=%d", v)
		require.Greater(t, lower(i+1), v, "v=%d", v)
	}
}

func TestQuantilesAgainstSort(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	h := New()
	var all []int64
	for i := 0; i < 100000; i++ {
		v := int64(r.ExpFloat64() * 20000)
		all = append(all, v)
		h.Record(time.Duration(v))
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := all[int(q*float64(len(all)))-1]
		got := int64(h.Quantile(q))
		require.InEpsilon(t, float64(exact), float64(got), 0.04, "q=%v", q)
	}
	require.Equal(t, time.Duration(all[len(all)-1]), h.Max())
	require.Equal(t, uint64(100000), h.Count())
}

func TestMerge(t *testing.T) {
	a, b := New(), New()
	a.Record(10 * time.Microsecond)
	b.Record(20 * time.Millisecond)
	a.Merge(b)
	require.Equal(t, uint64(2), a.Count())
	require.Equal(t, 20*time.Millisecond, a.Max())
	require.Equal(t, 10*time.Microsecond, a.Quantile(0.5))
}

func BenchmarkRecord(b *testing.B) {
	h := New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i))
	}
}
