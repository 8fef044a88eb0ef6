package schedcache_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/cachetest"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/nodeinfo"
)

var logger = klog.Background()

func node(name, zone string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("64"),
		v1.ResourceMemory: resource.MustParse("256Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}}}
	if zone != "" {
		n.Labels = map[string]string{"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": zone}
	}
	return n
}

func pod(uid, nodeName string, milliCPU int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
		Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)},
		}}}},
	}
}

func newCache(t *testing.T, opts ...schedcache.Option) *schedcache.Cache {
	t.Helper()
	c, err := schedcache.New(context.Background(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Guarantee 1: Snapshot (and the reads built on it) never wait on the
// coordinator. The coordinator is held inside an operation; reads must
// still answer, and the held operation must not be visible.
func TestGuaranteeReadersNeverBlock(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var hold atomic.Bool
	c := newCache(t, cachetest.WithFaultHooks(func(kind string) {
		if hold.Load() && kind == "AssumePod" {
			close(entered)
			<-release
		}
	}, nil))
	_, err := c.AddNode(logger, node("n1", "a"))
	require.NoError(t, err)
	before := c.Snapshot()

	hold.Store(true)
	assumed := make(chan error, 1)
	go func() { assumed <- c.AssumePod(logger, pod("p1", "n1", 100)) }()
	watchdog.Recv(entered, "the coordinator entering the hook") // the coordinator is now blocked inside AssumePod

	readsDone := make(chan struct{})
	go func() {
		defer close(readsDone)
		for i := 0; i < 1000; i++ {
			s := c.Snapshot()
			if s != before {
				panic("a snapshot was published while the coordinator was held")
			}
			if _, err := c.GetPod(pod("p1", "n1", 100)); !errors.Is(err, schedcache.ErrPodNotFound) {
				panic(fmt.Sprint("GetPod saw an unpublished pod: ", err))
			}
			c.NodeCount()
			_, _ = c.PodCount()
			_, _ = s.Get("n1")
		}
	}()
	select {
	case <-readsDone:
	case <-time.After(30 * time.Second): // hang guard, not a timing assertion
		t.Fatal("reads blocked while the coordinator was busy")
	}
	close(release)
	require.NoError(t, <-assumed)
	got, err := c.GetPod(pod("p1", "n1", 100))
	require.NoError(t, err)
	require.Equal(t, types.UID("p1"), got.UID)
}

// Guarantee 2: every snapshot reflects exactly a prefix of the operation
// order across all shards. One writer submits pod k to node k%nodes (nodes
// spread over 4 shards) asynchronously, so publications cover many
// operations; readers check every snapshot they see is a prefix.
func TestGuaranteeConsistentCut(t *testing.T) {
	const nodes, ops = 16, 4000
	c := newCache(t, schedcache.WithShards(4), schedcache.WithMaxBatch(64))
	for i := 0; i < nodes; i++ {
		_, err := c.AddNode(logger, node(fmt.Sprint("n", i), string(rune('a'+i%3))))
		require.NoError(t, err)
	}
	var stop atomic.Bool
	var checked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				s := c.Snapshot()
				if err := checkPrefix(s, nodes); err != nil {
					errs <- err
					return
				}
				checked.Add(1)
			}
		}()
	}
	for k := 0; k < ops; k++ {
		require.NoError(t, c.AddPodAsync(pod(fmt.Sprintf("p%05d", k), fmt.Sprint("n", k%nodes), int64(k+1))))
	}
	require.NoError(t, c.Sync())
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.NoError(t, checkPrefix(c.Snapshot(), nodes))
	n, _ := c.PodCount()
	require.Equal(t, ops, n)
	require.Positive(t, checked.Load())
}

// checkPrefix verifies that s holds exactly pods p0..p(m-1) for m =
// PodCount, each aggregated on its node: pod k adds k+1 millicores to node
// k%nodes.
func checkPrefix(s *schedcache.Snapshot, nodes int) error {
	m := s.PodCount()
	want := make([]int64, nodes)
	for k := 0; k < m; k++ {
		if _, ok := s.Pod(fmt.Sprintf("p%05d", k)); !ok {
			return fmt.Errorf("snapshot with %d pods lacks pod %d: not a prefix", m, k)
		}
		want[k%nodes] += int64(k + 1)
	}
	if _, ok := s.Pod(fmt.Sprintf("p%05d", m)); ok {
		return fmt.Errorf("snapshot with %d pods holds pod %d", m, m)
	}
	for i := 0; i < nodes; i++ {
		ni, err := s.Get(fmt.Sprint("n", i))
		if err != nil {
			return err
		}
		if got := ni.Requested().MilliCPU; got != want[i] {
			return fmt.Errorf("epoch %d: node n%d requests %dm, the prefix of %d pods gives %dm", s.Epoch(), i, got, m, want[i])
		}
	}
	return nil
}

