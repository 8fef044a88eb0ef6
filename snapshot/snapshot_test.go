package snapshot

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/nodeinfo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func frozen(t *testing.T, name string, pods ...string) *nodeinfo.NodeInfo {
	var g int64
	s := nodeinfo.NewNodeState(func() int64 { g++; return g })
	s.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	for _, uid := range pods {
		pi, err := nodeinfo.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}})
		require.NoError(t, err)
		s.AddPod(pi)
	}
	return s.Freeze()
}

// Commit produces a new snapshot; the previous one keeps what it had.
func TestBuilderCommitLeavesOldSnapshots(t *testing.T) {
	b := newBuilder()
	b.SetNode(0, frozen(t, "a"))
	b.SetIndex("a", 0)
	b.SetNode(1, frozen(t, "b", "p1"))
	b.SetIndex("b", 1)
	b.SetPod("p1", nil, true)
	b.SetPVC("ns/c", true)
	b.SetLists([]int32{1, 0}, immutable.Seq[int32]{}, immutable.Seq[int32]{}, immutable.Seq[int32]{}, nil)
	s1 := b.Commit(7, 2, 1)
	require.Equal(t, uint64(7), s1.Epoch())
	require.Equal(t, 2, s1.NumNodes())
	require.Equal(t, "b", s1.At(0).NodeName())
	require.Nil(t, s1.At(2))
	require.True(t, s1.IsPVCUsedByPods("ns/c"))
	e, ok := s1.Pod("p1")
	require.True(t, ok)
	require.True(t, e.Assumed)

	b.DeleteIndex("a")
	b.SetNode(0, nil)
	b.DeletePod("p1")
	b.SetPVC("ns/c", false)
	b.SetLists([]int32{1}, immutable.Seq[int32]{}, immutable.Seq[int32]{}, immutable.Seq[int32]{}, &InconsistentListError{ListLen: 1, TreeNodes: 2})
	s2 := b.Commit(8, 1, 0)
	_, err := s2.Get("a")
	require.ErrorIs(t, err, ErrNodeInfoNotFound)
	require.ErrorIs(t, s2.Err(), ErrInconsistentList)
	require.False(t, s2.IsPVCUsedByPods("ns/c"))
	require.Equal(t, 0, s2.PodCount())
	// s1 is untouched.
	ni, err := s1.Get("a")
	require.NoError(t, err)
	require.Equal(t, "a", ni.NodeName())
	require.NoError(t, s1.Err())
	require.Equal(t, 1, s1.PodCount())
	require.True(t, s1.IsPVCUsedByPods("ns/c"))
}

// List and the affinity lists return fresh slices; published snapshots
// refuse CopyFrom; a caller-owned snapshot takes a copy in O(1).
func TestSnapshotCopies(t *testing.T) {
	b := newBuilder()
	b.SetNode(0, frozen(t, "a"))
	b.SetIndex("a", 0)
	b.SetLists([]int32{0}, immutable.SeqOf([]int32{0}), immutable.Seq[int32]{}, immutable.SeqOf([]int32{0}), nil)
	pub := b.Commit(1, 1, 0)
	l, err := pub.List()
	require.NoError(t, err)
	l[0] = nil
	l2, _ := pub.List()
	require.NotNil(t, l2[0])
	aff, _ := pub.HavePodsWithAffinityList()
	require.Len(t, aff, 1)
	anti, _ := pub.HavePodsWithRequiredAntiAffinityList()
	require.Nil(t, anti)
	nonHost, _ := pub.HavePodsWithRequiredNonHostScopedAntiAffinityList()
	require.Len(t, nonHost, 1)
	nonHost[0] = nil
	nonHost, _ = pub.HavePodsWithRequiredNonHostScopedAntiAffinityList()
	require.NotNil(t, nonHost[0], "a fresh slice")
	require.ErrorIs(t, pub.CopyFrom(NewEmptySnapshot()), ErrPublished)
	own := NewEmptySnapshot()
	require.Equal(t, 0, own.NumNodes())
	require.NoError(t, own.CopyFrom(pub))
	require.Equal(t, 1, own.NumNodes())
	require.NoError(t, own.CopyFrom(NewEmptySnapshot()), "an owned copy stays writable")
}

