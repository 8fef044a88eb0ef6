// Package misuse feeds the cache every kind of bad input and bad call
// sequence and checks that each is refused with the documented typed error
// and leaves the cache exactly as it was (canonical rendering of Dump and
// of the snapshot before and after), that nothing panics or hangs, and that
// Close and context cancellation behave as documented.
//
// Run: go test -race -short ./tests/misuse/   (no long form; -misuse.rounds
// repeats the racy cases more often)
package misuse

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/tests/stress/invariant"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

var flagRounds = flag.Int("misuse.rounds", 0, "rounds of the racy cases (default 20 with -short, 200 otherwise)")

func rounds() int {
	if *flagRounds > 0 {
		return *flagRounds
	}
	if testing.Short() {
		return 20
	}
	return 200
}

var logger = klog.Background()

// hangGuard is how long any single call may take before the test calls it
// a hang. It is a deadlock detector, not a timing assertion.
const hangGuard = 20 * time.Second

func mkNode(name, zone string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Labels: map[string]string{
			v1.LabelTopologyRegion: "r", v1.LabelTopologyZone: zone, v1.LabelHostname: name}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")},
			Images: []v1.ContainerImage{{Names: []string{"img-" + zone}, SizeBytes: 1 << 20}}},
	}
}

func mkPod(uid, node string, milliCPU int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid), ResourceVersion: "1"},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: *resource.NewMilliQuantity(milliCPU, resource.DecimalSI), v1.ResourceMemory: resource.MustParse("64Mi")}},
			Ports: []v1.ContainerPort{{HostPort: int32(8000 + milliCPU%100), ContainerPort: 80}}}},
			Volumes: []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim-" + uid}}}},
		},
	}
}

// with returns a copy of p with the given node name and UID.
func with(p *v1.Pod, node string, uid types.UID) *v1.Pod {
	cp := p.DeepCopy()
	cp.Spec.NodeName, cp.UID = node, uid
	return cp
}

func bump(p *v1.Pod) *v1.Pod {
	cp := p.DeepCopy()
	cp.ResourceVersion += "+"
	return cp
}

// fixture is a small cache in every state a misuse case needs: nodes n1,
// n2, n3 (n3 removed while holding a pod: a ghost), pods added (on n1),
// assumed (on n2), ghostPod (on n3) and phantom (on a node never seen: a
// nodeless entry), and a finished-binding assumed pod.
type fixture struct {
	c                *schedcache.Cache
	n1, n2, n3       *v1.Node
	added, assumed   *v1.Pod
	finished         *v1.Pod
	ghostPod         *v1.Pod
	phantom          *v1.Pod
	unknown          *v1.Pod // never cached
	handlerMu        sync.Mutex
	handled          []schedcache.AsyncError
	handledC         chan struct{}
	dumpBefore       string
	snapBefore       string
	freshBefore      string // a new snapshot refreshed by UpdateSnapshot then: image counts now, not as of each node's last change
	publishedBefore  *schedcache.Snapshot
	publishedBeforeF uint64
}

func newFixture(t *testing.T, opts ...schedcache.Option) *fixture {
	t.Helper()
	return newFixtureCtx(t, context.Background(), opts...)
}

func newFixtureCtx(t *testing.T, ctx context.Context, opts ...schedcache.Option) *fixture {
	t.Helper()
	f := &fixture{handledC: make(chan struct{}, 1024)}
	opts = append([]schedcache.Option{schedcache.WithShards(2), schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
		f.handlerMu.Lock()
		f.handled = append(f.handled, e)
		f.handlerMu.Unlock()
		f.handledC <- struct{}{}
	})}, opts...)
	c, err := schedcache.New(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	f.c = c
	f.n1, f.n2, f.n3 = mkNode("n1", "a"), mkNode("n2", "b"), mkNode("n3", "a")
	for _, n := range []*v1.Node{f.n1, f.n2, f.n3} {
		if _, err := c.AddNode(logger, n); err != nil {
			t.Fatal(err)
		}
	}
	f.added, f.assumed, f.finished = mkPod("added", "n1", 100), mkPod("assumed", "n2", 200), mkPod("finished", "n2", 300)
	f.ghostPod, f.phantom, f.unknown = mkPod("ghost-pod", "n3", 400), mkPod("phantom", "nowhere", 500), mkPod("unknown", "n1", 600)
	must(t, c.AddPod(logger, f.added))
	must(t, c.AssumePod(logger, f.assumed))
	must(t, c.AssumePod(logger, f.finished))
	must(t, c.FinishBinding(logger, f.finished))
	must(t, c.AddPod(logger, f.ghostPod))
	must(t, c.RemoveNode(logger, f.n3))
	must(t, c.AddPod(logger, f.phantom))
	f.record(t)
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// record takes the "before" renderings.
func (f *fixture) record(t *testing.T) {
	t.Helper()
	d, err := f.c.Dump()
	must(t, err)
	if _, err := invariant.CheckDump(d, true); err != nil {
		t.Fatalf("fixture dump: %v", err)
	}
	f.dumpBefore = invariant.RenderDump(d)
	f.publishedBefore = f.c.Snapshot()
	f.publishedBeforeF = invariant.Fingerprint(f.publishedBefore)
	f.snapBefore = invariant.RenderSnapshot(f.publishedBefore)
	fresh := schedcache.NewEmptySnapshot()
	if err := f.c.UpdateSnapshot(logger, fresh); err != nil {
		t.Fatal(err)
	}
	f.freshBefore = invariant.RenderSnapshot(fresh)
	if _, err := invariant.CheckSnapshot(f.publishedBefore, invariant.Options{RecomputeRequests: true}); err != nil {
		t.Fatalf("fixture snapshot: %v", err)
	}
}

// unchanged asserts that the cache state equals the recorded one. With
// dump=false (closed cache) only the snapshot is compared.
func (f *fixture) unchanged(t *testing.T, dump bool) {
	t.Helper()
	if dump {
		d, err := f.c.Dump()
		if err != nil {
			t.Fatalf("Dump after the case: %v", err)
		}
		if diff := invariant.Diff(f.dumpBefore, invariant.RenderDump(d)); diff != "" {
			t.Errorf("Dump changed: %s", diff)
		}
	}
	if diff := invariant.Diff(f.snapBefore, invariant.RenderSnapshot(f.c.Snapshot())); diff != "" {
		t.Errorf("snapshot changed: %s", diff)
	}
	if invariant.Fingerprint(f.publishedBefore) != f.publishedBeforeF {
		t.Error("the snapshot published before the case changed")
	}
}

// waitHandled waits for n async errors and returns them.
func (f *fixture) waitHandled(t *testing.T, n int) []schedcache.AsyncError {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-f.handledC:
		case <-time.After(hangGuard):
			t.Fatalf("waited %v for async error %d of %d", hangGuard, i+1, n)
		}
	}
	f.handlerMu.Lock()
	defer f.handlerMu.Unlock()
	out := f.handled
	f.handled = nil
	return out
}

