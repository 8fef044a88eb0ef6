package fuzz

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// The universe of FuzzOperations: 4 UIDs, 4 node names (the empty name
// included: pods may be added to it and a node may carry it), 8 pod request
// shapes, 4 zone labellings.
var (
	opUIDs  = [4]string{"u0", "u1", "u2", "u3"}
	opNodes = [4]string{"n0", "n1", "n2", ""}
)

const maxOps = 256

// podShape is a pod request shape whose Requested and NonZeroRequested
// contributions (semantics 4.2 and 4.3) are worked out by hand.
type podShape struct {
	req   req
	build func(spec *v1.PodSpec, status *v1.PodStatus)
}

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

var podShapes = [8]podShape{
	{req{0, 0, 100, 200 << 20}, func(s *v1.PodSpec, _ *v1.PodStatus) { s.Containers = []v1.Container{{Name: "c"}} }},
	{req{250, 64 << 20, 250, 64 << 20}, func(s *v1.PodSpec, _ *v1.PodStatus) {
		s.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "64Mi")}}}
	}},
	// Two containers: sums.
	{req{1500, 1536 << 20, 1500, 1536 << 20}, func(s *v1.PodSpec, _ *v1.PodStatus) {
		s.Containers = []v1.Container{
			{Name: "a", Resources: v1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi")}},
			{Name: "b", Resources: v1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "512Mi")}},
		}
	}},
	// A plain init container larger than the containers (max), plus
	// overhead: cpu max(100m, 2) + 50m, memory max(10Mi, 0) + 1Mi.
	{req{2050, 11 << 20, 2050, 201 << 20}, func(s *v1.PodSpec, _ *v1.PodStatus) {
		s.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "10Mi")}}}
		s.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Requests: rl("cpu", "2")}}}
		s.Overhead = rl("cpu", "50m", "memory", "1Mi")
	}},
	// Status resources (in-place resize): per resource the max of spec
	// requests, status requests and allocated: cpu max(500m, 300m, 200m),
	// memory max(200Mi, 50Mi, 150Mi).
	{req{500, 200 << 20, 500, 200 << 20}, func(s *v1.PodSpec, st *v1.PodStatus) { resized(s, st, false) }},
	// The same with an Infeasible resize: spec requests are left out, cpu
	// max(300m, 200m), memory max(50Mi, 150Mi).
	{req{300, 150 << 20, 300, 150 << 20}, func(s *v1.PodSpec, st *v1.PodStatus) { resized(s, st, true) }},
	// Pod-level requests override the container sums for cpu and memory;
	// overhead is added: cpu 1 + 10m, memory 1Gi.
	{req{1010, 1 << 30, 1010, 1 << 30}, func(s *v1.PodSpec, _ *v1.PodStatus) {
		s.Containers = []v1.Container{
			{Name: "a", Resources: v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "10Mi")}},
			{Name: "b", Resources: v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "10Mi")}},
		}
		s.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi")}
		s.Overhead = rl("cpu", "10m")
	}},
	// A sidecar then a plain init container: sum = 200m+300m / 100Mi+50Mi;
	// init candidate = plain + sidecars = 1000m+300m / 300Mi+50Mi; the max
	// of the two: 1300m, 350Mi.
	{req{1300, 350 << 20, 1300, 350 << 20}, func(s *v1.PodSpec, _ *v1.PodStatus) {
		always := v1.ContainerRestartPolicyAlways
		s.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: rl("cpu", "200m", "memory", "100Mi")}}}
		s.InitContainers = []v1.Container{
			{Name: "s", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: rl("cpu", "300m", "memory", "50Mi")}},
			{Name: "i", Resources: v1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "300Mi")}},
		}
	}},
}

func resized(s *v1.PodSpec, st *v1.PodStatus, infeasible bool) {
	s.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "200Mi")}}}
	st.ContainerStatuses = []v1.ContainerStatus{{
		Name:               "c",
		Resources:          &v1.ResourceRequirements{Requests: rl("cpu", "300m", "memory", "50Mi")},
		AllocatedResources: rl("cpu", "200m", "memory", "150Mi"),
	}}
	if infeasible {
		st.Conditions = []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonInfeasible}}
	}
}

var zoneLabels = [4]map[string]string{
	nil,
	{"topology.kubernetes.io/zone": "a"},
	{"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "b"},
	{"failure-domain.beta.kubernetes.io/zone": "a"}, // same zone key as [1]
}

// freshPod returns a new pod object (the model compares stored pointers).
func freshPod(uid, node string, shape int) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid)},
		Spec:       v1.PodSpec{NodeName: node},
	}
	podShapes[shape].build(&p.Spec, &p.Status)
	return p
}

