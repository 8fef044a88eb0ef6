package informer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/e2e/controlplane"
	"github.com/schedcache/schedcache/e2e/internal/apitrace"
	"github.com/schedcache/schedcache/e2e/internal/leak"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/kube/informer"
	"github.com/schedcache/schedcache/kube/metrics"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock in the cache fails in seconds, with every goroutine's stack
	leak.VerifyTestMain(m)
}

// Deadlines of the polling waits: generous, since CI's 2 cores also run
// the apiserver and etcd under the race detector. Nothing asserts a
// duration.
const (
	convergeTimeout = 3 * time.Minute
	pollInterval    = 200 * time.Millisecond
	testTimeout     = 15 * time.Minute
)

// testContext is a context bound to the test: cancelled at its end, and
// after testTimeout at the latest.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// errSink collects the errors the adapter and the cache report.
type errSink struct {
	mu   sync.Mutex
	errs []error // guarded by mu
}

func (s *errSink) add(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *errSink) all() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// watcher is a schedcache.Cache fed by informers through
// kube/informer, as a scheduler runs it.
type watcher struct {
	cache   *schedcache.Cache               // owned: closed at Cleanup
	adapter *informer.Adapter               // immutable
	factory informers.SharedInformerFactory // owned: shut down at Cleanup
	rec     *apitrace.Recorder              // immutable: the informers' requests
	errs    *errSink                        // immutable
	ctx     context.Context                 // the informers' context; cancelled at Cleanup
	// tombstones counts the DeletedFinalStateUnknown pods and nodes the
	// informers delivered, from a second handler on the same informers.
	tombstones *tombstoneCounter
}

type tombstoneCounter struct {
	mu          sync.Mutex
	pods, nodes int // guarded by mu
}

func (c *tombstoneCounter) handler(pods bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if _, ok := obj.(cache.DeletedFinalStateUnknown); !ok {
			return
		}
		c.mu.Lock()
		if pods {
			c.pods++
		} else {
			c.nodes++
		}
		c.mu.Unlock()
	}}
}

func (c *tombstoneCounter) get() (pods, nodes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods, c.nodes
}

// newWatcher attaches a new cache to informers of cfg (recorded by a new
// apitrace.Recorder) and, if start, starts them. Everything stops at the
// test's Cleanup: the informers first, then the cache.
func newWatcher(t *testing.T, cfg *rest.Config, start bool) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{rec: apitrace.New(), errs: &errSink{}, ctx: ctx, tombstones: &tombstoneCounter{}}
	logger := klog.Background()
	c, err := schedcache.New(ctx, schedcache.WithAsyncErrorHandler(informer.AsyncErrorHandler(logger, w.errs.add)))
	require.NoError(t, err)
	w.cache = c
	client, err := kubernetes.NewForConfig(w.rec.Wrap(cfg))
	require.NoError(t, err)
	w.factory = informers.NewSharedInformerFactory(client, 0)
	w.adapter, err = informer.Attach(c, w.factory, informer.WithErrorHandler(w.errs.add), informer.WithLogger(logger))
	require.NoError(t, err)
	_, err = w.factory.Core().V1().Pods().Informer().AddEventHandler(w.tombstones.handler(true))
	require.NoError(t, err)
	_, err = w.factory.Core().V1().Nodes().Informer().AddEventHandler(w.tombstones.handler(false))
	require.NoError(t, err)
	t.Cleanup(func() {
		cancel()
		w.factory.Shutdown() // waits for the informers' goroutines
		require.NoError(t, c.Close())
	})
	if start {
		w.start(t)
	}
	return w
}

// start starts the informers and waits until the adapter has synced.
func (w *watcher) start(t *testing.T) {
	t.Helper()
	w.factory.Start(w.ctx.Done())
	ctx, cancel := context.WithTimeout(w.ctx, convergeTimeout)
	defer cancel()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), w.adapter.HasSynced), "the adapter did not sync")
}

// requireNoErrors fails t if the adapter or the cache reported an error.
func (w *watcher) requireNoErrors(t *testing.T) {
	t.Helper()
	require.Empty(t, w.errs.all(), "errors reported by the adapter or the cache")
	n := w.adapter.Counts()
	require.Zero(t, n.WrongType, "wrong-type callbacks")
	require.Zero(t, n.SubmitErrors, "events the cache refused")
}

// apiState is a consistent read of the API server's nodes and pods.
type apiState struct {
	nodes []*v1.Node
	pods  []*v1.Pod
}