// noneHandled asserts the handler saw nothing (after a Sync and a grace
// period for the notifier).
func (f *fixture) noneHandled(t *testing.T) {
	t.Helper()
	must(t, f.c.Sync())
	select {
	case <-f.handledC:
		f.handlerMu.Lock()
		t.Errorf("async handler called: %+v", f.handled)
		f.handlerMu.Unlock()
	case <-time.After(20 * time.Millisecond):
	}
}

// callResult runs fn with a hang guard.
func callWithGuard(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("PANIC: %v", r)
			}
		}()
		done <- fn()
	}()
	select {
	case err := <-done:
		if err != nil && len(err.Error()) > 6 && err.Error()[:6] == "PANIC:" {
			t.Fatalf("%s panicked: %v", what, err)
		}
		return err
	case <-time.After(hangGuard):
		t.Fatalf("%s hung for %v", what, hangGuard)
		return nil
	}
}

type misuseCase struct {
	name string
	call func(f *fixture) error
	want error // sentinel (errors.Is); nil: the call must succeed and change nothing
	// as, when set, must succeed on the error (errors.As checks).
	as func(t *testing.T, f *fixture, err error)
}

func podErr(op string) func(*testing.T, *fixture, error) {
	return func(t *testing.T, _ *fixture, err error) {
		var pe *schedcache.PodError
		if !errors.As(err, &pe) || pe.Op != op {
			t.Errorf("error %v is not a *PodError of %s", err, op)
		}
	}
}

func nodeErr(op string) func(*testing.T, *fixture, error) {
	return func(t *testing.T, _ *fixture, err error) {
		var ne *schedcache.NodeError
		if !errors.As(err, &ne) || ne.Op != op {
			t.Errorf("error %v is not a *NodeError of %s", err, op)
		}
	}
}

func corruption(op, cached, given string) func(*testing.T, *fixture, error) {
	return func(t *testing.T, _ *fixture, err error) {
		var ce *schedcache.CorruptionError
		if !errors.As(err, &ce) || ce.Op != op || ce.CachedNode != cached || ce.GivenNode != given {
			t.Errorf("error %v is not a *CorruptionError{Op:%s CachedNode:%s GivenNode:%s}", err, op, cached, given)
		}
	}
}

func noUID(p *v1.Pod) *v1.Pod { return with(p, p.Spec.NodeName, "") }