func freshNode(name string, zone int) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: zoneLabels[zone]},
		Status:     v1.NodeStatus{Allocatable: rl("cpu", "8", "memory", "32Gi", "pods", "110")},
	}
}

func withNode(p *v1.Pod, node string) *v1.Pod {
	q := p.DeepCopy()
	q.Spec.NodeName = node
	return q
}

// opsObserve, if set, sees the trace and the final model of each run
// (tests of the harness itself).
var opsObserve func(trace []string, m *model)

// opsRun applies the operations encoded in data to a cache and to the
// model. data[0] picks the shard count; then each byte pair (k, a) is one
// operation: k%10 the kind and k/10 extra choices; a&3 the UID, a>>2&3 the
// node name, a>>4&3 the zone labelling or the pod shape (plus 4 when bit 2
// of k/10 is set), a>>6 the argument mode.
func opsRun(data []byte) error {
	shards := 1
	if len(data) > 0 {
		shards += int(data[0]) % 3
		data = data[1:]
	}
	c, err := schedcache.New(context.Background(), schedcache.WithShards(shards))
	if err != nil {
		return err
	}
	defer c.Close()
	m := newModel()
	logger := klog.Background()
	var trace []string
	fail := func(format string, args ...any) error {
		return fmt.Errorf("after %d ops (shards=%d):\n  %s\n%s", len(trace), shards, strings.Join(trace, "\n  "), fmt.Sprintf(format, args...))
	}
	for i := 0; i+1 < len(data) && i/2 < maxOps; i += 2 {
		k, a := data[i], data[i+1]
		kind, extra := k%10, k/10
		uid, node := opUIDs[a&3], opNodes[a>>2&3]
		zone, mode := int(a>>4&3), a>>6
		shape := zone + 4*int(extra>>2&1)
		stored := func() *v1.Pod {
			if s := m.pods[uid]; s != nil {
				return s.pod
			}
			return freshPod(uid, node, shape)
		}
		storedNode := func(name string) *v1.Node {
			if e := m.entries[name]; e != nil && e.node != nil {
				return e.node
			}
			return freshNode(name, int(mode))
		}
		var got, want error
		var desc string
		switch kind {
		case 0:
			p := freshPod(uid, node, shape)
			desc = fmt.Sprintf("AssumePod(%s@%q shape %d)", uid, node, shape)
			got, want = c.AssumePod(logger, p), m.assume(p, podShapes[shape].req)
		case 1:
			p := stored()
			desc = fmt.Sprintf("FinishBinding(%s@%q)", uid, p.Spec.NodeName)
			got = c.FinishBinding(logger, p)
		case 2:
			p := stored()
			switch mode {
			case 2:
				p = withNode(p, node)
			case 3:
				p = freshPod(uid, node, shape)
			}
			desc = fmt.Sprintf("ForgetPod(%s@%q)", uid, p.Spec.NodeName)
			got, want = c.ForgetPod(logger, p), m.forget(p)
		case 3, 9:
			n := node
			if s := m.pods[uid]; s != nil && mode < 2 {
				n = s.pod.Spec.NodeName
			}
			p := freshPod(uid, n, shape)
			desc = fmt.Sprintf("AddPod(%s@%q shape %d)", uid, n, shape)
			got, want = c.AddPod(logger, p), m.add(p, podShapes[shape].req)
		case 4:
			old := stored()
			if mode == 3 {
				old = freshPod(uid, node, 0)
			}
			n := old.Spec.NodeName
			if mode == 2 {
				n = node
			}
			newUID := uid
			if extra%4 == 3 {
				newUID = opUIDs[(a+1)&3]
			}
			p := freshPod(newUID, n, shape)
			desc = fmt.Sprintf("UpdatePod(%s@%q -> %s@%q shape %d)", uid, old.Spec.NodeName, newUID, n, shape)
			got, want = c.UpdatePod(logger, old, p), m.update(old, p, podShapes[shape].req)
		case 5:
			p := stored()
			switch mode {
			case 2:
				p = withNode(p, "")
			case 3:
				p = freshPod(uid, node, shape)
			}
			desc = fmt.Sprintf("RemovePod(%s@%q)", uid, p.Spec.NodeName)
			got, want = c.RemovePod(logger, p), m.remove(p)
		case 6:
			n := freshNode(node, zone)
			desc = fmt.Sprintf("AddNode(%q zone %d)", node, zone)
			_, got = c.AddNode(logger, n)
			m.addNode(n)
		case 7:
			old := storedNode(node)
			if mode == 3 {
				old = freshNode(node, int(extra%4))
				if extra%8 >= 4 {
					old = nil
				}
			}
			name := node
			if mode == 2 && extra%2 == 1 {
				name = opNodes[(a>>2+1)&3]
			}
			n := freshNode(name, zone)
			desc = fmt.Sprintf("UpdateNode(%s -> %q zone %d)", describeNode(old), name, zone)
			_, got = c.UpdateNode(logger, old, n)
			want = m.updateNode(old, n)
		case 8:
			n := storedNode(node)
			if mode >= 2 {
				n = freshNode(node, zone)
			}
			desc = fmt.Sprintf("RemoveNode(%s)", describeNode(n))
			got, want = c.RemoveNode(logger, n), m.removeNode(n)
		}
		trace = append(trace, fmt.Sprintf("%s -> %v", desc, errClass(got)))
		if errClass(got) != errClass(want) {
			return fail("error: got %v, want %v", got, want)
		}
		if err := compare(c, m); err != nil {
			return fail("%v", err)
		}
	}
	if opsObserve != nil {
		opsObserve(trace, m)
	}
	if err := compareDump(c, m); err != nil {
		return fail("%v", err)
	}
	if err := c.Err(); err != nil {
		return fail("cache failed: %v", err)
	}
	return nil
}

