package anchor

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The workloads' names, as the command's -workload flag takes them, and
// the scheduler_perf test cases they port.
const (
	Basic           = "basic"             // SchedulingBasic (misc/performance-config.yaml)
	NodeAffinity    = "node-affinity"     // SchedulingNodeAffinity (affinity/performance-config.yaml)
	PodAntiAffinity = "pod-anti-affinity" // SchedulingPodAntiAffinity (affinity/performance-config.yaml)
	TopologySpread  = "topology-spread"   // TopologySpreading (topology_spreading/performance-config.yaml)
	Preemption      = "preemption"        // PreemptionBasic (default_preemption/performance-config.yaml)
	Gang            = "gang"              // GangScheduling (podgroup/gangscheduling/performance-config.yaml)
)

// Names lists the built-in workloads.
var Names = []string{Basic, NodeAffinity, PodAntiAffinity, TopologySpread, Preemption, Gang}

// GangSize is the gang workload's podsPerGroup (scheduler_perf's
// 5000Nodes_1000Gangs_3000Pods).
const GangSize = 3

// The namespaces of the initial and of the measured pods (scheduler_perf's
// SchedulingPodAntiAffinity puts them in sched-0 and sched-1; the other
// workloads use the same two, which changes nothing for them).
const (
	InitNamespace     = "sched-0"
	MeasuredNamespace = "sched-1"
)

// Labels the workloads' nodes carry.
const (
	HostnameLabel = "kubernetes.io/hostname"
	ZoneLabel     = "topology.kubernetes.io/zone"
)

// ErrInvalidWorkload is wrapped by every error about a Workload.
var ErrInvalidWorkload = errors.New("invalid workload")

// Workload is a scheduler_perf-shaped test case: Nodes copies of
// NodeTemplate, then InitPods copies of InitPodTemplate scheduled by the
// scheduler before the measurement starts, then Pods copies of PodTemplate,
// the measured phase.
type Workload struct {
	// Name labels the workload in the result.
	Name string

	// Nodes is the number of nodes, each a copy of NodeTemplate named
	// "node-NNNNNN" and labelled kubernetes.io/hostname with its name (as
	// scheduler_perf's node preparer does).
	Nodes        int
	NodeTemplate *v1.Node
	// NodeLabelKey and NodeLabelValues label node i with
	// NodeLabelValues[i % len] (scheduler_perf's labelNodePrepareStrategy,
	// round robin); no label when NodeLabelKey is empty.
	NodeLabelKey    string
	NodeLabelValues []string

	// InitPods pods "init-NNNNNN" in namespace sched-0, copies of
	// InitPodTemplate, are scheduled before the measured phase.
	InitPods        int
	InitPodTemplate *v1.Pod

	// Pods pods "pod-NNNNNN" in namespace sched-1, copies of PodTemplate,
	// are the measured phase.
	Pods        int
	PodTemplate *v1.Pod

	// GangSize, when positive, makes the measured pods gangs: measured
	// pod i is in the PodGroup "gang-<i/GangSize>" (scheduling.k8s.io
	// v1beta1, Gang policy, minCount GangSize), created with the nodes,
	// before the scheduler starts. Pods must be a multiple of it.
	GangSize int
	// FeatureGates are set for the run's duration (upstream's gate
	// registry; Run restores the previous values): the gang workload
	// turns GenericWorkload on.
	FeatureGates map[string]bool
}

// DefaultInitPods is the number of initial pods scheduler_perf's 5000Nodes
// test cases give each workload for 5,000 nodes; NewWorkload scales it to
// the number of nodes.
var DefaultInitPods = map[string]int{
	Basic:           1000,
	NodeAffinity:    5000,
	PodAntiAffinity: 1000,
	TopologySpread:  5000,
	Preemption:      20000, // 1000Nodes: 4,000 low-priority pods, 4 a node
}