func syncCases() []misuseCase {
	nilPod := (*v1.Pod)(nil)
	nilNode := (*v1.Node)(nil)
	return []misuseCase{
		// nil pod, every method
		{name: "AssumePod(nil)", call: func(f *fixture) error { return f.c.AssumePod(logger, nilPod) }, want: schedcache.ErrNilPod},
		{name: "FinishBinding(nil)", call: func(f *fixture) error { return f.c.FinishBinding(logger, nilPod) }, want: schedcache.ErrNilPod},
		{name: "ForgetPod(nil)", call: func(f *fixture) error { return f.c.ForgetPod(logger, nilPod) }, want: schedcache.ErrNilPod},
		{name: "AddPod(nil)", call: func(f *fixture) error { return f.c.AddPod(logger, nilPod) }, want: schedcache.ErrNilPod},
		{name: "UpdatePod(nil,new)", call: func(f *fixture) error { return f.c.UpdatePod(logger, nilPod, bump(f.added)) }, want: schedcache.ErrNilPod},
		{name: "UpdatePod(old,nil)", call: func(f *fixture) error { return f.c.UpdatePod(logger, f.added, nilPod) }, want: schedcache.ErrNilPod},
		{name: "RemovePod(nil)", call: func(f *fixture) error { return f.c.RemovePod(logger, nilPod) }, want: schedcache.ErrNilPod},
		{name: "GetPod(nil)", call: func(f *fixture) error {
			p, err := f.c.GetPod(nilPod)
			if p != nil {
				return fmt.Errorf("GetPod(nil) returned a pod")
			}
			return err
		}, want: schedcache.ErrNilPod},
		{name: "IsAssumedPod(nil)", call: func(f *fixture) error {
			ok, err := f.c.IsAssumedPod(nilPod)
			if ok {
				return fmt.Errorf("IsAssumedPod(nil) = true")
			}
			return err
		}, want: schedcache.ErrNilPod},
		// nil node, every method
		{name: "AddNode(nil)", call: func(f *fixture) error { return nodeResult(f.c.AddNode(logger, nilNode)) }, want: schedcache.ErrNilNode},
		// A nil old node is upstream's zone key "": refused only with a
		// zoned new node (upstream panics); n1 is in zone a.
		{name: "UpdateNode(nil,new)", call: func(f *fixture) error { return nodeResult(f.c.UpdateNode(logger, nilNode, f.n1)) },
			want: schedcache.ErrNilNode, as: nodeErr("UpdateNode")},
		{name: "UpdateNode(old,nil)", call: func(f *fixture) error { return nodeResult(f.c.UpdateNode(logger, f.n1, nilNode)) }, want: schedcache.ErrNilNode},
		{name: "RemoveNode(nil)", call: func(f *fixture) error { return f.c.RemoveNode(logger, nilNode) }, want: schedcache.ErrNilNode},
		// empty UID, every pod method
		{name: "AssumePod(empty UID)", call: func(f *fixture) error { return f.c.AssumePod(logger, noUID(f.unknown)) }, want: schedcache.ErrEmptyUID},
		{name: "FinishBinding(empty UID)", call: func(f *fixture) error { return f.c.FinishBinding(logger, noUID(f.assumed)) }, want: schedcache.ErrEmptyUID},
		{name: "ForgetPod(empty UID)", call: func(f *fixture) error { return f.c.ForgetPod(logger, noUID(f.assumed)) }, want: schedcache.ErrEmptyUID},
		{name: "AddPod(empty UID)", call: func(f *fixture) error { return f.c.AddPod(logger, noUID(f.unknown)) }, want: schedcache.ErrEmptyUID},
		{name: "UpdatePod(old empty UID)", call: func(f *fixture) error { return f.c.UpdatePod(logger, noUID(f.added), bump(f.added)) }, want: schedcache.ErrEmptyUID},
		{name: "UpdatePod(new empty UID)", call: func(f *fixture) error { return f.c.UpdatePod(logger, f.added, noUID(bump(f.added))) }, want: schedcache.ErrEmptyUID},
		{name: "RemovePod(empty UID)", call: func(f *fixture) error { return f.c.RemovePod(logger, noUID(f.added)) }, want: schedcache.ErrEmptyUID},
		{name: "GetPod(empty UID)", call: func(f *fixture) error { _, err := f.c.GetPod(noUID(f.added)); return err }, want: schedcache.ErrEmptyUID},
		{name: "IsAssumedPod(empty UID)", call: func(f *fixture) error { _, err := f.c.IsAssumedPod(noUID(f.assumed)); return err }, want: schedcache.ErrEmptyUID},
		// state misuse (an empty node name is no misuse: the pod goes to
		// the nodeless entry "", as upstream)
		{name: "AssumePod(assumed pod) again", call: func(f *fixture) error { return f.c.AssumePod(logger, f.assumed) },
			want: schedcache.ErrPodAlreadyCached, as: podErr("AssumePod")},
		{name: "AssumePod(assumed pod) on another node", call: func(f *fixture) error { return f.c.AssumePod(logger, with(f.assumed, "n1", "assumed")) },
			want: schedcache.ErrPodAlreadyCached},
		{name: "AssumePod(added pod)", call: func(f *fixture) error { return f.c.AssumePod(logger, f.added) }, want: schedcache.ErrPodAlreadyCached},
		{name: "AddPod(added pod)", call: func(f *fixture) error { return f.c.AddPod(logger, bump(f.added)) },
			want: schedcache.ErrPodAlreadyAdded, as: podErr("AddPod")},
		{name: "AddPod(pod on a ghost node) again", call: func(f *fixture) error { return f.c.AddPod(logger, f.ghostPod) }, want: schedcache.ErrPodAlreadyAdded},
		{name: "ForgetPod(added pod)", call: func(f *fixture) error { return f.c.ForgetPod(logger, f.added) },
			want: schedcache.ErrPodNotAssumed, as: podErr("ForgetPod")},
		{name: "ForgetPod(added pod) naming another node", call: func(f *fixture) error { return f.c.ForgetPod(logger, with(f.added, "n2", "added")) },
			want: schedcache.ErrPodNodeMismatch}, // the mismatch check comes first (semantics 1.4)
		{name: "ForgetPod(assumed pod) naming another node", call: func(f *fixture) error { return f.c.ForgetPod(logger, with(f.assumed, "n1", "assumed")) },
			want: schedcache.ErrPodNodeMismatch, as: podErr("ForgetPod")},
		{name: "ForgetPod(assumed pod) naming no node", call: func(f *fixture) error { return f.c.ForgetPod(logger, with(f.assumed, "", "assumed")) },
			want: schedcache.ErrPodNodeMismatch},
		{name: "ForgetPod(unknown pod) is a no-op", call: func(f *fixture) error { return f.c.ForgetPod(logger, f.unknown) }},
		{name: "FinishBinding(unknown pod) is a no-op", call: func(f *fixture) error { return f.c.FinishBinding(logger, f.unknown) }},
		{name: "FinishBinding(added pod) is a no-op", call: func(f *fixture) error { return f.c.FinishBinding(logger, f.added) }},
		{name: "UpdatePod(assumed pod)", call: func(f *fixture) error { return f.c.UpdatePod(logger, f.assumed, bump(f.assumed)) },
			want: schedcache.ErrPodAssumed, as: podErr("UpdatePod")},
		{name: "UpdatePod(unknown pod)", call: func(f *fixture) error { return f.c.UpdatePod(logger, f.unknown, bump(f.unknown)) },
			want: schedcache.ErrPodNotFound, as: podErr("UpdatePod")},
		{name: "UpdatePod new pod naming another node", call: func(f *fixture) error { return f.c.UpdatePod(logger, f.added, with(f.added, "n2", "added")) },
			want: schedcache.ErrCorrupted, as: corruption("UpdatePod", "n1", "n2")},
		// The old pod naming another node than the cached one: upstream
		// fails without change on a live node, panics on a nodeless entry
		// (ghost n3, pods-first "nowhere"), double-counts the pod when the
		// node has no entry.
		{name: "UpdatePod old pod naming another node", call: func(f *fixture) error { return f.c.UpdatePod(logger, with(f.added, "n2", "added"), bump(f.added)) },
			want: schedcache.ErrPodNodeMismatch, as: podErr("UpdatePod")},
		{name: "UpdatePod old pod naming a ghost", call: func(f *fixture) error { return f.c.UpdatePod(logger, with(f.added, "n3", "added"), bump(f.added)) },
			want: schedcache.ErrPodNodeMismatch, as: podErr("UpdatePod")},
		{name: "UpdatePod old pod naming a pods-first entry", call: func(f *fixture) error {
			return f.c.UpdatePod(logger, with(f.added, "nowhere", "added"), bump(f.added))
		}, want: schedcache.ErrPodNodeMismatch, as: podErr("UpdatePod")},
		{name: "UpdatePod old pod naming a node without entry", call: func(f *fixture) error { return f.c.UpdatePod(logger, with(f.added, "n9", "added"), bump(f.added)) },
			want: schedcache.ErrPodNodeMismatch, as: podErr("UpdatePod")},
		// A new UID renames the pod (upstream), unless it is another cached
		// pod's: upstream would hold that key twice.
		{name: "UpdatePod new UID is a cached pod's", call: func(f *fixture) error { return f.c.UpdatePod(logger, f.added, with(f.ghostPod, "n1", "ghost-pod")) },
			want: schedcache.ErrUIDMismatch, as: podErr("UpdatePod")},
		{name: "UpdatePod new UID is an assumed pod's", call: func(f *fixture) error { return f.c.UpdatePod(logger, f.added, with(f.added, "n1", "assumed")) },
			want: schedcache.ErrUIDMismatch, as: podErr("UpdatePod")},
		{name: "RemovePod naming another node", call: func(f *fixture) error { return f.c.RemovePod(logger, with(f.added, "n2", "added")) },
			want: schedcache.ErrCorrupted, as: corruption("RemovePod", "n1", "n2")},
		{name: "RemovePod(assumed pod) naming another node", call: func(f *fixture) error { return f.c.RemovePod(logger, with(f.assumed, "n1", "assumed")) },
			want: schedcache.ErrCorrupted, as: corruption("RemovePod", "n2", "n1")},
		{name: "RemovePod(pod on a ghost) naming a live node", call: func(f *fixture) error { return f.c.RemovePod(logger, with(f.ghostPod, "n1", "ghost-pod")) },
			want: schedcache.ErrCorrupted, as: corruption("RemovePod", "n3", "n1")},
		{name: "RemovePod(unknown pod)", call: func(f *fixture) error { return f.c.RemovePod(logger, f.unknown) },
			want: schedcache.ErrPodNotFound, as: podErr("RemovePod")},
		{name: "RemoveNode(unknown node)", call: func(f *fixture) error { return f.c.RemoveNode(logger, mkNode("n9", "a")) },
			want: schedcache.ErrNodeNotFound, as: nodeErr("RemoveNode")},
		// Old n1 (live, listed in zone a), new n2 in zone c: upstream would
		// unlist n1. (Differing names that unlist no live node are
		// accepted, as upstream: reject_test.go.)
		{name: "UpdateNode with differing names", call: func(f *fixture) error { return nodeResult(f.c.UpdateNode(logger, f.n1, mkNode("n2", "c"))) },
			want: schedcache.ErrNodeNameMismatch, as: nodeErr("UpdateNode")},
		{name: "GetNode(unknown)", call: func(f *fixture) error { return nodeResult(f.c.GetNode("n9")) },
			want: schedcache.ErrNodeNotFound, as: nodeErr("GetNode")},
		{name: "GetNode(\"\")", call: func(f *fixture) error { return nodeResult(f.c.GetNode("")) }, want: schedcache.ErrNodeNotFound},
		{name: "GetNode(ghost) answers", call: func(f *fixture) error {
			ni, err := f.c.GetNode("n3")
			if err == nil && (ni == nil || ni.Node() != nil || ni.NumPods() != 1) {
				return fmt.Errorf("GetNode(ghost) = %v", ni)
			}
			return err
		}},
		{name: "UpdateSnapshot(nil)", call: func(f *fixture) error { return f.c.UpdateSnapshot(logger, nil) }, want: schedcache.ErrNilSnapshot},
		{name: "UpdateSnapshot(published snapshot)", call: func(f *fixture) error { return f.c.UpdateSnapshot(logger, f.c.Snapshot()) },
			want: schedcache.ErrSnapshotPublished},
		{name: "UpdateSnapshot(old published snapshot)", call: func(f *fixture) error { return f.c.UpdateSnapshot(logger, f.publishedBefore) },
			want: schedcache.ErrSnapshotPublished},
	}
}

