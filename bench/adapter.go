// Package bench runs the standard workloads (docs/workloads.md,
// W1–W6) on schedcache and on the upstream kube-scheduler cache
// (k8s.io/kubernetes v1.37.2, pkg/scheduler/backend/cache) through one small
// interface, so that every workload runs unchanged on both, and checks the
// two for observable equivalence (diff_test.go).
//
// It is a separate module so that the main module never depends on
// k8s.io/kubernetes.
package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	upcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	upmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/workload"
)

// Implementation names, as they appear in benchmark names (impl=...).
const (
	Upstream   = "upstream"
	SchedCache = "schedcache"
)

// Impls lists the implementations in the order benchmarks run them.
var Impls = []string{Upstream, SchedCache}

// Options configure NewImpl.
type Options struct {
	// TTL of assumed pods after FinishBinding; 0 (production): never
	// expire. schedcache only (its extension, docs/upstream-semantics.md
	// 11.1): upstream v1.37.2 has neither FinishBinding nor expiry, and
	// NewImpl refuses a TTL for it.
	TTL time.Duration
	// Period between expiry passes; schedcache only.
	Period time.Duration
	// GenericWorkload and CompositePodGroup are the pod-group switches of
	// both caches (upstream's cache.New arguments, schedcache's
	// WithPodGroups); off, as upstream's feature gates by default.
	GenericWorkload, CompositePodGroup bool
}

// Impl is one cache implementation. Every method is safe for concurrent use
// (both caches are). The synchronous methods return once the effect is
// visible to readers refreshed afterwards.
type Impl interface {
	Name() string

	AddNode(*v1.Node) error
	UpdateNode(oldNode, newNode *v1.Node) error
	RemoveNode(*v1.Node) error
	AssumePod(*v1.Pod) error
	ForgetPod(*v1.Pod) error
	RemoveAssumedPod(*v1.Pod) error
	AddPod(*v1.Pod) error
	UpdatePod(oldPod, newPod *v1.Pod) error
	RemovePod(*v1.Pod) error
	GetPod(*v1.Pod) (*v1.Pod, error)
	PodCount() int
	NodeCount() int

	// Submit applies an informer event (AddPod, UpdatePod, RemovePod,
	// AddNode, UpdateNode, RemoveNode) the way an event handler would:
	// schedcache uses its Async methods (no round trip; failures are
	// collected and reported by Flush), upstream has no asynchronous path and
	// applies it synchronously.
	Submit(ev workload.Event) error
	// Flush waits until every submitted event is applied and visible
	// (schedcache: Sync) and reports the first asynchronous failure since
	// the last Flush. Upstream: nothing to wait for.
	Flush() error

	// NewReader returns a snapshot reader for one goroutine.
	NewReader() Reader
	// Close stops the cache and waits for its goroutines where the
	// implementation allows it.
	Close()
}

// NodeView is what the workloads read of one node. Reading it does not
// allocate.
type NodeView struct {
	Name                       string
	MilliCPU, Memory           int64 // Requested
	AllocMilliCPU, AllocMemory int64 // Allocatable
	AllowedPods                int64
	Pods                       int
}

// Reader is a per-goroutine snapshot reader. Not safe for concurrent use.
//
// Upstream: the reader owns a Snapshot (NewEmptySnapshot once) and Refresh
// calls UpdateSnapshot on it, as the scheduler does each cycle; the first
// Refresh is a full clone. schedcache: Refresh is Cache.Snapshot(), one
// atomic load of the latest immutable snapshot.
type Reader interface {
	Refresh() error
	NumNodes() int
	// NodeAt returns the i-th node of the list (zone order), 0 <= i < NumNodes().
	NodeAt(i int) NodeView
	// Get returns the node named name.
	Get(name string) (NodeView, bool)
	// List materialises the node list as a consumer needing a slice gets
	// it (upstream: its internal slice; schedcache: a new slice) and
	// returns its length.
	List() int
}

