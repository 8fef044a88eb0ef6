package linearizability

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
)

var (
	flagHistories = flag.Int("lin.histories", 0, "concurrent histories checked by TestLinearizable (0: 2000 with -short, 10000 otherwise)")
	flagOps       = flag.Int("lin.ops", 30, "operations per history")
	flagClients   = flag.Int("lin.clients", 0, "goroutines per history (0: alternate 3 and 4)")
	flagSeed      = flag.Uint64("lin.seed", 0, "seed of the operation programs (0: derived from the time; logged)")
)

func seed(t *testing.T) uint64 {
	s := *flagSeed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("programs seeded with -lin.seed=%d", s)
	return s
}

// TestLinearizable records thousands of short concurrent histories against
// real caches (1 to 3 shards; three histories in four with scheduling
// jitter injected through the fault hooks) and checks each with porcupine
// against the sequential model of model_test.go. A failure prints the
// history and keeps a porcupine visualization in a temporary directory.
func TestLinearizable(t *testing.T) {
	histories := *flagHistories
	if histories == 0 {
		histories = 10000
		if testing.Short() {
			histories = 2000
		}
	}
	base := seed(t)
	un := newUniverse()
	var total historyStats
	start := time.Now()
	var checkTime time.Duration
	for h := 0; h < histories; h++ {
		clients := *flagClients
		if clients <= 0 {
			clients = 3 + h%2
		}
		c := newCache(t, 1+h%3, h%4 != 0)
		ops := record(c, un, base+uint64(h), clients, *flagOps)
		failed := c.Err()
		c.Close()
		if failed != nil {
			t.Fatalf("history %d: cache failed: %v", h, failed)
		}
		total.add(statsOf(ops))
		t0 := time.Now()
		res, detail := check(ops, true, fmt.Sprint("history-", h))
		checkTime += time.Since(t0)
		if res != porcupine.Ok {
			t.Fatalf("history %d (seed %d, %d clients, %d shards) is not linearizable:\n%s",
				h, base+uint64(h), clients, 1+h%3, detail)
		}
	}
	t.Logf("checked %d histories, %d ops (%.1f per history), %.0f%% of ops overlapped another client's op, "+
		"%d mutations (%.0f%% returned an error); %v in all, %v in porcupine",
		histories, total.ops, float64(total.ops)/float64(histories), 100*float64(total.overlapped)/float64(total.ops),
		total.mutations, 100*float64(total.failedMuts)/float64(total.mutations), time.Since(start).Round(time.Millisecond),
		checkTime.Round(time.Millisecond))
}

// ---- hand-built histories ----

type hist []porcupine.Operation