// nodeResult checks the (NodeInfo, error) convention: a NodeInfo exactly
// when there is no error.
func nodeResult(ni *schedcache.NodeInfo, err error) error {
	if (ni == nil) == (err == nil) {
		return fmt.Errorf("returned NodeInfo %v with error %v", ni, err)
	}
	return err
}

// argShape checks the one shape of an argument misuse, whichever call got
// it, sync or async: a nil or keyless pod is a *PodError, a nil node a
// *NodeError, each naming the operation (the case name up to "(", without
// "Async").
func argShape(t *testing.T, name string, want, err error) {
	t.Helper()
	op := strings.TrimSuffix(name[:strings.IndexByte(name+"(", '(')], "Async")
	switch want {
	case schedcache.ErrNilPod, schedcache.ErrEmptyUID:
		podErr(op)(t, nil, err)
	case schedcache.ErrNilNode:
		nodeErr(op)(t, nil, err)
	}
}

// TestMisuseSync runs every synchronous misuse case on a fresh fixture and
// checks the typed error and that nothing changed.
func TestMisuseSync(t *testing.T) {
	cases := syncCases()
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			err := callWithGuard(t, tc.name, func() error { return tc.call(f) })
			if e := invariant.Expect(tc.name, err, tc.want); e != nil {
				t.Fatal(e)
			}
			if tc.as != nil {
				tc.as(t, f, err)
			}
			argShape(t, tc.name, tc.want, err)
			f.unchanged(t, true)
			f.noneHandled(t)
			if f.c.Err() != nil {
				t.Errorf("misuse failed the cache: %v", f.c.Err())
			}
		})
	}
	t.Logf("%d synchronous misuse cases", len(cases))
}

