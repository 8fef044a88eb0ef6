package fuzz

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
)

// bytesReader hands out the fuzz input a byte at a time, then zeros.
type bytesReader struct {
	data []byte
	i    int
}

func (r *bytesReader) byte() byte {
	if r.i >= len(r.data) {
		r.i++
		return 0
	}
	b := r.data[r.i]
	r.i++
	return b
}

func (r *bytesReader) done() bool { return r.i >= len(r.data) }

func (r *bytesReader) pick(n int) int { return int(r.byte()) % n }

// pickOf returns one element of choices.
func pickOf[T any](r *bytesReader, choices ...T) T { return choices[r.pick(len(choices))] }

var (
	oddQuantities = []string{"0", "1", "-5", "-1m", "100m", "1n", "1e18", "9223372036854775807",
		"-9223372036854775808", "18446744073709551616", "1Ei", "8Ei", "1e300", "999999999999999999999999999999",
		"-0", "123456789123456789m", "9.5e18", "-1e18", "2Gi", "250m"}
	oddResourceNames = []v1.ResourceName{"cpu", "memory", "ephemeral-storage", "pods", "example.com/gpu",
		"hugepages-2Mi", "kubernetes.io/x", "attachable-volumes-aws", "requests.example.com/x", "invalid", "",
		"nvidia.com/gpu", "hugepages-", "a/b/c"}
	oddUIDs      = []types.UID{"", "a", "b", "c"}
	oddNodeNames = []string{"", "n0", "n1", "n2"}
)

func (r *bytesReader) quantity() resource.Quantity {
	return resource.MustParse(pickOf(r, oddQuantities...))
}

// resourceList returns nil, an empty list, or up to 4 odd entries.
func (r *bytesReader) resourceList() v1.ResourceList {
	n := r.pick(6)
	switch n {
	case 0:
		return nil
	case 1:
		return v1.ResourceList{}
	}
	l := v1.ResourceList{}
	for range n - 1 {
		l[pickOf(r, oddResourceNames...)] = r.quantity()
	}
	return l
}

func (r *bytesReader) ports() []v1.ContainerPort {
	n := r.pick(4)
	if n == 0 {
		return nil
	}
	ps := make([]v1.ContainerPort, n)
	for i := range ps {
		ps[i] = v1.ContainerPort{
			HostPort:      pickOf[int32](r, 0, -1, 80, 80, 65536, math.MaxInt32, math.MinInt32),
			ContainerPort: pickOf[int32](r, 0, 80, -1),
			Protocol:      pickOf[v1.Protocol](r, "", "TCP", "UDP", "SCTP", "bogus"),
			HostIP:        pickOf(r, "", "0.0.0.0", "::", "10.0.0.1", "not-an-ip"),
		}
	}
	return ps
}

func (r *bytesReader) restartPolicy() *v1.ContainerRestartPolicy {
	switch r.pick(6) {
	case 0, 1:
		return nil
	case 2:
		p := v1.ContainerRestartPolicyAlways
		return &p
	}
	p := pickOf[v1.ContainerRestartPolicy](r, "OnFailure", "Never", "", "bogus")
	return &p
}

func (r *bytesReader) containers(init bool) []v1.Container {
	n := r.pick(5)
	switch n {
	case 0:
		return nil
	case 1:
		return []v1.Container{}
	}
	cs := make([]v1.Container, n-1)
	for i := range cs {
		cs[i] = v1.Container{
			Name:      pickOf(r, "", "c", "c", "d"), // duplicates on purpose
			Resources: v1.ResourceRequirements{Requests: r.resourceList(), Limits: r.resourceList()},
			Ports:     r.ports(),
		}
		if init || r.pick(4) == 0 {
			cs[i].RestartPolicy = r.restartPolicy()
		}
	}
	return cs
}

func (r *bytesReader) containerStatuses(cs []v1.Container) []v1.ContainerStatus {
	if len(cs) == 0 || r.pick(3) == 0 {
		return nil
	}
	var out []v1.ContainerStatus
	for _, c := range cs {
		if r.pick(3) == 0 {
			continue
		}
		s := v1.ContainerStatus{Name: c.Name, AllocatedResources: r.resourceList()}
		if r.pick(2) == 0 {
			s.Name = pickOf(r, "", "c", "zz")
		}
		if r.pick(3) > 0 {
			s.Resources = &v1.ResourceRequirements{Requests: r.resourceList(), Limits: r.resourceList()}
		}
		out = append(out, s)
	}
	return out
}