func describeNode(n *v1.Node) string {
	if n == nil {
		return "nil"
	}
	return fmt.Sprintf("%q zone %q", n.Name, zoneKey(n))
}

// compare checks every observable of the latest snapshot against m.
func compare(c *schedcache.Cache, m *model) error {
	snap := c.Snapshot()
	if n, _ := c.PodCount(); n != len(m.pods) || snap.PodCount() != len(m.pods) {
		return fmt.Errorf("PodCount %d (snapshot %d), want %d", n, snap.PodCount(), len(m.pods))
	}
	if n := c.NodeCount(); n != len(m.entries) {
		return fmt.Errorf("NodeCount %d, want %d", n, len(m.entries))
	}
	for _, uid := range opUIDs {
		probe := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
		got, err := c.GetPod(probe)
		assumed, aerr := c.IsAssumedPod(probe)
		if aerr != nil {
			return fmt.Errorf("IsAssumedPod(%s): %v", uid, aerr)
		}
		s := m.pods[uid]
		switch {
		case s == nil && !errors.Is(err, schedcache.ErrPodNotFound):
			return fmt.Errorf("GetPod(%s) = %v, %v; want ErrPodNotFound", uid, got, err)
		case s == nil && assumed:
			return fmt.Errorf("IsAssumedPod(%s) of an absent pod", uid)
		case s != nil && (err != nil || got != s.pod):
			return fmt.Errorf("GetPod(%s) = %p, %v; want the stored %p", uid, got, err, s.pod)
		case s != nil && assumed != s.assumed:
			return fmt.Errorf("IsAssumedPod(%s) = %v, want %v", uid, assumed, s.assumed)
		}
	}
	var list []string
	snap.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		list = append(list, ni.Node().Name)
		return true
	})
	want := m.list()
	if !slices.Equal(list, want) {
		return fmt.Errorf("node list %q, want %q (zones %q)", list, want, m.tree.Zones())
	}
	if snap.NumNodes() != len(want) {
		return fmt.Errorf("NumNodes %d, want %d", snap.NumNodes(), len(want))
	}
	if wantErr := len(want) != m.tree.Count(); (snap.Err() != nil) != wantErr {
		return fmt.Errorf("snapshot Err() = %v, want an error: %v (list %d, tree %d)", snap.Err(), wantErr, len(want), m.tree.Count())
	}
	for _, name := range opNodes {
		e := m.entries[name]
		ni, err := snap.Get(name)
		if e == nil || e.node == nil {
			if !errors.Is(err, schedcache.ErrNodeInfoNotFound) {
				return fmt.Errorf("snapshot Get(%q) = %v, %v; want ErrNodeInfoNotFound", name, ni, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("snapshot Get(%q): %v", name, err)
		}
		if err := compareEntry("snapshot node "+name, ni, e); err != nil {
			return err
		}
	}
	return nil
}

func compareEntry(what string, ni *nodeinfo.NodeInfo, e *mEntry) error {
	rq, nz := ni.Requested(), ni.NonZeroRequested()
	got := req{rq.MilliCPU, rq.Memory, nz.MilliCPU, nz.Memory}
	if ni.Node() != e.node || ni.NumPods() != e.pods || got != e.req {
		return fmt.Errorf("%s: node %p pods %d requested/non-zero %+v; want node %p pods %d %+v",
			what, ni.Node(), ni.NumPods(), got, e.node, e.pods, e.req)
	}
	return nil
}

// compareDump checks the entries, ghosts and nodeless ones included, and
// the assumed set.
func compareDump(c *schedcache.Cache, m *model) error {
	d, err := c.Dump()
	if err != nil {
		return fmt.Errorf("Dump: %v", err)
	}
	if len(d.Nodes) != len(m.entries) {
		return fmt.Errorf("Dump has %d entries, want %d", len(d.Nodes), len(m.entries))
	}
	for name, e := range m.entries {
		ni := d.Nodes[name]
		if ni == nil {
			return fmt.Errorf("Dump lacks entry %q", name)
		}
		if err := compareEntry(fmt.Sprintf("Dump entry %q", name), ni, e); err != nil {
			return err
		}
		gn, err := c.GetNode(name)
		if err != nil || gn.NumPods() != e.pods {
			return fmt.Errorf("GetNode(%q) = %v, %v", name, gn, err)
		}
	}
	for uid, s := range m.pods {
		if _, ok := d.AssumedPods[uid]; ok != s.assumed {
			return fmt.Errorf("Dump.AssumedPods[%s] = %v, want %v", uid, ok, s.assumed)
		}
	}
	if len(d.AssumedPods) > len(m.pods) {
		return fmt.Errorf("Dump.AssumedPods %v has absent pods", d.AssumedPods)
	}
	return nil
}

// within runs body on a goroutine and fails t if it panics or takes longer
// than d; a hang is reported with every goroutine's stack.
func within(t *testing.T, d time.Duration, body func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				buf := make([]byte, 64<<10)
				done <- fmt.Errorf("panic: %v\n%s", r, buf[:runtime.Stack(buf, false)])
			}
		}()
		done <- body()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-timer.C:
		buf := make([]byte, 1<<20)
		t.Fatalf("no result after %v; goroutines:\n%s", d, buf[:runtime.Stack(buf, true)])
	}
}