// NewSnapshot lists every entry, nodeless ones too, but Get finds only
// entries with a node object; PVCs of pods with a node name are used.
func TestNewSnapshot(t *testing.T) {
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{UID: "p1", Namespace: "ns"}, Spec: v1.PodSpec{NodeName: "n1",
			Volumes: []v1.Volume{{VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c1"}}}}}},
		{ObjectMeta: metav1.ObjectMeta{UID: "p2"}, Spec: v1.PodSpec{NodeName: "unknown"}},
		{ObjectMeta: metav1.ObjectMeta{UID: "p3"}},
	}
	nodes := []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"img"}, SizeBytes: 10}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"img"}, SizeBytes: 20}}}},
	}
	s := NewSnapshot(pods, nodes)
	require.Equal(t, 4, s.NumNodes(), `n1, n2, "unknown" and ""`)
	_, err := s.Get("unknown")
	require.ErrorIs(t, err, ErrNodeInfoNotFound)
	n1, err := s.Get("n1")
	require.NoError(t, err)
	require.Equal(t, 1, n1.NumPods())
	img, _ := n1.ImageState("img")
	require.Equal(t, nodeinfo.ImageStateSummary{Size: 10, NumNodes: 2}, img)
	n2, _ := s.Get("n2")
	img, _ = n2.ImageState("img")
	require.Equal(t, int64(20), img.Size, "sizes are per node in NewSnapshot")
	require.True(t, s.IsPVCUsedByPods("ns/c1"))
	require.Equal(t, 3, s.PodCount())
}

// NewSnapshot's three affinity lists are its node list (names in order)
// filtered by the nodes' sub-lists: a pod whose required anti-affinity
// terms are all hostname-scoped puts its node in the anti-affinity list
// only; a hostname term beside a zone term puts it in both.
func TestNewSnapshotAffinityLists(t *testing.T) {
	anti := func(keys ...string) *v1.Affinity {
		a := &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{}}
		for _, k := range keys {
			a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(
				a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, v1.PodAffinityTerm{TopologyKey: k})
		}
		return a
	}
	pod := func(uid, node string, a *v1.Affinity) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Spec: v1.PodSpec{NodeName: node, Affinity: a}}
	}
	pods := []*v1.Pod{
		pod("a", "n1", anti(v1.LabelTopologyZone)),
		pod("b", "n2", anti(v1.LabelHostname)),
		pod("c", "n3", anti(v1.LabelHostname, v1.LabelTopologyZone)),
		pod("d", "n4", &v1.Affinity{PodAffinity: &v1.PodAffinity{}}),
		pod("e", "n5", nil),
		pod("f", "n0", anti(v1.LabelHostname, v1.LabelHostname)),
		pod("g", "n0", anti("rack")),
	}
	var nodes []*v1.Node
	for i := range 6 {
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("n", i)}})
	}
	s := NewSnapshot(pods, nodes)
	names := func(l []*nodeinfo.NodeInfo, err error) []string {
		require.NoError(t, err)
		var out []string
		for _, ni := range l {
			out = append(out, ni.NodeName())
		}
		return out
	}
	require.Equal(t, []string{"n0", "n1", "n2", "n3", "n4"}, names(s.HavePodsWithAffinityList()))
	require.Equal(t, []string{"n0", "n1", "n2", "n3"}, names(s.HavePodsWithRequiredAntiAffinityList()))
	require.Equal(t, []string{"n0", "n1", "n3"}, names(s.HavePodsWithRequiredNonHostScopedAntiAffinityList()))
	require.Equal(t, 3, s.NumNodesWithRequiredNonHostScopedAntiAffinity())
	n0, err := s.Get("n0")
	require.NoError(t, err)
	require.Equal(t, 2, n0.NumPodsWithRequiredAntiAffinity())
	require.Equal(t, 1, n0.NumPodsWithRequiredNonHostScopedAntiAffinity())
	require.Equal(t, "g", n0.PodWithRequiredNonHostScopedAntiAffinityAt(0).Key())
}