func (r *bytesReader) affinity() *v1.Affinity {
	sel := func() *metav1.LabelSelector {
		switch r.pick(3) {
		case 0:
			return nil
		case 1:
			return &metav1.LabelSelector{}
		}
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "", Operator: "bogus"}}}
	}
	terms := func() []v1.PodAffinityTerm {
		switch r.pick(3) {
		case 0:
			return nil
		case 1:
			return []v1.PodAffinityTerm{}
		}
		return []v1.PodAffinityTerm{{LabelSelector: sel(), TopologyKey: pickOf(r, "", "kubernetes.io/hostname")},
			{NamespaceSelector: sel()}}
	}
	switch r.pick(8) {
	case 0, 1:
		return nil
	case 2:
		return &v1.Affinity{}
	case 3:
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{}}}
	case 4:
		return &v1.Affinity{PodAffinity: &v1.PodAffinity{}}
	case 5:
		return &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{}}
	case 6:
		return &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms(),
			PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: -1}}}}
	}
	return &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms()},
		PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms()}}
}

func (r *bytesReader) volumes() []v1.Volume {
	n := r.pick(4)
	if n == 0 {
		return nil
	}
	vs := make([]v1.Volume, n)
	for i := range vs {
		switch r.pick(4) {
		case 0: // no source at all
		case 1:
			vs[i].PersistentVolumeClaim = &v1.PersistentVolumeClaimVolumeSource{ClaimName: pickOf(r, "", "claim", "claim")}
		case 2:
			vs[i].Ephemeral = &v1.EphemeralVolumeSource{}
		default:
			vs[i].EmptyDir = &v1.EmptyDirVolumeSource{}
		}
	}
	return vs
}

// pod decodes a malformed pod (nil about one time in 16).
func (r *bytesReader) pod() *v1.Pod {
	if r.pick(16) == 0 {
		return nil
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pickOf(r, "", "p"), Namespace: pickOf(r, "", "ns"), UID: pickOf(r, oddUIDs...)},
		Spec: v1.PodSpec{
			NodeName:       pickOf(r, oddNodeNames...),
			Containers:     r.containers(false),
			InitContainers: r.containers(true),
			Affinity:       r.affinity(),
			Volumes:        r.volumes(),
		},
	}
	if r.pick(3) == 0 {
		p.Spec.Overhead = r.resourceList()
	}
	if r.pick(3) == 0 {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: r.resourceList(), Limits: r.resourceList()}
	}
	p.Status.ContainerStatuses = r.containerStatuses(p.Spec.Containers)
	p.Status.InitContainerStatuses = r.containerStatuses(p.Spec.InitContainers)
	if r.pick(4) == 0 {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodResizePending, Reason: pickOf(r, "Infeasible", "Deferred", "")}}
	}
	return p
}

// node decodes a malformed node (nil about one time in 16).
func (r *bytesReader) node() *v1.Node {
	if r.pick(16) == 0 {
		return nil
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: pickOf(r, oddNodeNames...)}}
	switch r.pick(5) {
	case 0:
	case 1:
		n.Labels = map[string]string{}
	case 2:
		n.Labels = map[string]string{"topology.kubernetes.io/zone": pickOf(r, "", "a", "b")}
	case 3:
		n.Labels = map[string]string{"failure-domain.beta.kubernetes.io/zone": "", "topology.kubernetes.io/region": pickOf(r, "", "r")}
	default:
		n.Labels = map[string]string{"failure-domain.beta.kubernetes.io/region": "r", "failure-domain.beta.kubernetes.io/zone": "a"}
	}
	n.Status.Allocatable = r.resourceList()
	n.Status.Capacity = r.resourceList()
	if k := r.pick(4); k > 0 {
		for range k - 1 {
			img := v1.ContainerImage{SizeBytes: pickOf[int64](r, -1, 0, 100, math.MaxInt64, math.MinInt64)}
			switch r.pick(3) {
			case 0:
			case 1:
				img.Names = []string{}
			default:
				img.Names = []string{pickOf(r, "", "img"), pickOf(r, "img", "img2")}
			}
			n.Status.Images = append(n.Status.Images, img)
		}
	}
	return n
}

