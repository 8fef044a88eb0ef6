package schedcache_test

// Ports of upstream's cache tests (k8s.io/kubernetes v1.35.4,
// pkg/scheduler/backend/cache/cache_test.go) to the public API, plus the
// worked examples of docs/upstream-semantics.md that concern
// pods and nodes (sections 1.3, 1.5, 2, 3.3, 3.4, 4.5, 4.6).
//
// Upstream compares whole framework.NodeInfo structs; here every expected
// NodeInfo is an upWant checked field by field through the NodeInfo
// accessors (upRequireNodeInfo). Upstream's cache.nodes[name] becomes
// Cache.GetNode(name) (which also returns ghosts and pods-only entries), its
// head-of-list recency order becomes "descending Generation" (semantics 5.2:
// the recency order equals generation order), and cleanupAssumedPods(now)
// becomes fake time inside a testing/synctest bubble.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodetree"
	"github.com/schedcache/schedcache/snapshot"
)

// ---------------------------------------------------------------------------
// Fixtures and assertions shared by upstream_cache_test.go and
// upstream_snapshot_test.go.
// ---------------------------------------------------------------------------

var upLog = klog.Background()

const (
	upDefaultMilliCPU int64 = 100               // schedutil.DefaultMilliCPURequest
	upDefaultMemory   int64 = 200 * 1024 * 1024 // schedutil.DefaultMemoryRequest
	upMB              int64 = 1024 * 1024
)

// upNew starts a cache that is closed when the test ends. Not for synctest
// bubbles: use upStart and defer Close there.
func upNew(t *testing.T, opts ...schedcache.Option) *schedcache.Cache {
	t.Helper()
	c := upStart(t, opts...)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// upStart starts a cache; the caller must Close it.
func upStart(t *testing.T, opts ...schedcache.Option) *schedcache.Cache {
	t.Helper()
	c, err := schedcache.New(context.Background(), opts...)
	require.NoError(t, err)
	return c
}

// upSleepUntil advances the fake clock of the current synctest bubble to at
// (if it is in the future) and waits until every goroutine of the cache is
// idle again, so that every expiry pass due by then has run.
func upSleepUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
	synctest.Wait()
}

// upBasePod is upstream's makeBasePod: one container "container" (image
// pause) whose requests and limits are cpu, mem and one "name:value"
// extended resource (all only when cpu != ""), with the given ports;
// namespace node_info_cache_test, UID = name.
func upBasePod(nodeName, name, cpu, mem, extended string, ports []v1.ContainerPort) *v1.Pod {
	req := v1.ResourceList{}
	if cpu != "" {
		req[v1.ResourceCPU] = resource.MustParse(cpu)
		req[v1.ResourceMemory] = resource.MustParse(mem)
		if extended != "" {
			k, v, ok := strings.Cut(extended, ":")
			if !ok {
				panic("invalid extended resource " + extended)
			}
			req[v1.ResourceName(k)] = resource.MustParse(v)
		}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "node_info_cache_test", UID: types.UID(name)},
		Spec: v1.PodSpec{
			NodeName: nodeName,
			Containers: []v1.Container{{
				Name: "container", Image: "pause",
				Resources: v1.ResourceRequirements{Requests: req, Limits: req},
				Ports:     ports,
			}},
		},
	}
}

// upPod is st.MakePod().Name(name).Namespace(ns).UID(uid).Node(node).Obj():
// a pod without containers.
func upPod(name, ns, uid, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid)},
		Spec:       v1.PodSpec{NodeName: node},
	}
}

// upWithPVC is st.PodWrapper.PVC: adds a volume using claim.
func upWithPVC(p *v1.Pod, claim string) *v1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{
		Name:         claim,
		VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}},
	})
	return p
}

// upWithPodAffinity is st.PodWrapper.PodAffinity(topologyKey, selector,
// PodAffinityWithRequiredReq).
func upWithPodAffinity(p *v1.Pod, topologyKey string, sel *metav1.LabelSelector) *v1.Pod {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &v1.Affinity{}
	}
	if p.Spec.Affinity.PodAffinity == nil {
		p.Spec.Affinity.PodAffinity = &v1.PodAffinity{}
	}
	pa := p.Spec.Affinity.PodAffinity
	pa.RequiredDuringSchedulingIgnoredDuringExecution = append(pa.RequiredDuringSchedulingIgnoredDuringExecution,
		v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: topologyKey})
	return p
}

// upWithPodAntiAffinity is st.PodWrapper.PodAntiAffinity(topologyKey,
// selector, PodAntiAffinityWithRequiredReq).
func upWithPodAntiAffinity(p *v1.Pod, topologyKey string, sel *metav1.LabelSelector) *v1.Pod {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &v1.Affinity{}
	}
	if p.Spec.Affinity.PodAntiAffinity == nil {
		p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{}
	}
	pa := p.Spec.Affinity.PodAntiAffinity
	pa.RequiredDuringSchedulingIgnoredDuringExecution = append(pa.RequiredDuringSchedulingIgnoredDuringExecution,
		v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: topologyKey})
	return p
}

// upExistsSelector is st.MakeLabelSelector().Exists(key).Obj().
func upExistsSelector(key string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpExists}}}
}

// upNode returns an unlabelled node with the given allocatable resources.
func upNode(name string, alloc map[v1.ResourceName]string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if alloc != nil {
		n.Status.Allocatable = v1.ResourceList{}
		for k, v := range alloc {
			n.Status.Allocatable[k] = resource.MustParse(v)
		}
	}
	return n
}

// upZoneNode returns a node labelled with topology.kubernetes.io/zone (and
// region when not empty).
func upZoneNode(name, region, zone string) *v1.Node {
	labels := map[string]string{v1.LabelTopologyZone: zone}
	if region != "" {
		labels[v1.LabelTopologyRegion] = region
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// upWithImages sets one ContainerImage per name (st.NodeWrapper.Images),
// in name order.
func upWithImages(n *v1.Node, images map[string]int64) *v1.Node {
	names := make([]string, 0, len(images))
	for name := range images {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: []string{name}, SizeBytes: images[name]})
	}
	return n
}

type upHP struct {
	protocol, ip string
	port         int32
}

// upPorts is upstream's hostPortInfoBuilder.
func upPorts(hps ...upHP) schedcache.HostPortInfo {
	h := schedcache.HostPortInfo{}
	for _, hp := range hps {
		h.Add(hp.ip, hp.protocol, hp.port)
	}
	return h
}

func upRes(milliCPU, memory int64) schedcache.Resource {
	return schedcache.Resource{MilliCPU: milliCPU, Memory: memory}
}

// upWant is an expected NodeInfo. Every field is compared; nil maps and
// slices mean "empty".
type upWant struct {
	node        *v1.Node // nil: a nodeless entry (ghost or pods-first)
	pods        []*v1.Pod
	aff, anti   []*v1.Pod
	requested   schedcache.Resource
	nonZero     schedcache.Resource
	allocatable schedcache.Resource
	ports       schedcache.HostPortInfo
	images      map[string]schedcache.ImageStateSummary
	pvcs        map[string]int
}

func upPodNames(pods []*v1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func upInfoNames(infos []*schedcache.PodInfo) []string {
	out := []string{}
	for _, pi := range infos {
		out = append(out, pi.Pod().Name)
	}
	return out
}

func upRequireResource(t *testing.T, want, got schedcache.Resource, what string) {
	t.Helper()
	require.Truef(t, want.Equal(got), "%s:\nwant %v\n got %v", what, want, got)
}

// upRequireNodeInfo asserts that got has exactly the contents of want.
func upRequireNodeInfo(t *testing.T, want upWant, got *schedcache.NodeInfo, what string) {
	t.Helper()
	require.NotNil(t, got, "%s: NodeInfo", what)
	if want.node == nil {
		require.Nil(t, got.Node(), "%s: Node()", what)
	} else {
		require.Same(t, want.node, got.Node(), "%s: Node()", what)
	}
	require.Equal(t, upPodNames(want.pods), upInfoNames(got.Pods()), "%s: Pods() order", what)
	for i, p := range want.pods {
		require.Same(t, p, got.PodAt(i).Pod(), "%s: Pods()[%d] object", what, i)
	}
	require.Equal(t, upPodNames(want.aff), upInfoNames(got.PodsWithAffinity()), "%s: PodsWithAffinity()", what)
	require.Equal(t, upPodNames(want.anti), upInfoNames(got.PodsWithRequiredAntiAffinity()), "%s: PodsWithRequiredAntiAffinity()", what)
	upRequireResource(t, want.requested, got.Requested(), what+": Requested()")
	upRequireResource(t, want.nonZero, got.NonZeroRequested(), what+": NonZeroRequested()")
	upRequireResource(t, want.allocatable, got.Allocatable(), what+": Allocatable()")
	ports := want.ports
	if ports == nil {
		ports = schedcache.HostPortInfo{}
	}
	require.Equal(t, ports, got.UsedPorts(), "%s: UsedPorts()", what)
	images := want.images
	if images == nil {
		images = map[string]schedcache.ImageStateSummary{}
	}
	require.Equal(t, images, got.ImageStates(), "%s: ImageStates()", what)
	pvcs := want.pvcs
	if pvcs == nil {
		pvcs = map[string]int{}
	}
	require.Equal(t, pvcs, got.PVCRefCounts(), "%s: PVCRefCounts()", what)
}

// upGetNode is upstream's cache.nodes[name].info.
func upGetNode(t *testing.T, c *schedcache.Cache, name string) *schedcache.NodeInfo {
	t.Helper()
	ni, err := c.GetNode(name)
	require.NoError(t, err, "GetNode(%q)", name)
	return ni
}

// upRequireNoEntry asserts that the cache holds no entry named name.
func upRequireNoEntry(t *testing.T, c *schedcache.Cache, name string) {
	t.Helper()
	_, err := c.GetNode(name)
	require.ErrorIs(t, err, schedcache.ErrNodeNotFound, "GetNode(%q)", name)
	d, err := c.Dump()
	require.NoError(t, err)
	require.NotContains(t, d.Nodes, name, "Dump().Nodes")
}

// upRequireForgotten is upstream's isForgottenFromCache.
func upRequireForgotten(t *testing.T, c *schedcache.Cache, p *v1.Pod) {
	t.Helper()
	assumed, err := c.IsAssumedPod(p)
	require.NoError(t, err)
	require.False(t, assumed, "pod %s still assumed", p.Name)
	_, err = c.GetPod(p)
	require.ErrorIs(t, err, schedcache.ErrPodNotFound, "pod %s still in cache", p.Name)
}

// upRequireCached asserts that the cache stores exactly obj for obj's UID,
// in the given assumed state.
func upRequireCached(t *testing.T, c *schedcache.Cache, obj *v1.Pod, assumed bool) {
	t.Helper()
	got, err := c.GetPod(obj)
	require.NoError(t, err, "GetPod(%s)", obj.Name)
	require.Same(t, obj, got, "GetPod(%s) object", obj.Name)
	a, err := c.IsAssumedPod(obj)
	require.NoError(t, err)
	require.Equal(t, assumed, a, "IsAssumedPod(%s)", obj.Name)
}

// upRecency lists the entries of the cache (ghosts and nodeless ones
// included) from most to least recently updated: upstream's headNode list.
func upRecency(t *testing.T, c *schedcache.Cache) []string {
	t.Helper()
	d, err := c.Dump()
	require.NoError(t, err)
	names := make([]string, 0, len(d.Nodes))
	for name := range d.Nodes {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return d.Nodes[names[i]].Generation() > d.Nodes[names[j]].Generation() })
	for i := 1; i < len(names); i++ {
		require.NotEqual(t, d.Nodes[names[i-1]].Generation(), d.Nodes[names[i]].Generation(), "generations must be unique")
	}
	return names
}

