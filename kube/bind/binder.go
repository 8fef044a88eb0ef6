package bind

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/puzpuzpuz/xsync/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
)

// ErrNilPlacement is the error of a Placement without a pod.
var ErrNilPlacement = errors.New("bind: placement without a pod")

// Placement is a scheduling decision: pod goes to Node.
type Placement struct {
	Pod  *v1.Pod
	Node string
}

// BinderCounts is a reading of a Binder's outcome counters.
type BinderCounts struct {
	Bound     int64 // binding succeeded (or was taken over by another call): FinishBinding
	Forgotten int64 // binding failed: ForgetPod
	Refused   int64 // AssumePod refused the placement: nothing to undo
}

// Binder is an example of the binding half of upstream's scheduleOne on
// top of the cache: AssumePod, then BindPod and wait; success (or a skip
// or overwrite: another call took over) ends with FinishBinding, a failure
// with ForgetPod, so a failed binding never leaves resources assumed.
//
// Contract: Bind and Run are safe for concurrent use; Counts may be read
// at any time. A Binder owns no goroutine outside Run, which returns only
// once its workers have.
type Binder struct {
	cache  *schedcache.Cache // immutable
	logger klog.Logger       // immutable
	// Outcome counters, bumped by every binding goroutine at once
	// (xsync.Counter: striped, so parallel binders on many cores do not
	// contend on one word). An uncontended increment costs more than an
	// atomic's, which is nothing beside a binding's round trip
	// (docs/kube-integration.md, "Counters: xsync or atomics").
	bound, forgotten, refused *xsync.Counter
}

// NewBinder returns a Binder on c (whose dispatcher, set with
// schedcache.WithDispatcher, does the API calls).
func NewBinder(c *schedcache.Cache, logger klog.Logger) *Binder {
	return &Binder{cache: c, logger: logger, bound: xsync.NewCounter(), forgotten: xsync.NewCounter(), refused: xsync.NewCounter()}
}

// Counts reads the outcome counters.
func (b *Binder) Counts() BinderCounts {
	return BinderCounts{Bound: b.bound.Value(), Forgotten: b.forgotten.Value(), Refused: b.refused.Value()}
}

// Bind assumes p.Pod on p.Node, binds it and finishes or forgets it. It
// returns the binding's failure (after ForgetPod), AssumePod's refusal, or
// nil.
func (b *Binder) Bind(ctx context.Context, p Placement) error {
	if p.Pod == nil {
		b.refused.Inc()
		return ErrNilPlacement
	}
	assumed := p.Pod.DeepCopy()
	assumed.Spec.NodeName = p.Node
	if err := b.cache.AssumePod(b.logger, assumed); err != nil {
		b.refused.Inc()
		return err
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: assumed.Namespace, Name: assumed.Name, UID: assumed.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: p.Node},
	}
	err := func() error {
		onFinish, err := b.cache.BindPod(binding)
		if err != nil {
			return err
		}
		return WaitOnFinish(ctx, onFinish)
	}()
	if err != nil {
		b.forgotten.Inc()
		if ferr := b.cache.ForgetPod(b.logger, assumed); ferr != nil {
			return errors.Join(fmt.Errorf("binding %s/%s: %w", assumed.Namespace, assumed.Name, err), ferr)
		}
		return fmt.Errorf("binding %s/%s: %w", assumed.Namespace, assumed.Name, err)
	}
	b.bound.Inc()
	return b.cache.FinishBinding(b.logger, assumed)
}

// Run binds the placements it receives with workers goroutines until in
// is closed or ctx is done, then waits for its workers. onError (may be
// nil) receives each failed placement's error, from the workers.
func (b *Binder) Run(ctx context.Context, in <-chan Placement, workers int, onError func(Placement, error)) {
	if workers < 1 {
		workers = 1
	}
	var wg sync.WaitGroup
	wg.Add(workers)
	for i := 0; i < workers; i++ {
		go func() { // owned by Run, which waits for it
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case p, ok := <-in:
					if !ok {
						return
					}
					if err := b.Bind(ctx, p); err != nil && onError != nil {
						onError(p, err)
					}
				}
			}
		}()
	}
	wg.Wait()
}
