package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/kube/informer"
	"github.com/schedcache/schedcache/kube/metrics"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

var logger = klog.Background()

func mkNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"k": name}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("8"), v1.ResourcePods: resource.MustParse("110")}}}
}

func mkPod(name, nodeName string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(100, resource.DecimalSI)},
		}}}},
	}
}

// clock is a fixed time source for the cache and the collector.
type clock struct{ now time.Time }

func (c clock) Now() time.Time                          { return c.now }
func (c clock) NewTimer(time.Duration) schedcache.Timer { panic("no TTL in these tests") }

func newCache(t *testing.T, opts ...schedcache.Option) *schedcache.Cache {
	t.Helper()
	c, err := schedcache.New(context.Background(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The collector reports upstream's scheduler_cache_size and the cache's
// counters, consistently (a pedantic registry checks the descriptions).
func TestCollector(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newCache(t, schedcache.WithClock(clock{t0}))
	ad, err := informer.New(c, informer.WithErrorHandler(func(error) {}))
	require.NoError(t, err)
	col, err := metrics.NewCollector(c, metrics.WithNow(func() time.Time { return t0.Add(90 * time.Second) }), metrics.WithInformer(ad))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(col))

	ad.AddNode(mkNode("n1"))
	ad.AddPod(mkPod("a", "n1"))
	ad.AddPod("wrong type")
	require.NoError(t, c.Sync())
	require.NoError(t, c.AssumePod(logger, mkPod("b", "n1")))
	require.Error(t, c.RemovePod(logger, mkPod("zzz", "n1")))

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP scheduler_cache_size Number of nodes, pods, and assumed (bound) pods in the scheduler cache.
# TYPE scheduler_cache_size gauge
scheduler_cache_size{type="assumed_pods"} 1
scheduler_cache_size{type="nodes"} 1
scheduler_cache_size{type="pods"} 2
# HELP schedcache_snapshot_age_seconds Time since the latest snapshot was published (0 before the first).
# TYPE schedcache_snapshot_age_seconds gauge
schedcache_snapshot_age_seconds 90
# HELP schedcache_informer_rejected_events_total Informer callbacks not applied, by reason: 'unassigned' (an unassigned pod needing no cache call), 'unchanged' (an update with an unchanged resource version), 'wrong_type', 'submit_error' (refused by the cache).
# TYPE schedcache_informer_rejected_events_total counter
schedcache_informer_rejected_events_total{reason="submit_error"} 0
schedcache_informer_rejected_events_total{reason="unassigned"} 0
schedcache_informer_rejected_events_total{reason="unchanged"} 0
schedcache_informer_rejected_events_total{reason="wrong_type"} 1
# HELP schedcache_pod_groups Pod groups ('podgroup') and composite pod groups ('compositepodgroup') in the cache, placeholders kept for members or children included; 0 while the GenericWorkload and CompositePodGroup gates are off.
# TYPE schedcache_pod_groups gauge
schedcache_pod_groups{type="compositepodgroup"} 0
schedcache_pod_groups{type="podgroup"} 0
`), "scheduler_cache_size", "schedcache_snapshot_age_seconds", "schedcache_informer_rejected_events_total", "schedcache_pod_groups"))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{} // name,label values (labels sorted by name)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				got[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				got[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				got[key+",count"] = float64(m.GetHistogram().GetSampleCount())
				got[key+",sum"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	st := c.Stats()
	require.Equal(t, 1.0, got["schedcache_operations_total,AssumePod"])
	require.Equal(t, 1.0, got["schedcache_operation_errors_total,RemovePod"])
	require.Equal(t, float64(st.Ops[schedcache.OpSync]), got["schedcache_operations_total,Sync"])
	require.Equal(t, float64(st.Epoch), got["schedcache_snapshot_epoch"])
	require.Equal(t, float64(st.Publications), got["schedcache_publications_total"])
	require.Equal(t, float64(st.Batches), got["schedcache_batch_size,count"])
	require.Equal(t, float64(st.BatchedOps), got["schedcache_batch_size,sum"])
	require.Equal(t, 1.0, got["schedcache_informer_events_total,add,pod"])
	require.Equal(t, 1.0, got["schedcache_informer_events_total,add,node"])
	require.Equal(t, 1024.0, got["schedcache_mailbox_capacity"])
	require.Zero(t, got["schedcache_failed"])

	_, err = metrics.NewCollector(nil)
	require.ErrorIs(t, err, metrics.ErrNilCache)
}

func listers(t *testing.T, nodes []*v1.Node, pods []*v1.Pod) (corelisters.NodeLister, corelisters.PodLister) {
	t.Helper()
	ni := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pi := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		require.NoError(t, ni.Add(n))
	}
	for _, p := range pods {
		require.NoError(t, pi.Add(p))
	}
	return corelisters.NewNodeLister(ni), corelisters.NewPodLister(pi)
}

// The comparer reports missed and redundant nodes and pods, pods cached
// on another node, and lists assumed pods apart.
func TestComparer(t *testing.T) {
	c := newCache(t)
	for _, n := range []string{"n1", "n3"} {
		_, err := c.AddNode(logger, mkNode(n))
		require.NoError(t, err)
	}
	require.NoError(t, c.AddPod(logger, mkPod("ok", "n1")))
	require.NoError(t, c.AddPod(logger, mkPod("extra", "n1")))
	require.NoError(t, c.AddPod(logger, mkPod("moved", "n3")))
	require.NoError(t, c.AssumePod(logger, mkPod("binding", "n1")))

	nl, pl := listers(t, []*v1.Node{mkNode("n1"), mkNode("n2")},
		[]*v1.Pod{mkPod("ok", "n1"), mkPod("missed", "n1"), mkPod("moved", "n1"), mkPod("pending", ""), mkPod("binding", "")})
	cmp := &metrics.Comparer{NodeLister: nl, PodLister: pl, Cache: c}
	d, err := cmp.Compare(logger)
	require.NoError(t, err)
	require.Equal(t, &metrics.Diff{
		MissedNodes: []string{"n2"}, RedundantNodes: []string{"n3"},
		MissedPods: []string{"missed"}, RedundantPods: []string{"extra"}, MisplacedPods: []string{"moved"},
		AssumedPods: []string{"binding"},
	}, d)
	require.False(t, d.Empty())

	nl, pl = listers(t, []*v1.Node{mkNode("n1"), mkNode("n3")},
		[]*v1.Pod{mkPod("ok", "n1"), mkPod("extra", "n1"), mkPod("moved", "n3")})
	d, err = (&metrics.Comparer{NodeLister: nl, PodLister: pl, Cache: c}).Compare(logger)
	require.NoError(t, err)
	require.True(t, d.Empty(), "%+v", d)

	_, err = (&metrics.Comparer{Cache: c}).Compare(logger)
	require.ErrorIs(t, err, metrics.ErrNilLister)
	_, err = (&metrics.Comparer{NodeLister: nl, PodLister: pl}).Compare(logger)
	require.ErrorIs(t, err, metrics.ErrNilCache)
}

// The JSON dump holds every entry (ghosts too), pods with their assumed
// flag, the stats and the comparer's diff.
func TestWriteJSON(t *testing.T) {
	c := newCache(t)
	_, err := c.AddNode(logger, mkNode("n1"))
	require.NoError(t, err)
	require.NoError(t, c.AddPod(logger, mkPod("a", "n1")))
	require.NoError(t, c.AssumePod(logger, mkPod("b", "ghost")))
	nl, pl := listers(t, []*v1.Node{mkNode("n1")}, []*v1.Pod{mkPod("a", "n1")})
	var buf bytes.Buffer
	require.NoError(t, metrics.WriteJSON(&buf, c, &metrics.Comparer{NodeLister: nl, PodLister: pl, Cache: c}, logger))
	var doc metrics.DumpDoc
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	require.Len(t, doc.Nodes, 2)
	require.Equal(t, "ghost", doc.Nodes[0].Name)
	require.True(t, doc.Nodes[0].Deleted)
	require.Equal(t, []metrics.DumpPod{{Namespace: "ns", Name: "b", UID: "b", Assumed: true}}, doc.Nodes[0].Pods)
	require.Equal(t, "n1", doc.Nodes[1].Name)
	require.Equal(t, int64(100), doc.Nodes[1].Requested.MilliCPU)
	require.Equal(t, int64(8000), doc.Nodes[1].Allocatable.MilliCPU)
	require.Equal(t, []string{"b"}, doc.AssumedPods)
	require.Equal(t, 2, doc.Stats.Pods)
	require.Equal(t, []string{"ghost"}, doc.Diff.RedundantNodes)

	require.NoError(t, c.Close())
	require.ErrorIs(t, metrics.WriteJSON(&buf, c, nil, logger), schedcache.ErrClosed)
	require.ErrorIs(t, metrics.WriteJSON(&buf, nil, nil, logger), metrics.ErrNilCache)
}

func TestDumpHandler(t *testing.T) {
	c := newCache(t)
	_, err := c.AddNode(logger, mkNode("n1"))
	require.NoError(t, err)
	h := metrics.DumpHandler(c, nil, logger)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/schedcache", nil))
	require.Equal(t, 200, rec.Code)
	var doc metrics.DumpDoc
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &doc))
	require.Len(t, doc.Nodes, 1)
	require.NoError(t, c.Close())
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/schedcache", nil))
	require.Equal(t, 503, rec.Code)
}