// upNodeFP renders everything a NodeInfo shows.
func upNodeFP(ni *schedcache.NodeInfo) string {
	node := "<nil>"
	if n := ni.Node(); n != nil {
		node = fmt.Sprintf("%s@%p", n.Name, n)
	}
	ptrs := func(infos []*schedcache.PodInfo) []string {
		out := []string{}
		for _, pi := range infos {
			out = append(out, fmt.Sprintf("%s@%p", pi.Key(), pi.Pod()))
		}
		return out
	}
	r := ni.Requested()
	return fmt.Sprintf("node=%s gen=%d pods=%v aff=%v anti=%v req=%v scalars=%v nz=%v alloc=%v ports=%v pvc=%v img=%v",
		node, ni.Generation(), ptrs(ni.Pods()), ptrs(ni.PodsWithAffinity()), ptrs(ni.PodsWithRequiredAntiAffinity()),
		r, r.ScalarResources(), ni.NonZeroRequested(), ni.Allocatable(), ni.UsedPorts(), ni.PVCRefCounts(), ni.ImageStates())
}

// upCacheFP renders everything the cache shows through Dump, the counts and
// its latest snapshot (epoch excluded).
func upCacheFP(t *testing.T, c *schedcache.Cache) string {
	t.Helper()
	d, err := c.Dump()
	require.NoError(t, err)
	var b strings.Builder
	names := make([]string, 0, len(d.Nodes))
	for name := range d.Nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "dump %q: %s\n", name, upNodeFP(d.Nodes[name]))
	}
	assumed := make([]string, 0, len(d.AssumedPods))
	for k := range d.AssumedPods {
		assumed = append(assumed, k)
	}
	sort.Strings(assumed)
	pc, err := c.PodCount()
	require.NoError(t, err)
	fmt.Fprintf(&b, "assumed=%v pods=%d nodes=%d\n", assumed, pc, c.NodeCount())
	b.WriteString(upSnapFP(c.Snapshot()))
	return b.String()
}

// upSnapFP renders everything a snapshot shows, except its epoch.
func upSnapFP(s *schedcache.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "snapshot nodes=%d pods=%d numNodes=%d err=%v\n", s.NodeCount(), s.PodCount(), s.NumNodes(), s.Err())
	s.Range(func(i int, ni *schedcache.NodeInfo) bool {
		fmt.Fprintf(&b, "list[%d]: %s\n", i, upNodeFP(ni))
		return true
	})
	aff, _ := s.HavePodsWithAffinityList()
	anti, _ := s.HavePodsWithRequiredAntiAffinityList()
	fmt.Fprintf(&b, "aff=%v anti=%v pvc=%v\n", upNodeNames(aff), upNodeNames(anti), upUsedPVCs(s))
	var pods []string
	s.RangePods(func(k string, e snapshot.PodEntry) bool {
		pods = append(pods, fmt.Sprintf("%s:%v:%p", k, e.Assumed, e.Pod))
		return true
	})
	sort.Strings(pods)
	fmt.Fprintf(&b, "pods=%v\n", pods)
	return b.String()
}

// upNodeNames returns the node names of a NodeInfo list ("<nil>" for a
// nodeless entry).
func upNodeNames(nis []*schedcache.NodeInfo) []string {
	out := []string{}
	for _, ni := range nis {
		if ni.Node() == nil {
			out = append(out, "<nil>")
			continue
		}
		out = append(out, ni.Node().Name)
	}
	return out
}

// upListNames returns the names of snapshot.List(), checking that List,
// Range, At and NumNodes agree.
func upListNames(t *testing.T, s *schedcache.Snapshot) []string {
	t.Helper()
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, s.NumNodes(), "NumNodes() vs List()")
	s.Range(func(i int, ni *schedcache.NodeInfo) bool {
		require.Same(t, list[i], ni, "Range(%d)", i)
		require.Same(t, list[i], s.At(i), "At(%d)", i)
		return true
	})
	return upNodeNames(list)
}

// upUsedPVCs returns the used-PVC set of s, sorted.
func upUsedPVCs(s *schedcache.Snapshot) []string {
	out := []string{}
	s.RangeUsedPVCs(func(k string) bool {
		out = append(out, k)
		return true
	})
	sort.Strings(out)
	return out
}

// ---------------------------------------------------------------------------
// TestAssumePodScheduled
// ---------------------------------------------------------------------------

func TestUpstreamAssumePodScheduled(t *testing.T) {
	const nodeName = "node"
	port := func(p int32) []v1.ContainerPort {
		return []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: p, Protocol: "TCP"}}
	}
	testPods := []*v1.Pod{
		upBasePod(nodeName, "test-resource-request-and-port-0", "100m", "500", "", port(80)),
		upBasePod(nodeName, "test-resource-request-and-port-1", "100m", "500", "", port(80)),
		upBasePod(nodeName, "test-resource-request-and-port-2", "200m", "1Ki", "", port(8080)),
		upBasePod(nodeName, "test-nonzero-request", "", "", "", port(80)),
		upBasePod(nodeName, "test-extended-resource-1", "100m", "500", "example.com/foo:3", port(80)),
		upBasePod(nodeName, "test-extended-resource-2", "200m", "1Ki", "example.com/foo:5", port(8080)),
		upBasePod(nodeName, "test-extended-key", "100m", "500", "random-invalid-extended-key:100", []v1.ContainerPort{{}}),
	}
	tests := []struct {
		name string
		pods []*v1.Pod
		want upWant
	}{{
		name: "assumed one pod with resource request and used ports",
		pods: []*v1.Pod{testPods[0]},
		want: upWant{
			pods:      []*v1.Pod{testPods[0]},
			requested: upRes(100, 500), nonZero: upRes(100, 500),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 80}),
		},
	}, {
		name: "node requested resource are equal to the sum of the assumed pods requested resource, node contains host ports defined by pods",
		pods: []*v1.Pod{testPods[1], testPods[2]},
		want: upWant{
			pods:      []*v1.Pod{testPods[1], testPods[2]},
			requested: upRes(300, 1524), nonZero: upRes(300, 1524),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 80}, upHP{"TCP", "127.0.0.1", 8080}),
		},
	}, {
		name: "assumed pod without resource request",
		pods: []*v1.Pod{testPods[3]},
		want: upWant{
			pods:      []*v1.Pod{testPods[3]},
			requested: upRes(0, 0), nonZero: upRes(upDefaultMilliCPU, upDefaultMemory),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 80}),
		},
	}, {
		name: "assumed one pod with extended resource",
		pods: []*v1.Pod{testPods[4]},
		want: upWant{
			pods:      []*v1.Pod{testPods[4]},
			requested: upRes(100, 500).WithScalar("example.com/foo", 3), nonZero: upRes(100, 500),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 80}),
		},
	}, {
		name: "assumed two pods with extended resources",
		pods: []*v1.Pod{testPods[4], testPods[5]},
		want: upWant{
			pods:      []*v1.Pod{testPods[4], testPods[5]},
			requested: upRes(300, 1524).WithScalar("example.com/foo", 8), nonZero: upRes(300, 1524),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 80}, upHP{"TCP", "127.0.0.1", 8080}),
		},
	}, {
		name: "assumed pod with random invalid extended resource key",
		pods: []*v1.Pod{testPods[6]},
		want: upWant{
			pods:      []*v1.Pod{testPods[6]},
			requested: upRes(100, 500), nonZero: upRes(100, 500),
		},
	}}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := upNew(t)
			var gen int64
			for _, pod := range tc.pods {
				require.NoError(t, c.AssumePod(upLog, pod))
				upRequireCached(t, c, pod, true)
				// pod already in cache so can't be assumed
				require.ErrorIs(t, c.AssumePod(upLog, pod), schedcache.ErrPodAlreadyCached)
				g := upGetNode(t, c, nodeName).Generation()
				require.Greater(t, g, gen, "each assumed pod bumps the generation")
				gen = g
			}
			upRequireNodeInfo(t, tc.want, upGetNode(t, c, nodeName), "after AssumePod")
			n, err := c.PodCount()
			require.NoError(t, err)
			require.Equal(t, len(tc.pods), n, "PodCount")
			require.Equal(t, 1, c.NodeCount(), "NodeCount counts the pods-only entry")

			for _, pod := range tc.pods {
				require.NoError(t, c.ForgetPod(upLog, pod))
				upRequireForgotten(t, c, pod)
			}
			// The pods-only entry goes with its last pod (semantics 3.4).
			upRequireNoEntry(t, c, nodeName)
			require.Equal(t, 0, c.NodeCount())
		})
	}
}

// ---------------------------------------------------------------------------
// TestExpirePod and the TTL semantics of section 2
// ---------------------------------------------------------------------------

func TestUpstreamExpirePod(t *testing.T) {
	const nodeName = "node"
	port := func(p int32) []v1.ContainerPort {
		return []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: p, Protocol: "TCP"}}
	}
	testPods := []*v1.Pod{
		upBasePod(nodeName, "test-1", "100m", "500", "", port(80)),
		upBasePod(nodeName, "test-2", "200m", "1Ki", "", port(8080)),
		upBasePod(nodeName, "test-3", "200m", "1Ki", "", port(8080)),
	}
	const defaultTTL = 10 * time.Second
	type assumedPod struct {
		pod        *v1.Pod
		finishBind bool
		finishAt   time.Duration // FinishBinding time, from the start
	}
	tests := []struct {
		name      string
		ttl       time.Duration
		pods      []assumedPod // assumed at the start, in this order
		cleanupAt time.Duration
		want      *upWant // nil: the entry is gone
		expired   []*v1.Pod
	}{{
		name:      "assumed pod would expire",
		ttl:       defaultTTL,
		pods:      []assumedPod{{pod: testPods[0], finishBind: true}},
		cleanupAt: 2 * defaultTTL,
		want:      nil,
		expired:   []*v1.Pod{testPods[0]},
	}, {
		name: "first one would expire, second and third would not",
		ttl:  defaultTTL,
		pods: []assumedPod{
			{pod: testPods[0], finishBind: true},
			{pod: testPods[1], finishBind: true, finishAt: 3 * defaultTTL / 2},
			{pod: testPods[2]},
		},
		cleanupAt: 2 * defaultTTL,
		want: &upWant{
			// Order gets altered when removing pods.
			pods:      []*v1.Pod{testPods[2], testPods[1]},
			requested: upRes(400, 2048), nonZero: upRes(400, 2048),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 8080}),
		},
		expired: []*v1.Pod{testPods[0]},
	}, {
		name:      "assumed pod would never expire",
		ttl:       0,
		pods:      []assumedPod{{pod: testPods[0], finishBind: true}},
		cleanupAt: 3 * defaultTTL,
		want: &upWant{
			pods:      []*v1.Pod{testPods[0]},
			requested: upRes(100, 500), nonZero: upRes(100, 500),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 80}),
		},
	}}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := upStart(t, schedcache.WithTTL(tc.ttl), schedcache.WithPeriod(time.Second))
				defer c.Close()
				start := time.Now()
				for _, p := range tc.pods {
					require.NoError(t, c.AssumePod(upLog, p.pod))
				}
				finish := append([]assumedPod(nil), tc.pods...)
				sort.SliceStable(finish, func(i, j int) bool { return finish[i].finishAt < finish[j].finishAt })
				for _, p := range finish {
					if !p.finishBind {
						continue
					}
					upSleepUntil(start.Add(p.finishAt))
					require.NoError(t, c.FinishBinding(upLog, p.pod))
				}
				upSleepUntil(start.Add(tc.cleanupAt))

				if tc.want == nil {
					upRequireNoEntry(t, c, nodeName)
				} else {
					upRequireNodeInfo(t, *tc.want, upGetNode(t, c, nodeName), "after cleanup")
				}
				for _, p := range tc.pods {
					expired := false
					for _, e := range tc.expired {
						expired = expired || e == p.pod
					}
					if expired {
						upRequireForgotten(t, c, p.pod)
					} else {
						upRequireCached(t, c, p.pod, true)
					}
				}
			})
		})
	}
}