type asyncCase struct {
	name string
	call func(f *fixture) error
	want error // synchronous rejection (nil: accepted)
	// handled: the sentinel the async handler must receive (nil: none)
	handled     error
	handledKind string
}

func asyncCases() []asyncCase {
	return []asyncCase{
		// invalid input: rejected synchronously, never reaches the handler
		{name: "AddPodAsync(nil)", call: func(f *fixture) error { return f.c.AddPodAsync(nil) }, want: schedcache.ErrNilPod},
		{name: "AddPodAsync(empty UID)", call: func(f *fixture) error { return f.c.AddPodAsync(noUID(f.unknown)) }, want: schedcache.ErrEmptyUID},
		{name: "UpdatePodAsync(nil,new)", call: func(f *fixture) error { return f.c.UpdatePodAsync(nil, bump(f.added)) }, want: schedcache.ErrNilPod},
		{name: "UpdatePodAsync(old,nil)", call: func(f *fixture) error { return f.c.UpdatePodAsync(f.added, nil) }, want: schedcache.ErrNilPod},
		{name: "UpdatePodAsync(old empty UID)", call: func(f *fixture) error { return f.c.UpdatePodAsync(noUID(f.added), bump(f.added)) }, want: schedcache.ErrEmptyUID},
		{name: "UpdatePodAsync(new empty UID)", call: func(f *fixture) error { return f.c.UpdatePodAsync(f.added, noUID(f.added)) }, want: schedcache.ErrEmptyUID},
		{name: "RemovePodAsync(nil)", call: func(f *fixture) error { return f.c.RemovePodAsync(nil) }, want: schedcache.ErrNilPod},
		{name: "RemovePodAsync(empty UID)", call: func(f *fixture) error { return f.c.RemovePodAsync(noUID(f.added)) }, want: schedcache.ErrEmptyUID},
		{name: "AddNodeAsync(nil)", call: func(f *fixture) error { return f.c.AddNodeAsync(nil) }, want: schedcache.ErrNilNode},
		{name: "UpdateNodeAsync(nil,new)", call: func(f *fixture) error { return f.c.UpdateNodeAsync(nil, f.n1) }, want: schedcache.ErrNilNode},
		{name: "UpdateNodeAsync(old,nil)", call: func(f *fixture) error { return f.c.UpdateNodeAsync(f.n1, nil) }, want: schedcache.ErrNilNode},
		{name: "RemoveNodeAsync(nil)", call: func(f *fixture) error { return f.c.RemoveNodeAsync(nil) }, want: schedcache.ErrNilNode},
		// state errors: accepted, then reported to the handler
		{name: "AddPodAsync(added pod)", call: func(f *fixture) error { return f.c.AddPodAsync(bump(f.added)) },
			handled: schedcache.ErrPodAlreadyAdded, handledKind: "AddPod"},
		{name: "UpdatePodAsync(assumed pod)", call: func(f *fixture) error { return f.c.UpdatePodAsync(f.assumed, bump(f.assumed)) },
			handled: schedcache.ErrPodAssumed, handledKind: "UpdatePod"},
		{name: "UpdatePodAsync(unknown pod)", call: func(f *fixture) error { return f.c.UpdatePodAsync(f.unknown, bump(f.unknown)) },
			handled: schedcache.ErrPodNotFound, handledKind: "UpdatePod"},
		{name: "UpdatePodAsync new pod naming another node", call: func(f *fixture) error { return f.c.UpdatePodAsync(f.added, with(f.added, "n2", "added")) },
			handled: schedcache.ErrCorrupted, handledKind: "UpdatePod"},
		{name: "UpdatePodAsync old pod naming another node", call: func(f *fixture) error { return f.c.UpdatePodAsync(with(f.added, "n2", "added"), bump(f.added)) },
			handled: schedcache.ErrPodNodeMismatch, handledKind: "UpdatePod"},
		{name: "UpdatePodAsync new UID is a cached pod's", call: func(f *fixture) error { return f.c.UpdatePodAsync(f.added, with(f.added, "n1", "ghost-pod")) },
			handled: schedcache.ErrUIDMismatch, handledKind: "UpdatePod"},
		{name: "UpdatePodAsync old pod naming a ghost", call: func(f *fixture) error { return f.c.UpdatePodAsync(with(f.added, "n3", "added"), bump(f.added)) },
			handled: schedcache.ErrPodNodeMismatch, handledKind: "UpdatePod"},
		// The name check needs the zone tree: the coordinator makes it.
		{name: "UpdateNodeAsync differing names", call: func(f *fixture) error { return f.c.UpdateNodeAsync(f.n1, mkNode("n2", "c")) },
			handled: schedcache.ErrNodeNameMismatch, handledKind: "UpdateNode"},
		{name: "RemovePodAsync(unknown pod)", call: func(f *fixture) error { return f.c.RemovePodAsync(f.unknown) },
			handled: schedcache.ErrPodNotFound, handledKind: "RemovePod"},
		{name: "RemovePodAsync naming another node", call: func(f *fixture) error { return f.c.RemovePodAsync(with(f.added, "n2", "added")) },
			handled: schedcache.ErrCorrupted, handledKind: "RemovePod"},
		{name: "RemoveNodeAsync(unknown node)", call: func(f *fixture) error { return f.c.RemoveNodeAsync(mkNode("n9", "a")) },
			handled: schedcache.ErrNodeNotFound, handledKind: "RemoveNode"},
	}
}