// The pod log and its folding into the trie: every snapshot, held for as
// long as the test runs, keeps answering exactly as the model did when it
// was committed, across many folds: run inline (no folder), on a folder
// goroutine, and on a stalled folder whose results arrive late, some only
// once the log has reached podLogMax (the builder has then folded the log
// itself, and drops them).
func TestPodLogFoldsAndHeldSnapshots(t *testing.T) {
	const keys = 61
	for _, mode := range []string{"inline", "folder", "stalled"} {
		t.Run(mode, func(t *testing.T) {
			b := newBuilder()
			var stalled *foldQueue
			switch mode {
			case "folder":
				q := serveFolds(t)
				b.SetFoldQueue(q)
			case "stalled":
				// No goroutine: the test runs each fold when it chooses.
				stalled = newFoldQueue()
				b.SetFoldQueue(stalled)
			}
			model := map[string]bool{} // key -> assumed
			type held struct {
				s     *Snapshot
				model map[string]bool
			}
			var kept []held
			pod := &v1.Pod{}
			folds, waits := 0, 0
			for epoch := 1; epoch <= 4000 || folds < 6; epoch++ {
				for j := 0; j < epoch%13; j++ { // 0..12 changes per epoch
					k := fmt.Sprint((epoch*7 + j) % keys)
					switch {
					case (epoch+j)%5 == 0:
						b.DeletePod(k)
						delete(model, k)
					default:
						assumed := (epoch+j)%2 == 0
						b.SetPod(k, pod, assumed)
						model[k] = assumed
					}
				}
				if stalled != nil && len(stalled.reqc) == 1 {
					switch {
					case len(b.podLog) >= podLogMax: // FoldPods will wait for this one
						waits++
						go func(r foldReq) {
							time.Sleep(time.Millisecond)
							stalled.resc <- r.fold(nil)
						}(<-stalled.reqc)
					case epoch%97 == 0 && folds%2 == 1: // the result is ready for the next FoldPods
						stalled.resc <- (<-stalled.reqc).fold(nil)
					}
				}
				started := b.foldLen == 0 && len(b.podLog) > podLogFold
				if started {
					folds++
				}
				pending := b.foldLen
				b.FoldPods()
				s := b.Commit(uint64(epoch), 0, len(model))
				if epoch%3 == 0 || started || pending != b.foldLen { // every third, and each fold's start and end
					kept = append(kept, held{s, maps.Clone(model)})
				}
			}
			require.Greater(t, folds, 4, "folds started")
			if stalled != nil {
				require.Positive(t, waits, "a fold was still stalled when the log reached podLogMax")
			}
			indexed := 0
			for i, h := range kept {
				got := map[string]bool{}
				h.s.RangePods(func(k string, e PodEntry) bool { got[k] = e.Assumed; return true })
				require.Equal(t, h.model, got, "snapshot %d: RangePods", i)
				require.Equal(t, len(h.model), h.s.PodCount())
				// Scanning the log, then through its index (podLogIndex).
				for pass := 0; pass < 2; pass++ {
					for c := 0; c < keys; c++ {
						e, ok := h.s.Pod(fmt.Sprint(c))
						want, wok := h.model[fmt.Sprint(c)]
						require.Equal(t, wok, ok, "snapshot %d key %d pass %d", i, c, pass)
						require.Equal(t, want, e.Assumed, "snapshot %d key %d pass %d", i, c, pass)
					}
					h.s.indexPodLog()
					require.Equal(t, len(h.s.podLog) >= podLogIndexMin, h.s.logIx.ready.Load(), "snapshot %d indexed", i)
				}
				if h.s.logIx.ready.Load() {
					indexed++
				}
			}
			require.Greater(t, indexed, 10, "snapshots read through their log index")
		})
	}
}

