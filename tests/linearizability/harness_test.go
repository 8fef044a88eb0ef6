package linearizability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/cachetest"
)

// target is the part of the cache a history exercises. *schedcache.Cache
// implements it; the broken wrappers of lin_test.go override some methods.
type target interface {
	AssumePod(klog.Logger, *v1.Pod) error
	FinishBinding(klog.Logger, *v1.Pod) error
	ForgetPod(klog.Logger, *v1.Pod) error
	AddPod(klog.Logger, *v1.Pod) error
	UpdatePod(klog.Logger, *v1.Pod, *v1.Pod) error
	RemovePod(klog.Logger, *v1.Pod) error
	GetPod(*v1.Pod) (*v1.Pod, error)
	IsAssumedPod(*v1.Pod) (bool, error)
	PodCount() (int, error)
	NodeCount() int
	Snapshot() *schedcache.Snapshot
}

var _ target = (*schedcache.Cache)(nil)

// genInput draws one operation. Node names are drawn blindly (a client does
// not know where a pod is stored), so every error path of the state machine
// occurs, and so do concurrent conflicting transitions on the same UID.
func genInput(r *rand.Rand) input {
	in := input{uid: uint8(r.IntN(nUID)), ver: uint8(r.IntN(nVer)), node: uint8(r.IntN(nodeNX + 1))}
	w := r.IntN(100)
	switch {
	case w < 14:
		in.op = opAssume
		if r.IntN(16) == 0 {
			in.node = nodeNone
		}
	case w < 18:
		in.op = opFinish
	case w < 26:
		in.op = opForget
		if r.IntN(10) == 0 {
			in.node = nodeNone
		}
	case w < 38:
		in.op = opAdd
	case w < 46:
		in.op = opUpdate
		in.uid2, in.node2 = in.uid, in.node
		if r.IntN(3) == 0 {
			in.node2 = uint8(r.IntN(nodeNX + 1))
		}
		if r.IntN(12) == 0 {
			in.uid2 = (in.uid + 1) % nUID
		}
	case w < 56:
		in.op = opRemove
		if r.IntN(5) == 0 {
			in.node = nodeNone
		}
	case w < 68:
		in.op = opGet
	case w < 76:
		in.op = opIsAssumed
	case w < 80:
		in.op = opPodCount
	case w < 83:
		in.op = opNodeCount
	default:
		in.op = opSnapshot
	}
	return in
}

// readView reads everything view records from one snapshot.
func readView(un *universe, snap *schedcache.Snapshot) view {
	var v view
	for u := range v.pods {
		e, ok := snap.Pod(uidNames[u])
		v.pods[u] = podView{present: ok, assumed: e.Assumed, id: un.id(e.Pod)}
	}
	for n := range v.nodes {
		ni, err := snap.Get(nodeNames[n])
		if err != nil {
			continue
		}
		req := ni.Requested()
		v.nodes[n] = nodeView{found: true, numPods: ni.NumPods(), cpu: req.MilliCPU, mem: req.Memory}
	}
	_, err := snap.Get(nodeNames[nodeNX])
	v.nxListed = err == nil
	v.podCount, v.nodeCount, v.numNodes = snap.PodCount(), snap.NodeCount(), snap.NumNodes()
	return v
}

// do performs in on tg and returns its output.
func do(tg target, un *universe, in input) any {
	logger := klog.Background()
	pod := un.pod(in.uid, in.node, in.ver)
	switch in.op {
	case opAssume:
		return classify(tg.AssumePod(logger, pod))
	case opFinish:
		return classify(tg.FinishBinding(logger, pod))
	case opForget:
		return classify(tg.ForgetPod(logger, pod))
	case opAdd:
		return classify(tg.AddPod(logger, pod))
	case opUpdate:
		return classify(tg.UpdatePod(logger, un.pod(in.uid, in.node, 0), un.pod(in.uid2, in.node2, in.ver)))
	case opRemove:
		return classify(tg.RemovePod(logger, pod))
	case opGet:
		p, err := tg.GetPod(pod)
		return getOut{err: classify(err), id: un.id(p)}
	case opIsAssumed:
		ok, err := tg.IsAssumedPod(pod)
		if err != nil {
			return -1
		}
		return b2i(ok)
	case opPodCount:
		n, err := tg.PodCount()
		if err != nil {
			return -1
		}
		return n
	case opNodeCount:
		return tg.NodeCount()
	case opSnapshot:
		return readView(un, tg.Snapshot())
	}
	panic(fmt.Sprint("unknown op ", in.op))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// historyStats describes how concurrent a recorded history was.
type historyStats struct {
	ops        int
	overlapped int // ops whose interval intersects an op of another client
	mutations  int
	failedMuts int // mutations that returned an error
}

func (s *historyStats) add(o historyStats) {
	s.ops += o.ops
	s.overlapped += o.overlapped
	s.mutations += o.mutations
	s.failedMuts += o.failedMuts
}

func statsOf(ops []porcupine.Operation) historyStats {
	st := historyStats{ops: len(ops)}
	for i, a := range ops {
		for j, b := range ops {
			if i != j && a.ClientId != b.ClientId && a.Call <= b.Return && b.Call <= a.Return {
				st.overlapped++
				break
			}
		}
		if a.Input.(input).op <= opRemove {
			st.mutations++
			if a.Output.(errCode) != errNone {
				st.failedMuts++
			}
		}
	}
	return st
}

// newCache starts a cache with the two real nodes of the universe. With
// jitter, the coordinator and the shards yield or sleep at random before
// operations and shard requests (through the fault hooks), so that clients
// run while mutations are in flight: on two cores the client a reply wakes
// otherwise runs next, and clients would rarely overlap.
func newCache(t testing.TB, shards int, jitter bool) *schedcache.Cache {
	t.Helper()
	var opts []schedcache.Option
	opts = append(opts, schedcache.WithShards(shards))
	if jitter {
		opts = append(opts, cachetest.WithFaultHooks(func(string) { jitterNow() }, func(int) { jitterNow() }))
	}
	c, err := schedcache.New(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < nRealN; n++ {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeNames[n],
			Labels: map[string]string{v1.LabelTopologyZone: fmt.Sprint("z", n)}}}
		if _, err := c.AddNode(klog.Background(), node); err != nil {
			c.Close()
			t.Fatal(err)
		}
	}
	return c
}

