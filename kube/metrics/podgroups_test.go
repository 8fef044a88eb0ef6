package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/informer"
	"github.com/schedcache/schedcache/kube/metrics"
)

func member(name, group string) *v1.Pod {
	p := mkPod(name, "")
	p.ResourceVersion = "1"
	g := group
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &g}
	return p
}

// With the pod-group gates on, the collector reports the cache's pod
// groups and composite pod groups (schedcache_pod_groups) and the
// adapter's pod-group, member and assumed-pod events.
func TestCollectorPodGroups(t *testing.T) {
	c := newCache(t, schedcache.WithPodGroups(true, true))
	ad, err := informer.New(c, informer.WithErrorHandler(func(err error) { t.Error(err) }))
	require.NoError(t, err)
	col, err := metrics.NewCollector(c, metrics.WithInformer(ad))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(col))

	parent := "cg"
	cpg := &schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cg", ResourceVersion: "1"}}
	g := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", ResourceVersion: "1"},
		Spec: schedulingv1beta1.PodGroupSpec{ParentCompositePodGroupName: &parent}}
	h := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h", ResourceVersion: "1"}}
	ad.AddNode(mkNode("n1"))
	ad.AddCompositePodGroup(cpg)
	ad.AddPodGroup(g)
	ad.AddPodGroup(h)
	g2 := g.DeepCopy()
	g2.ResourceVersion = "2"
	ad.UpdatePodGroup(g, g2)
	ad.UpdatePodGroup(g2, g2.DeepCopy()) // unchanged
	ad.DeletePodGroup(cache.DeletedFinalStateUnknown{Key: "ns/h", Obj: h})

	a, b := member("a", "g"), member("b", "g")
	ad.AddPod(a)
	ad.AddPod(b)
	a2 := a.DeepCopy()
	a2.ResourceVersion = "2"
	a2.Labels = map[string]string{"v": "2"}
	ad.UpdatePod(a, a2)
	bOnN1 := b.DeepCopy()
	bOnN1.Spec.NodeName = "n1"
	require.NoError(t, c.AssumePod(logger, bOnN1))
	ad.DeletePod(b) // an assumed pod deleted: RemoveAssumedPod
	require.NoError(t, c.Sync())

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP schedcache_pod_groups Pod groups ('podgroup') and composite pod groups ('compositepodgroup') in the cache, placeholders kept for members or children included; 0 while the GenericWorkload and CompositePodGroup gates are off.
# TYPE schedcache_pod_groups gauge
schedcache_pod_groups{type="compositepodgroup"} 1
schedcache_pod_groups{type="podgroup"} 1
`), "schedcache_pod_groups"))

	got := map[string]float64{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"schedcache_informer_events_total,add,compositepodgroup":    1,
		"schedcache_informer_events_total,add,podgroup":             2,
		"schedcache_informer_events_total,update,podgroup":          1,
		"schedcache_informer_events_total,delete,podgroup":          1,
		"schedcache_informer_events_total,tombstone,any":            1,
		"schedcache_informer_events_total,add,podgroup_member":      2,
		"schedcache_informer_events_total,update,podgroup_member":   1,
		"schedcache_informer_events_total,delete,podgroup_member":   0,
		"schedcache_informer_events_total,delete,assumed_pod":       1,
		"schedcache_informer_rejected_events_total,unchanged":       1,
		"schedcache_informer_events_total,update,compositepodgroup": 0,
		"schedcache_informer_events_total,delete,compositepodgroup": 0,
		"schedcache_operations_total,PodGroup":                      4,
		"schedcache_operations_total,CompositePodGroup":             1,
		"schedcache_operations_total,PodGroupMember":                3,
		"schedcache_operations_total,RemoveAssumedPod":              1,
		"schedcache_informer_rejected_events_total,submit_error":    0,
		"schedcache_informer_rejected_events_total,wrong_type":      0,
		"schedcache_informer_rejected_events_total,unassigned":      0,
	} {
		v, ok := got[key]
		require.True(t, ok, "%s not exported", key)
		require.Equal(t, want, v, key)
	}
}