// TestUpstreamExpiryTiming pins the TTL rules of docs/upstream-semantics.md section 2 and
// FinishBinding (1.4): the deadline is set only by FinishBinding (now+ttl,
// re-armed by a second call), a pass expires a pod only when now is strictly
// after the deadline, passes run every period, and a pod whose binding never
// finished, or that left the Assumed state, never expires.
func TestUpstreamExpiryTiming(t *testing.T) {
	const ttl, period = 10 * time.Second, time.Second
	type step struct {
		at   time.Duration // from the cache's start
		op   string        // assume, finish, add, forget, remove, or expect
		pod  string        // fixture: "p" (uid u on n1) or "pAdded" (uid u on n1, other object)
		want upState       // for expect
	}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "expires at the first pass strictly after the deadline",
		steps: []step{
			{at: 0, op: "assume", pod: "p"},
			{at: 0, op: "finish", pod: "p"},
			{at: 9 * time.Second, op: "expect", pod: "p", want: upAssumed},
			{at: 10 * time.Second, op: "expect", pod: "p", want: upAssumed}, // now == deadline: kept
			{at: 11 * time.Second, op: "expect", pod: "p", want: upAbsent},
		},
	}, {
		name: "a second FinishBinding re-arms the deadline from the new now",
		steps: []step{
			{at: 0, op: "assume", pod: "p"},
			{at: 0, op: "finish", pod: "p"},
			{at: 5 * time.Second, op: "finish", pod: "p"},
			{at: 15 * time.Second, op: "expect", pod: "p", want: upAssumed},
			{at: 16 * time.Second, op: "expect", pod: "p", want: upAbsent},
		},
	}, {
		name: "an assumed pod whose binding never finished never expires",
		steps: []step{
			{at: 0, op: "assume", pod: "p"},
			{at: time.Hour, op: "expect", pod: "p", want: upAssumed},
		},
	}, {
		name: "AssumePod sets no deadline: the TTL starts at FinishBinding",
		steps: []step{
			{at: 0, op: "assume", pod: "p"},
			{at: 30 * time.Second, op: "finish", pod: "p"},
			{at: 40 * time.Second, op: "expect", pod: "p", want: upAssumed},
			{at: 41 * time.Second, op: "expect", pod: "p", want: upAbsent},
		},
	}, {
		name: "AddPod confirms the pod and discards its deadline",
		steps: []step{
			{at: 0, op: "assume", pod: "p"},
			{at: 0, op: "finish", pod: "p"},
			{at: 3 * time.Second, op: "add", pod: "pAdded"},
			{at: time.Minute, op: "expect", pod: "pAdded", want: upAdded},
		},
	}, {
		name: "FinishBinding on an added pod is a no-op",
		steps: []step{
			{at: 0, op: "add", pod: "pAdded"},
			{at: 0, op: "finish", pod: "pAdded"},
			{at: time.Minute, op: "expect", pod: "pAdded", want: upAdded},
		},
	}, {
		name: "a forgotten then re-assumed pod is not expired by its old deadline",
		steps: []step{
			{at: 0, op: "assume", pod: "p"},
			{at: 0, op: "finish", pod: "p"},
			{at: 2 * time.Second, op: "forget", pod: "p"},
			{at: 3 * time.Second, op: "assume", pod: "p"},
			{at: time.Minute, op: "expect", pod: "p", want: upAssumed},
		},
	}, {
		name: "a removed then re-assumed pod gets a fresh deadline",
		steps: []step{
			{at: 0, op: "assume", pod: "p"},
			{at: 0, op: "finish", pod: "p"},
			{at: 4 * time.Second, op: "remove", pod: "p"},
			{at: 5 * time.Second, op: "assume", pod: "p"},
			{at: 6 * time.Second, op: "finish", pod: "p"},
			{at: 15 * time.Second, op: "expect", pod: "p", want: upAssumed},
			{at: 16 * time.Second, op: "expect", pod: "p", want: upAssumed},
			{at: 17 * time.Second, op: "expect", pod: "p", want: upAbsent},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pods := map[string]*v1.Pod{
					"p":      upBasePod("n1", "u", "100m", "500", "", nil),
					"pAdded": upBasePod("n1", "u", "100m", "500", "", nil),
				}
				c := upStart(t, schedcache.WithTTL(ttl), schedcache.WithPeriod(period))
				defer c.Close()
				_, err := c.AddNode(upLog, upNode("n1", nil))
				require.NoError(t, err)
				start := time.Now()
				for i, s := range tc.steps {
					upSleepUntil(start.Add(s.at))
					p := pods[s.pod]
					what := fmt.Sprintf("step %d (%s %s at %v)", i, s.op, s.pod, s.at)
					switch s.op {
					case "assume":
						require.NoError(t, c.AssumePod(upLog, p), what)
					case "finish":
						require.NoError(t, c.FinishBinding(upLog, p), what)
					case "add":
						require.NoError(t, c.AddPod(upLog, p), what)
					case "forget":
						require.NoError(t, c.ForgetPod(upLog, p), what)
					case "remove":
						require.NoError(t, c.RemovePod(upLog, p), what)
					case "expect":
						ni := upGetNode(t, c, "n1")
						switch s.want {
						case upAbsent:
							upRequireForgotten(t, c, p)
							require.Equal(t, 0, ni.NumPods(), what)
						default:
							upRequireCached(t, c, p, s.want == upAssumed)
							require.Equal(t, []string{"u"}, upInfoNames(ni.Pods()), what)
						}
					default:
						t.Fatalf("unknown op %q", s.op)
					}
				}
			})
		})
	}
}

// ---------------------------------------------------------------------------
// TestAddPodWillConfirm, TestDump, TestAddPodAlwaysUpdatesPodInfoInNodeInfo,
// TestAddPodWillReplaceAssumed, TestAddPodAfterExpiration
// ---------------------------------------------------------------------------

func TestUpstreamAddPodWillConfirm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodeName = "node"
		const ttl = 10 * time.Second
		testPods := []*v1.Pod{
			upBasePod(nodeName, "test-1", "100m", "500", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 80, Protocol: "TCP"}}),
			upBasePod(nodeName, "test-2", "200m", "1Ki", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 8080, Protocol: "TCP"}}),
		}
		// Two pods were assumed at the same time, but the first one is Add()ed
		// and gets confirmed.
		podsToAssume := []*v1.Pod{testPods[0], testPods[1]}
		podsToAdd := []*v1.Pod{testPods[0]}
		want := upWant{
			pods:      []*v1.Pod{testPods[0]},
			requested: upRes(100, 500), nonZero: upRes(100, 500),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 80}),
		}

		c := upStart(t, schedcache.WithTTL(ttl), schedcache.WithPeriod(time.Second))
		defer c.Close()
		start := time.Now()
		for _, p := range podsToAssume {
			require.NoError(t, c.AssumePod(upLog, p))
			require.NoError(t, c.FinishBinding(upLog, p))
		}
		for _, p := range podsToAdd {
			require.NoError(t, c.AddPod(upLog, p))
			// pod already in added state
			require.ErrorIs(t, c.AddPod(upLog, p), schedcache.ErrPodAlreadyAdded)
		}
		upSleepUntil(start.Add(2 * ttl))
		// Confirmed pods are not expired.
		upRequireNodeInfo(t, want, upGetNode(t, c, nodeName), "after expiration")
		upRequireCached(t, c, testPods[0], false)
		upRequireForgotten(t, c, testPods[1])
	})
}

func TestUpstreamDump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodeName = "node"
		testPods := []*v1.Pod{
			upBasePod(nodeName, "test-1", "100m", "500", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 80, Protocol: "TCP"}}),
			upBasePod(nodeName, "test-2", "200m", "1Ki", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 80, Protocol: "TCP"}}),
		}
		c := upStart(t, schedcache.WithTTL(10*time.Second), schedcache.WithPeriod(time.Second))
		defer c.Close()
		for _, p := range testPods {
			require.NoError(t, c.AssumePod(upLog, p))
			require.NoError(t, c.FinishBinding(upLog, p))
		}
		require.NoError(t, c.AddPod(upLog, testPods[0]))

		d, err := c.Dump()
		require.NoError(t, err)
		require.Len(t, d.Nodes, c.NodeCount(), "one Dump entry per cache entry")
		require.Contains(t, d.Nodes, nodeName)
		for name, ni := range d.Nodes {
			require.Equal(t, upNodeFP(upGetNode(t, c, name)), upNodeFP(ni), "Dump entry %q equals the cache entry", name)
		}
		// Removing test-1 from [test-1 test-2] moves test-2 into its slot,
		// then the confirmed test-1 is appended.
		upRequireNodeInfo(t, upWant{
			pods:      []*v1.Pod{testPods[1], testPods[0]},
			requested: upRes(300, 1524), nonZero: upRes(300, 1524),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 80}),
		}, d.Nodes[nodeName], "Dump entry")
		require.Equal(t, map[string]struct{}{"test-2": {}}, d.AssumedPods)
	})
}

func TestUpstreamAddPodAlwaysUpdatesPodInfoInNodeInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Second
		p1 := upBasePod("node1", "test-1", "100m", "500", "", []v1.ContainerPort{{HostPort: 80}})
		p2 := p1.DeepCopy()
		p2.Status.Conditions = append(p1.Status.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue})

		c := upStart(t, schedcache.WithTTL(ttl), schedcache.WithPeriod(time.Second))
		defer c.Close()
		start := time.Now()
		require.NoError(t, c.AssumePod(upLog, p1))
		require.NoError(t, c.FinishBinding(upLog, p1))
		gen := upGetNode(t, c, "node1").Generation()
		require.NoError(t, c.AddPod(upLog, p2))

		want := upWant{
			pods:      []*v1.Pod{p2},
			requested: upRes(100, 500), nonZero: upRes(100, 500),
			ports: upPorts(upHP{"TCP", "0.0.0.0", 80}),
		}
		ni := upGetNode(t, c, "node1")
		upRequireNodeInfo(t, want, ni, "after AddPod")
		require.Greater(t, ni.Generation(), gen)
		upRequireCached(t, c, p2, false)

		// The confirmed pod lost the deadline of its Assumed state.
		upSleepUntil(start.Add(3 * ttl))
		upRequireNodeInfo(t, want, upGetNode(t, c, "node1"), "after the TTL")
		upRequireCached(t, c, p2, false)
	})
}