// NewWorkload builds the built-in workload name with nodes nodes, initPods
// initial pods (negative: scheduler_perf's ratio for that workload,
// DefaultInitPods per 5,000 nodes) and pods measured pods.
func NewWorkload(name string, nodes, initPods, pods int) (Workload, error) {
	if initPods < 0 {
		if r, ok := DefaultInitPods[name]; ok {
			initPods = int(int64(nodes) * int64(r) / 5000)
		} else {
			initPods = 0
		}
	}
	w := Workload{Name: name, Nodes: nodes, NodeTemplate: DefaultNode(), InitPods: initPods, Pods: pods}
	switch name {
	case Basic:
		w.InitPodTemplate, w.PodTemplate = DefaultPod(), DefaultPod()
	case NodeAffinity:
		w.NodeLabelKey, w.NodeLabelValues = ZoneLabel, []string{"zone1"}
		w.InitPodTemplate, w.PodTemplate = NodeAffinityPod(), NodeAffinityPod()
	case PodAntiAffinity:
		w.InitPodTemplate, w.PodTemplate = PodAntiAffinityPod(), PodAntiAffinityPod()
	case TopologySpread:
		w.NodeLabelKey, w.NodeLabelValues = ZoneLabel, []string{"moon-1", "moon-2", "moon-3"}
		w.InitPodTemplate, w.PodTemplate = DefaultPod(), TopologySpreadPod()
	case Gang:
		w.InitPodTemplate, w.PodTemplate = GangPod(), GangPod()
		w.GangSize = GangSize
		w.FeatureGates = map[string]bool{"GenericWorkload": true}
	case Preemption:
		w.InitPodTemplate, w.PodTemplate = LowPriorityPod(), HighPriorityPod()
	default:
		return Workload{}, fmt.Errorf("anchor: %w: unknown workload %q (want one of %s)",
			ErrInvalidWorkload, name, strings.Join(Names, ", "))
	}
	return w, w.Validate()
}

// maxObjects bounds a workload's size: the fake API server holds every
// object, and the watch buffers are sized to the workload.
const maxObjects = 10_000_000

// Validate reports what is wrong with w, wrapping ErrInvalidWorkload.
func (w Workload) Validate() error {
	var errs []string
	if w.Nodes < 1 {
		errs = append(errs, fmt.Sprintf("nodes must be at least 1, got %d", w.Nodes))
	}
	if w.InitPods < 0 {
		errs = append(errs, fmt.Sprintf("initial pods must be 0 or more, got %d", w.InitPods))
	}
	if w.Pods < 1 {
		errs = append(errs, fmt.Sprintf("measured pods must be at least 1, got %d", w.Pods))
	}
	if int64(w.Nodes)+int64(w.InitPods)+int64(w.Pods) > maxObjects {
		errs = append(errs, fmt.Sprintf("nodes and pods must total at most %d", maxObjects))
	}
	if w.NodeTemplate == nil {
		errs = append(errs, "no node template")
	}
	if w.InitPods > 0 && w.InitPodTemplate == nil {
		errs = append(errs, "no initial pod template")
	}
	if w.PodTemplate == nil {
		errs = append(errs, "no measured pod template")
	}
	if w.GangSize < 0 || (w.GangSize > 0 && w.Pods%w.GangSize != 0) {
		errs = append(errs, fmt.Sprintf("%d measured pods are not whole gangs of %d", w.Pods, w.GangSize))
	}
	if w.NodeLabelKey != "" && len(w.NodeLabelValues) == 0 {
		errs = append(errs, fmt.Sprintf("node label %q has no values", w.NodeLabelKey))
	}
	if len(errs) > 0 {
		name := w.Name
		if name == "" {
			name = "(unnamed)"
		}
		return fmt.Errorf("anchor: %w %s: %s", ErrInvalidWorkload, name, strings.Join(errs, "; "))
	}
	return nil
}

// node builds node i of w.
func (w Workload) node(i int) *v1.Node {
	n := w.NodeTemplate.DeepCopy()
	n.Name = fmt.Sprintf("node-%06d", i)
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[HostnameLabel] = n.Name
	if w.NodeLabelKey != "" {
		n.Labels[w.NodeLabelKey] = w.NodeLabelValues[i%len(w.NodeLabelValues)]
	}
	return n
}

// Pod names: the prefix, then the index.
const (
	initPrefix     = "init-"
	measuredPrefix = "pod-"
)

// pod builds a pod of template t named prefix+index in namespace ns, with
// the defaults the API server would give it that the scheduler reads.
func pod(t *v1.Pod, ns, prefix string, i int) *v1.Pod {
	p := t.DeepCopy()
	p.Name = fmt.Sprintf("%s%06d", prefix, i)
	p.GenerateName = ""
	p.Namespace = ns
	p.UID = "" // set by the tracker wrapper
	if p.Spec.SchedulerName == "" {
		p.Spec.SchedulerName = v1.DefaultSchedulerName
	}
	return p
}

// DefaultNode is scheduler_perf's templates/node-default.yaml: 4 CPUs,
// 32Gi, 110 pods, Ready. Allocatable is set to the capacity, as the API
// server's defaulting does (the fake client set does no defaulting).
func DefaultNode() *v1.Node {
	capacity := v1.ResourceList{
		v1.ResourcePods:   resource.MustParse("110"),
		v1.ResourceCPU:    resource.MustParse("4"),
		v1.ResourceMemory: resource.MustParse("32Gi"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "scheduler-perf-"},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			Phase:       v1.NodeRunning,
		},
	}
}