// A builder whose fold is stalled (its folder never runs) does not wait for
// it when the log reaches podLogMax: it folds the whole log itself, drops
// the late result when it comes, and only then queues the next fold.
func TestFoldPodsDoesNotWaitForStalledFold(t *testing.T) {
	q := newFoldQueue() // no goroutine serves it: the test plays the folder
	b := newBuilder()
	b.SetFoldQueue(q)
	pod := &v1.Pod{}
	model := map[string]bool{}
	set := func(i int) {
		k := fmt.Sprint(i % 3000)
		if i%7 == 0 {
			b.DeletePod(k)
			delete(model, k)
			return
		}
		b.SetPod(k, pod, i%2 == 0)
		model[k] = i%2 == 0
	}
	check := func(s *Snapshot, want map[string]bool, what string) {
		got := map[string]bool{}
		s.RangePods(func(k string, e PodEntry) bool { got[k] = e.Assumed; return true })
		require.Equal(t, want, got, what)
	}
	i := 0
	for ; len(b.podLog) <= podLogFold; i++ {
		set(i)
	}
	b.FoldPods()
	require.Len(t, q.reqc, 1, "a fold was queued")
	stale := <-q.reqc
	for len(b.podLog) < podLogMax {
		if len(b.podLog) > podLogMax/2 {
			b.FoldPods() // not ready, log below podLogMax: returns at once
			require.False(t, b.foldStale)
		}
		set(i)
		i++
	}
	done := make(chan struct{})
	go func() { defer close(done); b.FoldPods() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("FoldPods waited for the stalled fold")
	}
	require.Empty(t, b.podLog, "the whole log was folded here")
	require.True(t, b.foldStale)
	s1, m1 := b.Commit(1, 0, len(model)), maps.Clone(model)
	check(s1, m1, "after the builder's own fold")

	for len(b.podLog) <= podLogFold { // past the threshold, but the stale fold is still out
		set(i)
		i++
	}
	b.FoldPods()
	require.Empty(t, q.reqc, "no fold queued while the stale one is out")
	q.resc <- stale.fold(nil) // the late result arrives
	b.FoldPods()
	require.False(t, b.foldStale, "the late result was dropped")
	require.Positive(t, len(b.podLog), "and not installed")
	s2 := b.Commit(2, 0, len(model))
	check(s2, model, "after the late result")
	b.FoldPods()
	require.Len(t, q.reqc, 1, "the next fold is queued")
	check(s1, m1, "an earlier snapshot is unchanged")
}

// A fold that panics is reported by the folder, not propagated: the
// builder's next FoldPods panics with it, on the builder's goroutine.
func TestFoldPanicReachesBuilder(t *testing.T) {
	q := newFoldQueue() // no goroutine serves it: the test plays the folder
	b := newBuilder()
	b.SetFoldQueue(q)
	for i := 0; i <= podLogFold; i++ {
		b.SetPod(fmt.Sprint(i), &v1.Pod{}, false)
	}
	b.FoldPods() // submitted
	require.Positive(t, b.foldLen)
	req := <-q.reqc
	// The fold panics on the folder's goroutine (here, the test's), which
	// recovers and reports it; foldHook is set only around it, so that no
	// other goroutine ever reads it concurrently.
	foldHook = func() { panic("boom") }
	res := req.fold(nil)
	foldHook = nil
	require.ErrorContains(t, res.err, "pod log fold panicked: boom")
	q.resc <- res
	require.PanicsWithError(t, "boom", func() {
		defer func() {
			if v := recover(); v != nil {
				err := v.(error)
				require.Contains(t, err.Error(), "pod log fold panicked: boom")
				panic(errors.New("boom"))
			}
		}()
		b.FoldPods() // takes the result and panics with it
	})
}

// A fork looks its base's pod log up by scanning it until it has made
// podLogScans lookups, then builds the base's index, which the base and
// every fork of it share; the answers stay the same.
func TestForkIndexesBasePodLog(t *testing.T) {
	b := newBuilder()
	pod := &v1.Pod{}
	for i := 0; i < 3*podLogIndexMin; i++ {
		b.SetPod(fmt.Sprint(i%podLogIndexMin), pod, i%2 == 0)
		if i%5 == 0 {
			b.DeletePod(fmt.Sprint(i % podLogIndexMin))
		}
	}
	s := b.Commit(1, 0, 0)
	require.GreaterOrEqual(t, len(s.podLog), podLogIndexMin)
	want := map[string]PodEntry{}
	for c := 0; c < podLogIndexMin+1; c++ {
		if e, ok := s.Pod(fmt.Sprint(c)); ok {
			want[fmt.Sprint(c)] = e
		}
	}
	require.False(t, s.logIx.ready.Load())
	f := s.Fork()
	e := f.begin()
	for c := 0; c <= podLogScans; c++ {
		require.False(t, s.logIx.ready.Load(), "lookup %d", c)
		got, ok := e.pod(fmt.Sprint(c % (podLogIndexMin + 1)))
		w, wok := want[fmt.Sprint(c%(podLogIndexMin+1))]
		require.Equal(t, wok, ok)
		require.Equal(t, w, got)
	}
	require.True(t, s.logIx.ready.Load(), "index built after podLogScans lookups")
	for c := 0; c < podLogIndexMin+1; c++ {
		got, ok := e.pod(fmt.Sprint(c))
		w, wok := want[fmt.Sprint(c)]
		require.Equal(t, wok, ok, "key %d", c)
		require.Equal(t, w, got, "key %d", c)
		got, ok = s.Pod(fmt.Sprint(c))
		require.Equal(t, wok, ok, "key %d", c)
		require.Equal(t, w, got, "key %d", c)
	}
	f.discard()
}