func TestUpstreamAddPodWillReplaceAssumed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Second
		assumedPod := upBasePod("assumed-node-1", "test-1", "100m", "500", "", []v1.ContainerPort{{HostPort: 80}})
		addedPod := upBasePod("actual-node", "test-1", "100m", "500", "", []v1.ContainerPort{{HostPort: 80}})
		updatedPod := upBasePod("actual-node", "test-1", "200m", "500", "", []v1.ContainerPort{{HostPort: 90}})

		c := upStart(t, schedcache.WithTTL(ttl), schedcache.WithPeriod(time.Second))
		defer c.Close()
		start := time.Now()
		require.NoError(t, c.AssumePod(upLog, assumedPod))
		require.NoError(t, c.FinishBinding(upLog, assumedPod))
		require.NoError(t, c.AddPod(upLog, addedPod))
		require.NoError(t, c.UpdatePod(upLog, addedPod, updatedPod))

		want := upWant{
			pods:      []*v1.Pod{updatedPod},
			requested: upRes(200, 500), nonZero: upRes(200, 500),
			ports: upPorts(upHP{"TCP", "0.0.0.0", 90}),
		}
		upRequireNoEntry(t, c, "assumed-node-1")
		upRequireNodeInfo(t, want, upGetNode(t, c, "actual-node"), "actual-node")
		upRequireCached(t, c, updatedPod, false)
		require.Equal(t, 1, c.NodeCount())

		upSleepUntil(start.Add(3 * ttl))
		upRequireNodeInfo(t, want, upGetNode(t, c, "actual-node"), "actual-node after the TTL")
	})
}

func TestUpstreamAddPodAfterExpiration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodeName = "node"
		const ttl = 10 * time.Second
		basePod := upBasePod(nodeName, "test", "100m", "500", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 80, Protocol: "TCP"}})

		c := upStart(t, schedcache.WithTTL(ttl), schedcache.WithPeriod(time.Second))
		defer c.Close()
		start := time.Now()
		require.NoError(t, c.AssumePod(upLog, basePod))
		require.NoError(t, c.FinishBinding(upLog, basePod))
		upSleepUntil(start.Add(2 * ttl))
		// It should be expired and removed.
		upRequireForgotten(t, c, basePod)
		upRequireNoEntry(t, c, nodeName)

		require.NoError(t, c.AddPod(upLog, basePod))
		upRequireNodeInfo(t, upWant{
			pods:      []*v1.Pod{basePod},
			requested: upRes(100, 500), nonZero: upRes(100, 500),
			ports: upPorts(upHP{"TCP", "127.0.0.1", 80}),
		}, upGetNode(t, c, nodeName), "after re-adding")
		upRequireCached(t, c, basePod, false)
	})
}

// ---------------------------------------------------------------------------
// TestUpdatePod, TestUpdatePodAndGet, TestExpireAddUpdatePod
// ---------------------------------------------------------------------------

// upUpdateWants are the expected entries after updating testPods[0] to
// testPods[1] and back (TestUpdatePod, TestExpireAddUpdatePod).
func upUpdateFixtures(nodeName string) ([]*v1.Pod, []upWant) {
	testPods := []*v1.Pod{
		upBasePod(nodeName, "test", "100m", "500", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 80, Protocol: "TCP"}}),
		upBasePod(nodeName, "test", "200m", "1Ki", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 8080, Protocol: "TCP"}}),
	}
	wants := []upWant{{
		pods:      []*v1.Pod{testPods[1]},
		requested: upRes(200, 1024), nonZero: upRes(200, 1024),
		ports: upPorts(upHP{"TCP", "127.0.0.1", 8080}),
	}, {
		pods:      []*v1.Pod{testPods[0]},
		requested: upRes(100, 500), nonZero: upRes(100, 500),
		ports: upPorts(upHP{"TCP", "127.0.0.1", 80}),
	}}
	return testPods, wants
}

func TestUpstreamUpdatePod(t *testing.T) {
	const nodeName = "node"
	testPods, wants := upUpdateFixtures(nodeName)
	podsToUpdate := []*v1.Pod{testPods[0], testPods[1], testPods[0]}

	c := upNew(t, schedcache.WithTTL(10*time.Second))
	require.NoError(t, c.AddPod(upLog, testPods[0]))
	gen := upGetNode(t, c, nodeName).Generation()
	for j := 1; j < len(podsToUpdate); j++ {
		require.NoError(t, c.UpdatePod(upLog, podsToUpdate[j-1], podsToUpdate[j]), "update %d", j)
		ni := upGetNode(t, c, nodeName)
		upRequireNodeInfo(t, wants[j-1], ni, fmt.Sprintf("update %d", j))
		require.Greater(t, ni.Generation(), gen, "update %d bumps the generation", j)
		gen = ni.Generation()
		upRequireCached(t, c, podsToUpdate[j], false)
	}
}

func TestUpstreamUpdatePodAndGet(t *testing.T) {
	const nodeName = "node"
	testPods := []*v1.Pod{
		upBasePod(nodeName, "test", "100m", "500", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 80, Protocol: "TCP"}}),
		upBasePod(nodeName, "test", "200m", "1Ki", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 8080, Protocol: "TCP"}}),
	}
	tests := []struct {
		name        string
		pod         *v1.Pod
		podToUpdate *v1.Pod
		handler     string // "AssumePod" or "AddPod"
		assumePod   bool
	}{
		{name: "do not update pod when pod information has not changed", pod: testPods[0], podToUpdate: testPods[0], handler: "AssumePod", assumePod: true},
		{name: "update pod when pod information changed", pod: testPods[0], podToUpdate: testPods[1], handler: "AddPod", assumePod: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := upNew(t, schedcache.WithTTL(10*time.Second))
			// trying to get an unknown pod should return an error
			_, err := c.GetPod(tc.podToUpdate)
			require.ErrorIs(t, err, schedcache.ErrPodNotFound)
			// trying to update an unknown pod should return an error
			require.ErrorIs(t, c.UpdatePod(upLog, tc.pod, tc.podToUpdate), schedcache.ErrPodNotFound)

			switch tc.handler {
			case "AssumePod":
				require.NoError(t, c.AssumePod(upLog, tc.pod))
				// an assumed pod cannot be updated
				require.ErrorIs(t, c.UpdatePod(upLog, tc.pod, tc.podToUpdate), schedcache.ErrPodAssumed)
			case "AddPod":
				require.NoError(t, c.AddPod(upLog, tc.pod))
			}
			if !tc.assumePod {
				require.NoError(t, c.UpdatePod(upLog, tc.pod, tc.podToUpdate))
			}
			cached, err := c.GetPod(tc.pod)
			require.NoError(t, err)
			require.Same(t, tc.podToUpdate, cached)
			require.Equal(t, tc.podToUpdate, cached)
		})
	}
}

func TestUpstreamExpireAddUpdatePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodeName = "node"
		const ttl = 10 * time.Second
		testPods, wants := upUpdateFixtures(nodeName)
		podsToUpdate := []*v1.Pod{testPods[0], testPods[1], testPods[0]}

		c := upStart(t, schedcache.WithTTL(ttl), schedcache.WithPeriod(time.Second))
		defer c.Close()
		start := time.Now()
		// The pod is assumed, expired and added; then it is updated twice.
		require.NoError(t, c.AssumePod(upLog, testPods[0]))
		require.NoError(t, c.FinishBinding(upLog, testPods[0]))
		upSleepUntil(start.Add(2 * ttl))
		upRequireForgotten(t, c, testPods[0])
		require.NoError(t, c.AddPod(upLog, testPods[0]))
		for j := 1; j < len(podsToUpdate); j++ {
			require.NoError(t, c.UpdatePod(upLog, podsToUpdate[j-1], podsToUpdate[j]), "update %d", j)
			upRequireNodeInfo(t, wants[j-1], upGetNode(t, c, nodeName), fmt.Sprintf("update %d", j))
			upRequireCached(t, c, podsToUpdate[j], false)
		}
	})
}

// ---------------------------------------------------------------------------
// TestEphemeralStorageResource, TestRemovePod, TestForgetPod
// ---------------------------------------------------------------------------

func TestUpstreamEphemeralStorageResource(t *testing.T) {
	const nodeName = "node"
	// st.MakePod().Name(..).Namespace(..).UID(..).Req({ephemeral-storage: 500}).Node(nodeName)
	podE := upPod("pod-with-ephemeral-storage", "default-namespace", "pod-with-ephemeral-storage", nodeName)
	podE.Spec.Containers = []v1.Container{{Name: "con0", Image: "pause", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("500")},
	}}}

	c := upNew(t)
	require.NoError(t, c.AddPod(upLog, podE))
	upRequireNodeInfo(t, upWant{
		pods:      []*v1.Pod{podE},
		requested: schedcache.Resource{EphemeralStorage: 500},
		nonZero:   upRes(upDefaultMilliCPU, upDefaultMemory),
	}, upGetNode(t, c, nodeName), "after AddPod")

	require.NoError(t, c.RemovePod(upLog, podE))
	upRequireForgotten(t, c, podE)
	upRequireNoEntry(t, c, nodeName)
}

func TestUpstreamRemovePod(t *testing.T) {
	pod := upBasePod("node-1", "test", "100m", "500", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 80, Protocol: "TCP"}})
	nodes := []*v1.Node{upNode("node-1", nil), upNode("node-2", nil)}
	want := upWant{
		pods:      []*v1.Pod{pod},
		requested: upRes(100, 500), nonZero: upRes(100, 500),
		ports: upPorts(upHP{"TCP", "127.0.0.1", 80}),
	}
	for _, tc := range []struct {
		name   string
		assume bool
	}{{name: "added", assume: false}, {name: "assumed", assume: true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := upNew(t, schedcache.WithTTL(time.Second))
			nodeName := pod.Spec.NodeName
			// Add/Assume pod succeeds even before adding the nodes.
			if tc.assume {
				require.NoError(t, c.AssumePod(upLog, pod))
			} else {
				require.NoError(t, c.AddPod(upLog, pod))
			}
			upRequireNodeInfo(t, want, upGetNode(t, c, nodeName), "pods-first entry")
			for _, n := range nodes {
				_, err := c.AddNode(upLog, n)
				require.NoError(t, err)
			}
			withNode := want
			withNode.node = nodes[0]
			upRequireNodeInfo(t, withNode, upGetNode(t, c, nodeName), "after AddNode")

			require.NoError(t, c.RemovePod(upLog, pod))
			upRequireForgotten(t, c, pod)
			upRequireNodeInfo(t, upWant{node: nodes[0]}, upGetNode(t, c, nodeName), "after RemovePod")

			// trying to remove a pod already removed should return an error
			require.ErrorIs(t, c.RemovePod(upLog, pod), schedcache.ErrPodNotFound)

			// Node that owned the Pod should be at the head of the list.
			require.Equal(t, []string{"node-1", "node-2"}, upRecency(t, c))
		})
	}
}

func TestUpstreamForgetPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const nodeName = "node"
		basePod := upBasePod(nodeName, "test", "100m", "500", "", []v1.ContainerPort{{HostIP: "127.0.0.1", HostPort: 80, Protocol: "TCP"}})
		pods := []*v1.Pod{basePod}

		c := upStart(t, schedcache.WithTTL(10*time.Second), schedcache.WithPeriod(time.Second))
		defer c.Close()
		for _, pod := range pods {
			require.NoError(t, c.AssumePod(upLog, pod))
			require.NoError(t, c.FinishBinding(upLog, pod))
			isAssumed, err := c.IsAssumedPod(pod)
			require.NoError(t, err)
			require.True(t, isAssumed)
			assumedPod, err := c.GetPod(pod)
			require.NoError(t, err)
			require.Equal(t, pod.Namespace, assumedPod.Namespace)
			require.Equal(t, pod.Name, assumedPod.Name)
		}
		for _, pod := range pods {
			require.NoError(t, c.ForgetPod(upLog, pod))
			upRequireForgotten(t, c, pod)
			// trying to forget a pod already forgotten should return nil
			require.NoError(t, c.ForgetPod(upLog, pod))
		}
		upRequireNoEntry(t, c, nodeName)
	})
}

