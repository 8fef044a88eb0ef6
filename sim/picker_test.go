package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// firstFit is a test picker: the first even-numbered node in snapshot
// order holding fewer than firstFitCap pods, counting the odd-numbered
// nodes it passes over under "Odd" and the full ones under "Full".
type firstFit struct {
	mu      sync.Mutex
	made    []*firstFitNode // guarded by mu
	failAt  int             // immutable; >0: Pick fails on that call
	badMake bool            // immutable; NewNodePicker fails for scheduler 1
}

type firstFitNode struct {
	p      *firstFit
	calls  int  // owned by the node picker's scheduler
	closed bool // owned by the run's main goroutine (Close)
}

func (p *firstFit) Name() string      { return "first-fit" }
func (p *firstFit) Plugins() []string { return []string{"Full", "Odd"} }
func (p *firstFit) NewNodePicker(_ context.Context, cfg PickerConfig) (NodePicker, error) {
	if p.badMake && cfg.Scheduler == 1 {
		return nil, errors.New("no picker for scheduler 1")
	}
	np := &firstFitNode{p: p}
	p.mu.Lock()
	p.made = append(p.made, np)
	p.mu.Unlock()
	return np, nil
}

func (np *firstFitNode) Pick(_ context.Context, snap *schedcache.Snapshot, pod *nodeinfo.PodInfo, _ *rand.Rand, rej []int64) (string, error) {
	np.calls++
	if np.p.failAt > 0 && np.calls == np.p.failAt {
		return "", errors.New("picker broke")
	}
	for i := 0; i < snap.NumNodes(); i++ {
		ni := snap.At(i)
		if i%2 == 1 {
			rej[1]++
			continue
		}
		if ni.NumPods() >= firstFitCap {
			rej[0]++
			continue
		}
		return ni.Node().Name, nil
	}
	return "", nil
}

// firstFitCap: the test clusters start with 2 pods a node, so the first
// even node is full after 2 decisions and the run soon fills them all.
const firstFitCap = 4

func (np *firstFitNode) Close() error { np.closed = true; return nil }

// The seam: MainWith's picker makes every decision (every pod lands on an
// even-numbered node in snapshot order), its rejections are summed over
// the schedulers into the JSON data item and the text line, and every node
// picker is closed; the default picker's label is least-allocated and it
// adds no data item.
func TestPickerSeam(t *testing.T) {
	for _, det := range []bool{false, true} {
		p := &firstFit{}
		args := []string{"-nodes", "20", "-pods-per-node", "2", "-duration", "150ms", "-schedulers", "3", "-keep-pods", "-fail-rate", "0", "-json", "-"}
		if det {
			args = append(args, "-deterministic")
		}
		code, rep, stderr := runJSON(t, args, hooks{picker: p})
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, "first-fit", rep.Picker)
		require.Positive(t, rep.Counts.Scheduled)
		var item *DataItem
		for i := range rep.DataItems {
			if rep.DataItems[i].Labels["Metric"] == "PluginRejections" {
				item = &rep.DataItems[i]
			}
		}
		require.NotNil(t, item, "no PluginRejections item")
		require.Equal(t, "first-fit", item.Labels["Picker"])
		require.Len(t, p.made, 3)
		calls := 0
		for _, np := range p.made {
			require.True(t, np.closed, "a node picker was not closed")
			calls += np.calls
		}
		// Node 0 fills after 2 decisions (a few more when the 3
		// schedulers race for it); from then on every call passes over
		// node 0 (Full) and node 1 (Odd) at least.
		require.Positive(t, item.Data["Odd"])
		require.Positive(t, item.Data["Full"], "the first nodes fill up")
		require.GreaterOrEqual(t, item.Data["Full"], float64(calls-6))
		require.GreaterOrEqual(t, item.Data["Odd"], float64(calls-6))
		decisions := rep.Counts.Scheduled + rep.Counts.Unschedulable + rep.Counts.FailedBindings + rep.Counts.Conflicts
		require.Equal(t, int64(calls), decisions)
	}
	code, rep, stderr := runJSON(t, detArgs("3"), hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "least-allocated", rep.Picker)
	for _, it := range rep.DataItems {
		require.NotEqual(t, "PluginRejections", it.Labels["Metric"])
	}
}

// The text report names the picker and its counts in its order.
func TestPickerText(t *testing.T) {
	var out bytes.Buffer
	r := &Report{Picker: "x", Rejections: []PluginCount{{"B", 2}, {"A", 0}}}
	r.printPicker(&out)
	require.Equal(t, "picker:    x; nodes rejected by plugin: B 2, A 0\n", out.String())
}

// A picker that fails stops the run with its error (exit 1), in both
// modes; a picker that cannot be made fails the run before scheduling,
// closing those already made.
func TestPickerErrors(t *testing.T) {
	for _, det := range []bool{false, true} {
		args := []string{"-nodes", "20", "-pods-per-node", "2", "-duration", "150ms", "-schedulers", "2"}
		if det {
			args = append(args, "-deterministic")
		}
		var stderr bytes.Buffer
		code := realMain(context.Background(), args, &bytes.Buffer{}, &stderr, false, hooks{picker: &firstFit{failAt: 3}})
		require.Equal(t, exitFailed, code)
		require.Contains(t, stderr.String(), "picker broke")

		stderr.Reset()
		p := &firstFit{badMake: true}
		code = realMain(context.Background(), args, &bytes.Buffer{}, &stderr, false, hooks{picker: p})
		require.Equal(t, exitFailed, code)
		require.True(t, strings.Contains(stderr.String(), "no picker for scheduler 1"), stderr.String())
		require.Len(t, p.made, 1)
		require.True(t, p.made[0].closed)
	}
}

// imageStates is every node's image summaries in c's latest snapshot.
func imageStates(c *schedcache.Cache) map[string]string {
	out := map[string]string{}
	c.Snapshot().Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		out[ni.Node().Name] = fmt.Sprint(ni.ImageStates())
		return true
	})
	return out
}

// A deterministic run starts from a cache state that does not depend on
// timing, image summaries included (a picker running ImageLocality reads
// them): the same state as adding the cluster one synchronous call at a
// time. The asynchronous load's summaries depend on how the coordinator
// happened to batch the node adds, so deterministic runs add nodes with
// synchronous calls.
func TestDeterministicSetupImages(t *testing.T) {
	cfg := defaultConfig()
	// Most nodes get no pod, so they keep the summaries of the load.
	cfg.Nodes, cfg.InitialPods, cfg.Deterministic = 2000, 200, true
	e, err := setup(context.Background(), cfg, &virtualClock{}, &progress{}, &Report{}, false)
	require.NoError(t, err)
	defer e.c.Close()
	got := imageStates(e.c)

	ref, err := schedcache.New(context.Background())
	require.NoError(t, err)
	defer ref.Close()
	cl := buildCluster(cfg)
	for _, n := range cl.Nodes {
		_, err := ref.AddNode(klog.Background(), n)
		require.NoError(t, err)
	}
	for _, p := range cl.Pods {
		require.NoError(t, ref.AddPod(klog.Background(), p))
	}
	want := imageStates(ref)
	require.Len(t, got, len(want))
	diff := 0
	for k := range want {
		if got[k] != want[k] {
			diff++
		}
	}
	require.Zero(t, diff, "nodes whose image summaries differ from the synchronous load's")
}