// Expirer is an Impl whose assumed pods can expire: schedcache with a
// TTL (Options.TTL). Upstream v1.37.2 has no FinishBinding.
type Expirer interface {
	Impl
	// FinishBinding starts the TTL of an assumed pod.
	FinishBinding(*v1.Pod) error
}

// errNoExpiry refuses Options.TTL for upstream.
var errNoExpiry = errors.New("bench: upstream v1.37.2 has no FinishBinding and no expiry of assumed pods (Options.TTL)")

// NewImpl starts a new empty cache of the named implementation.
func NewImpl(name string, o Options) (Impl, error) {
	switch name {
	case Upstream:
		if o.TTL != 0 {
			return nil, errNoExpiry
		}
		return newUpstream(o), nil
	case SchedCache:
		return newSchedCache(o)
	}
	return nil, fmt.Errorf("bench: unknown implementation %q", name)
}

// Apply applies ev to impl synchronously.
func Apply(impl Impl, ev workload.Event) error {
	switch ev.Kind {
	case workload.AddPod:
		return impl.AddPod(ev.Pod)
	case workload.UpdatePod:
		return impl.UpdatePod(ev.OldPod, ev.Pod)
	case workload.RemovePod:
		return impl.RemovePod(ev.Pod)
	case workload.AddNode:
		return impl.AddNode(ev.Node)
	case workload.UpdateNode:
		return impl.UpdateNode(ev.OldNode, ev.Node)
	case workload.RemoveNode:
		return impl.RemoveNode(ev.Node)
	}
	return fmt.Errorf("bench: unknown event kind %v", ev.Kind)
}

// Load adds the cluster's nodes and then its pods through the informer
// path and flushes.
func Load(impl Impl, c *workload.Cluster) error {
	for _, n := range c.Nodes {
		if err := impl.Submit(workload.Event{Kind: workload.AddNode, Node: n}); err != nil {
			return err
		}
	}
	for _, p := range c.Pods {
		if err := impl.Submit(workload.Event{Kind: workload.AddPod, Pod: p}); err != nil {
			return err
		}
	}
	return impl.Flush()
}

// discard is the logger handed to both caches: upstream logs some calls at
// Info level (a confirmation on another node than assumed), and schedcache
// every expired pod, which would otherwise dominate W5 with stderr writes.
var discard = logr.Discard()

// ---- upstream ----

var registerMetrics sync.Once

type upstreamImpl struct {
	c      upcache.Cache
	cancel context.CancelFunc
}

// newUpstream starts an upstream cache without an API dispatcher (the
// scheduler's SchedulerAsyncAPICalls path, unused here); o.TTL is ignored
// (NewImpl refuses it).
func newUpstream(o Options) *upstreamImpl {
	// The metrics loop publishes scheduler_cache_size and panics on a nil
	// gauge unless the scheduler metrics are registered first.
	registerMetrics.Do(upmetrics.Register)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), discard))
	return &upstreamImpl{c: upcache.New(ctx, nil, o.GenericWorkload, o.CompositePodGroup), cancel: cancel}
}

func (u *upstreamImpl) Name() string { return Upstream }

