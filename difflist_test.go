package schedcache_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// Snapshot.DiffList against a model: after each random change, the
// positions it reports between the previous and the new published
// snapshot are exactly those whose NodeInfo differs, each with the new
// one, in order; a node added or removed (another order) reports false
// and calls nothing.
func TestSnapshotDiffList(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := schedcache.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	logger := klog.Background()
	for i := range 300 {
		if _, err := c.AddNode(logger, node(fmt.Sprintf("n-%03d", i), fmt.Sprintf("z%d", i%3))); err != nil {
			t.Fatal(err)
		}
	}
	list := func(s *schedcache.Snapshot) []*nodeinfo.NodeInfo {
		out, _ := s.List()
		return out
	}
	prev := c.Snapshot()

	for step := range 60 {
		var sameOrder bool
		switch step % 6 {
		case 5: // a node added: another order
			if _, err := c.AddNode(logger, node(fmt.Sprintf("x-%03d", step), "z1")); err != nil {
				t.Fatal(err)
			}
		default: // pods bound on 1 to 4 nodes
			sameOrder = true
			for k := range 1 + step%4 {
				p := pod(fmt.Sprintf("p-%d-%d", step, k), fmt.Sprintf("n-%03d", (step*37+k*101)%300), 10)
				if err := c.AddPod(logger, p); err != nil {
					t.Fatal(err)
				}
			}
		}
		cur := c.Snapshot()
		var want []int
		a, b := list(prev), list(cur)
		if sameOrder {
			for i := range b {
				if a[i] != b[i] {
					want = append(want, i)
				}
			}
		}
		var got []int
		ok := cur.DiffList(prev, func(i int, ni *nodeinfo.NodeInfo) {
			if ni != b[i] {
				t.Fatalf("step %d: position %d reported with another NodeInfo", step, i)
			}
			got = append(got, i)
		})
		if ok != sameOrder {
			t.Fatalf("step %d: DiffList returned %v, same order %v", step, ok, sameOrder)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: changed positions %v, want %v", step, got, want)
		}
		if sameOrder && len(got) == 0 {
			t.Fatalf("step %d: no position changed after a binding", step)
		}
		prev = cur
	}
	if cur := c.Snapshot(); !cur.DiffList(cur, func(int, *nodeinfo.NodeInfo) { t.Fatal("a snapshot differs from itself") }) {
		t.Fatal("DiffList of a snapshot with itself: false")
	}
	if c.Snapshot().DiffList(nil, func(int, *nodeinfo.NodeInfo) {}) {
		t.Fatal("DiffList against nil: true")
	}
}