// ---------------------------------------------------------------------------
// TestNodeOperators
// ---------------------------------------------------------------------------

// upNodeOperatorsCases are upstream's TestNodeOperators cases: nodes built
// with st.MakeNode().Name(..).Capacity(..).Taints(..).Images(..), and pods
// for the first node.
func upNodeOperatorsCases() []struct {
	name  string
	nodes []*v1.Node
	pods  []*v1.Pod
	want  upWant // the first node's entry after adding nodes and pods
} {
	cpuHalf := resource.MustParse("500m")
	mem50m := resource.MustParse("50m")
	// Capacity() sets capacity and allocatable, with pods: 32.
	capacity := func(cpu, mem, foo string) v1.ResourceList {
		return v1.ResourceList{
			v1.ResourcePods:   resource.MustParse("32"),
			v1.ResourceCPU:    resource.MustParse(cpu),
			v1.ResourceMemory: resource.MustParse(mem),
			"example.com/foo": resource.MustParse(foo),
		}
	}
	taints := []v1.Taint{{Key: "test-key", Value: "test-value", Effect: v1.TaintEffectPreferNoSchedule}}
	imageStatus1 := map[string]int64{
		"gcr.io/80:latest":  80 * upMB,
		"gcr.io/80:v1":      80 * upMB,
		"gcr.io/300:latest": 300 * upMB,
		"gcr.io/300:v1":     300 * upMB,
	}
	imageStatus2 := map[string]int64{
		"gcr.io/600:latest": 600 * upMB,
		"gcr.io/80:latest":  80 * upMB,
		"gcr.io/900:latest": 900 * upMB,
	}
	mkNode := func(name string, res v1.ResourceList, images map[string]int64) *v1.Node {
		n := upWithImages(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, images)
		n.Spec.Taints = taints
		n.Status.Capacity, n.Status.Allocatable = res.DeepCopy(), res.DeepCopy()
		return n
	}
	mkPod := func(name string, ports []v1.ContainerPort) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
			Spec: v1.PodSpec{NodeName: "test-node-1", Containers: []v1.Container{{
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: cpuHalf, v1.ResourceMemory: mem50m}},
				Ports:     ports,
			}}},
		}
	}
	// Allocatable of resourceList1: cpu 1000m, memory ceil(0.1)=1, pods 32, foo 1.
	alloc1 := schedcache.Resource{MilliCPU: 1000, Memory: 1, AllowedPodNumber: 32}.WithScalar("example.com/foo", 1)

	case1Nodes := []*v1.Node{
		mkNode("test-node-1", capacity("1000m", "100m", "1"), imageStatus1),
		mkNode("test-node-2", capacity("500m", "50m", "2"), imageStatus2),
		mkNode("test-node-3", capacity("1000m", "100m", "1"), imageStatus1),
		mkNode("test-node-4", capacity("500m", "50m", "2"), imageStatus2),
	}
	case1Pods := []*v1.Pod{mkPod("pod1", []v1.ContainerPort{{Name: "http", HostPort: 80, ContainerPort: 80}})}
	case2Nodes := []*v1.Node{
		mkNode("test-node-1", capacity("1000m", "100m", "1"), imageStatus1),
		mkNode("test-node-2", capacity("500m", "50m", "2"), imageStatus2),
		mkNode("test-node-3", capacity("1000m", "100m", "1"), imageStatus1),
	}
	case2Pods := []*v1.Pod{mkPod("pod1", nil), mkPod("pod2", nil)}

	return []struct {
		name  string
		nodes []*v1.Node
		pods  []*v1.Pod
		want  upWant
	}{{
		name:  "operate the node with one pod",
		nodes: case1Nodes,
		pods:  case1Pods,
		want: upWant{
			node: case1Nodes[0],
			pods: case1Pods,
			// memory 50m rounds up to 1 byte
			requested: upRes(500, 1), nonZero: upRes(500, 1),
			allocatable: alloc1,
			ports:       upPorts(upHP{"TCP", "0.0.0.0", 80}),
			// buildImageStates: NumNodes = nodes listing the name among all four.
			images: map[string]schedcache.ImageStateSummary{
				"gcr.io/80:latest":  {Size: 80 * upMB, NumNodes: 4},
				"gcr.io/80:v1":      {Size: 80 * upMB, NumNodes: 2},
				"gcr.io/300:latest": {Size: 300 * upMB, NumNodes: 2},
				"gcr.io/300:v1":     {Size: 300 * upMB, NumNodes: 2},
			},
		},
	}, {
		name:  "operate the node with two pods",
		nodes: case2Nodes,
		pods:  case2Pods,
		want: upWant{
			node:      case2Nodes[0],
			pods:      case2Pods,
			requested: upRes(1000, 2), nonZero: upRes(1000, 2),
			allocatable: alloc1,
			images: map[string]schedcache.ImageStateSummary{
				"gcr.io/80:latest":  {Size: 80 * upMB, NumNodes: 3},
				"gcr.io/80:v1":      {Size: 80 * upMB, NumNodes: 2},
				"gcr.io/300:latest": {Size: 300 * upMB, NumNodes: 2},
				"gcr.io/300:v1":     {Size: 300 * upMB, NumNodes: 2},
			},
		},
	}}
}

func TestUpstreamNodeOperators(t *testing.T) {
	for _, tc := range upNodeOperatorsCases() {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.nodes[0]
			c := upNew(t, schedcache.WithTTL(time.Second))
			for _, n := range tc.nodes {
				ni, err := c.AddNode(upLog, n)
				require.NoError(t, err)
				require.Same(t, n, ni.Node(), "AddNode returns the new entry")
			}
			for _, p := range tc.pods {
				require.NoError(t, c.AddPod(upLog, p))
			}

			// Step 1: the node was added into the cache successfully.
			got := upGetNode(t, c, node.Name)
			upRequireNodeInfo(t, tc.want, got, "step 1: cache entry")
			require.Equal(t, len(tc.nodes), c.NodeCount())
			require.Equal(t, len(tc.nodes), c.Snapshot().NumNodes(), "nodes in the tree")
			gen := got.Generation()

			// Step 2: dump cached nodes successfully.
			cachedNodes := schedcache.NewEmptySnapshot()
			require.NoError(t, c.UpdateSnapshot(upLog, cachedNodes))
			require.Equal(t, len(tc.nodes), cachedNodes.NumNodes())
			newNode, err := cachedNodes.Get(node.Name)
			require.NoError(t, err)
			upRequireNodeInfo(t, tc.want, newNode, "step 2: snapshot entry")
			require.Equal(t, gen, newNode.Generation(), "the snapshot entry is a clone of the cache entry")

			// Step 3: update node attribute successfully, with a nil old
			// node as upstream (the node has no zone labels: zone key "",
			// nothing moves). Upstream mutates the stored node; here the
			// update is a copy, since a stored object is shared with
			// published snapshots.
			require.Empty(t, nodetree.ZoneKey(node), "a zoned node with a nil old node is refused (upstream panics)")
			updated := node.DeepCopy()
			updated.Status.Allocatable[v1.ResourceMemory] = resource.MustParse("50m")
			ni, err := c.UpdateNode(upLog, nil, updated)
			require.NoError(t, err)
			require.Same(t, updated, ni.Node(), "UpdateNode returns the new entry")
			got = upGetNode(t, c, node.Name)
			require.Greater(t, got.Generation(), gen, "Generation is incremented")
			wantUpdated := tc.want
			wantUpdated.node = updated // allocatable memory 50m rounds up to 1 byte, as 100m did
			upRequireNodeInfo(t, wantUpdated, got, "step 3: after UpdateNode")
			upRequireNodeInfo(t, wantUpdated, ni, "step 3: UpdateNode result")
			require.Equal(t, len(tc.nodes), c.Snapshot().NumNodes(), "nodes in the tree after UpdateNode")

			// Step 4: the node can be removed even if it still has pods.
			require.NoError(t, c.RemoveNode(upLog, updated))
			ghost := upGetNode(t, c, node.Name)
			require.Nil(t, ghost.Node(), "the ghost entry has no node object")
			require.Equal(t, upPodNames(tc.pods), upInfoNames(ghost.Pods()))
			// trying to remove a node already removed should return an error
			require.ErrorIs(t, c.RemoveNode(upLog, updated), schedcache.ErrNodeNotInZone)
			// The node is removed from the tree as well.
			s := c.Snapshot()
			require.Equal(t, len(tc.nodes)-1, s.NumNodes())
			require.NotContains(t, upListNames(t, s), node.Name)
			_, err = s.Get(node.Name)
			require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound)
			// Pods are still in the pods cache.
			for _, p := range tc.pods {
				upRequireCached(t, c, p, false)
			}

			// Step 5: removing pods for the removed node still succeeds.
			for _, p := range tc.pods {
				require.NoError(t, c.RemovePod(upLog, p))
				upRequireForgotten(t, c, p)
			}
			upRequireNoEntry(t, c, node.Name)
			require.Equal(t, len(tc.nodes)-1, c.NodeCount())
		})
	}
}

// TestUpstreamNodeOperatorsImageSummaries is the checkImageStateSummary part
// of upstream's TestNodeOperators: every clone of a node made at the same
// time shows the same summary for an image (semantics 3.5/3.6: clones carry
// NumNodes = number of nodes reporting the name *at clone time*). Dump clones
// every entry when called; a fresh snapshot (generation 0) clones every node.
func TestUpstreamNodeOperatorsImageSummaries(t *testing.T) {
	tc := upNodeOperatorsCases()[0]
	want := map[string]schedcache.ImageStateSummary{
		"gcr.io/80:latest":  {Size: 80 * upMB, NumNodes: 4},
		"gcr.io/300:latest": {Size: 300 * upMB, NumNodes: 2},
	}
	setup := func(t *testing.T) *schedcache.Cache {
		c := upNew(t)
		for _, n := range tc.nodes {
			_, err := c.AddNode(upLog, n)
			require.NoError(t, err)
		}
		for _, p := range tc.pods {
			require.NoError(t, c.AddPod(upLog, p))
		}
		return c
	}
	check := func(t *testing.T, nodes map[string]*schedcache.NodeInfo) {
		for _, name := range []string{"test-node-1", "test-node-2", "test-node-3", "test-node-4"} {
			ni := nodes[name]
			require.NotNil(t, ni, name)
			for image, summary := range want {
				if got, ok := ni.ImageState(image); ok {
					require.Equal(t, summary, got, "%s: image %s", name, image)
				}
			}
		}
	}
	t.Run("Dump", func(t *testing.T) {
		c := setup(t)
		d, err := c.Dump()
		require.NoError(t, err)
		check(t, d.Nodes)
	})
	// A fresh snapshot clones every node now (5.2), so every node shows the
	// count now, as upstream. The published snapshot shows each node's
	// count as of its last change (what upstream's long-lived snapshot
	// refreshed after every operation shows): the node added last has the
	// full count, earlier ones fewer.
	t.Run("fresh snapshot", func(t *testing.T) {
		c := setup(t)
		snap := schedcache.NewEmptySnapshot()
		require.NoError(t, c.UpdateSnapshot(upLog, snap))
		stale := 0
		for _, name := range []string{"test-node-1", "test-node-2", "test-node-3", "test-node-4"} {
			ni, err := snap.Get(name)
			require.NoError(t, err)
			got, ok := ni.ImageState("gcr.io/80:latest")
			require.True(t, ok, name)
			require.Equal(t, schedcache.ImageStateSummary{Size: 80 * upMB, NumNodes: 4}, got, name)
			pub, err := c.Snapshot().Get(name)
			require.NoError(t, err)
			if got, _ := pub.ImageState("gcr.io/80:latest"); got.NumNodes < 4 {
				stale++
			}
		}
		last, _ := c.Snapshot().Get("test-node-4")
		got, _ := last.ImageState("gcr.io/80:latest")
		require.Equal(t, 4, got.NumNodes, "the node added last was cloned with the full count")
		require.Positive(t, stale, "published: earlier nodes keep the count of their last change")
	})
}

