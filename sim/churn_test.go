package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/sim/trace"
	"github.com/schedcache/schedcache/workload"
)

// churnConfig is a small cluster with every kind of churn, binding
// latency, informer jitter and lost windows with relists.
func churnConfig(det bool) Config {
	cfg := defaultConfig()
	cfg.Nodes, cfg.PodsPerNode, cfg.Schedulers, cfg.Sample, cfg.Zones = 200, 10, 2, 20, 3
	cfg.Duration = 600 * time.Millisecond
	cfg.Deterministic = det
	cfg.PodUpdateRate, cfg.PodDeleteRate = 300, 50
	cfg.NodeAddRate, cfg.NodeRemoveRate, cfg.DrainRate = 20, 20, 20
	cfg.DrainGrace, cfg.DrainFor = 20*time.Millisecond, 100*time.Millisecond
	cfg.NotReadyRate, cfg.NotReadyFor = 30, 50*time.Millisecond
	cfg.ZoneMoveRate = 20
	cfg.ZoneOutageEvery, cfg.ZoneOutageFor = 200*time.Millisecond, 50*time.Millisecond
	cfg.BindLatency = 500 * time.Microsecond
	cfg.InformerJitter = 3 * time.Millisecond
	cfg.DropEvery, cfg.DropFor = 150*time.Millisecond, 20*time.Millisecond
	return cfg
}

// churned returns the counts of every kind of churn requireChurned wants
// to have happened.
func churned(ch ChurnCounts, in InformerCounts) map[string]int64 {
	return map[string]int64{"pod updates": ch.PodUpdates, "pod deletes": ch.PodDeletes, "node adds": ch.NodeAdds,
		"node removes": ch.NodeRemoves, "drains": ch.Drains, "evictions": ch.Evictions, "not ready": ch.NotReady,
		"zone outages": ch.ZoneOutages, "zone moves": ch.ZoneMoves, "delivered updates": in.PodUpdates,
		"dropped": in.Dropped, "relists": in.Relists, "tombstones": in.Tombstones, "node deletes": in.NodeDeletes}
}

// allChurned is a real-time run's hooks.until for requireChurned: the run
// goes on past its duration until every kind of churn has happened (a
// loaded machine gets through less of the churn in the duration: a
// removal waits for the informer to catch up with the node's pods).
func allChurned(p runProgress) bool {
	for _, n := range churned(p.Churn, p.Informer) {
		if n == 0 {
			return false
		}
	}
	return true
}

func requireChurned(t *testing.T, rep *Report) {
	t.Helper()
	require.True(t, rep.Consistent, "audit %+v, mid-run %+v", rep.Audit, rep.MidAudits)
	require.Zero(t, rep.Audit.Divergences)
	require.Positive(t, rep.Scheduled)
	ch, in := rep.Churn, rep.Informer
	for name, n := range churned(ch, in) {
		require.Positive(t, n, name)
	}
	require.Equal(t, rep.Audit.ExpectedNodes, 200+int(ch.NodeAdds-ch.NodeRemoves))
	require.Equal(t, rep.FinalNodes, rep.Audit.ExpectedNodes)
}

// A deterministic churn run is reproduced event for event by its seed:
// the same seed gives the same digest (with or without mid-run audits),
// another seed another digest; the cache ends consistent after every
// kind of churn, reordering, lost events and relists with tombstones.
func TestChurnDeterministic(t *testing.T) {
	ctx := context.Background()
	a, err := run(ctx, churnConfig(true), nil, hooks{})
	require.NoError(t, err)
	requireChurned(t, a)
	cfg := churnConfig(true)
	cfg.AuditEvery = 50 * time.Millisecond
	b, err := run(ctx, cfg, nil, hooks{})
	require.NoError(t, err)
	require.Equal(t, a.Digest, b.Digest, "same seed, same run; audits do not change it")
	require.Equal(t, 11, b.MidAudits.Count)
	require.Zero(t, b.MidAudits.Failed, "%+v", b.MidAudits.FirstFail)
	cfg = churnConfig(true)
	cfg.Seed = 2
	c, err := run(ctx, cfg, nil, hooks{})
	require.NoError(t, err)
	requireChurned(t, c)
	require.NotEqual(t, a.Digest, c.Digest)
}