// Guarantee 3: once a mutating call returns, every snapshot taken after it,
// by any goroutine, includes it; UpdateSnapshot right after AssumePod shows
// the pod, as upstream.
func TestGuaranteeReadYourWrites(t *testing.T) {
	c := newCache(t, schedcache.WithShards(3))
	for i := 0; i < 6; i++ {
		_, err := c.AddNode(logger, node(fmt.Sprint("n", i), ""))
		require.NoError(t, err)
	}
	own := schedcache.NewEmptySnapshot()
	done := make(chan int)
	seen := make(chan error)
	go func() { // another goroutine observes right after each return
		for k := range done {
			ni, err := c.Snapshot().Get(fmt.Sprint("n", k%6))
			if err == nil && ni.NumPods() != k/6+1 {
				err = fmt.Errorf("node n%d has %d pods after assume %d returned, want %d", k%6, ni.NumPods(), k, k/6+1)
			}
			seen <- err
		}
	}()
	for k := 0; k < 300; k++ {
		p := pod(fmt.Sprint("p", k), fmt.Sprint("n", k%6), 10)
		require.NoError(t, c.AssumePod(logger, p))
		require.NoError(t, c.UpdateSnapshot(logger, own))
		ni, err := own.Get(fmt.Sprint("n", k%6))
		require.NoError(t, err)
		require.Equal(t, k/6+1, ni.NumPods())
		assumed, err := c.IsAssumedPod(p)
		require.NoError(t, err)
		require.True(t, assumed)
		done <- k
		require.NoError(t, <-seen)
	}
	close(done)
}

// Guarantee 4: a published snapshot and its NodeInfos never change, and
// what accessors return are copies. Readers hold snapshots while writers
// churn; under -race any write to published memory is reported too.
// Read-your-writes through Snapshot, for every synchronous call: several
// goroutines, each on nodes and pods of its own, read c.Snapshot() right
// after each AddNode, AssumePod, FinishBinding, ForgetPod, AddPod,
// UpdatePod, RemovePod, UpdateNode and RemoveNode returns and find that
// call's effect there (the pod present, absent or assumed, the node's
// object, allocatable and requested totals). A coordinator that replies
// before it publishes is caught.
func TestGuaranteeReadYourWritesEveryCall(t *testing.T) {
	iterations := 1000
	if testing.Short() {
		iterations = 500
	}
	const goroutines = 4
	c := newCache(t, schedcache.WithShards(2))
	var wg sync.WaitGroup
	errc := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- readYourWrites(c, g, iterations)
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
}