// TestMisuseAsync: invalid input to the Async methods is refused
// synchronously; state errors are reported to the handler with the right
// sentinel, kind and object; in both cases nothing changes.
func TestMisuseAsync(t *testing.T) {
	for _, tc := range asyncCases() {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			err := callWithGuard(t, tc.name, func() error { return tc.call(f) })
			if e := invariant.Expect(tc.name, err, tc.want); e != nil {
				t.Fatal(e)
			}
			argShape(t, tc.name, tc.want, err)
			if tc.handled == nil {
				f.noneHandled(t)
			} else {
				must(t, f.c.Sync())
				got := f.waitHandled(t, 1)
				if len(got) != 1 {
					t.Fatalf("handler got %d errors: %+v", len(got), got)
				}
				e := got[0]
				if x := invariant.Expect("async "+tc.name, e.Err, tc.handled); x != nil {
					t.Error(x)
				}
				if e.Kind.String() != tc.handledKind {
					t.Errorf("AsyncError.Kind = %v, want %s", e.Kind, tc.handledKind)
				}
				if e.Pod == nil && e.Node == nil {
					t.Error("AsyncError carries neither the pod nor the node of the event")
				}
				if tc.handledKind == "UpdatePod" && e.OldPod == nil {
					t.Error("AsyncError of an update lacks the old pod")
				}
				f.noneHandled(t)
			}
			f.unchanged(t, true)
		})
	}
}

// TestMisuseAfterClose: after Close every method returns ErrClosed (the
// Async ones included), reads keep answering from the last snapshot,
// UpdateSnapshot copies it, Close is idempotent (also concurrently).
func TestMisuseAfterClose(t *testing.T) {
	f := newFixture(t)
	must(t, f.c.Close())
	select {
	case <-f.c.Done():
	default:
		t.Fatal("Done not closed after Close returned")
	}
	n4 := mkNode("n4", "a")
	fresh := mkPod("fresh", "n1", 7)
	calls := []struct {
		name string
		call func() error
	}{
		{"AssumePod", func() error { return f.c.AssumePod(logger, fresh) }},
		{"FinishBinding", func() error { return f.c.FinishBinding(logger, f.assumed) }},
		{"ForgetPod", func() error { return f.c.ForgetPod(logger, f.assumed) }},
		{"AddPod", func() error { return f.c.AddPod(logger, fresh) }},
		{"UpdatePod", func() error { return f.c.UpdatePod(logger, f.added, bump(f.added)) }},
		{"RemovePod", func() error { return f.c.RemovePod(logger, f.added) }},
		{"AddNode", func() error { return nodeResult(f.c.AddNode(logger, n4)) }},
		{"UpdateNode", func() error { return nodeResult(f.c.UpdateNode(logger, f.n1, bumpNode(f.n1))) }},
		{"RemoveNode", func() error { return f.c.RemoveNode(logger, f.n1) }},
		{"GetNode", func() error { return nodeResult(f.c.GetNode("n1")) }},
		{"Dump", func() error {
			d, err := f.c.Dump()
			if d != nil {
				return fmt.Errorf("Dump after Close returned a dump")
			}
			return err
		}},
		{"Sync", func() error { return f.c.Sync() }},
		{"AddPodAsync", func() error { return f.c.AddPodAsync(fresh) }},
		{"UpdatePodAsync", func() error { return f.c.UpdatePodAsync(f.added, bump(f.added)) }},
		{"RemovePodAsync", func() error { return f.c.RemovePodAsync(f.added) }},
		{"AddNodeAsync", func() error { return f.c.AddNodeAsync(n4) }},
		{"UpdateNodeAsync", func() error { return f.c.UpdateNodeAsync(f.n1, bumpNode(f.n1)) }},
		{"RemoveNodeAsync", func() error { return f.c.RemoveNodeAsync(f.n1) }},
	}
	for _, cl := range calls {
		err := callWithGuard(t, cl.name+" after Close", cl.call)
		if e := invariant.Expect(cl.name+" after Close", err, schedcache.ErrClosed); e != nil {
			t.Error(e)
		}
	}
	// Reads answer from the last snapshot.
	if got, err := f.c.GetPod(f.added); err != nil || got != f.added {
		t.Errorf("GetPod after Close = %v, %v", got, err)
	}
	if ok, err := f.c.IsAssumedPod(f.assumed); err != nil || !ok {
		t.Errorf("IsAssumedPod after Close = %v, %v", ok, err)
	}
	if n, err := f.c.PodCount(); err != nil || n != 5 {
		t.Errorf("PodCount after Close = %d, %v; want 5", n, err)
	}
	if n := f.c.NodeCount(); n != 4 { // n1, n2, ghost n3, nodeless "nowhere"
		t.Errorf("NodeCount after Close = %d, want 4", n)
	}
	own := schedcache.NewEmptySnapshot()
	if err := f.c.UpdateSnapshot(logger, own); err != nil {
		t.Errorf("UpdateSnapshot after Close: %v (reads keep answering from the last snapshot)", err)
	} else if diff := invariant.Diff(f.freshBefore, invariant.RenderSnapshot(own)); diff != "" {
		t.Errorf("UpdateSnapshot after Close copied another state: %s", diff)
	}
	f.unchanged(t, false)
	// Close again, from many goroutines at once.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := callWithGuard(t, "Close again", f.c.Close); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
	wg.Wait()
	if f.c.Err() != nil {
		t.Errorf("Err after Close = %v, want nil (closed is not failed)", f.c.Err())
	}
	f.handlerMu.Lock()
	if len(f.handled) != 0 {
		t.Errorf("async handler called for refused submissions: %+v", f.handled)
	}
	f.handlerMu.Unlock()
}