func (h *hist) add(client int, call, ret int64, in input, out any) {
	*h = append(*h, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

func assumeIn(u, n, v uint8) input { return input{op: opAssume, uid: u, node: n, ver: v} }
func addIn(u, n, v uint8) input    { return input{op: opAdd, uid: u, node: n, ver: v} }
func forgetIn(u, n uint8) input    { return input{op: opForget, uid: u, node: n} }
func removeIn(u, n uint8) input    { return input{op: opRemove, uid: u, node: n} }
func updateIn(u, n, v uint8) input {
	return input{op: opUpdate, uid: u, node: n, uid2: u, node2: n, ver: v}
}
func getIn(u uint8) input       { return input{op: opGet, uid: u} }
func isAssumedIn(u uint8) input { return input{op: opIsAssumed, uid: u} }
func snapIn() input             { return input{op: opSnapshot} }
func podCountIn() input         { return input{op: opPodCount} }
func nodeCountIn() input        { return input{op: opNodeCount} }

func found(u, n, v uint8) getOut { return getOut{id: podID(u, n, v)} }

var notFound = getOut{err: errNotFound, id: -1}

// viewOf is what a snapshot of the given pod states shows.
func viewOf(pods ...podAt) view {
	var s state
	for _, p := range pods {
		s[p.u] = podState{p.st, p.n, p.v}
	}
	return observe(s)
}

type podAt struct{ u, st, n, v uint8 }

func assumedAt(u, n, v uint8) podAt { return podAt{u, stAssumed, n, v} }
func addedAt(u, n, v uint8) podAt   { return podAt{u, stAdded, n, v} }

// TestCheckerRejects: histories that are not linearizable must be Illegal.
func TestCheckerRejects(t *testing.T) {
	cases := map[string]func(h *hist){
		"GetPod returns a pod before its AssumePod was invoked": func(h *hist) {
			h.add(0, 0, 10, getIn(0), found(0, 0, 0))
			h.add(1, 20, 30, assumeIn(0, 0, 0), errNone)
		},
		"snapshot misses a pod whose AssumePod returned before the read": func(h *hist) {
			h.add(0, 0, 10, assumeIn(0, 0, 0), errNone)
			h.add(1, 20, 30, snapIn(), viewOf())
		},
		"reads in real-time order see add, then not-add, without a remove": func(h *hist) {
			h.add(0, 0, 100, addIn(0, 1, 0), errNone)
			h.add(1, 10, 20, snapIn(), viewOf(addedAt(0, 1, 0)))
			h.add(2, 30, 40, getIn(0), notFound)
		},
		"two snapshot reads in real-time order see add, then not-add": func(h *hist) {
			h.add(0, 0, 100, addIn(0, 1, 0), errNone)
			h.add(1, 10, 20, snapIn(), viewOf(addedAt(0, 1, 0)))
			h.add(1, 30, 40, snapIn(), viewOf())
		},
		"torn snapshot: pod entry present, node aggregate without it": func(h *hist) {
			h.add(0, 0, 10, addIn(0, 0, 1), errNone)
			v := viewOf(addedAt(0, 0, 1))
			v.nodes[0] = nodeView{found: true}
			h.add(1, 0, 20, snapIn(), v)
		},
		"snapshot node aggregate counts the old version after UpdatePod returned": func(h *hist) {
			h.add(0, 0, 10, addIn(0, 0, 0), errNone)
			h.add(0, 20, 30, updateIn(0, 0, 1), errNone)
			v := viewOf(addedAt(0, 0, 1))
			v.nodes[0].cpu = podCPU(0, 0)
			h.add(1, 40, 50, snapIn(), v)
		},
		"two concurrent AssumePods of one UID both succeed": func(h *hist) {
			h.add(0, 0, 10, assumeIn(0, 0, 0), errNone)
			h.add(1, 0, 10, assumeIn(0, 1, 0), errNone)
		},
		"IsAssumedPod true after AddPod confirmed the pod": func(h *hist) {
			h.add(0, 0, 10, assumeIn(1, 0, 0), errNone)
			h.add(0, 20, 30, addIn(1, 0, 0), errNone)
			h.add(1, 40, 50, isAssumedIn(1), 1)
		},
		"RemovePod reports not-found after AddPod returned": func(h *hist) {
			h.add(0, 0, 10, addIn(2, 1, 0), errNone)
			h.add(1, 20, 30, removeIn(2, nodeNone), errNotFound)
		},
		"ForgetPod succeeds on an added pod": func(h *hist) {
			h.add(0, 0, 10, addIn(0, 0, 0), errNone)
			h.add(1, 20, 30, forgetIn(0, 0), errNone)
		},
		"PodCount of zero after AssumePod returned": func(h *hist) {
			h.add(0, 0, 10, assumeIn(0, nodeNX, 0), errNone)
			h.add(1, 20, 30, podCountIn(), 0)
		},
		"NodeCount misses the nodeless entry of a pod on an unknown node": func(h *hist) {
			h.add(0, 0, 10, addIn(0, nodeNX, 0), errNone)
			h.add(1, 20, 30, nodeCountIn(), nRealN)
		},
		"GetPod returns the object of a failed AssumePod": func(h *hist) {
			h.add(0, 0, 10, addIn(0, 0, 0), errNone)
			h.add(0, 20, 30, assumeIn(0, 1, 1), errAlreadyCached)
			h.add(1, 40, 50, getIn(0), found(0, 1, 1))
		},
		"two concurrent AddPods of one UID both succeed": func(h *hist) {
			h.add(0, 0, 100, addIn(0, 0, 0), errNone)
			h.add(1, 0, 100, addIn(0, 1, 1), errNone)
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			var h hist
			build(&h)
			if res := porcupine.CheckOperationsTimeout(cacheModel, h, 10*time.Second); res != porcupine.Illegal {
				t.Fatalf("porcupine returned %s, want Illegal, for\n%s", res, formatHistory(h))
			}
		})
	}
}

// TestCheckerAccepts: linearizable histories, including ones whose reads
// observe a concurrent mutation either way, must be Ok.
func TestCheckerAccepts(t *testing.T) {
	cases := map[string]func(h *hist){
		"GetPod concurrent with AssumePod sees it": func(h *hist) {
			h.add(0, 10, 30, assumeIn(0, 0, 0), errNone)
			h.add(1, 0, 20, getIn(0), found(0, 0, 0))
		},
		"GetPod concurrent with AssumePod misses it": func(h *hist) {
			h.add(0, 10, 30, assumeIn(0, 0, 0), errNone)
			h.add(1, 20, 40, getIn(0), notFound)
		},
		"closed intervals: a read invoked at the instant a mutation returns may miss it": func(h *hist) {
			h.add(0, 0, 10, assumeIn(0, 0, 0), errNone)
			h.add(1, 10, 20, snapIn(), viewOf())
		},
		"add, concurrent remove, reads see present then absent": func(h *hist) {
			h.add(0, 0, 10, addIn(0, 1, 0), errNone)
			h.add(0, 20, 100, removeIn(0, 1), errNone)
			h.add(1, 30, 40, snapIn(), viewOf(addedAt(0, 1, 0)))
			h.add(2, 50, 60, getIn(0), notFound)
		},
		"concurrent AssumePods: one wins, the other sees it cached": func(h *hist) {
			h.add(0, 0, 10, assumeIn(0, 0, 0), errAlreadyCached)
			h.add(1, 0, 10, assumeIn(0, 1, 1), errNone)
			h.add(2, 20, 30, snapIn(), viewOf(assumedAt(0, 1, 1)))
		},
		"sequential life cycle": func(h *hist) {
			h.add(0, 0, 1, assumeIn(0, 0, 1), errNone)
			h.add(0, 2, 3, isAssumedIn(0), 1)
			h.add(0, 4, 5, snapIn(), viewOf(assumedAt(0, 0, 1)))
			h.add(0, 6, 7, addIn(0, 1, 0), errNone)
			h.add(0, 8, 9, isAssumedIn(0), 0)
			h.add(0, 10, 11, getIn(0), found(0, 1, 0))
			h.add(0, 12, 13, forgetIn(0, 1), errNotAssumed)
			h.add(0, 14, 15, updateIn(0, 1, 1), errNone)
			h.add(0, 16, 17, snapIn(), viewOf(addedAt(0, 1, 1)))
			h.add(0, 18, 19, removeIn(0, nodeNone), errNone)
			h.add(0, 20, 21, podCountIn(), 0)
			h.add(0, 22, 23, getIn(0), notFound)
		},
		"snapshot reads order concurrent mutations of two keys the same way": func(h *hist) {
			h.add(0, 0, 100, addIn(0, 0, 0), errNone)
			h.add(1, 0, 100, addIn(1, nodeNX, 0), errNone)
			h.add(2, 10, 20, snapIn(), viewOf(addedAt(0, 0, 0)))
			h.add(3, 10, 20, snapIn(), viewOf(addedAt(0, 0, 0)))
			h.add(2, 30, 40, nodeCountIn(), nRealN+1)
			h.add(3, 50, 60, snapIn(), viewOf(addedAt(0, 0, 0), addedAt(1, nodeNX, 0)))
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			var h hist
			build(&h)
			if res := porcupine.CheckOperationsTimeout(cacheModel, h, 10*time.Second); res != porcupine.Ok {
				t.Fatalf("porcupine returned %s, want Ok, for\n%s", res, formatHistory(h))
			}
		})
	}
}