// checkErr fails unless err is nil or matches an exported sentinel other
// than ErrFailed (which would mean an internal panic or invariant breach).
func checkErr(method string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, schedcache.ErrFailed) {
		return fmt.Errorf("%s: the cache failed: %v", method, err)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return nil
		}
	}
	return fmt.Errorf("%s returned an untyped error %T: %v", method, err, err)
}

// checkAggregates checks the invariants of a snapshot (semantics 7): every
// listed node's Requested (cpu, memory, ephemeral storage, scalars) and
// NonZeroRequested equal the sums over its pods of nodeinfo.NewPodInfo on
// the stored pod (two's-complement sums: totals wrap, as the node's do),
// its PVC reference counts match its pods' claims, every pod it holds is in
// the pod map with the same object, and PodCount equals the number of pods
// reachable via RangePods.
func checkAggregates(snap *schedcache.Snapshot) error {
	var err error
	snap.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		var cpu, mem, eph, nzCPU, nzMem int64
		scalars := map[v1.ResourceName]int64{}
		pvcs := map[string]int{}
		pods := ni.Pods()
		if len(pods) != ni.NumPods() {
			err = fmt.Errorf("node %q: %d pods, NumPods %d", ni.NodeName(), len(pods), ni.NumPods())
			return false
		}
		for _, pi := range pods {
			fresh, perr := nodeinfo.NewPodInfo(pi.Pod())
			if perr != nil {
				err = fmt.Errorf("node %q holds pod %v with no PodInfo: %v", ni.NodeName(), pi.Key(), perr)
				return false
			}
			r := fresh.Requests()
			cpu += r.MilliCPU
			mem += r.Memory
			eph += r.EphemeralStorage
			for _, s := range r.Scalars() {
				scalars[s.Name] += s.Value
			}
			nzCPU += fresh.NonZeroCPU()
			nzMem += fresh.NonZeroMemory()
			for _, k := range fresh.PVCKeys() {
				pvcs[k]++
			}
			if e, ok := snap.Pod(pi.Key()); !ok || e.Pod != pi.Pod() {
				err = fmt.Errorf("node %q holds pod %s that the pod map does not (or with another object)", ni.NodeName(), pi.Key())
				return false
			}
		}
		req := ni.Requested()
		if req.MilliCPU != cpu || req.Memory != mem || req.EphemeralStorage != eph {
			err = fmt.Errorf("node %q: Requested cpu %d mem %d eph %d, want the sum of its pods' requests %d %d %d",
				ni.NodeName(), req.MilliCPU, req.Memory, req.EphemeralStorage, cpu, mem, eph)
			return false
		}
		if nz := ni.NonZeroRequested(); nz.MilliCPU != nzCPU || nz.Memory != nzMem {
			err = fmt.Errorf("node %q: NonZeroRequested cpu %d mem %d, want the sum of its pods' %d %d",
				ni.NodeName(), nz.MilliCPU, nz.Memory, nzCPU, nzMem)
			return false
		}
		if got := ni.PVCRefCounts(); !maps.Equal(got, pvcs) {
			err = fmt.Errorf("node %q: PVCRefCounts %v, want %v", ni.NodeName(), got, pvcs)
			return false
		}
		for name, v := range scalars {
			if req.Scalar(name) != v {
				err = fmt.Errorf("node %q: Requested %s = %d, want %d", ni.NodeName(), name, req.Scalar(name), v)
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	n := 0
	snap.RangePods(func(string, schedcacheEntry) bool { n++; return true })
	if n != snap.PodCount() {
		return fmt.Errorf("PodCount %d, but RangePods reaches %d pods", snap.PodCount(), n)
	}
	return nil
}

// malformedObserve, if set, sees how many pods were stored at the end of a
// run and the calls made (tests of the harness itself).
var malformedObserve func(stored []*v1.Pod, trace []string)

// malformedRun feeds the decoded objects into every public method.
func malformedRun(data []byte) (err error) {
	r := &bytesReader{data: data}
	// The last byte (also part of the call stream) picks the options.
	var o byte
	if len(data) > 0 {
		o = data[len(data)-1]
	}
	if o>>6 == 3 {
		if e := checkBadNew(o); e != nil {
			return e
		}
	}
	ttl := time.Duration(0)
	opts := []schedcache.Option{
		schedcache.WithShards(1 + r.pick(3)),
		schedcache.WithMailboxSize([]int{0, 1, 2, 1024}[o&3]),
		schedcache.WithMaxBatch([]int{0, 1, 3, 256}[o>>2&3]),
	}
	if o>>4&3 == 3 {
		// Assumed pods expire 1ms after FinishBinding, one per step.
		ttl = time.Millisecond
		opts = append(opts, schedcache.WithTTL(ttl), schedcache.WithPeriod(time.Millisecond), schedcache.WithExpiryChunk(1))
	}
	var asyncMu sync.Mutex
	var asyncErrs []error
	opts = append(opts, schedcache.WithAsyncErrorHandler(func(e schedcache.AsyncError) {
		asyncMu.Lock()
		asyncErrs = append(asyncErrs, e.Err)
		asyncMu.Unlock()
	}))
	c, err := schedcache.New(context.Background(), opts...)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	logger := klog.Background()
	var pool []*v1.Pod // every pod handed to the cache, for reuse as "old" objects
	var nodes []*v1.Node
	var trace []string
	fail := func(e error) error {
		return fmt.Errorf("after calls:\n  %s\n%w", strings.Join(trace, "\n  "), e)
	}
	// podArg decodes a fresh malformed pod or reuses one given earlier.
	podArg := func() *v1.Pod {
		if len(pool) > 0 && r.pick(3) == 0 {
			return pool[r.pick(len(pool))]
		}
		p := r.pod()
		if p != nil {
			pool = append(pool, p)
		}
		return p
	}
	nodeArg := func() *v1.Node {
		if len(nodes) > 0 && r.pick(3) == 0 {
			return nodes[r.pick(len(nodes))]
		}
		n := r.node()
		if n != nil {
			nodes = append(nodes, n)
		}
		return n
	}
	// updated returns a new pod for UpdatePod: half the time a copy of old
	// (same UID and node) with freshly decoded malformed requests.
	updated := func(old *v1.Pod) *v1.Pod {
		if old == nil || r.pick(2) == 0 {
			return podArg()
		}
		p := old.DeepCopy()
		p.Spec.Containers = r.containers(false)
		p.Spec.InitContainers = r.containers(true)
		p.Spec.Overhead = r.resourceList()
		p.Status.ContainerStatuses = r.containerStatuses(p.Spec.Containers)
		pool = append(pool, p)
		return p
	}
	for step := 0; !r.done() && step < 64; step++ {
		var name string
		var cerr error
		switch r.pick(18) {
		case 0:
			name, cerr = "AssumePod", c.AssumePod(logger, podArg())
		case 1:
			name, cerr = "FinishBinding", c.FinishBinding(logger, podArg())
		case 2:
			name, cerr = "ForgetPod", c.ForgetPod(logger, podArg())
		case 3:
			name, cerr = "AddPod", c.AddPod(logger, podArg())
		case 4:
			old := podArg()
			name, cerr = "UpdatePod", c.UpdatePod(logger, old, updated(old))
		case 5:
			name, cerr = "RemovePod", c.RemovePod(logger, podArg())
		case 6:
			p := podArg()
			name = "GetPod/IsAssumedPod"
			_, cerr = c.GetPod(p)
			if cerr == nil || errors.Is(cerr, schedcache.ErrPodNotFound) {
				_, cerr = c.IsAssumedPod(p)
			}
		case 7:
			name = "AddNode"
			_, cerr = c.AddNode(logger, nodeArg())
		case 8:
			name = "UpdateNode"
			_, cerr = c.UpdateNode(logger, nodeArg(), nodeArg())
		case 9:
			name, cerr = "RemoveNode", c.RemoveNode(logger, nodeArg())
		case 10:
			name = "GetNode"
			_, cerr = c.GetNode(pickOf(r, oddNodeNames...))
		case 11:
			name = "Dump"
			_, cerr = c.Dump()
		case 12:
			switch r.pick(3) {
			case 0:
				name, cerr = "AddPodAsync", c.AddPodAsync(podArg())
			case 1:
				old := podArg()
				name, cerr = "UpdatePodAsync", c.UpdatePodAsync(old, updated(old))
			default:
				name, cerr = "RemovePodAsync", c.RemovePodAsync(podArg())
			}
		case 13:
			switch r.pick(3) {
			case 0:
				name, cerr = "AddNodeAsync", c.AddNodeAsync(nodeArg())
			case 1:
				name, cerr = "UpdateNodeAsync", c.UpdateNodeAsync(nodeArg(), nodeArg())
			default:
				name, cerr = "RemoveNodeAsync", c.RemoveNodeAsync(nodeArg())
			}
		case 14:
			name = "UpdateSnapshot"
			switch r.pick(3) {
			case 0:
				cerr = c.UpdateSnapshot(logger, nil)
			case 1:
				cerr = c.UpdateSnapshot(logger, schedcache.NewEmptySnapshot())
			default:
				cerr = c.UpdateSnapshot(logger, c.Snapshot())
			}
		case 15:
			name = "NewSnapshot"
			var ps []*v1.Pod
			var ns []*v1.Node
			for range r.pick(4) {
				ps = append(ps, podArg())
			}
			for range r.pick(3) {
				ns = append(ns, nodeArg())
			}
			s := schedcache.NewSnapshot(ps, ns)
			readAll(s)
		case 16:
			name, cerr = "Sync", c.Sync()
		default:
			name = "reads"
			readAll(c.Snapshot())
			_, cerr = c.PodCount()
			_ = c.NodeCount()
		}
		trace = append(trace, fmt.Sprintf("%s: %v", name, cerr))
		if e := checkErr(name, cerr); e != nil {
			return fail(e)
		}
		if e := checkAggregates(c.Snapshot()); e != nil {
			return fail(e)
		}
	}

	// Remove every pod the cache holds, with its stored object: each must
	// go, and every node must be back to zero.
	if e := checkErr("Sync", c.Sync()); e != nil {
		return fail(e)
	}
	var stored []*v1.Pod
	c.Snapshot().RangePods(func(_ string, e schedcacheEntry) bool { stored = append(stored, e.Pod); return true })
	for _, p := range stored {
		if e := c.RemovePod(logger, p); e != nil && !(ttl > 0 && errors.Is(e, schedcache.ErrPodNotFound)) {
			return fail(fmt.Errorf("RemovePod of the stored pod %q@%q: %v", p.UID, p.Spec.NodeName, e))
		}
	}
	if malformedObserve != nil {
		malformedObserve(stored, trace)
	}
	snap := c.Snapshot()
	if e := checkAggregates(snap); e != nil {
		return fail(e)
	}
	if n, _ := c.PodCount(); n != 0 {
		return fail(fmt.Errorf("PodCount %d after removing every pod", n))
	}
	d, e := c.Dump()
	if e != nil {
		return fail(fmt.Errorf("Dump: %v", e))
	}
	if len(d.AssumedPods) != 0 {
		return fail(fmt.Errorf("assumed pods %v left after removing every pod", d.AssumedPods))
	}
	for name, ni := range d.Nodes {
		req, nz := ni.Requested(), ni.NonZeroRequested()
		if ni.Node() == nil || ni.NumPods() != 0 || req.MilliCPU != 0 || req.Memory != 0 || req.EphemeralStorage != 0 ||
			nz.MilliCPU != 0 || nz.Memory != 0 {
			return fail(fmt.Errorf("entry %q after removing every pod: node %v pods %d requested %+v non-zero %+v",
				name, ni.Node() != nil, ni.NumPods(), req, nz))
		}
		for _, s := range req.Scalars() {
			if s.Value != 0 {
				return fail(fmt.Errorf("entry %q after removing every pod: scalar %s = %d", name, s.Name, s.Value))
			}
		}
	}
	if e := c.Err(); e != nil {
		return fail(fmt.Errorf("cache failed: %v", e))
	}

	// After Close: typed errors, reads still answer.
	c.Close()
	closed = true
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "z"}, Spec: v1.PodSpec{NodeName: "n0"}}
	if e := c.AddPod(logger, p); !errors.Is(e, schedcache.ErrClosed) {
		return fail(fmt.Errorf("AddPod after Close: %v, want ErrClosed", e))
	}
	if e := checkErr("UpdatePod after Close", c.UpdatePod(logger, r.pod(), r.pod())); e != nil {
		return fail(e)
	}
	if _, e := c.AddNode(logger, r.node()); checkErr("AddNode after Close", e) != nil || e == nil {
		return fail(fmt.Errorf("AddNode after Close: %v", e))
	}
	readAll(c.Snapshot())
	asyncMu.Lock()
	defer asyncMu.Unlock()
	for _, ae := range asyncErrs {
		if e := checkErr("async operation", ae); e != nil {
			return fail(e)
		}
	}
	return nil
}