func (u *upstreamImpl) AddNode(n *v1.Node) error { u.c.AddNode(discard, n); return nil }
func (u *upstreamImpl) UpdateNode(o, n *v1.Node) error {
	u.c.UpdateNode(discard, o, n)
	return nil
}
func (u *upstreamImpl) RemoveNode(n *v1.Node) error       { return u.c.RemoveNode(discard, n) }
func (u *upstreamImpl) AssumePod(p *v1.Pod) error         { return u.c.AssumePod(discard, p) }
func (u *upstreamImpl) ForgetPod(p *v1.Pod) error         { return u.c.ForgetPod(discard, p) }
func (u *upstreamImpl) RemoveAssumedPod(p *v1.Pod) error  { return u.c.RemoveAssumedPod(discard, p) }
func (u *upstreamImpl) AddPod(p *v1.Pod) error            { return u.c.AddPod(discard, p) }
func (u *upstreamImpl) UpdatePod(o, n *v1.Pod) error      { return u.c.UpdatePod(discard, o, n) }
func (u *upstreamImpl) RemovePod(p *v1.Pod) error         { return u.c.RemovePod(discard, p) }
func (u *upstreamImpl) GetPod(p *v1.Pod) (*v1.Pod, error) { return u.c.GetPod(p) }
func (u *upstreamImpl) PodCount() int                     { n, _ := u.c.PodCount(); return n }
func (u *upstreamImpl) NodeCount() int                    { return u.c.NodeCount() }
func (u *upstreamImpl) Submit(ev workload.Event) error    { return Apply(u, ev) }
func (u *upstreamImpl) Flush() error                      { return nil }
func (u *upstreamImpl) Close()                            { u.cancel() }

// Cache exposes the upstream cache (for the differential test).
func (u *upstreamImpl) Cache() upcache.Cache { return u.c }

func (u *upstreamImpl) NewReader() Reader {
	return &upstreamReader{c: u.c, snap: upcache.NewEmptySnapshot()}
}

type upstreamReader struct {
	c    upcache.Cache
	snap *upcache.Snapshot
	list []fwk.NodeInfo
}

func (r *upstreamReader) Refresh() error {
	err := r.c.UpdateSnapshot(discard, r.snap)
	r.list, _ = r.snap.NodeInfos().List()
	return err
}

func (r *upstreamReader) NumNodes() int { return len(r.list) }

func upView(ni fwk.NodeInfo) NodeView {
	req, alloc := ni.GetRequested(), ni.GetAllocatable()
	return NodeView{
		Name:          ni.Node().Name,
		MilliCPU:      req.GetMilliCPU(),
		Memory:        req.GetMemory(),
		AllocMilliCPU: alloc.GetMilliCPU(),
		AllocMemory:   alloc.GetMemory(),
		AllowedPods:   int64(alloc.GetAllowedPodNumber()),
		Pods:          len(ni.GetPods()),
	}
}

func (r *upstreamReader) NodeAt(i int) NodeView { return upView(r.list[i]) }

func (r *upstreamReader) Get(name string) (NodeView, bool) {
	ni, err := r.snap.NodeInfos().Get(name)
	if err != nil {
		return NodeView{}, false
	}
	return upView(ni), true
}

func (r *upstreamReader) List() int {
	l, _ := r.snap.NodeInfos().List()
	return len(l)
}

// ---- schedcache ----

type schedImpl struct {
	c         *schedcache.Cache
	asyncErrs atomic.Int64
	mu        sync.Mutex
	firstErr  error // first async failure since the last Flush
}

func newSchedCache(o Options) (*schedImpl, error) {
	s := &schedImpl{}
	opts := []schedcache.Option{
		schedcache.WithTTL(o.TTL),
		schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
			s.asyncErrs.Add(1)
			s.mu.Lock()
			if s.firstErr == nil {
				s.firstErr = fmt.Errorf("async %v: %w", e.Kind, e.Err)
			}
			s.mu.Unlock()
		}),
	}
	if o.Period > 0 {
		opts = append(opts, schedcache.WithPeriod(o.Period))
	}
	if o.GenericWorkload || o.CompositePodGroup {
		opts = append(opts, schedcache.WithPodGroups(o.GenericWorkload, o.CompositePodGroup))
	}
	c, err := schedcache.New(context.Background(), opts...)
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

func (s *schedImpl) Name() string { return SchedCache }