// DefaultPod is scheduler_perf's templates/pod-default.yaml: one pause
// container with container port 80, 100m CPU and 500Mi requested and
// limited.
func DefaultPod() *v1.Pod {
	rl := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("100m"),
		v1.ResourceMemory: resource.MustParse("500Mi"),
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:      "pause",
				Image:     "registry.k8s.io/pause:3.10.2",
				Ports:     []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}},
				Resources: v1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()},
			}},
			SchedulerName: v1.DefaultSchedulerName,
		},
	}
}

// NodeAffinityPod is templates/pod-with-node-affinity.yaml: DefaultPod with
// a required node affinity for topology.kubernetes.io/zone in zone1, zone2.
func NodeAffinityPod() *v1.Pod {
	p := DefaultPod()
	p.GenerateName = "node-affinity-"
	p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: ZoneLabel, Operator: v1.NodeSelectorOpIn, Values: []string{"zone1", "zone2"},
				}},
			}},
		},
	}}
	return p
}

// PodAntiAffinityPod is templates/pod-with-pod-anti-affinity.yaml:
// DefaultPod labelled color=green with a required anti-affinity to
// color=green pods in sched-0 and sched-1 per kubernetes.io/hostname (at
// most one such pod a node).
func PodAntiAffinityPod() *v1.Pod {
	p := DefaultPod()
	p.GenerateName = "anti-affinity-pod-"
	p.Labels = map[string]string{"color": "green"}
	p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "green"}},
			TopologyKey:   HostnameLabel,
			Namespaces:    []string{MeasuredNamespace, InitNamespace},
		}},
	}}
	return p
}

// TopologySpreadPod is templates/pod-with-topology-spreading.yaml:
// DefaultPod labelled color=blue, spread over topology.kubernetes.io/zone
// with maxSkew 5, DoNotSchedule.
func TopologySpreadPod() *v1.Pod {
	p := DefaultPod()
	p.GenerateName = "spreading-pod-"
	p.Labels = map[string]string{"color": "blue"}
	p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
		MaxSkew:           5,
		TopologyKey:       ZoneLabel,
		WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}},
	}}
	return p
}

// GangPod is podgroup/gangscheduling's templates/gang-pod.yaml without
// its schedulingGroup (the run sets it per pod): one pause container
// requesting 100m CPU and 100Mi.
func GangPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-gang-scheduling-"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:  "pause",
				Image: "registry.k8s.io/pause:3.10.1",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU:    resource.MustParse("100m"),
					v1.ResourceMemory: resource.MustParse("100Mi"),
				}},
			}},
			SchedulerName: v1.DefaultSchedulerName,
		},
	}
}

// gangName is the PodGroup of measured pod i of a gang workload.
func (w Workload) gangName(i int) string { return fmt.Sprintf("gang-%d", i/w.GangSize) }

// podGroup is the PodGroup of gang g (podgroup/gangscheduling's
// templates/podgroup.yaml).
func (w Workload) podGroup(g int) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gang-%d", g), Namespace: MeasuredNamespace},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(w.GangSize)},
		}},
	}
}

// LowPriorityPod is templates/pod-low-priority.yaml: one pause container
// with container port 80, 900m CPU and 500Mi requested and limited, no
// priority (0), terminationGracePeriodSeconds 0. Four fill a node's 4
// CPUs to 3.6.
func LowPriorityPod() *v1.Pod {
	p := DefaultPod()
	rl := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("900m"),
		v1.ResourceMemory: resource.MustParse("500Mi"),
	}
	p.Spec.Containers[0].Image = "registry.k8s.io/pause:3.10.1"
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()}
	p.Spec.TerminationGracePeriodSeconds = new(int64)
	return p
}

// HighPriorityPod is default_preemption/templates/pod-high-priority.yaml:
// one pause container (no port) with 3970m CPU and 500Mi requested and
// limited, priority 9999999, terminationGracePeriodSeconds 0. It fits a
// node of 4 CPUs only once all four of the node's low-priority pods are
// preempted: every measured pod preempts.
func HighPriorityPod() *v1.Pod {
	p := LowPriorityPod()
	p.GenerateName = "pod-high-priority-"
	c := &p.Spec.Containers[0]
	c.Image, c.Ports = "registry.k8s.io/pause:3.10.2", nil
	c.Resources.Requests[v1.ResourceCPU] = resource.MustParse("3970m")
	c.Resources.Limits[v1.ResourceCPU] = resource.MustParse("3970m")
	prio := int32(9999999)
	p.Spec.Priority = &prio
	return p
}