func bumpNode(n *v1.Node) *v1.Node {
	cp := n.DeepCopy()
	cp.ResourceVersion += "+"
	return cp
}

// TestMisuseConcurrentClose: Close called while goroutines issue every
// kind of call. Each call returns its normal result or ErrClosed (async
// events accepted before Close reach the handler, possibly with
// ErrClosed); none hangs or panics; after Close every write is refused;
// the final snapshot is consistent and holds every pod whose AddPod
// returned nil and none whose AddPod returned ErrClosed.
func TestMisuseConcurrentClose(t *testing.T) {
	for round := 0; round < rounds(); round++ {
		concurrentCloseRound(t, round)
		if t.Failed() {
			return
		}
	}
}

func concurrentCloseRound(t *testing.T, round int) {
	var handled atomic.Int64
	var badHandled atomic.Value
	c, err := schedcache.New(context.Background(), schedcache.WithShards(2), schedcache.WithMailboxSize(8),
		schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
			handled.Add(1)
			if !errors.Is(e.Err, schedcache.ErrClosed) && !errors.Is(e.Err, schedcache.ErrPodNotFound) {
				badHandled.Store(fmt.Sprintf("%v: %v", e.Kind, e.Err))
			}
		}))
	must(t, err)
	defer c.Close()
	for i := 0; i < 4; i++ {
		_, err := c.AddNode(logger, mkNode(fmt.Sprint("n", i), "a"))
		must(t, err)
	}
	const G = 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		committed []*v1.Pod // AddPod returned nil
		refused   []*v1.Pod // AddPod returned ErrClosed
		started   = make(chan struct{}, G)
	)
	for g := 0; g < G; g++ {
		wg.Go(func() {
			started <- struct{}{}
			for k := 0; ; k++ {
				p := mkPod(fmt.Sprintf("r%d-g%d-%d", round, g, k), fmt.Sprint("n", k%4), int64(k%50+1))
				var err error
				switch k % 6 {
				case 0, 1:
					err = c.AddPod(logger, p)
					mu.Lock()
					if err == nil {
						committed = append(committed, p)
					} else if errors.Is(err, schedcache.ErrClosed) {
						refused = append(refused, p)
					}
					mu.Unlock()
				case 2:
					err = c.AddPodAsync(p)
				case 3:
					err = c.RemovePodAsync(mkPod(fmt.Sprintf("never-%d-%d", g, k), "n0", 1)) // ErrPodNotFound via the handler
				case 4:
					_, err = c.GetNode(fmt.Sprint("n", k%4))
					if err == nil {
						_, err = c.Dump()
					}
				case 5:
					err = c.Sync()
				}
				if errors.Is(err, schedcache.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("goroutine %d call %d: %v", g, k, err)
					return
				}
			}
		})
	}
	for g := 0; g < G; g++ {
		<-started
	}
	time.Sleep(time.Duration(round%5) * time.Millisecond)
	closeDone := make(chan struct{})
	go func() { _ = c.Close(); close(closeDone) }()
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-time.After(hangGuard):
		t.Fatalf("round %d: calls in flight hung after Close", round)
	}
	select {
	case <-closeDone:
	case <-time.After(hangGuard):
		t.Fatalf("round %d: Close hung", round)
	}
	if v := badHandled.Load(); v != nil {
		t.Errorf("round %d: handler got an unexpected error %v", round, v)
	}
	if err := c.AddPod(logger, mkPod("late", "n0", 1)); !errors.Is(err, schedcache.ErrClosed) {
		t.Errorf("round %d: AddPod after Close = %v", round, err)
	}
	s := c.Snapshot()
	if _, err := invariant.CheckSnapshot(s, invariant.Options{}); err != nil {
		t.Errorf("round %d: final snapshot: %v", round, err)
	}
	for _, p := range committed {
		if e, ok := s.Pod(string(p.UID)); !ok || e.Pod != p {
			t.Errorf("round %d: AddPod(%s) returned nil but the final snapshot lacks it", round, p.UID)
			break
		}
	}
	for _, p := range refused {
		if _, ok := s.Pod(string(p.UID)); ok {
			t.Errorf("round %d: AddPod(%s) returned ErrClosed but the pod was applied", round, p.UID)
			break
		}
	}
}

// TestMisuseCancelledContextBeforeNew: New with an already-cancelled
// context returns no cache and an error matching both ErrClosed and
// context.Canceled (a cache started on it would refuse every call).
func TestMisuseCancelledContextBeforeNew(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < rounds()*5; i++ {
		c, err := schedcache.New(ctx, schedcache.WithAsyncErrorHandler(func(schedcache.AsyncError) {}))
		if c != nil || !errors.Is(err, schedcache.ErrClosed) || !errors.Is(err, context.Canceled) {
			t.Fatalf("New with a cancelled context: %v, %v; want no cache and ErrClosed wrapping context.Canceled", c, err)
		}
	}
}