func readAPI(ctx context.Context, admin kubernetes.Interface) (*apiState, error) {
	nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := admin.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s := &apiState{}
	for i := range nodes.Items {
		s.nodes = append(s.nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		s.pods = append(s.pods, &pods.Items[i])
	}
	return s, nil
}

// listers serves s through the listers metrics.Comparer reads.
func (s *apiState) listers() (corelisters.NodeLister, corelisters.PodLister, error) {
	ni := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pi := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, n := range s.nodes {
		if err := ni.Add(n); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range s.pods {
		if err := pi.Add(p); err != nil {
			return nil, nil, err
		}
	}
	return corelisters.NewNodeLister(ni), corelisters.NewPodLister(pi), nil
}

// difference compares the cache with the API server: metrics.Comparer
// (node names, assigned pods by UID and node) on a fresh consistent read,
// then the versions: every cached node and pod must carry the
// ResourceVersion the API server has, so updates are checked too. It
// returns "" when they agree.
func (w *watcher) difference(ctx context.Context, admin kubernetes.Interface) (string, error) {
	s, err := readAPI(ctx, admin)
	if err != nil {
		return "", err
	}
	nl, pl, err := s.listers()
	if err != nil {
		return "", err
	}
	cmp := &metrics.Comparer{NodeLister: nl, PodLister: pl, Cache: w.cache}
	d, err := cmp.Compare(klog.Background())
	if err != nil {
		return "", err
	}
	var out []string
	if !d.Empty() || len(d.AssumedPods) != 0 {
		out = append(out, fmt.Sprintf("comparer: missed nodes %v, redundant nodes %v, missed pods %d, redundant pods %d, misplaced pods %d, assumed %d",
			d.MissedNodes, d.RedundantNodes, len(d.MissedPods), len(d.RedundantPods), len(d.MisplacedPods), len(d.AssumedPods)))
	}
	dump, err := w.cache.Dump()
	if err != nil {
		return "", err
	}
	nodeRV := map[string]string{}
	for _, n := range s.nodes {
		nodeRV[n.Name] = n.ResourceVersion
	}
	podRV := map[string]string{}
	for _, p := range s.pods {
		podRV[string(p.UID)] = p.ResourceVersion
	}
	var staleNodes, stalePods []string
	for name, ni := range dump.Nodes {
		if n := ni.Node(); n != nil && nodeRV[name] != "" && n.ResourceVersion != nodeRV[name] {
			staleNodes = append(staleNodes, name)
		}
		for _, pi := range ni.Pods() {
			p := pi.Pod()
			if rv, ok := podRV[string(p.UID)]; ok && rv != p.ResourceVersion {
				stalePods = append(stalePods, p.Namespace+"/"+p.Name)
			}
		}
	}
	if len(staleNodes)+len(stalePods) != 0 {
		sort.Strings(staleNodes)
		sort.Strings(stalePods)
		out = append(out, fmt.Sprintf("stale versions: nodes %v, pods %d (first: %v)", staleNodes, len(stalePods), first(stalePods, 5)))
	}
	return strings.Join(out, "; "), nil
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// requireConverges polls until the cache equals the API server (the API
// must be quiescent meanwhile) and fails t with the last difference if
// it does not within convergeTimeout.
func (w *watcher) requireConverges(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	var last string
	for {
		diff, err := w.difference(ctx, admin)
		if err == nil && diff == "" {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = diff
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the cache did not converge to the API server: %s", last)
		case <-time.After(pollInterval):
		}
	}
}

// requireEqualNow fails t unless the cache equals the API server at once
// (no polling).
func (w *watcher) requireEqualNow(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	diff, err := w.difference(ctx, admin)
	require.NoError(t, err)
	require.Empty(t, diff)
}

// cluster drives the API server: the objects the tests create, update
// and delete, with a pool of concurrent workers.
type cluster struct {
	admin   kubernetes.Interface // immutable
	ns      string               // immutable: the namespace of the test's pods
	workers int                  // immutable
}

func newCluster(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, ns string) *cluster {
	t.Helper()
	require.NoError(t, cp.EnsureNamespace(ctx, ns))
	return &cluster{admin: cp.Client(), ns: ns, workers: 8}
}

// each runs fn(i) for i in [0, n) on c.workers goroutines and returns the
// errors joined; it returns once every call returned.
func (c *cluster) each(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range c.workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

var zones = []string{"zone-a", "zone-b", "zone-c"}

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

func newNode(i int) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{
			v1.LabelTopologyZone: zones[i%len(zones)], v1.LabelHostname: nodeName(i)}},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("128Gi"), v1.ResourcePods: resource.MustParse("110")},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("128Gi"), v1.ResourcePods: resource.MustParse("110")},
		},
	}
}

