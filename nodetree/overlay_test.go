package nodetree

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An Overlay of a tree changed by a random sequence of AddID, UpdateID,
// Remove and SetID lists, counts and answers InZone exactly as a clone of the tree
// changed by the same calls, and every overlay made on the way still shows
// what it showed when made.
func TestOverlayMatchesTree(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		r := rand.New(rand.NewSource(seed))
		zoneOf := func() map[string]string {
			if r.Intn(6) == 0 {
				return nil // zone key ""
			}
			return map[string]string{v1.LabelTopologyZone: fmt.Sprint("z", r.Intn(4))}
		}
		mk := func() *v1.Node { return node(fmt.Sprint("n", r.Intn(40)), zoneOf()) }
		base := New()
		for i := 0; i < r.Intn(40); i++ {
			n := mk()
			base.AddID(n, int32(i))
		}
		baseIDs, _ := base.AppendIDs(nil)
		ref := base.Clone()
		o := NewOverlay(base)
		type held struct {
			o   *Overlay
			ids []int32
			n   int
		}
		var kept []held
		for step := 0; step < 300; step++ {
			id := int32(100 + step)
			switch n := mk(); r.Intn(4) {
			case 0:
				ref.AddID(n, id)
				o = o.AddID(n, id)
			case 1:
				var old *v1.Node
				if r.Intn(5) > 0 {
					old = mk()
					old.Name = n.Name
				}
				ref.UpdateID(old, n, id)
				o = o.UpdateID(old, n, id)
			case 3:
				ref.SetID(n.Name, id)
				o = o.SetID(n.Name, id)
			default:
				err := ref.Remove(n)
				var oerr error
				o, oerr = o.Remove(n)
				require.Equal(t, err == nil, oerr == nil, "seed %d step %d", seed, step)
				if err != nil {
					require.True(t, errors.Is(oerr, ErrNodeNotInZone))
					require.Equal(t, err.Error(), oerr.Error())
				}
			}
			want, werr := ref.AppendIDs(nil)
			got, gerr := o.AppendIDs(nil)
			require.Equal(t, want, got, "seed %d step %d", seed, step)
			require.Equal(t, werr, gerr)
			require.Equal(t, ref.NumNodes(), o.NumNodes())
			for k := 0; k < 5; k++ {
				n := mk()
				require.Equal(t, ref.InZone(n.Name, ZoneKey(n)), o.InZone(n.Name, ZoneKey(n)))
			}
			if step%7 == 0 {
				kept = append(kept, held{o, got, o.NumNodes()})
			}
		}
		for i, h := range kept {
			got, _ := h.o.AppendIDs(nil)
			require.Equal(t, h.ids, got, "seed %d overlay %d changed", seed, i)
			require.Equal(t, h.n, h.o.NumNodes())
		}
		after, _ := base.AppendIDs(nil)
		require.Equal(t, baseIDs, after, "the base tree did not change")
		require.True(t, slices.Equal(baseIDs, after))
	}
}

// isZoneKey agrees with comparing ZoneKey's string, separators inside
// labels included.
func TestIsZoneKey(t *testing.T) {
	parts := []string{"", "a", "b", "a:\x00:", ":\x00:b", "a:\x00:b"}
	for _, r1 := range parts {
		for _, z1 := range parts {
			key := ZoneKey(&v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelTopologyRegion: r1, v1.LabelTopologyZone: z1}}})
			for _, r2 := range parts {
				for _, z2 := range parts {
					want := key == ZoneKey(&v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelTopologyRegion: r2, v1.LabelTopologyZone: z2}}})
					if got := isZoneKey(key, r2, z2); got != want {
						t.Fatalf("isZoneKey(%q, %q, %q) = %v, want %v", key, r2, z2, got, want)
					}
				}
			}
		}
	}
}