// ---------------------------------------------------------------------------
// Semantics 1.3: the transition table, every call in every prior state
// ---------------------------------------------------------------------------

type upState int

const (
	upAbsent upState = iota
	upAssumed
	upAdded
)

func (s upState) String() string { return [...]string{"Absent", "Assumed", "Added"}[s] }

// upTransitionPods are the objects the transition table refers to. All but
// pOtherUID and pNoUID carry UID "u"; CPU requests tell them apart.
func upTransitionPods() map[string]*v1.Pod {
	mk := func(uid, node, cpu string) *v1.Pod {
		p := upBasePod(node, "pod-"+uid, cpu, "1Ki", "", nil)
		p.UID = types.UID(uid)
		return p
	}
	return map[string]*v1.Pod{
		"p":         mk("u", "n1", "100m"),
		"pNew":      mk("u", "n1", "200m"), // an update of p on the same node
		"pOther":    mk("u", "n2", "300m"), // p as seen on another node
		"pNoNode":   mk("u", "", "100m"),   // p without node name
		"pOtherUID": mk("v", "n1", "400m"),
		"pNoUID":    mk("", "n1", "100m"),
		"nil":       nil,
	}
}

// upMilliCPU is the Requested().MilliCPU each transition pod contributes.
var upMilliCPU = map[string]int64{"p": 100, "pNew": 200, "pOther": 300, "pNoNode": 100}

// upInvoke runs a call written as in the semantics table, e.g.
// "AddPod(pOther)" or "UpdatePod(p, pNew)", with the named pods.
func upInvoke(t *testing.T, c *schedcache.Cache, pods map[string]*v1.Pod, call string) error {
	t.Helper()
	method, rest, ok := strings.Cut(strings.TrimSuffix(call, ")"), "(")
	require.True(t, ok, "bad call %q", call)
	var args []*v1.Pod
	for _, a := range strings.Split(rest, ",") {
		p, ok := pods[strings.TrimSpace(a)]
		require.True(t, ok, "unknown pod %q in %q", a, call)
		args = append(args, p)
	}
	switch method {
	case "AssumePod":
		return c.AssumePod(upLog, args[0])
	case "FinishBinding":
		return c.FinishBinding(upLog, args[0])
	case "ForgetPod":
		return c.ForgetPod(upLog, args[0])
	case "AddPod":
		return c.AddPod(upLog, args[0])
	case "UpdatePod":
		return c.UpdatePod(upLog, args[0], args[1])
	case "RemovePod":
		return c.RemovePod(upLog, args[0])
	case "GetPod":
		_, err := c.GetPod(args[0])
		return err
	case "IsAssumedPod":
		// Every IsAssumedPod row probes a key that is not assumed (or
		// invalid): the answer is false.
		assumed, err := c.IsAssumedPod(args[0])
		require.False(t, assumed, "IsAssumedPod(%s)", call)
		return err
	}
	t.Fatalf("unknown method in %q", call)
	return nil
}

// upRequirePodState asserts the state of key "u": GetPod returns the
// stored fixture (or ErrPodNotFound), IsAssumedPod and Dump agree, and the
// pod is aggregated exactly once, into the entry named by the stored pod.
func upRequirePodState(t *testing.T, c *schedcache.Cache, pods map[string]*v1.Pod, state upState, stored, what string) {
	t.Helper()
	probe := pods["p"]
	got, err := c.GetPod(probe)
	assumed, aerr := c.IsAssumedPod(probe)
	require.NoError(t, aerr)
	d, derr := c.Dump()
	require.NoError(t, derr)
	count, _ := c.PodCount()
	if state == upAbsent {
		require.ErrorIs(t, err, schedcache.ErrPodNotFound, "%s: GetPod", what)
		require.Nil(t, got, "%s: GetPod", what)
		require.False(t, assumed, "%s: IsAssumedPod", what)
		require.Empty(t, d.AssumedPods, "%s: Dump().AssumedPods", what)
		require.Equal(t, 0, count, "%s: PodCount", what)
	} else {
		require.NoError(t, err, "%s: GetPod", what)
		require.Same(t, pods[stored], got, "%s: GetPod returns %s", what, stored)
		require.Equal(t, state == upAssumed, assumed, "%s: IsAssumedPod", what)
		if state == upAssumed {
			require.Equal(t, map[string]struct{}{"u": {}}, d.AssumedPods, "%s: Dump().AssumedPods", what)
		} else {
			require.Empty(t, d.AssumedPods, "%s: Dump().AssumedPods", what)
		}
		require.Equal(t, 1, count, "%s: PodCount", what)
	}
	holder := "-"
	if state != upAbsent {
		holder = pods[stored].Spec.NodeName
	}
	for _, name := range []string{"n1", "n2", ""} {
		ni, ok := d.Nodes[name]
		if name == holder {
			require.True(t, ok, "%s: entry %q holds the pod", what, name)
			require.Equal(t, []string{pods[stored].Name}, upInfoNames(ni.Pods()), "%s: pods of %q", what, name)
			require.Same(t, pods[stored], ni.PodAt(0).Pod(), "%s: pod object on %q", what, name)
			upRequireResource(t, upRes(upMilliCPU[stored], 1024), ni.Requested(), what+": Requested of "+name)
			continue
		}
		if ok {
			require.Equal(t, 0, ni.NumPods(), "%s: pods of %q", what, name)
			upRequireResource(t, schedcache.Resource{}, ni.Requested(), what+": Requested of "+name)
		}
	}
}

// upChangesInPlace are the successful calls that change the cache without
// changing the pod's state or stored object: the PodInfo is rebuilt.
var upChangesInPlace = map[string]bool{"UpdatePod(p, p)": true}