// newPod is a pod on node (unassigned if node is "").
func (c *cluster) newPod(name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name, Labels: map[string]string{"app": "storm"}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "registry.invalid/pause:1",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")}}}}},
	}
}

func (c *cluster) createNodes(ctx context.Context, from, to int) error {
	return c.each(ctx, to-from, func(ctx context.Context, i int) error {
		_, err := c.admin.CoreV1().Nodes().Create(ctx, newNode(from+i), metav1.CreateOptions{})
		return err
	})
}

// createPods creates pods named prefix-i for i in [0, n): every fourth
// one unassigned and then bound to its node with a Binding (the
// scheduler's path: an update from unassigned to assigned), the others
// created on their node. Pod i goes to node nodeOf(i).
func (c *cluster) createPods(ctx context.Context, prefix string, n int, nodeOf func(i int) string) error {
	return c.each(ctx, n, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("%s-%05d", prefix, i)
		if i%4 != 0 {
			_, err := c.admin.CoreV1().Pods(c.ns).Create(ctx, c.newPod(name, nodeOf(i)), metav1.CreateOptions{})
			return err
		}
		if _, err := c.admin.CoreV1().Pods(c.ns).Create(ctx, c.newPod(name, ""), metav1.CreateOptions{}); err != nil {
			return err
		}
		b := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
			Target: v1.ObjectReference{Kind: "Node", Name: nodeOf(i)}}
		return c.admin.CoreV1().Pods(c.ns).Bind(ctx, b, metav1.CreateOptions{})
	})
}

// updatePods relabels the named pods (metadata only: the cache's
// UpdatePod path for an assigned pod).
func (c *cluster) updatePods(ctx context.Context, names []string, round int) error {
	return c.each(ctx, len(names), func(ctx context.Context, i int) error {
		p, err := c.admin.CoreV1().Pods(c.ns).Get(ctx, names[i], metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Labels["round"] = fmt.Sprint(round)
		_, err = c.admin.CoreV1().Pods(c.ns).Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// updateNodes relabels the named nodes and changes their allocatable
// CPU (a status update).
func (c *cluster) updateNodes(ctx context.Context, names []string, round int) error {
	return c.each(ctx, len(names), func(ctx context.Context, i int) error {
		n, err := c.admin.CoreV1().Nodes().Get(ctx, names[i], metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Labels["round"] = fmt.Sprint(round)
		if n, err = c.admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		n.Status.Allocatable[v1.ResourceCPU] = *resource.NewQuantity(int64(16+round%16), resource.DecimalSI)
		_, err = c.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

var zero = int64(0)

// deletePods deletes the named pods at once (grace period 0: no kubelet
// runs here to finish a graceful deletion).
func (c *cluster) deletePods(ctx context.Context, names []string) error {
	return c.each(ctx, len(names), func(ctx context.Context, i int) error {
		err := c.admin.CoreV1().Pods(c.ns).Delete(ctx, names[i], metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// deleteNodes deletes the named nodes.
func (c *cluster) deleteNodes(ctx context.Context, names []string) error {
	return c.each(ctx, len(names), func(ctx context.Context, i int) error {
		return c.admin.CoreV1().Nodes().Delete(ctx, names[i], metav1.DeleteOptions{})
	})
}

// podsOn returns the names of the test's pods on the named nodes, and of
// all the test's pods (sorted).
func (c *cluster) podsOn(ctx context.Context, nodes []string) (on, all []string, err error) {
	list, err := c.admin.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	set := map[string]bool{}
	for _, n := range nodes {
		set[n] = true
	}
	for _, p := range list.Items {
		all = append(all, p.Name)
		if set[p.Spec.NodeName] {
			on = append(on, p.Name)
		}
	}
	sort.Strings(on)
	sort.Strings(all)
	return on, all, nil
}

// sample returns k of names (k ≤ len(names)), chosen by rng, in order.
func sample(rng *rand.Rand, names []string, k int) []string {
	idx := rng.Perm(len(names))[:k]
	sort.Ints(idx)
	out := make([]string, k)
	for i, j := range idx {
		out[i] = names[j]
	}
	return out
}

func nodeNames(from, to int) []string {
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, nodeName(i))
	}
	return out
}