// The same churn in real time, audited mid-run under the world lock, ends
// consistent with no mid-run divergence. The run goes on past its
// duration until every kind of churn and three audits have happened, so
// that a loaded machine does not fail it.
func TestChurnRealtime(t *testing.T) {
	cfg := churnConfig(false)
	cfg.AuditEvery = 100 * time.Millisecond
	until := func(p runProgress) bool { return allChurned(p) && p.MidAudits >= 3 }
	rep, err := run(context.Background(), cfg, nil, hooks{until: until})
	require.NoError(t, err)
	requireChurned(t, rep)
	require.GreaterOrEqual(t, rep.MidAudits.Count, 3)
	require.Zero(t, rep.MidAudits.Failed, "%+v", rep.MidAudits.FirstFail)
}

// A divergence planted in the middle of a real-time run (a delivered pod
// removed behind the informer's back) is caught by the next mid-run audit,
// asked for on the audit channel (SIGUSR1 in cmd/loadgen), and the run
// exits 3. The run goes on until the three audits asked for are made.
func TestRealtimeMidRunAuditCatchesDivergence(t *testing.T) {
	auditNow := make(chan struct{})
	calls := 0
	var planted string
	h := hooks{auditNow: auditNow, until: func(p runProgress) bool { return p.MidAudits >= 3 }, beforeAudit: func(c *schedcache.Cache, truth *Truth) {
		calls++
		if calls != 2 {
			return
		}
		truth.pods.Range(func(uid string, r podRecord) bool {
			if r.Bound && r.Pod.Spec.NodeName != "" && truth.pods.Size() > 0 {
				if _, ok := c.Snapshot().Pod(uid); ok {
					planted = uid
					require.NoError(t, c.RemovePod(klog.Background(), r.Pod))
					return false
				}
			}
			return true
		})
	}}
	done := make(chan int)
	var stdout, stderr bytes.Buffer
	go func() {
		done <- realMain(context.Background(), []string{"-nodes", "60", "-pods-per-node", "10", "-schedulers", "2", "-duration", "1s", "-keep-pods", "-json", "-"}, &stdout, &stderr, false, h)
	}()
	for i := 0; i < 3; i++ {
		time.Sleep(100 * time.Millisecond)
		select {
		case auditNow <- struct{}{}:
		case code := <-done:
			t.Fatalf("the run ended (exit %d) before audit %d was asked for: %s", code, i+1, stderr.String())
		}
	}
	code := watchdog.Recv(done, "the run ending")
	require.Equal(t, exitDivergence, code, stderr.String())
	require.NotEmpty(t, planted)
	var rep JSONReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	require.NotNil(t, rep.MidAudits)
	require.Equal(t, 3, rep.MidAudits.Count)
	require.Equal(t, 2, rep.MidAudits.Failed, "the second and third audits see it")
	require.NotNil(t, rep.MidAudits.FirstFail)
	require.GreaterOrEqual(t, rep.MidAudits.FirstFail.Divergences, 2, "the pod and its node's totals")
	require.Contains(t, fmt.Sprint(rep.MidAudits.FirstFail.Examples), planted)
	require.False(t, rep.Consistent)
	require.Equal(t, 4, calls, "three mid-run audits and the final one")
}

// Without the planted divergence, audits asked for on the channel pass.
// The run goes on until the four audits asked for are made.
func TestRealtimeAuditOnDemand(t *testing.T) {
	auditNow := make(chan struct{})
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	cfg := churnConfig(false)
	cfg.Duration = 800 * time.Millisecond
	go func() { // owned by the test: it receives the result below
		rep, err := run(context.Background(), cfg, nil, hooks{auditNow: auditNow, until: func(p runProgress) bool { return p.MidAudits >= 4 }})
		done <- result{rep, err}
	}()
	for i := 0; i < 4; i++ {
		time.Sleep(120 * time.Millisecond)
		select {
		case auditNow <- struct{}{}:
		case res := <-done:
			t.Fatalf("the run ended (%v) before audit %d was asked for", res.err, i+1)
		}
	}
	res := watchdog.Recv(done, "the run ending")
	require.NoError(t, res.err)
	rep := res.rep
	require.Equal(t, 4, rep.MidAudits.Count)
	require.Zero(t, rep.MidAudits.Failed, "%+v", rep.MidAudits.FirstFail)
	require.True(t, rep.Consistent)
}