func TestUpstreamPodTransitionTable(t *testing.T) {
	// Corruption means a *schedcache.CorruptionError (upstream exits the
	// process there, semantics 1.5); the state must stay unchanged.
	corrupt := schedcache.ErrCorrupted
	tests := []struct {
		from    upState
		call    string
		wantErr error   // matched with errors.Is; nil: success
		to      upState // state of key "u" afterwards
		stored  string  // pod GetPod returns afterwards ("" when absent)
	}{
		// ---- from Absent ----
		{upAbsent, "AssumePod(p)", nil, upAssumed, "p"},
		{upAbsent, "AssumePod(pNoNode)", nil, upAssumed, "pNoNode"}, // assumed on the nodeless entry named ""
		{upAbsent, "FinishBinding(p)", nil, upAbsent, ""},
		{upAbsent, "ForgetPod(p)", nil, upAbsent, ""},
		{upAbsent, "AddPod(p)", nil, upAdded, "p"},
		{upAbsent, "AddPod(pNoNode)", nil, upAdded, "pNoNode"}, // aggregated into the entry named ""
		{upAbsent, "UpdatePod(p, pNew)", schedcache.ErrPodNotFound, upAbsent, ""},
		{upAbsent, "RemovePod(p)", schedcache.ErrPodNotFound, upAbsent, ""},
		{upAbsent, "GetPod(p)", schedcache.ErrPodNotFound, upAbsent, ""},
		{upAbsent, "IsAssumedPod(p)", nil, upAbsent, ""},

		// ---- from Assumed (AssumePod(p)) ----
		{upAssumed, "AssumePod(p)", schedcache.ErrPodAlreadyCached, upAssumed, "p"},
		{upAssumed, "AssumePod(pOther)", schedcache.ErrPodAlreadyCached, upAssumed, "p"},
		{upAssumed, "FinishBinding(p)", nil, upAssumed, "p"},
		{upAssumed, "ForgetPod(p)", nil, upAbsent, ""},
		{upAssumed, "ForgetPod(pOther)", schedcache.ErrPodNodeMismatch, upAssumed, "p"},
		{upAssumed, "ForgetPod(pNoNode)", schedcache.ErrPodNodeMismatch, upAssumed, "p"},
		{upAssumed, "AddPod(pNew)", nil, upAdded, "pNew"},     // PodInfo replaced
		{upAssumed, "AddPod(pOther)", nil, upAdded, "pOther"}, // moved to n2
		{upAssumed, "UpdatePod(p, pNew)", schedcache.ErrPodAssumed, upAssumed, "p"},
		{upAssumed, "RemovePod(p)", nil, upAbsent, ""},
		{upAssumed, "RemovePod(pNoNode)", nil, upAbsent, ""}, // empty node name tolerated
		{upAssumed, "RemovePod(pOther)", corrupt, upAssumed, "p"},
		{upAssumed, "RemovePod(pOtherUID)", schedcache.ErrPodNotFound, upAssumed, "p"},
		{upAssumed, "GetPod(p)", nil, upAssumed, "p"},
		{upAssumed, "IsAssumedPod(pOtherUID)", nil, upAssumed, "p"},

		// ---- from Added (AddPod(p)) ----
		{upAdded, "AssumePod(p)", schedcache.ErrPodAlreadyCached, upAdded, "p"},
		{upAdded, "AssumePod(pOther)", schedcache.ErrPodAlreadyCached, upAdded, "p"},
		{upAdded, "FinishBinding(p)", nil, upAdded, "p"},
		{upAdded, "ForgetPod(p)", schedcache.ErrPodNotAssumed, upAdded, "p"},
		{upAdded, "ForgetPod(pOther)", schedcache.ErrPodNodeMismatch, upAdded, "p"}, // mismatch checked first
		{upAdded, "AddPod(p)", schedcache.ErrPodAlreadyAdded, upAdded, "p"},
		{upAdded, "AddPod(pOther)", schedcache.ErrPodAlreadyAdded, upAdded, "p"},
		{upAdded, "UpdatePod(p, pNew)", nil, upAdded, "pNew"},
		{upAdded, "UpdatePod(p, p)", nil, upAdded, "p"},
		{upAdded, "UpdatePod(p, pOther)", corrupt, upAdded, "p"},
		{upAdded, "UpdatePod(p, pNoNode)", corrupt, upAdded, "p"},
		{upAdded, "UpdatePod(pOther, pNew)", schedcache.ErrPodNodeMismatch, upAdded, "p"}, // upstream: n2 has no such pod, nothing changes
		// UpdatePod(p, pOtherUID) renames the pod: key "u" leaves, "v" is
		// added (TestRejectUpdatePodRename).
		{upAdded, "RemovePod(p)", nil, upAbsent, ""},
		{upAdded, "RemovePod(pNoNode)", nil, upAbsent, ""},
		{upAdded, "RemovePod(pOther)", corrupt, upAdded, "p"},
		{upAdded, "GetPod(p)", nil, upAdded, "p"},
		{upAdded, "IsAssumedPod(p)", nil, upAdded, "p"},

		// ---- keys (1.1): empty UIDs and nil pods are refused before any state is touched ----
		{upAdded, "AssumePod(pNoUID)", schedcache.ErrEmptyUID, upAdded, "p"},
		{upAdded, "FinishBinding(pNoUID)", schedcache.ErrEmptyUID, upAdded, "p"},
		{upAdded, "ForgetPod(pNoUID)", schedcache.ErrEmptyUID, upAdded, "p"},
		{upAdded, "AddPod(pNoUID)", schedcache.ErrEmptyUID, upAdded, "p"},
		{upAdded, "UpdatePod(pNoUID, pNew)", schedcache.ErrEmptyUID, upAdded, "p"},
		{upAdded, "RemovePod(pNoUID)", schedcache.ErrEmptyUID, upAdded, "p"},
		{upAdded, "GetPod(pNoUID)", schedcache.ErrEmptyUID, upAdded, "p"},
		{upAdded, "IsAssumedPod(pNoUID)", schedcache.ErrEmptyUID, upAdded, "p"},
		{upAdded, "AssumePod(nil)", schedcache.ErrNilPod, upAdded, "p"},
		{upAdded, "AddPod(nil)", schedcache.ErrNilPod, upAdded, "p"},
		{upAdded, "UpdatePod(p, nil)", schedcache.ErrNilPod, upAdded, "p"},
		{upAdded, "UpdatePod(nil, p)", schedcache.ErrNilPod, upAdded, "p"},
		{upAdded, "RemovePod(nil)", schedcache.ErrNilPod, upAdded, "p"},
		{upAdded, "ForgetPod(nil)", schedcache.ErrNilPod, upAdded, "p"},
		{upAdded, "FinishBinding(nil)", schedcache.ErrNilPod, upAdded, "p"},
		{upAdded, "GetPod(nil)", schedcache.ErrNilPod, upAdded, "p"},
	}
	for _, tc := range tests {
		t.Run(tc.from.String()+"/"+tc.call, func(t *testing.T) {
			pods := upTransitionPods()
			c := upNew(t)
			for _, n := range []string{"n1", "n2"} {
				_, err := c.AddNode(upLog, upNode(n, nil))
				require.NoError(t, err)
			}
			prior := ""
			switch tc.from {
			case upAssumed:
				require.NoError(t, c.AssumePod(upLog, pods["p"]))
				prior = "p"
			case upAdded:
				require.NoError(t, c.AddPod(upLog, pods["p"]))
				prior = "p"
			}
			upRequirePodState(t, c, pods, tc.from, prior, "before")
			before := upCacheFP(t, c)

			err := upInvoke(t, c, pods, tc.call)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
			}
			var ce *schedcache.CorruptionError
			require.Equal(t, tc.wantErr == corrupt, errors.As(err, &ce), "*CorruptionError exactly for the corruption rows: %v", err)

			upRequirePodState(t, c, pods, tc.to, tc.stored, "after")
			if tc.to == tc.from && tc.stored == prior && !upChangesInPlace[tc.call] {
				require.Equal(t, before, upCacheFP(t, c), "the call must leave the cache unchanged")
			} else {
				require.NotEqual(t, before, upCacheFP(t, c), "the call must change the cache")
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Semantics 1.5: corruption is reported, not fatal, and changes nothing
// ---------------------------------------------------------------------------

func TestUpstreamCorruptionLeavesStateUnchanged(t *testing.T) {
	tests := []struct {
		name       string
		prior      string // "assume" or "add" p (uid u on n1)
		call       string
		op         string
		cachedNode string
		givenNode  string
	}{
		{name: "UpdatePod with the new pod on another node", prior: "add", call: "UpdatePod(p, pOther)", op: "UpdatePod", cachedNode: "n1", givenNode: "n2"},
		{name: "UpdatePod with old and new pod on another node", prior: "add", call: "UpdatePod(pOther, pOther)", op: "UpdatePod", cachedNode: "n1", givenNode: "n2"},
		{name: "UpdatePod with the new pod without node", prior: "add", call: "UpdatePod(p, pNoNode)", op: "UpdatePod", cachedNode: "n1", givenNode: ""},
		{name: "RemovePod of an added pod naming another node", prior: "add", call: "RemovePod(pOther)", op: "RemovePod", cachedNode: "n1", givenNode: "n2"},
		{name: "RemovePod of an assumed pod naming another node", prior: "assume", call: "RemovePod(pOther)", op: "RemovePod", cachedNode: "n1", givenNode: "n2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := upTransitionPods()
			c := upNew(t)
			for _, n := range []string{"n1", "n2"} {
				_, err := c.AddNode(upLog, upNode(n, nil))
				require.NoError(t, err)
			}
			if tc.prior == "assume" {
				require.NoError(t, c.AssumePod(upLog, pods["p"]))
			} else {
				require.NoError(t, c.AddPod(upLog, pods["p"]))
			}
			keep := schedcache.NewEmptySnapshot()
			require.NoError(t, c.UpdateSnapshot(upLog, keep))
			before := upCacheFP(t, c)
			keptFP := upSnapFP(keep)

			err := upInvoke(t, c, pods, tc.call)
			var ce *schedcache.CorruptionError
			require.True(t, errors.As(err, &ce), "want *CorruptionError, got %v", err)
			require.ErrorIs(t, err, schedcache.ErrCorrupted)
			require.Equal(t, tc.op, ce.Op)
			require.Equal(t, "u", ce.Key)
			require.Equal(t, tc.cachedNode, ce.CachedNode)
			require.Equal(t, tc.givenNode, ce.GivenNode)

			require.Equal(t, before, upCacheFP(t, c), "state unchanged (Dump, counts, snapshot)")
			snap := schedcache.NewEmptySnapshot()
			require.NoError(t, c.UpdateSnapshot(upLog, snap))
			require.Equal(t, keptFP, upSnapFP(snap), "UpdateSnapshot sees no change")
			require.NoError(t, c.Err(), "a corruption error does not fail the cache")

			// The cache keeps working: the pod can still be removed.
			require.NoError(t, c.RemovePod(upLog, pods["p"]))
			upRequireForgotten(t, c, pods["p"])
		})
	}
}

// ---------------------------------------------------------------------------
// Semantics 3.3 and 3.4: ghost nodes and pods for unknown nodes
// ---------------------------------------------------------------------------

func TestUpstreamGhostNode(t *testing.T) {
	n1 := upNode("n1", map[v1.ResourceName]string{v1.ResourceCPU: "2"})
	n2 := upNode("n2", nil)
	p := upBasePod("n1", "p", "100m", "1Ki", "", nil)
	pOnN2 := upBasePod("n2", "p", "100m", "1Ki", "", nil)

	// Every way a ghost's last pod can leave; the ghost leaves with it.
	tests := []struct {
		name   string
		assume bool   // p is assumed (else added)
		leave  string // the call that removes the last pod
	}{
		{name: "RemovePod of an added pod", leave: "RemovePod"},
		{name: "RemovePod of an assumed pod", assume: true, leave: "RemovePod"},
		{name: "ForgetPod", assume: true, leave: "ForgetPod"},
		{name: "AddPod moving the assumed pod away", assume: true, leave: "AddPod"},
		{name: "UpdatePod replaces the ghost by a fresh nodeless entry", leave: "UpdatePod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := upNew(t)
			for _, n := range []*v1.Node{n1, n2} {
				_, err := c.AddNode(upLog, n)
				require.NoError(t, err)
			}
			if tc.assume {
				require.NoError(t, c.AssumePod(upLog, p))
			} else {
				require.NoError(t, c.AddPod(upLog, p))
			}
			gen := upGetNode(t, c, "n1").Generation()

			require.NoError(t, c.RemoveNode(upLog, n1))
			// The ghost: counted by NodeCount, PodCount and Dump ...
			require.Equal(t, 2, c.NodeCount())
			count, err := c.PodCount()
			require.NoError(t, err)
			require.Equal(t, 1, count)
			ghost := upGetNode(t, c, "n1")
			require.Greater(t, ghost.Generation(), gen, "RemoveNode bumps the generation")
			upRequireNodeInfo(t, upWant{
				pods:        []*v1.Pod{p},
				requested:   upRes(100, 1024),
				nonZero:     upRes(100, 1024),
				allocatable: schedcache.Resource{MilliCPU: 2000}, // kept, invisible
			}, ghost, "ghost")
			d, err := c.Dump()
			require.NoError(t, err)
			require.Contains(t, d.Nodes, "n1")
			require.Nil(t, d.Nodes["n1"].Node())
			// ... but absent from snapshots; its pod is still cached.
			s := c.Snapshot()
			require.Equal(t, []string{"n2"}, upListNames(t, s))
			_, err = s.Get("n1")
			require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound)
			upRequireCached(t, c, p, tc.assume)

			// A second RemoveNode on the ghost bumps its generation again and
			// reports that the node is not in its zone.
			gen = ghost.Generation()
			require.ErrorIs(t, c.RemoveNode(upLog, n1), schedcache.ErrNodeNotInZone)
			require.Greater(t, upGetNode(t, c, "n1").Generation(), gen)
			require.Equal(t, 2, c.NodeCount())

			switch tc.leave {
			case "RemovePod":
				require.NoError(t, c.RemovePod(upLog, p))
			case "ForgetPod":
				require.NoError(t, c.ForgetPod(upLog, p))
			case "AddPod":
				require.NoError(t, c.AddPod(upLog, pOnN2))
				upRequireCached(t, c, pOnN2, false)
				require.Equal(t, []string{"p"}, upInfoNames(upGetNode(t, c, "n2").Pods()))
			case "UpdatePod":
				pNew := upBasePod("n1", "p", "300m", "1Ki", "", nil)
				require.NoError(t, c.UpdatePod(upLog, p, pNew))
				// The removal half deletes the ghost, the add half creates a
				// fresh nodeless entry: its Allocatable is gone.
				upRequireNodeInfo(t, upWant{
					pods:      []*v1.Pod{pNew},
					requested: upRes(300, 1024),
					nonZero:   upRes(300, 1024),
				}, upGetNode(t, c, "n1"), "nodeless entry after UpdatePod")
				require.Equal(t, 2, c.NodeCount())
				require.NoError(t, c.RemovePod(upLog, pNew))
			}
			// The ghost vanished with its last pod.
			upRequireNoEntry(t, c, "n1")
			require.Equal(t, 1, c.NodeCount())
			require.ErrorIs(t, c.RemoveNode(upLog, n1), schedcache.ErrNodeNotFound)
			require.Equal(t, []string{"n2"}, upListNames(t, c.Snapshot()))
		})
	}
}

func TestUpstreamGhostNodeExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Second
		n1 := upNode("n1", nil)
		p := upBasePod("n1", "p", "100m", "1Ki", "", nil)
		c := upStart(t, schedcache.WithTTL(ttl), schedcache.WithPeriod(time.Second))
		defer c.Close()
		start := time.Now()
		_, err := c.AddNode(upLog, n1)
		require.NoError(t, err)
		require.NoError(t, c.AssumePod(upLog, p))
		require.NoError(t, c.FinishBinding(upLog, p))
		require.NoError(t, c.RemoveNode(upLog, n1))
		require.Equal(t, 1, c.NodeCount(), "the ghost")

		upSleepUntil(start.Add(ttl + 2*time.Second))
		upRequireForgotten(t, c, p)
		upRequireNoEntry(t, c, "n1")
		require.Equal(t, 0, c.NodeCount())
	})
}

