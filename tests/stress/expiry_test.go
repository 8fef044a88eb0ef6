package stress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/tests/stress/invariant"
	"github.com/schedcache/schedcache/workload"
)

type expState uint8

const (
	expAbsent    expState = iota
	expAssumed            // binding not finished: never expires
	expVolatile           // binding finished: may expire at any moment
	expConfirmed          // added
)

// TestStressExpiry runs the assumed-pod lifecycle concurrently with the
// expiry loop (TTL 2ms, period 1ms, expiry chunks of 8 so expiry steps
// interleave with other operations): workers assume, finish binding,
// confirm, forget and remove pods while readers check every snapshot.
// The outcome of each call is predicted except where expiry may have won
// the race, where both outcomes are accepted; in the end every pod whose
// binding finished and that was never confirmed is gone, every other pod
// is in exactly its modelled state.
func TestStressExpiry(t *testing.T) {
	dur := *flagDuration
	if dur == 0 {
		dur = 10 * time.Second
		if testing.Short() {
			dur = time.Second
		}
	}
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d", seed)
	const ttl, period = 2 * time.Millisecond, time.Millisecond
	cl := workload.Build(workload.ClusterSpec{Nodes: 50, PodsPerNode: 2, Seed: 2})
	var asyncErrs atomic.Int64
	c, err := schedcache.New(context.Background(), schedcache.WithTTL(ttl), schedcache.WithPeriod(period),
		schedcache.WithExpiryChunk(8), schedcache.WithShards(*flagShards),
		schedcache.WithAsyncErrorHandler(func(schedcache.AsyncError) { asyncErrs.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range cl.Nodes {
		if _, err := c.AddNode(logger, n); err != nil {
			t.Fatal(err)
		}
	}
	G := *flagGoroutines
	var (
		stop      atomic.Bool
		ops       atomic.Int64
		expired   atomic.Int64 // calls that observed an expiry
		checked   atomic.Int64
		failures  atomic.Int64
		wg, rwg   sync.WaitGroup
		finalPods = make([]map[string]expState, G)
		objs      = make([]map[string]*v1.Pod, G)
	)
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
		stop.Store(true)
	}
	for r := 0; r < *flagReaders; r++ {
		rwg.Go(func() {
			var last *schedcache.Snapshot
			for !stop.Load() {
				s := c.Snapshot()
				if s == last {
					time.Sleep(200 * time.Microsecond)
					continue
				}
				last = s
				if _, err := invariant.CheckSnapshot(s, invariant.Options{}); err != nil {
					fail("reader: %v", err)
					return
				}
				checked.Add(1)
			}
		})
	}
	deadline := time.Now().Add(dur)
	for g := 0; g < G; g++ {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			state := map[string]expState{}
			obj := map[string]*v1.Pod{}
			keys := make([]string, 24)
			for i := range keys {
				keys[i] = fmt.Sprintf("exp-%d-%d", g, i)
				state[keys[i]] = expAbsent
			}
			rv := 0
			mk := func(key string) *v1.Pod {
				p := *cl.Pods[r.IntN(len(cl.Pods))]
				rv++
				p.UID, p.Name, p.ResourceVersion = types.UID(key), key, fmt.Sprint(rv)
				p.Spec.NodeName = cl.Nodes[r.IntN(len(cl.Nodes))].Name
				return &p
			}
			check := func(what string, err error, allowed ...error) {
				for _, a := range allowed {
					if invariant.Expect(what, err, a) == nil {
						return
					}
				}
				fail("worker %d: %s: %v (allowed %v)", g, what, err, allowed)
			}
			for !stop.Load() && time.Now().Before(deadline) {
				ops.Add(1)
				key := keys[r.IntN(len(keys))]
				st := state[key]
				switch op := r.IntN(8); {
				case op == 0 || st == expAbsent:
					p := mk(key)
					err := c.AssumePod(logger, p)
					switch st {
					case expAbsent:
						check("AssumePod(absent)", err, nil)
						if err == nil {
							state[key], obj[key] = expAssumed, p
						}
					case expVolatile:
						check("AssumePod(volatile)", err, nil, schedcache.ErrPodAlreadyCached)
						if err == nil {
							expired.Add(1)
							state[key], obj[key] = expAssumed, p
						}
					default:
						check("AssumePod(cached)", err, schedcache.ErrPodAlreadyCached)
					}
				case op == 1:
					check("FinishBinding", c.FinishBinding(logger, obj[key]), nil)
					if st == expAssumed {
						state[key] = expVolatile
					}
				case op == 2:
					p := mk(key)
					err := c.AddPod(logger, p)
					if st == expConfirmed {
						check("AddPod(confirmed)", err, schedcache.ErrPodAlreadyAdded)
					} else {
						check("AddPod", err, nil) // confirms, or re-adds an expired pod
						state[key], obj[key] = expConfirmed, p
					}
				case op == 3:
					err := c.ForgetPod(logger, obj[key])
					if st == expConfirmed {
						check("ForgetPod(confirmed)", err, schedcache.ErrPodNotAssumed)
					} else {
						check("ForgetPod", err, nil)
						state[key] = expAbsent
					}
				case op == 4:
					err := c.RemovePod(logger, obj[key])
					if st == expVolatile {
						check("RemovePod(volatile)", err, nil, schedcache.ErrPodNotFound)
						if err != nil {
							expired.Add(1)
						}
					} else {
						check("RemovePod", err, nil)
					}
					state[key] = expAbsent
				default:
					got, err := c.GetPod(obj[key])
					assumed, _ := c.IsAssumedPod(obj[key])
					switch st {
					case expVolatile:
						if err == nil && got != obj[key] {
							fail("worker %d: GetPod(%s) returned another object", g, key)
						}
						if err != nil {
							expired.Add(1)
						}
					case expAssumed, expConfirmed:
						if err != nil || got != obj[key] || assumed != (st == expAssumed) {
							fail("worker %d: GetPod(%s) = %v, %v, assumed=%v; model %d (an unfinished or confirmed pod never expires)", g, key, got, err, assumed, st)
						}
					}
				}
			}
			finalPods[g], objs[g] = state, obj
		})
	}
	wg.Wait()
	stop.Store(true)
	rwg.Wait()
	if t.Failed() {
		return
	}
	// Every volatile pod expires within ttl + period (+ pass time).
	want := 0
	for _, st := range finalPods {
		for _, s := range st {
			if s == expAssumed || s == expConfirmed {
				want++
			}
		}
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		if n, _ := c.PodCount(); n == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s := c.Snapshot()
	if _, err := invariant.CheckSnapshot(s, invariant.Options{RecomputeRequests: true}); err != nil {
		t.Fatal(err)
	}
	for g, st := range finalPods {
		for key, m := range st {
			e, ok := s.Pod(key)
			switch m {
			case expAbsent, expVolatile:
				if ok {
					t.Errorf("pod %s (model %d) still cached long after its TTL", key, m)
				}
			case expAssumed, expConfirmed:
				if !ok || e.Pod != objs[g][key] || e.Assumed != (m == expAssumed) {
					t.Errorf("pod %s: snapshot %+v, %v; model %d", key, e, ok, m)
				}
			}
		}
	}
	if n, _ := c.PodCount(); n != want {
		t.Errorf("PodCount = %d, want %d", n, want)
	}
	t.Logf("%d goroutines x %v with TTL %v / period %v: %d operations (%d observed an expiry), %d snapshots checked, final epoch %d, %d pods left",
		G, dur, ttl, period, ops.Load(), expired.Load(), checked.Load(), s.Epoch(), want)
	if expired.Load() == 0 {
		t.Error("no call observed an expiry: the test exercised nothing")
	}
}