// Operation kinds of the FuzzOperations encoding (k%10).
const (
	kAssume = iota
	kFinish
	kForget
	kAdd
	kUpdate
	kRemove
	kAddNode
	kUpdateNode
	kRemoveNode
)

// op encodes one operation: kind plus 10*extra, then the argument byte;
// shape is a pod shape (0-7) or a zone labelling (0-3).
func op(kind, extra, uid, node, shape, mode int) []byte {
	if shape >= 4 {
		extra |= 4
		shape &= 3
	}
	return []byte{byte(kind + 10*extra), byte(uid | node<<2 | shape<<4 | mode<<6)}
}

func opsSeed(shards byte, ops ...[]byte) []byte {
	return append([]byte{shards}, slices.Concat(ops...)...)
}

// FuzzOperations: the cache and the model agree after every operation.
func FuzzOperations(f *testing.F) {
	const n0, n1, n2, nEmpty = 0, 1, 2, 3
	f.Add([]byte{})
	// Pod life cycle on one node: assume, finish, confirm, update, forget
	// (not assumed; then naming another node: the mismatch is checked first),
	// remove.
	f.Add(opsSeed(0,
		op(kAddNode, 0, 0, n0, 1, 0),
		op(kAssume, 0, 0, n0, 1, 0), op(kFinish, 0, 0, 0, 0, 0), op(kAdd, 0, 0, 0, 2, 0),
		op(kUpdate, 0, 0, 0, 3, 0), op(kForget, 0, 0, 0, 0, 0), op(kForget, 0, 0, n1, 0, 2),
		op(kRemove, 0, 0, 0, 0, 0)))
	// Zone interleaving: three zones, a zone move, remove and re-add.
	f.Add(opsSeed(1,
		op(kAddNode, 0, 0, n0, 1, 0), op(kAddNode, 0, 0, n1, 2, 0), op(kAddNode, 0, 0, n2, 1, 0),
		op(kAddNode, 0, 0, nEmpty, 0, 0), op(kUpdateNode, 0, 0, n0, 2, 0), op(kRemoveNode, 0, 0, n1, 0, 0),
		op(kAddNode, 0, 0, n1, 2, 0), op(kUpdateNode, 0, 0, n2, 3, 0)))
	// Ghost node: remove a node holding pods, then revive it.
	f.Add(opsSeed(2,
		op(kAddNode, 0, 0, n0, 1, 0), op(kAdd, 0, 0, n0, 1, 0), op(kAssume, 0, 1, n0, 2, 0),
		op(kRemoveNode, 0, 0, n0, 0, 0), op(kFinish, 0, 1, 0, 0, 0), op(kAddNode, 0, 0, n0, 2, 0),
		op(kRemove, 0, 0, 0, 0, 0), op(kForget, 0, 1, 0, 0, 0), op(kRemoveNode, 0, 0, n0, 0, 0)))
	// Assumed pod confirmed on another node; corrupting update and remove.
	f.Add(opsSeed(0,
		op(kAddNode, 0, 0, n0, 0, 0), op(kAddNode, 0, 0, n1, 1, 0), op(kAssume, 0, 2, n0, 3, 0),
		op(kAdd, 0, 2, n1, 1, 2), op(kForget, 0, 2, 0, 0, 0), op(kUpdate, 0, 2, 0, 2, 0),
		op(kUpdate, 0, 2, n0, 0, 2), op(kUpdate, 3, 2, 0, 0, 0), op(kRemove, 0, 2, n0, 0, 3),
		op(kRemove, 0, 2, 0, 0, 2)))
	// Pods first, then UpdateNode with the same zone: Get finds the node,
	// the list does not (semantics 3.2); a zone change lists it.
	f.Add(opsSeed(1,
		op(kAdd, 0, 0, n2, 0, 2), op(kUpdateNode, 0, 0, n2, 0, 0), op(kAddNode, 0, 0, n0, 0, 0),
		op(kUpdateNode, 0, 0, n2, 1, 0), op(kRemove, 0, 0, 0, 0, 0)))
	// AddNode twice with different zones lists the node twice; RemoveNode
	// with stale labels fails with ErrNodeNotInZone.
	f.Add(opsSeed(2,
		op(kAddNode, 0, 0, n1, 1, 0), op(kAddNode, 0, 0, n1, 2, 0), op(kRemoveNode, 0, 0, n1, 0, 2),
		op(kAddNode, 0, 0, n1, 1, 0), op(kRemoveNode, 0, 0, n1, 1, 2), op(kRemoveNode, 0, 0, n1, 2, 2)))
	// The empty node name: accepted by AssumePod (the nodeless entry "",
	// as upstream), AddPod and AddNode; UpdateNode with another name or a
	// nil old node.
	f.Add(opsSeed(0,
		op(kAssume, 0, 0, nEmpty, 0, 0), op(kAdd, 0, 0, nEmpty, 1, 2), op(kAddNode, 0, 0, nEmpty, 1, 0),
		op(kUpdate, 0, 0, 0, 2, 0), op(kUpdateNode, 1, 0, nEmpty, 2, 2), op(kUpdateNode, 4, 0, nEmpty, 0, 3),
		op(kRemove, 0, 0, 0, 0, 2), op(kRemoveNode, 0, 0, nEmpty, 0, 0)))
	// Every request shape: status resources, an Infeasible resize,
	// pod-level requests, a sidecar.
	f.Add(opsSeed(1,
		op(kAddNode, 0, 0, n0, 1, 0), op(kAddNode, 0, 0, n1, 2, 0),
		op(kAssume, 0, 0, n0, 4, 0), op(kAdd, 0, 1, n0, 5, 2), op(kAdd, 0, 2, n1, 6, 2), op(kAssume, 0, 3, n1, 7, 0),
		op(kUpdate, 0, 1, 0, 7, 0), op(kAdd, 0, 0, n1, 6, 2), op(kUpdate, 0, 2, 0, 4, 0), op(kAdd, 0, 3, n1, 5, 0),
		op(kRemove, 0, 0, 0, 0, 0), op(kRemove, 0, 1, 0, 0, 0), op(kRemove, 0, 2, 0, 0, 2), op(kRemove, 0, 3, 0, 0, 0)))
	f.Fuzz(func(t *testing.T, data []byte) {
		within(t, 20*time.Second, func() error { return opsRun(data) })
	})
}