func TestUpstreamGhostNodeRevival(t *testing.T) {
	n1 := upNode("n1", nil)
	n2 := upNode("n2", nil)
	p := upBasePod("n1", "p", "100m", "1Ki", "", nil)
	n1v2 := upNode("n1", map[v1.ResourceName]string{v1.ResourceCPU: "4"})
	wantRevived := upWant{
		node:        n1v2,
		pods:        []*v1.Pod{p},
		requested:   upRes(100, 1024),
		nonZero:     upRes(100, 1024),
		allocatable: schedcache.Resource{MilliCPU: 4000},
	}
	setup := func(t *testing.T) *schedcache.Cache {
		c := upNew(t)
		for _, n := range []*v1.Node{n1, n2} {
			_, err := c.AddNode(upLog, n)
			require.NoError(t, err)
		}
		require.NoError(t, c.AddPod(upLog, p))
		require.NoError(t, c.RemoveNode(upLog, n1))
		return c
	}
	t.Run("AddNode", func(t *testing.T) {
		c := setup(t)
		ni, err := c.AddNode(upLog, n1v2)
		require.NoError(t, err)
		upRequireNodeInfo(t, wantRevived, ni, "AddNode result")
		s := c.Snapshot()
		require.Equal(t, []string{"n2", "n1"}, upListNames(t, s), "re-added at the end of its zone")
		got, err := s.Get("n1")
		require.NoError(t, err)
		upRequireNodeInfo(t, wantRevived, got, "snapshot entry")
		require.Equal(t, 2, c.NodeCount())
	})
	t.Run("UpdateNode with an unchanged zone is never inserted into the tree", func(t *testing.T) {
		// Semantics 3.2 quirk: Get finds the revived node, List does not.
		c := setup(t)
		ni, err := c.UpdateNode(upLog, n1, n1v2)
		require.NoError(t, err)
		upRequireNodeInfo(t, wantRevived, ni, "UpdateNode result")
		snap := schedcache.NewEmptySnapshot()
		require.NoError(t, c.UpdateSnapshot(upLog, snap))
		require.Equal(t, []string{"n2"}, upListNames(t, snap))
		got, err := snap.Get("n1")
		require.NoError(t, err)
		upRequireNodeInfo(t, wantRevived, got, "snapshot entry")
	})
}

func TestUpstreamPodsForUnknownNodes(t *testing.T) {
	p := upBasePod("unknown", "p", "100m", "1Ki", "", nil)
	q := upBasePod("unknown", "q", "200m", "1Ki", "", nil)
	c := upNew(t)
	require.NoError(t, c.AddPod(upLog, p))
	require.NoError(t, c.AssumePod(upLog, q))
	// A nodeless entry: counted, dumped, never in snapshots.
	require.Equal(t, 1, c.NodeCount())
	count, err := c.PodCount()
	require.NoError(t, err)
	require.Equal(t, 2, count)
	want := upWant{pods: []*v1.Pod{p, q}, requested: upRes(300, 2048), nonZero: upRes(300, 2048)}
	upRequireNodeInfo(t, want, upGetNode(t, c, "unknown"), "nodeless entry")
	s := c.Snapshot()
	require.Equal(t, 0, s.NumNodes())
	_, err = s.Get("unknown")
	require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound)

	// A later AddNode turns it into a real node that carries the pods.
	node := upNode("unknown", nil)
	_, err = c.AddNode(upLog, node)
	require.NoError(t, err)
	want.node = node
	got, err := c.Snapshot().Get("unknown")
	require.NoError(t, err)
	upRequireNodeInfo(t, want, got, "after AddNode")
	require.Equal(t, 1, c.NodeCount())
}

// ---------------------------------------------------------------------------
// Semantics 4.5 and 4.6: scalar keys are kept at 0; host ports are a set
// ---------------------------------------------------------------------------

func TestUpstreamScalarKeyKeptAtZero(t *testing.T) {
	node := upNode("n1", nil)
	p := upBasePod("n1", "p", "100m", "1Ki", "example.com/foo:2", nil)
	c := upNew(t)
	_, err := c.AddNode(upLog, node)
	require.NoError(t, err)

	require.NoError(t, c.AddPod(upLog, p))
	upRequireNodeInfo(t, upWant{
		node: node, pods: []*v1.Pod{p},
		requested: upRes(100, 1024).WithScalar("example.com/foo", 2), nonZero: upRes(100, 1024),
	}, upGetNode(t, c, "n1"), "after AddPod")

	require.NoError(t, c.RemovePod(upLog, p))
	for _, src := range []string{"GetNode", "snapshot"} {
		ni := upGetNode(t, c, "n1")
		if src == "snapshot" {
			ni, err = c.Snapshot().Get("n1")
			require.NoError(t, err)
		}
		upRequireNodeInfo(t, upWant{
			node:      node,
			requested: upRes(0, 0).WithScalar("example.com/foo", 0),
		}, ni, src+" after RemovePod")
		r := ni.Requested()
		require.True(t, r.HasScalar("example.com/foo"), "%s: the key stays", src)
		require.Equal(t, map[v1.ResourceName]int64{"example.com/foo": 0}, r.ScalarResources(), src)
		require.Equal(t, 1, r.NumScalars(), src)
		require.Equal(t, int64(0), r.AllowedPodNumber, src)
	}
}

func TestUpstreamHostPortsAreASet(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	node := upNode("n1", nil)
	web1 := upBasePod("n1", "web-1", "", "", "", []v1.ContainerPort{{HostPort: 8080}})
	web2 := upBasePod("n1", "web-2", "", "", "", []v1.ContainerPort{{HostPort: 8080, Protocol: "TCP", HostIP: "0.0.0.0"}})
	mixed := upBasePod("n1", "mixed", "", "", "", []v1.ContainerPort{
		{HostIP: "127.0.0.1", HostPort: 9090, Protocol: "UDP"},
		{ContainerPort: 80}, // hostPort 0: not a host port
	})
	mixed.Spec.InitContainers = []v1.Container{
		{Name: "sidecar", RestartPolicy: &always, Ports: []v1.ContainerPort{{HostIP: "10.0.0.1", HostPort: 7070}}},
		{Name: "init", Ports: []v1.ContainerPort{{HostPort: 6060}}}, // plain init containers are ignored
	}
	steps := []struct {
		do        string // "add" or "remove"
		pod       *v1.Pod
		wantPorts schedcache.HostPortInfo
		conflicts map[upHP]bool // HostPortConflict answers
	}{{
		do: "add", pod: web1,
		wantPorts: upPorts(upHP{"TCP", "0.0.0.0", 8080}),
		conflicts: map[upHP]bool{{"TCP", "", 8080}: true, {"TCP", "192.168.0.1", 8080}: true, {"UDP", "", 8080}: false},
	}, {
		do: "add", pod: web2, // the same (IP, protocol, port): the set does not change
		wantPorts: upPorts(upHP{"TCP", "0.0.0.0", 8080}),
	}, {
		do: "add", pod: mixed,
		wantPorts: upPorts(upHP{"TCP", "0.0.0.0", 8080}, upHP{"UDP", "127.0.0.1", 9090}, upHP{"TCP", "10.0.0.1", 7070}),
		conflicts: map[upHP]bool{
			{"UDP", "", 9090}: true, {"UDP", "127.0.0.1", 9090}: true, {"UDP", "127.0.0.2", 9090}: false,
			{"TCP", "127.0.0.1", 9090}: false, {"TCP", "", 6060}: false, {"TCP", "10.0.0.1", 7070}: true,
		},
	}, {
		do: "remove", pod: web1, // web-2 still uses 0.0.0.0/TCP/8080, but the entry is gone
		wantPorts: upPorts(upHP{"UDP", "127.0.0.1", 9090}, upHP{"TCP", "10.0.0.1", 7070}),
		conflicts: map[upHP]bool{{"TCP", "", 8080}: false, {"TCP", "0.0.0.0", 8080}: false},
	}, {
		do: "remove", pod: mixed, // IPs whose set empties are deleted
		wantPorts: upPorts(),
	}, {
		do: "add", pod: web1,
		wantPorts: upPorts(upHP{"TCP", "0.0.0.0", 8080}),
	}}

	c := upNew(t)
	_, err := c.AddNode(upLog, node)
	require.NoError(t, err)
	for i, s := range steps {
		switch s.do {
		case "add":
			require.NoError(t, c.AddPod(upLog, s.pod), "step %d", i)
		case "remove":
			require.NoError(t, c.RemovePod(upLog, s.pod), "step %d", i)
		}
		ni, err := c.Snapshot().Get("n1")
		require.NoError(t, err)
		require.Equal(t, s.wantPorts, ni.UsedPorts(), "step %d (%s %s)", i, s.do, s.pod.Name)
		require.Equal(t, s.wantPorts.Len(), ni.NumUsedPorts(), "step %d", i)
		for hp, want := range s.conflicts {
			require.Equal(t, want, ni.HostPortConflict(hp.ip, hp.protocol, hp.port), "step %d: conflict %+v", i, hp)
			require.Equal(t, want, ni.UsedPorts().CheckConflict(hp.ip, hp.protocol, hp.port), "step %d: CheckConflict %+v", i, hp)
		}
	}
}

// ---------------------------------------------------------------------------
// Node argument validation (schedcache deviations: typed errors, no panics)
// ---------------------------------------------------------------------------

func TestUpstreamNodeArgumentErrors(t *testing.T) {
	a := upNode("a", nil)
	b := upNode("b", nil)
	aZoned, bZoned := upZoneNode("a", "r", "z"), upZoneNode("b", "r", "z")
	tests := []struct {
		name    string
		call    func(c *schedcache.Cache) error
		wantErr error
	}{
		{"AddNode(nil)", func(c *schedcache.Cache) error { _, err := c.AddNode(upLog, nil); return err }, schedcache.ErrNilNode},
		// A nil old node with a zoned new node: upstream panics. (With a
		// zoneless one it is accepted: TestUpstreamNodeOperators.)
		{"UpdateNode(nil, aZoned)", func(c *schedcache.Cache) error { _, err := c.UpdateNode(upLog, nil, aZoned); return err }, schedcache.ErrNilNode},
		{"UpdateNode(a, nil)", func(c *schedcache.Cache) error { _, err := c.UpdateNode(upLog, a, nil); return err }, schedcache.ErrNilNode},
		// Old a, new b in another zone: upstream would unlist a, a live
		// node. (Other differing names: TestRejectUpdateNodeOtherName.)
		{"UpdateNode(a, bZoned)", func(c *schedcache.Cache) error { _, err := c.UpdateNode(upLog, a, bZoned); return err }, schedcache.ErrNodeNameMismatch},
		{"RemoveNode(nil)", func(c *schedcache.Cache) error { return c.RemoveNode(upLog, nil) }, schedcache.ErrNilNode},
		{"RemoveNode(b) never added", func(c *schedcache.Cache) error { return c.RemoveNode(upLog, b) }, schedcache.ErrNodeNotFound},
		{"GetNode(b) never added", func(c *schedcache.Cache) error { _, err := c.GetNode("b"); return err }, schedcache.ErrNodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := upNew(t)
			_, err := c.AddNode(upLog, a)
			require.NoError(t, err)
			before := upCacheFP(t, c)
			require.ErrorIs(t, tc.call(c), tc.wantErr)
			require.Equal(t, before, upCacheFP(t, c), "no change")
		})
	}
}