// jitterNow yields, sleeps briefly, or does nothing. It runs on the cache's
// goroutines, so it draws from the goroutine-safe global source.
func jitterNow() {
	switch rand.IntN(8) {
	case 0, 1, 2:
		runtime.Gosched()
	case 3:
		time.Sleep(time.Duration(rand.IntN(20)) * time.Microsecond)
	}
}

const noYield = 255

// record runs one history: clients goroutines, each performing its own
// pre-drawn program back to back, all released together; before some calls
// a client yields or spins briefly, at random. Timestamps come from the
// monotonic clock (time.Since of a fixed base) and enclose each call.
func record(tg target, un *universe, seed uint64, clients, opsTotal int) []porcupine.Operation {
	programs := make([][]input, clients)
	yields := make([][]uint8, clients)
	for cl := range programs {
		r := rand.New(rand.NewPCG(seed, uint64(cl)))
		n := opsTotal / clients
		if cl < opsTotal%clients {
			n++
		}
		for len(programs[cl]) < n {
			in := genInput(r)
			programs[cl] = append(programs[cl], in)
			yields[cl] = append(yields[cl], uint8(r.IntN(8)))
			// A third of the mutations are followed at once (no yield) by a
			// read of the same UID: a read-your-writes probe, which catches
			// a reply sent before the publication that includes it.
			if in.op <= opRemove && len(programs[cl]) < n && r.IntN(3) == 0 {
				probe := input{op: []opKind{opGet, opIsAssumed, opSnapshot}[r.IntN(3)], uid: in.uid}
				programs[cl] = append(programs[cl], probe)
				yields[cl] = append(yields[cl], noYield)
			}
		}
	}
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }
	results := make([][]porcupine.Operation, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for cl := range programs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i, in := range programs[cl] {
				switch yields[cl][i] {
				case noYield:
				case 0, 1:
					runtime.Gosched()
				case 2:
					for t0 := now(); now()-t0 < 1000; {
					}
				}
				call := now()
				out := do(tg, un, in)
				ret := now()
				results[cl] = append(results[cl], porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: out, Return: ret})
			}
		}()
	}
	close(start)
	wg.Wait()
	var ops []porcupine.Operation
	for _, r := range results {
		ops = append(ops, r...)
	}
	return ops
}

// check runs porcupine on ops. On anything but Ok it returns the history
// and, with visualize, also writes it and a porcupine visualization to a
// fresh temporary directory that is kept (its path is in the result).
func check(ops []porcupine.Operation, visualize bool, name string) (porcupine.CheckResult, string) {
	res := porcupine.CheckOperationsTimeout(cacheModel, ops, 30*time.Second)
	if res == porcupine.Ok {
		return res, ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "porcupine: %s; history (client: [call, return] op -> output):\n", res)
	b.WriteString(formatHistory(ops))
	if visualize {
		dir, err := os.MkdirTemp("", "schedcache-lin-")
		if err != nil {
			return res, b.String()
		}
		_, info := porcupine.CheckOperationsVerbose(cacheModel, ops, 30*time.Second)
		html := filepath.Join(dir, name+".html")
		if err := porcupine.VisualizePath(cacheModel, info, html); err == nil {
			fmt.Fprintf(&b, "visualization: %s\n", html)
		}
		_ = os.WriteFile(filepath.Join(dir, name+".txt"), []byte(b.String()), 0o644)
	}
	return res, b.String()
}

func formatHistory(ops []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	var b strings.Builder
	for _, o := range sorted {
		fmt.Fprintf(&b, "  c%d: [%d, %d] %s\n", o.ClientId, o.Call, o.Return, describeOp(o.Input, o.Output))
	}
	return b.String()
}