// fakeOps records the calls the informer makes.
type fakeOps struct{ calls []string }

func (f *fakeOps) add(format string, a ...any) error {
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
	return nil
}
func (f *fakeOps) addPod(p *v1.Pod) error { return f.add("AddPod %s@%s", p.Name, p.ResourceVersion) }
func (f *fakeOps) updatePod(o, n *v1.Pod) error {
	return f.add("UpdatePod %s@%s->%s", n.Name, o.ResourceVersion, n.ResourceVersion)
}
func (f *fakeOps) removePod(p *v1.Pod) error {
	return f.add("RemovePod %s@%s", p.Name, p.ResourceVersion)
}
func (f *fakeOps) addNode(n *v1.Node) error { return f.add("AddNode %s", n.Name) }
func (f *fakeOps) updateNode(o, n *v1.Node) error {
	return f.add("UpdateNode %s@%s->%s", n.Name, o.ResourceVersion, n.ResourceVersion)
}
func (f *fakeOps) removeNode(n *v1.Node) error {
	return f.add("RemoveNode %s@%s", n.Name, n.ResourceVersion)
}

func podV(name, node, rv string) *v1.Pod {
	p := workload.NewPod(workload.NewRand(1), name, node)
	p.ResourceVersion = rv
	return p
}

func nodeV(name, rv string) *v1.Node {
	n := &v1.Node{}
	n.Name, n.ResourceVersion = name, rv
	return n
}

// A relist after lost events delivers what the store misses: adds,
// updates, and deletions as tombstones carrying the store's stale object.
func TestInformerRelistTombstones(t *testing.T) {
	cfg := defaultConfig()
	cfg.DropEvery, cfg.DropFor = 100*time.Millisecond, 10*time.Millisecond
	ops := &fakeOps{}
	inf := newInformer(cfg, ops, 1)
	truth := newTruth()
	n1, n2 := nodeV("n1", "1"), nodeV("n2", "1")
	kept, upd, del := podV("kept", "n1", "1"), podV("upd", "n1", "1"), podV("del", "n2", "1")
	inf.load([]*v1.Node{n1, n2}, []*v1.Pod{kept, upd, del})
	for _, n := range []*v1.Node{n1, n2} {
		truth.LoadNode(n)
	}
	for _, p := range []*v1.Pod{kept, upd, del} {
		truth.Load(p)
	}
	// In the drop window [100ms, 110ms): an update, a deletion, a new
	// bound pod, a node update and a node removal are all lost.
	at := 100*time.Millisecond - cfg.ConfirmDelay
	upd2 := podV("upd", "n1", "2")
	truth.update(upd2)
	inf.emitPod(at, upd2, false)
	truth.Delete(del)
	inf.emitPod(at, del, true)
	added := podV("added", "n1", "1")
	truth.Bind(added, "n1")
	inf.emitPod(at, added, false)
	n1b := nodeV("n1", "2")
	truth.setNode(n1b, false)
	inf.emitNode(at, n1b, false)
	truth.removeNode("n2")
	inf.emitNode(at, n2, true)
	require.NoError(t, inf.deliverDue(105*time.Millisecond, false))
	require.Empty(t, ops.calls, "every event fell in the window")
	require.Equal(t, int64(5), inf.counts.Dropped)
	require.False(t, inf.settled())
	require.True(t, inf.busy(podKey(upd2)))
	require.NoError(t, inf.relist(110*time.Millisecond, truth))
	require.Equal(t, []string{"UpdateNode n1@1->2", "AddPod added@1", "UpdatePod upd@1->2", "RemovePod del@1", "RemoveNode n2@1"}, ops.calls)
	require.Equal(t, int64(2), inf.counts.Tombstones)
	require.Equal(t, int64(1), inf.counts.Relists)
	require.True(t, inf.settled())
}