// TestCheckerRejectsPerturbedHistories records sequential (one-client)
// histories against a real cache, which must be Ok, then changes one output
// at a time: the model is deterministic, so every perturbed history must be
// Illegal. This shows every output field is actually checked.
func TestCheckerRejectsPerturbedHistories(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 50
	}
	base := seed(t)
	un := newUniverse()
	perturbed := 0
	for h := 0; h < n; h++ {
		c := newCache(t, 1+h%2, false)
		ops := record(c, un, base+uint64(h), 1, *flagOps)
		c.Close()
		if res, detail := check(ops, false, ""); res != porcupine.Ok {
			t.Fatalf("sequential history %d is not Ok:\n%s", h, detail)
		}
		r := rand.New(rand.NewPCG(base, uint64(h)))
		for i := range ops {
			bad := append(hist(nil), ops...)
			bad[i].Output = perturb(r, ops[i].Input.(input), ops[i].Output)
			perturbed++
			if res := porcupine.CheckOperationsTimeout(cacheModel, bad, 10*time.Second); res != porcupine.Illegal {
				t.Fatalf("history %d with op %d changed from %s to %s: porcupine returned %s, want Illegal\n%s",
					h, i, describeOp(ops[i].Input, ops[i].Output), describeOp(bad[i].Input, bad[i].Output), res, formatHistory(bad))
			}
		}
	}
	t.Logf("%d perturbed histories, all Illegal", perturbed)
}