// TestMisuseCancelAfterNew: cancelling the context stops the cache like
// Close: Done closes, every call returns ErrClosed, reads keep answering
// from the last snapshot, Close still works.
func TestMisuseCancelAfterNew(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFixtureCtx(t, ctx)
	cancel()
	select {
	case <-f.c.Done():
	case <-time.After(hangGuard):
		t.Fatal("cache did not stop after its context was cancelled")
	}
	for name, err := range map[string]error{
		"AddPod":      f.c.AddPod(logger, mkPod("x", "n1", 1)),
		"RemovePod":   f.c.RemovePod(logger, f.added),
		"Sync":        f.c.Sync(),
		"AddPodAsync": f.c.AddPodAsync(mkPod("y", "n1", 1)),
		"RemoveNode":  f.c.RemoveNode(logger, f.n1),
	} {
		if e := invariant.Expect(name+" after cancel", err, schedcache.ErrClosed); e != nil {
			t.Error(e)
		}
	}
	if got, err := f.c.GetPod(f.added); err != nil || got != f.added {
		t.Errorf("GetPod after cancel = %v, %v", got, err)
	}
	f.unchanged(t, false)
	must(t, f.c.Close())
}

// TestMisuseNewArguments: New refuses a nil context and negative options
// with an error (no cache, no goroutine, no panic).
func TestMisuseNewArguments(t *testing.T) {
	var nilCtx context.Context // a nil context is the point
	if c, err := schedcache.New(nilCtx); !errors.Is(err, schedcache.ErrInvalidArgument) || c != nil {
		t.Errorf("New(nil) = %v, %v; want ErrInvalidArgument", c, err)
	}
	for name, opt := range map[string]schedcache.Option{
		"WithTTL(-1)":         schedcache.WithTTL(-1),
		"WithPeriod(-1)":      schedcache.WithPeriod(-1),
		"WithShards(-1)":      schedcache.WithShards(-1),
		"WithMailboxSize(-1)": schedcache.WithMailboxSize(-1),
		"WithMaxBatch(-1)":    schedcache.WithMaxBatch(-1),
		"WithExpiryChunk(-1)": schedcache.WithExpiryChunk(-1),
	} {
		c, err := schedcache.New(context.Background(), opt)
		if err == nil || c != nil {
			t.Errorf("New(%s) = %v, %v; want an error", name, c, err)
			if c != nil {
				_ = c.Close()
			}
			continue
		}
		if !errors.Is(err, schedcache.ErrInvalidArgument) {
			t.Errorf("New(%s) error %q does not wrap ErrInvalidArgument", name, err)
		}
	}
}

// TestMisuseHandlerCallsCache: the async error handler "may call the
// cache": a handler that re-adds every pod whose RemovePod failed, with a
// tiny mailbox under load, neither deadlocks nor loses its calls.
func TestMisuseHandlerCallsCache(t *testing.T) {
	var c *schedcache.Cache
	var reAdded, handlerErrs atomic.Int64
	ready := make(chan struct{})
	c, err := schedcache.New(context.Background(), schedcache.WithMailboxSize(2), schedcache.WithMaxBatch(4),
		schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
			<-ready
			if !errors.Is(e.Err, schedcache.ErrPodNotFound) {
				handlerErrs.Add(1)
				return
			}
			p := with(e.Pod, "n1", e.Pod.UID)
			if err := c.AddPod(logger, p); err != nil {
				handlerErrs.Add(1)
				return
			}
			if _, err := c.Dump(); err != nil {
				handlerErrs.Add(1)
			}
			reAdded.Add(1)
		}))
	must(t, err)
	defer c.Close()
	close(ready)
	_, err = c.AddNode(logger, mkNode("n1", "a"))
	must(t, err)
	const n = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			if err := c.RemovePodAsync(mkPod(fmt.Sprint("p", i), "n1", 1)); err != nil {
				t.Errorf("RemovePodAsync: %v", err)
				return
			}
			if err := c.AddPodAsync(mkPod(fmt.Sprint("other", i), "n1", 1)); err != nil {
				t.Errorf("AddPodAsync: %v", err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatal("producer hung while the handler called the cache")
	}
	deadline := time.Now().Add(hangGuard)
	for reAdded.Load()+handlerErrs.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if reAdded.Load() != n || handlerErrs.Load() != 0 {
		t.Fatalf("handler re-added %d of %d pods, %d errors", reAdded.Load(), n, handlerErrs.Load())
	}
	// The producer's last AddPodAsync may be queued behind the handler's
	// final re-add: wait until everything submitted so far is applied.
	must(t, c.Sync())
	if cnt, _ := c.PodCount(); cnt != 2*n {
		t.Errorf("PodCount = %d, want %d", cnt, 2*n)
	}
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(hangGuard):
		t.Fatal("Close hung")
	}
}

// TestMisuseHandlerClosesCache: a handler that reacts to a corruption
// report by closing the cache (it "may call the cache", and Close is a
// method of the cache) must not deadlock: Close returns and the cache
// stops.
func TestMisuseHandlerClosesCache(t *testing.T) {
	var c *schedcache.Cache
	closeReturned := make(chan struct{})
	ready := make(chan struct{})
	c, err := schedcache.New(context.Background(), schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
		<-ready
		if errors.Is(e.Err, schedcache.ErrCorrupted) {
			_ = c.Close()
			close(closeReturned)
		}
	}))
	must(t, err)
	close(ready)
	p := mkPod("p", "n1", 1)
	must(t, c.AddPod(logger, p))
	must(t, c.RemovePodAsync(with(p, "n2", "p"))) // ErrCorrupted, reported to the handler
	const guard = 5 * time.Second
	select {
	case <-closeReturned:
	case <-time.After(guard):
		t.Fatalf("Close called from the async error handler has not returned after %v: the coordinator waits for the notifier, which waits in Close for the coordinator (deadlock)", guard)
	}
	select {
	case <-c.Done():
	case <-time.After(guard):
		t.Fatal("cache not stopped after Close from the handler returned")
	}
}