func (s *schedImpl) AddNode(n *v1.Node) error { _, err := s.c.AddNode(discard, n); return err }
func (s *schedImpl) UpdateNode(o, n *v1.Node) error {
	_, err := s.c.UpdateNode(discard, o, n)
	return err
}
func (s *schedImpl) RemoveNode(n *v1.Node) error       { return s.c.RemoveNode(discard, n) }
func (s *schedImpl) AssumePod(p *v1.Pod) error         { return s.c.AssumePod(discard, p) }
func (s *schedImpl) FinishBinding(p *v1.Pod) error     { return s.c.FinishBinding(discard, p) }
func (s *schedImpl) ForgetPod(p *v1.Pod) error         { return s.c.ForgetPod(discard, p) }
func (s *schedImpl) RemoveAssumedPod(p *v1.Pod) error  { return s.c.RemoveAssumedPod(discard, p) }
func (s *schedImpl) AddPod(p *v1.Pod) error            { return s.c.AddPod(discard, p) }
func (s *schedImpl) UpdatePod(o, n *v1.Pod) error      { return s.c.UpdatePod(discard, o, n) }
func (s *schedImpl) RemovePod(p *v1.Pod) error         { return s.c.RemovePod(discard, p) }
func (s *schedImpl) GetPod(p *v1.Pod) (*v1.Pod, error) { return s.c.GetPod(p) }
func (s *schedImpl) PodCount() int                     { n, _ := s.c.PodCount(); return n }
func (s *schedImpl) NodeCount() int                    { return s.c.NodeCount() }
func (s *schedImpl) Close()                            { _ = s.c.Close() }

// Cache exposes the schedcache cache (for the differential test).
func (s *schedImpl) Cache() *schedcache.Cache { return s.c }

func (s *schedImpl) Submit(ev workload.Event) error {
	switch ev.Kind {
	case workload.AddPod:
		return s.c.AddPodAsync(ev.Pod)
	case workload.UpdatePod:
		return s.c.UpdatePodAsync(ev.OldPod, ev.Pod)
	case workload.RemovePod:
		return s.c.RemovePodAsync(ev.Pod)
	case workload.AddNode:
		return s.c.AddNodeAsync(ev.Node)
	case workload.UpdateNode:
		return s.c.UpdateNodeAsync(ev.OldNode, ev.Node)
	case workload.RemoveNode:
		return s.c.RemoveNodeAsync(ev.Node)
	}
	return fmt.Errorf("bench: unknown event kind %v", ev.Kind)
}

func (s *schedImpl) Flush() error {
	if err := s.c.Sync(); err != nil {
		return err
	}
	// The error handler runs on a goroutine of its own: failures of events
	// applied before Sync may still be in flight to it. Benchmarks feed
	// valid streams, so any failure is reported as soon as it shows up.
	s.mu.Lock()
	err := s.firstErr
	s.firstErr = nil
	s.mu.Unlock()
	if err != nil {
		return errors.Join(err, fmt.Errorf("%d asynchronous failures so far", s.asyncErrs.Load()))
	}
	return nil
}

func (s *schedImpl) NewReader() Reader { return &schedReader{c: s.c} }

type schedReader struct {
	c *schedcache.Cache
	s *schedcache.Snapshot
}

func (r *schedReader) Refresh() error {
	r.s = r.c.Snapshot()
	return r.s.Err()
}

func (r *schedReader) NumNodes() int { return r.s.NumNodes() }

func scView(ni *schedcache.NodeInfo) NodeView {
	req, alloc := ni.Requested(), ni.Allocatable()
	return NodeView{
		Name:          ni.NodeName(),
		MilliCPU:      req.MilliCPU,
		Memory:        req.Memory,
		AllocMilliCPU: alloc.MilliCPU,
		AllocMemory:   alloc.Memory,
		AllowedPods:   alloc.AllowedPodNumber,
		Pods:          ni.NumPods(),
	}
}

func (r *schedReader) NodeAt(i int) NodeView { return scView(r.s.At(i)) }

func (r *schedReader) Get(name string) (NodeView, bool) {
	ni, err := r.s.Get(name)
	if err != nil {
		return NodeView{}, false
	}
	return scView(ni), true
}

func (r *schedReader) List() int {
	l, _ := r.s.List()
	return len(l)
}