// Jitter reorders the events of different objects but never two events of
// one object.
func TestInformerReorderKeepsObjectOrder(t *testing.T) {
	cfg := defaultConfig()
	cfg.ConfirmDelay, cfg.InformerJitter = time.Millisecond, 5*time.Millisecond
	ops := &fakeOps{}
	inf := newInformer(cfg, ops, 1)
	var emitted []string
	for i := 0; i < 400; i++ {
		name := fmt.Sprintf("p%d", i%8)
		p := podV(name, "n1", fmt.Sprintf("%04d", i))
		inf.emitPod(time.Duration(i)*10*time.Microsecond, p, false)
		emitted = append(emitted, name)
	}
	require.NoError(t, inf.deliverDue(time.Second, false))
	require.Len(t, ops.calls, 400)
	last := map[string]string{}
	reordered := false
	for i, c := range ops.calls {
		var op, name, rv string
		fmt.Sscanf(c, "%s", &op)
		name, rv = parseCall(c)
		if prev, ok := last[name]; ok {
			require.Less(t, prev, rv, "events of %s out of order", name)
		}
		last[name] = rv
		if name != emitted[i] {
			reordered = true
		}
	}
	require.True(t, reordered, "the jitter reorders events of different pods")
}

func parseCall(c string) (name, rv string) {
	// "AddPod p3@0003" or "UpdatePod p3@0003->0011"
	var op, rest string
	fmt.Sscanf(c, "%s %s", &op, &rest)
	for i := range rest {
		if rest[i] == '@' {
			name = rest[:i]
			rv = rest[i+1:]
			break
		}
	}
	for i := range rv {
		if rv[i] == '>' {
			rv = rv[i+1:]
			break
		}
	}
	return name, rv
}

// The simulated API server refuses a binding to a node being drained or
// removed, and BindPod reports the refusal.
func TestBindRefusedOnDrainingNode(t *testing.T) {
	truth := newTruth()
	n := nodeV("n1", "1")
	truth.LoadNode(n)
	p := podV("p", "n1", "1")
	truth.Assume(p, "n1")
	drained := nodeV("n1", "2")
	truth.setNode(drained, true)
	_, err := truth.tryBind(string(p.UID), "n1")
	require.ErrorIs(t, err, ErrBindRefused)
	truth.setNode(nodeV("n1", "3"), false)
	got, err := truth.tryBind(string(p.UID), "n1")
	require.NoError(t, err)
	require.Same(t, p, got)
	truth.removeNode("n1")
	truth.Assume(p, "n1")
	_, err = truth.tryBind(string(p.UID), "n1")
	require.True(t, errors.Is(err, ErrBindRefused))

	// Through the cache: every binding fails at rate 1, each is forgotten.
	cfg := smallConfig()
	cfg.Deterministic, cfg.FailRate, cfg.Duration = true, 1, 20*time.Millisecond
	rep, err := run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.Zero(t, rep.Scheduled)
	require.Positive(t, rep.FailedBindings)
	require.Equal(t, rep.FailedBindings, rep.Forgotten)
}

// A deterministic churn run records every call, UpdatePod and node
// removals included, and replays with every result as recorded.
func TestChurnRecordReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "churn.jsonl")
	cfg := churnConfig(true)
	cfg.Duration = 300 * time.Millisecond
	cfg.Record = path
	rep, err := run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.True(t, rep.Consistent)
	code, out, stderr := replay(t, path)
	require.Equal(t, exitOK, code, out+stderr)
	require.Contains(t, out, "0 results differ")
	ops := map[trace.Op]bool{}
	for _, l := range readLines(t, path) {
		for _, op := range []trace.Op{trace.UpdatePod, trace.RemoveNode, trace.AddNode, trace.UpdateNode, trace.RemovePod, trace.ForgetPod} {
			if bytes.Contains([]byte(l), []byte(`"op":"`+string(op)+`"`)) {
				ops[op] = true
			}
		}
	}
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	require.Len(t, keys, 6, "%v", keys)
}