// checkBadNew: New with a nil context or a negative option returns no
// cache and an error matching ErrInvalidArgument.
func checkBadNew(o byte) error {
	var nilCtx context.Context
	bad := [][]schedcache.Option{
		{schedcache.WithShards(-1)}, {schedcache.WithTTL(-time.Second)}, {schedcache.WithPeriod(-1)},
		{schedcache.WithMailboxSize(-1)}, {schedcache.WithMaxBatch(-1)}, {schedcache.WithExpiryChunk(-1)},
	}
	for i, opts := range bad {
		ctx := context.Background()
		if int(o&7) == i {
			ctx = nilCtx
		}
		c, err := schedcache.New(ctx, opts...)
		if c != nil || !errors.Is(err, schedcache.ErrInvalidArgument) {
			if c != nil {
				c.Close()
			}
			return fmt.Errorf("New with bad option %d (nil context: %v) = %v, %v; want nil, ErrInvalidArgument", i, ctx == nil, c, err)
		}
	}
	c, err := schedcache.New(nilCtx)
	if c != nil || !errors.Is(err, schedcache.ErrInvalidArgument) {
		if c != nil {
			c.Close()
		}
		return fmt.Errorf("New(nil) = %v, %v; want nil, ErrInvalidArgument", c, err)
	}
	return nil
}

