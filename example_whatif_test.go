package schedcache_test

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
)

// What-if forks: fork the published snapshot in O(1), try a placement,
// revert it, try another, and commit the chosen one into the cache; the
// commit applies only if the nodes it touches did not change meanwhile.
func ExampleCache_Commit() {
	ctx := context.Background()
	logger := klog.Background()
	c, err := schedcache.New(ctx)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for _, n := range []*v1.Node{exampleNode("a1", "A"), exampleNode("b1", "B")} {
		if _, err := c.AddNode(logger, n); err != nil {
			panic(err)
		}
	}

	f := c.Snapshot().Fork() // private and mutable; the snapshot never changes
	f.Fork()                 // a fork point
	if err := f.AssumePod(examplePod("web-1", "a1", "3")); err != nil {
		panic(err)
	}
	a1, _ := f.Snapshot().Get("a1") // the whole Snapshot API reads a fork
	fmt.Println("what-if a1 cpu:", a1.Requested().MilliCPU)
	if err := f.Revert(); err != nil { // back to the fork point
		panic(err)
	}
	if err := f.AssumePod(examplePod("web-1", "b1", "3")); err != nil {
		panic(err)
	}
	fmt.Println("commit:", c.Commit(ctx, f)) // one atomic operation
	e, _ := c.Snapshot().Pod("web-1")
	fmt.Println("cache:", e.Pod.Spec.NodeName, "assumed:", e.Assumed)

	g := c.Snapshot().Fork()
	if err := g.AssumePod(examplePod("web-2", "b1", "500m")); err != nil {
		panic(err)
	}
	if err := c.AssumePod(logger, examplePod("other", "b1", "100m")); err != nil { // b1 changes
		panic(err)
	}
	var conflict *schedcache.CommitConflictError
	err = c.Commit(ctx, g)
	fmt.Println("conflict:", errors.As(err, &conflict), conflict.Nodes)
	// Output:
	// what-if a1 cpu: 3000
	// commit: <nil>
	// cache: b1 assumed: true
	// conflict: true [b1]
}