// serveFolds serves a new FoldQueue on a goroutine of the test's, as the
// coordinator does, and closes it (and waits for the goroutine) at cleanup.
func serveFolds(t *testing.T) *foldQueue {
	q := newFoldQueue()
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Serve()
	}()
	t.Cleanup(func() {
		q.Close()
		<-done
	})
	return q
}

// A commit that changes no list shares the last snapshot's nodeLists; one
// that changes the lists or the tree count gets a new one and leaves the
// old one (held by earlier snapshots) as it was. The commit's allocation
// (snapshot and its two lazy indexes) stays within 288 bytes, a size class
// (416 before the affinity lists, list error and tree count moved out and
// the counts and the node vector's length became 32-bit).
func TestCommitSharesNodeListsAndNeverWritesThem(t *testing.T) {
	b := newBuilder()
	b.SetNode(0, frozen(t, "a"))
	b.SetIndex("a", 0)
	b.SetNode(1, frozen(t, "b"))
	b.SetIndex("b", 1)
	b.SetLists([]int32{0, 1}, immutable.SeqOf([]int32{1}), immutable.Seq[int32]{}, immutable.Seq[int32]{}, nil)
	b.SetTree(2, nil)
	s1 := b.Commit(1, 2, 0)
	before := *s1.ls

	b.SetNode(0, frozen(t, "a", "p"))
	b.SetPod("p", nil, false)
	s2 := b.Commit(2, 2, 1)
	require.Same(t, s1.ls, s2.ls, "no list change: the lists are shared")
	require.Same(t, s1.li, s2.li)

	b.SetTree(3, []string{"a", "b", "c"})
	s3 := b.Commit(3, 2, 1)
	require.NotSame(t, s2.ls, s3.ls)
	require.Equal(t, 3, s3.lists().treeNodes)
	require.Equal(t, []int32{0, 1}, s3.order, "a tree change keeps the lists")
	require.Same(t, s2.li, s3.li, "the list index goes with the list")

	b.SetLists([]int32{1}, immutable.Seq[int32]{}, immutable.SeqOf([]int32{1}), immutable.SeqOf([]int32{1}), &InconsistentListError{ListLen: 1, TreeNodes: 3})
	s4 := b.Commit(4, 2, 1)
	require.NotSame(t, s3.ls, s4.ls)
	require.NotSame(t, s3.li, s4.li)
	require.Equal(t, 3, s4.lists().treeNodes, "a list change keeps the tree count")
	require.ErrorIs(t, s4.Err(), ErrInconsistentList)

	require.Equal(t, before, *s1.ls, "the first lists were never written")
	require.Equal(t, 2, s1.NumNodes())
	require.NoError(t, s1.Err())
	require.Equal(t, 1, s1.NumNodesWithAffinity())
	require.Equal(t, 0, s1.NumNodesWithRequiredAntiAffinity())
	require.Equal(t, 0, s1.NumNodesWithRequiredNonHostScopedAntiAffinity())
	require.Equal(t, 2, s3.NumNodes())
	require.Equal(t, 1, s4.NumNodes())
	require.Equal(t, 1, s4.NumNodesWithRequiredAntiAffinity())
	require.Equal(t, 1, s4.NumNodesWithRequiredNonHostScopedAntiAffinity())
	require.Equal(t, 0, s4.NumNodesWithAffinity())

	var zero Snapshot
	require.Equal(t, 0, zero.NumNodes(), "a snapshot without lists reads empty ones")
	require.Zero(t, zero.NumNodesWithRequiredNonHostScopedAntiAffinity())
	nh, err := zero.HavePodsWithRequiredNonHostScopedAntiAffinityList()
	require.NoError(t, err)
	require.Nil(t, nh)
	require.NoError(t, zero.Err())

	require.LessOrEqual(t, unsafe.Sizeof(struct {
		s  Snapshot
		pc pvcIndex
		lx podLogIndex
	}{}), uintptr(288))
}