// readAll calls every read accessor of a snapshot and of its nodes.
func readAll(s *schedcache.Snapshot) {
	_ = s.Epoch()
	_ = s.Err()
	l, _ := s.List()
	for _, ni := range l {
		if ni == nil {
			continue
		}
		_ = ni.String()
		_ = ni.Allocatable()
		_ = ni.NonZeroRequested()
		_ = ni.UsedPorts()
		_ = ni.ImageStates()
		_ = ni.PVCRefCounts()
		_, _ = s.Get(ni.NodeName())
	}
	_, _ = s.HavePodsWithAffinityList()
	_, _ = s.HavePodsWithRequiredAntiAffinityList()
	_ = s.IsPVCUsedByPods("ns/claim")
	s.RangeUsedPVCs(func(string) bool { return true })
	_ = s.At(-1)
	_ = s.At(s.NumNodes())
	_, _ = s.Get("")
}

type schedcacheEntry = snapshot.PodEntry

// FuzzMalformed: malformed objects into every public method.
func FuzzMalformed(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x03\x01\x01\x01\x02\x02\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05"))
	f.Add([]byte("\x01\x07\x01\x02\x03\x04\x05\x06\x07\x08\x09\x03\x01\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c"))
	f.Add([]byte("\x02\x03\x05\x02\x02\x04\x05\x06\x07\x01\x02\x03\x04\x05\x06\x07\x08\x09\x04\x02\x00\x00\x05\x01"))
	f.Add([]byte("\x00\x08\x01\x01\x00\x02\x03\x04\x07\x01\x02\x03\x04\x05\x06\x0f\x10\x11\x12\x0e\x02\x0c\x00\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		within(t, 20*time.Second, func() error { return malformedRun(data) })
	})
}