func readYourWrites(c *schedcache.Cache, g, iterations int) error {
	// check reads the latest snapshot right after a call returned.
	check := func(step string, err error, name string, want func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error) error {
		if err != nil {
			return fmt.Errorf("goroutine %d, %s: %w", g, step, err)
		}
		s := c.Snapshot()
		ni, _ := s.Get(name)
		if err := want(s, ni); err != nil {
			return fmt.Errorf("goroutine %d, snapshot right after %s: %w", g, step, err)
		}
		return nil
	}
	checkPod := func(s *schedcache.Snapshot, uid string, present, assumed bool, obj *v1.Pod) error {
		e, ok := s.Pod(uid)
		switch {
		case ok != present:
			return fmt.Errorf("pod %s present %v, want %v", uid, ok, present)
		case ok && e.Assumed != assumed:
			return fmt.Errorf("pod %s assumed %v, want %v", uid, e.Assumed, assumed)
		case ok && obj != nil && e.Pod != obj:
			return fmt.Errorf("pod %s: snapshot holds another object", uid)
		}
		return nil
	}
	checkNode := func(ni *schedcache.NodeInfo, obj *v1.Node, allocCPU, reqCPU int64, pods int) error {
		switch {
		case ni == nil:
			return errors.New("node missing")
		case ni.Node() != obj:
			return fmt.Errorf("node %s: snapshot holds another object", obj.Name)
		case ni.Allocatable().MilliCPU != allocCPU:
			return fmt.Errorf("node %s allocatable cpu %d, want %d", obj.Name, ni.Allocatable().MilliCPU, allocCPU)
		case ni.Requested().MilliCPU != reqCPU || ni.NumPods() != pods:
			return fmt.Errorf("node %s: %d pods requesting %dm, want %d requesting %dm", obj.Name, ni.NumPods(), ni.Requested().MilliCPU, pods, reqCPU)
		}
		return nil
	}
	for i := range iterations {
		name := fmt.Sprintf("g%d-n%d", g, i)
		n := node(name, fmt.Sprint("z", i%3))
		uid := func(s string) string { return fmt.Sprintf("g%d-%d-%s", g, i, s) }
		a, b, c2 := pod(uid("a"), name, 100), pod(uid("b"), name, 200), pod(uid("c"), name, 50)
		b2 := pod(uid("b"), name, 300)
		n2 := node(name, fmt.Sprint("z", i%3+1))
		n2.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("32")
		steps := []struct {
			step string
			call func() error
			want func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error
		}{
			{"AddNode", func() error { _, err := c.AddNode(logger, n); return err },
				func(_ *schedcache.Snapshot, ni *schedcache.NodeInfo) error { return checkNode(ni, n, 64000, 0, 0) }},
			{"AssumePod a", func() error { return c.AssumePod(logger, a) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					return errors.Join(checkPod(s, uid("a"), true, true, a), checkNode(ni, n, 64000, 100, 1))
				}},
			{"FinishBinding a", func() error { return c.FinishBinding(logger, a) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					return errors.Join(checkPod(s, uid("a"), true, true, a), checkNode(ni, n, 64000, 100, 1))
				}},
			{"ForgetPod a", func() error { return c.ForgetPod(logger, a) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					return errors.Join(checkPod(s, uid("a"), false, false, nil), checkNode(ni, n, 64000, 0, 0))
				}},
			{"AssumePod b", func() error { return c.AssumePod(logger, b) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					return errors.Join(checkPod(s, uid("b"), true, true, b), checkNode(ni, n, 64000, 200, 1))
				}},
			{"AddPod b (confirm)", func() error { return c.AddPod(logger, b) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					return errors.Join(checkPod(s, uid("b"), true, false, b), checkNode(ni, n, 64000, 200, 1))
				}},
			{"UpdatePod b", func() error { return c.UpdatePod(logger, b, b2) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					return errors.Join(checkPod(s, uid("b"), true, false, b2), checkNode(ni, n, 64000, 300, 1))
				}},
			{"AddPod c", func() error { return c.AddPod(logger, c2) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					return errors.Join(checkPod(s, uid("c"), true, false, c2), checkNode(ni, n, 64000, 350, 2))
				}},
			{"RemovePod c", func() error { return c.RemovePod(logger, c2) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					return errors.Join(checkPod(s, uid("c"), false, false, nil), checkNode(ni, n, 64000, 300, 1))
				}},
			{"UpdateNode (zone, allocatable)", func() error { _, err := c.UpdateNode(logger, n, n2); return err },
				func(_ *schedcache.Snapshot, ni *schedcache.NodeInfo) error { return checkNode(ni, n2, 32000, 300, 1) }},
			{"RemovePod b", func() error { return c.RemovePod(logger, b2) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					return errors.Join(checkPod(s, uid("b"), false, false, nil), checkNode(ni, n2, 32000, 0, 0))
				}},
			{"RemoveNode", func() error { return c.RemoveNode(logger, n2) },
				func(s *schedcache.Snapshot, ni *schedcache.NodeInfo) error {
					if ni != nil {
						return fmt.Errorf("node %s still in the snapshot", name)
					}
					return nil
				}},
		}
		for _, st := range steps {
			if err := check(fmt.Sprintf("%s (iteration %d)", st.step, i), st.call(), name, st.want); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestGuaranteeImmutability(t *testing.T) {
	c := newCache(t, schedcache.WithShards(2))
	for i := 0; i < 8; i++ {
		_, err := c.AddNode(logger, node(fmt.Sprint("n", i), string(rune('a'+i%2))))
		require.NoError(t, err)
	}
	for k := 0; k < 64; k++ {
		require.NoError(t, c.AddPod(logger, pod(fmt.Sprint("p", k), fmt.Sprint("n", k%8), 100)))
	}
	held := c.Snapshot()
	fp := fingerprint(held)
	ni, err := held.Get("n0")
	require.NoError(t, err)
	// Scribble on what accessors return.
	pods := ni.Pods()
	pods[0] = nil
	ports := ni.UsedPorts()
	ports["1.2.3.4"] = map[nodeinfo.ProtocolPort]struct{}{{Protocol: "TCP", Port: 1}: {}}
	pvc := ni.PVCRefCounts()
	pvc["x/y"] = 9
	imgs := ni.ImageStates()
	imgs["z"] = nodeinfo.ImageStateSummary{Size: 1}
	list, _ := held.List()
	list[0] = nil

	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := 0; k < 200; k++ {
				uid := fmt.Sprintf("w%d-%d", w, k)
				_ = c.AddPod(logger, pod(uid, fmt.Sprint("n", k%8), 7))
				_ = c.RemovePod(logger, pod(fmt.Sprint("p", k%64), fmt.Sprint("n", (k%64)%8), 100))
				if k%50 == 0 {
					_ = c.RemoveNode(logger, node(fmt.Sprint("n", k%8), string(rune('a'+(k%8)%2))))
					_, _ = c.AddNode(logger, node(fmt.Sprint("n", k%8), "c"))
				}
			}
		}(w)
	}
	wg.Wait()
	require.Equal(t, fp, fingerprint(held), "a held snapshot changed")
	require.NotEqual(t, fp, fingerprint(c.Snapshot()), "the writers changed nothing: the test proves nothing")
	// Published snapshots refuse UpdateSnapshot.
	require.ErrorIs(t, c.UpdateSnapshot(logger, held), schedcache.ErrSnapshotPublished)
}

// Guarantee 6: Close and context cancellation stop every goroutine (goleak
// in TestMain checks); operations racing with Close return a result or
// ErrClosed, never hang or panic; afterwards every write returns ErrClosed
// and reads still answer from the last snapshot.
func TestGuaranteeCleanShutdown(t *testing.T) {
	for _, viaCtx := range []bool{false, true} {
		t.Run(fmt.Sprint("ctx=", viaCtx), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c, err := schedcache.New(ctx, schedcache.WithShards(2))
			require.NoError(t, err)
			_, err = c.AddNode(logger, node("n1", ""))
			require.NoError(t, err)
			var wg sync.WaitGroup
			var closedSeen atomic.Int64
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for k := 0; ; k++ {
						p := pod(fmt.Sprintf("g%d-%d", g, k), "n1", 1)
						err := c.AddPod(logger, p)
						if errors.Is(err, schedcache.ErrClosed) {
							closedSeen.Add(1)
							return
						}
						if err != nil {
							panic(err)
						}
						if err := c.AddPodAsync(pod(fmt.Sprintf("a%d-%d", g, k), "n1", 1)); errors.Is(err, schedcache.ErrClosed) {
							closedSeen.Add(1)
							return
						}
					}
				}(g)
			}
			time.Sleep(20 * time.Millisecond) // let the writers run
			if viaCtx {
				cancel()
				watchdog.Recv(c.Done(), "the cache stopping")
			} else {
				require.NoError(t, c.Close())
			}
			wg.Wait()
			require.Equal(t, int64(8), closedSeen.Load())
			require.ErrorIs(t, c.AddPod(logger, pod("late", "n1", 1)), schedcache.ErrClosed)
			require.ErrorIs(t, c.AssumePod(logger, pod("late", "n1", 1)), schedcache.ErrClosed)
			_, err = c.AddNode(logger, node("n2", ""))
			require.ErrorIs(t, err, schedcache.ErrClosed)
			require.ErrorIs(t, c.Sync(), schedcache.ErrClosed)
			_, err = c.Dump()
			require.ErrorIs(t, err, schedcache.ErrClosed)
			require.ErrorIs(t, c.AddPodAsync(pod("late2", "n1", 1)), schedcache.ErrClosed)
			n, _ := c.PodCount()
			require.Positive(t, n)
			require.Equal(t, 1, c.NodeCount())
			require.NoError(t, c.Close()) // idempotent
		})
	}
}