// perturb returns an output of the same type as out that differs from it.
func perturb(r *rand.Rand, in input, out any) any {
	switch o := out.(type) {
	case errCode:
		return (o + errCode(1+r.IntN(int(errOther)-1))) % errOther
	case getOut:
		if o.err == errNone {
			if r.IntN(2) == 0 {
				return notFound
			}
			return getOut{id: (o.id + 1) % (nUID * nNodeIdx * nVer)}
		}
		return found(in.uid, uint8(r.IntN(nodeNX+1)), 0)
	case int:
		if in.op == opIsAssumed {
			return 1 - o
		}
		return o + 1 + r.IntN(2)
	case view:
		switch r.IntN(8) {
		case 0:
			u := r.IntN(nUID)
			o.pods[u].present = !o.pods[u].present
		case 1:
			u := r.IntN(nUID)
			o.pods[u].assumed = !o.pods[u].assumed
		case 2:
			u := r.IntN(nUID)
			o.pods[u].id++
		case 3:
			o.nodes[r.IntN(nRealN)].numPods++
		case 4:
			o.nodes[r.IntN(nRealN)].cpu += podCPU(0, 0)
		case 5:
			o.nodes[r.IntN(nRealN)].mem--
		case 6:
			o.podCount++
		default:
			o.nodeCount--
		}
		return o
	}
	panic(fmt.Sprintf("perturb: unexpected output %T", out))
}

// ---- deliberately broken caches ----

// staleGets serves GetPod and IsAssumedPod from the snapshot that was
// current when the latest mutation started: one operation behind.
type staleGets struct {
	*schedcache.Cache
	prev atomic.Pointer[schedcache.Snapshot]
}

func (s *staleGets) before() { s.prev.Store(s.Cache.Snapshot()) }

func (s *staleGets) stale() *schedcache.Snapshot {
	if p := s.prev.Load(); p != nil {
		return p
	}
	return s.Cache.Snapshot()
}

func (s *staleGets) AssumePod(l klog.Logger, p *v1.Pod) error {
	s.before()
	return s.Cache.AssumePod(l, p)
}
func (s *staleGets) FinishBinding(l klog.Logger, p *v1.Pod) error {
	s.before()
	return s.Cache.FinishBinding(l, p)
}
func (s *staleGets) ForgetPod(l klog.Logger, p *v1.Pod) error {
	s.before()
	return s.Cache.ForgetPod(l, p)
}
func (s *staleGets) AddPod(l klog.Logger, p *v1.Pod) error {
	s.before()
	return s.Cache.AddPod(l, p)
}
func (s *staleGets) UpdatePod(l klog.Logger, o, n *v1.Pod) error {
	s.before()
	return s.Cache.UpdatePod(l, o, n)
}
func (s *staleGets) RemovePod(l klog.Logger, p *v1.Pod) error {
	s.before()
	return s.Cache.RemovePod(l, p)
}

func (s *staleGets) GetPod(p *v1.Pod) (*v1.Pod, error) {
	e, ok := s.stale().Pod(string(p.UID))
	if !ok {
		return nil, fmt.Errorf("stale GetPod: %w", schedcache.ErrPodNotFound)
	}
	return e.Pod, nil
}

func (s *staleGets) IsAssumedPod(p *v1.Pod) (bool, error) {
	e, _ := s.stale().Pod(string(p.UID))
	return e.Assumed, nil
}

// staleSnapshots hands out the snapshot that was current when the latest
// mutation started.
type staleSnapshots struct{ staleGets }

func (s *staleSnapshots) GetPod(p *v1.Pod) (*v1.Pod, error) { return s.Cache.GetPod(p) }
func (s *staleSnapshots) IsAssumedPod(p *v1.Pod) (bool, error) {
	return s.Cache.IsAssumedPod(p)
}
func (s *staleSnapshots) Snapshot() *schedcache.Snapshot { return s.stale() }

// TestBrokenCacheCaught runs the recorder against caches wrapped to read
// one operation behind; porcupine must find non-linearizable histories.
func TestBrokenCacheCaught(t *testing.T) {
	base := seed(t)
	un := newUniverse()
	wrappers := map[string]func(*schedcache.Cache) target{
		"GetPod and IsAssumedPod from a snapshot one op stale": func(c *schedcache.Cache) target { return &staleGets{Cache: c} },
		"Snapshot one op stale":                                func(c *schedcache.Cache) target { return &staleSnapshots{staleGets{Cache: c}} },
	}
	for name, wrap := range wrappers {
		t.Run(name, func(t *testing.T) {
			const histories = 100
			illegal := 0
			for h := 0; h < histories; h++ {
				c := newCache(t, 2, true)
				ops := record(wrap(c), un, base+uint64(h), 3, *flagOps)
				c.Close()
				if res := porcupine.CheckOperationsTimeout(cacheModel, ops, 30*time.Second); res == porcupine.Illegal {
					illegal++
				}
			}
			t.Logf("%d of %d histories rejected", illegal, histories)
			if illegal == 0 {
				t.Fatalf("no history of the broken cache was rejected")
			}
		})
	}
}