// The churn preset runs in short form (a small cluster) with its exit code
// 0 and audits during the run (it goes on until one was made).
func TestChurnPresetShort(t *testing.T) {
	var stdout, stderr bytes.Buffer
	h := hooks{until: func(p runProgress) bool { return p.MidAudits >= 1 }}
	code := realMain(context.Background(), []string{"-preset", "churn", "-nodes", "300", "-pods-per-node", "10", "-duration", "700ms", "-audit-every", "200ms"}, &stdout, &stderr, false, h)
	require.Equal(t, exitOK, code, stdout.String()+stderr.String())
	require.Contains(t, stdout.String(), "0 with divergences")
	require.Contains(t, stdout.String(), "consistent: true")
}

// A cache call that fails in a recorded run is in the trace with its
// error, the trace still ends with the state at the failure, and a replay
// checks that call: here it differs, since the divergence that made it
// fail was planted outside the trace.
func TestRecordFailedCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fail.jsonl")
	planted := false
	h := hooks{beforeAudit: func(c *schedcache.Cache, truth *Truth) {
		if planted {
			return
		}
		planted = true
		n := 0
		truth.pods.Range(func(_ string, r podRecord) bool {
			if r.Bound && strings.HasPrefix(r.Pod.Name, "pod-") {
				require.NoError(t, c.RemovePod(klog.Background(), r.Pod))
				n++
			}
			return n < 300
		})
	}}
	var stdout, stderr bytes.Buffer
	args := []string{"-deterministic", "-nodes", "60", "-pods-per-node", "10", "-schedulers", "2", "-duration", "200ms",
		"-audit-every", "10ms", "-pod-update-rate", "2000", "-record", path}
	code := realMain(context.Background(), args, &stdout, &stderr, false, h)
	require.Equal(t, exitFailed, code, stderr.String())
	// The first call on a planted-away pod is an update or a removal,
	// whichever the churn draws first; both read as upstream's refusals.
	if msg := stderr.String(); !strings.Contains(msg, "is not added to scheduler cache, so cannot be updated") &&
		!strings.Contains(msg, "is not found in scheduler cache, so cannot be removed from it") {
		t.Fatalf("stderr names neither refusal: %s", msg)
	}
	lines := readLines(t, path)
	require.Contains(t, lines[len(lines)-2], `"err":`, "the failed call, with its error")
	require.Contains(t, lines[len(lines)-1], `"op":"End"`)
	code, out, _ := replay(t, path)
	require.Equal(t, exitDivergence, code, out)
	require.Contains(t, out, "recorded")
}

// An expiry storm under churn: pods assumed with a binding that never
// comes expire after the TTL, also on nodes drained and removed meanwhile
// (the cache keeps them there until then, as upstream's does), and no
// audit reports them. A node removal waits for the informer to have
// delivered every event of the node's pods, which a loaded machine delays
// (a removal drawn early can finish after the duration): the run goes on
// past its duration until the storm and a removal have happened.
func TestChurnWithExpiry(t *testing.T) {
	cfg := churnConfig(false)
	cfg.Duration, cfg.AuditEvery = 900*time.Millisecond, 100*time.Millisecond
	cfg.AssumeTTL, cfg.ExpiryPods, cfg.ExpiryAt = 200*time.Millisecond, 1000, 100*time.Millisecond
	until := func(p runProgress) bool {
		return p.Churn.ExpiryAssumed == int64(cfg.ExpiryPods) && p.Churn.NodeRemoves > 0
	}
	rep, err := run(context.Background(), cfg, nil, hooks{until: until})
	require.NoError(t, err)
	require.True(t, rep.Consistent, "audit %+v, mid-run %+v; final %d pods %d nodes, async errors %d", rep.Audit, rep.MidAudits.FirstFail, rep.FinalPods, rep.FinalNodes, rep.AsyncErrors)
	require.Zero(t, rep.MidAudits.Failed)
	require.Equal(t, int64(1000), rep.Churn.ExpiryAssumed)
	require.Positive(t, rep.Churn.NodeRemoves)
}
