package workload

import (
	"math/rand/v2"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod shape: the share of pods, in percent, that have each feature. Features
// are drawn independently of one another.
const (
	PercentInit         = 10 // a regular init container
	PercentSidecar      = 5  // a sidecar: an init container with restartPolicy Always
	PercentNoRequests   = 2  // no container (init containers included) requests anything
	PercentOverhead     = 10 // spec.overhead and a runtime class
	PercentHostPort     = 5  // one container has a host port in [HostPortMin, HostPortMax]
	PercentPVC          = 10 // one persistentVolumeClaim volume
	PercentAffinity     = 10 // spec.affinity.podAffinity, half preferred, half required
	PercentAntiAffinity = 5  // a required podAntiAffinity term
)

// Pod vocabulary.
const (
	NumApps       = 200 // app label values "app-000".."app-199"; an app lives in one namespace
	NumNamespaces = 10  // namespaces "ns-0".."ns-9"
	NumClaims     = 500 // claim names "pvc-000".."pvc-499", in every namespace
	HostPortMin   = 8000
	HostPortMax   = 8999

	LabelApp           = "app"                           // the app; affinity terms select on it
	LabelTrack         = "track"                         // "stable", or "canary" after an odd number of updates
	AnnotationRevision = "workload.example.com/revision" // changed by every pod update
	RuntimeClassKata   = "kata"                          // the runtime class of pods with overhead
)

// Per-container requests are drawn uniformly from these ladders, which are
// roughly log-spaced: mean 646m CPU and 1,173 Mi memory per container, so the
// 30 pods of a node request about 40 of its 64 CPUs and 70 of its 256 Gi.
var (
	cpuLadderMilli = [...]int64{50, 100, 150, 200, 250, 300, 400, 500, 600, 750, 1000, 1250, 1500, 2000}
	memLadderMi    = [...]int64{64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096}
)

// Sidecars draw from the low end of the ladders.
const (
	sidecarCPURungs = 6 // up to 300m
	sidecarMemRungs = 6 // up to 512 Mi
)

var (
	podOverheadCPU    = resource.MustParse("250m")
	podOverheadMemory = resource.MustParse("160Mi")
)

const (
	numRevisionAnnotations = 16
	numImages              = 200
)

// vocabulary holds the immutable objects that pods share.
type vocabulary struct {
	requests    [len(cpuLadderMilli)][len(memLadderMi)]v1.ResourceList
	overhead    v1.ResourceList
	kata        *string
	always      *v1.ContainerRestartPolicy
	apps        [NumApps]appVocab
	appIndex    map[string]int
	volumes     [NumClaims][]v1.Volume
	hostPorts   [HostPortMax - HostPortMin + 1][]v1.ContainerPort
	annotations [numRevisionAnnotations]map[string]string
	imageNames  [numImages]string
}

type appVocab struct {
	namespace string
	labels    [2]map[string]string // stable, canary
	// affinity[a][b]: a is 0 none, 1 preferred, 2 required pod affinity;
	// b is 1 with required anti-affinity. affinity[0][0] is nil.
	affinity [3][2]*v1.Affinity
	images   [3]string // of containers 0, 1, 2
}

var vocab = sync.OnceValue(newVocabulary)

func newVocabulary() *vocabulary {
	v := &vocabulary{appIndex: make(map[string]int, NumApps)}
	for i, m := range cpuLadderMilli {
		for j, mi := range memLadderMi {
			v.requests[i][j] = v1.ResourceList{
				v1.ResourceCPU:    *resource.NewMilliQuantity(m, resource.DecimalSI),
				v1.ResourceMemory: *resource.NewQuantity(mi<<20, resource.BinarySI),
			}
		}
	}
	v.overhead = v1.ResourceList{v1.ResourceCPU: podOverheadCPU, v1.ResourceMemory: podOverheadMemory}
	kata := RuntimeClassKata
	v.kata = &kata
	always := v1.ContainerRestartPolicyAlways
	v.always = &always
	for i := range v.imageNames {
		v.imageNames[i] = imageName(i)
	}
	var namespaces [NumNamespaces]string
	for i := range namespaces {
		namespaces[i] = indexName("ns-", i, 1)
	}
	for i := range v.apps {
		name := indexName("app-", i, 3)
		v.appIndex[name] = i
		a := &v.apps[i]
		a.namespace = namespaces[i%NumNamespaces]
		for t, track := range [2]string{"stable", "canary"} {
			a.labels[t] = map[string]string{LabelApp: name, LabelTrack: track}
		}
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{LabelApp: name}}
		zoneTerm := v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: v1.LabelTopologyZone}
		preferred := &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 50, PodAffinityTerm: zoneTerm}}}
		required := &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{zoneTerm}}
		anti := &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{LabelSelector: sel, TopologyKey: v1.LabelHostname}}}
		for k, pa := range [3]*v1.PodAffinity{nil, preferred, required} {
			if pa != nil {
				a.affinity[k][0] = &v1.Affinity{PodAffinity: pa}
			}
			a.affinity[k][1] = &v1.Affinity{PodAffinity: pa, PodAntiAffinity: anti}
		}
		for c := range a.images {
			a.images[c] = v.imageNames[(i*7+c*61)%numImages]
		}
	}
	for i := range v.volumes {
		v.volumes[i] = []v1.Volume{{
			Name: "data",
			VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
				ClaimName: indexName("pvc-", i, 3),
			}},
		}}
	}
	for i := range v.hostPorts {
		v.hostPorts[i] = []v1.ContainerPort{{
			Name:          "http",
			HostPort:      int32(HostPortMin + i),
			ContainerPort: 8080,
			Protocol:      v1.ProtocolTCP,
		}}
	}
	for i := range v.annotations {
		v.annotations[i] = map[string]string{AnnotationRevision: indexName("", i, 1)}
	}
	return v
}

// imageName returns the first name of image i of the pool.
func imageName(i int) string {
	return "registry.example.com/" + indexName("img-", i, 3) + ":v1"
}

// containerAlloc hands out container slices. A nil *containerAlloc allocates
// each slice on its own; Build carves them out of shared blocks.
type containerAlloc struct {
	free []v1.Container
}

const containerBlock = 1024

func (a *containerAlloc) take(n int) []v1.Container {
	if a == nil {
		return make([]v1.Container, n)
	}
	if len(a.free) < n {
		a.free = make([]v1.Container, containerBlock)
	}
	c := a.free[:n:n]
	a.free = a.free[n:]
	return c
}

// NewPod returns a new pod of the standard shape, named and identified by uid,
// bound to nodeName (pending when nodeName is ""), with ResourceVersion "1".
// It has 1 to 3 containers, each requesting 50m to 2 CPU and 64 Mi to 4 Gi
// (log-spaced; means 646m and 1,173 Mi), and the features of the Percent
// constants. It draws from r only; the pod shares immutable parts with other
// pods.
func NewPod(r *rand.Rand, uid string, nodeName string) *v1.Pod {
	p := new(v1.Pod)
	fillPod(p, r, uid, nodeName, nil)
	return p
}

// fillPod writes a pod of the standard shape into the zero pod p.
func fillPod(p *v1.Pod, r *rand.Rand, uid, nodeName string, alloc *containerAlloc) {
	v := vocab()
	appIdx := r.IntN(NumApps)
	app := &v.apps[appIdx]
	nContainers := 1 + r.IntN(3)
	noRequests := r.IntN(100) < PercentNoRequests
	hasInit := r.IntN(100) < PercentInit
	hasSidecar := r.IntN(100) < PercentSidecar
	hasOverhead := r.IntN(100) < PercentOverhead
	hasHostPort := r.IntN(100) < PercentHostPort
	hasPVC := r.IntN(100) < PercentPVC
	affinity := 0
	if r.IntN(100) < PercentAffinity {
		affinity = 1 + r.IntN(2)
	}
	anti := 0
	if r.IntN(100) < PercentAntiAffinity {
		anti = 1
	}

	p.Name = uid
	p.Namespace = app.namespace
	p.UID = types.UID(uid)
	p.ResourceVersion = "1"
	p.Labels = app.labels[0]

	s := &p.Spec
	s.NodeName = nodeName
	s.SchedulerName = v1.DefaultSchedulerName
	s.RestartPolicy = v1.RestartPolicyAlways
	s.DNSPolicy = v1.DNSClusterFirst
	s.Containers = alloc.take(nContainers)
	for i := range s.Containers {
		c := &s.Containers[i]
		c.Name = containerNames[i]
		c.Image = app.images[i]
		c.Resources.Requests = v.pickRequests(r, len(cpuLadderMilli), len(memLadderMi), noRequests)
	}
	if hasHostPort {
		s.Containers[r.IntN(nContainers)].Ports = v.hostPorts[r.IntN(len(v.hostPorts))]
	}
	if n := b2i(hasInit) + b2i(hasSidecar); n > 0 {
		s.InitContainers = alloc.take(n)
		i := 0
		if hasInit {
			c := &s.InitContainers[i]
			c.Name = "init"
			c.Image = v.imageNames[r.IntN(numImages)]
			c.Resources.Requests = v.pickRequests(r, len(cpuLadderMilli), len(memLadderMi), noRequests)
			i++
		}
		if hasSidecar {
			c := &s.InitContainers[i]
			c.Name = "sidecar"
			c.Image = v.imageNames[r.IntN(numImages)]
			c.RestartPolicy = v.always
			c.Resources.Requests = v.pickRequests(r, sidecarCPURungs, sidecarMemRungs, noRequests)
		}
	}
	if hasOverhead {
		s.Overhead = v.overhead
		s.RuntimeClassName = v.kata
	}
	if hasPVC {
		s.Volumes = v.volumes[r.IntN(NumClaims)]
	}
	s.Affinity = app.affinity[affinity][anti]

	if nodeName != "" {
		p.Status.Phase = v1.PodRunning
	} else {
		p.Status.Phase = v1.PodPending
	}
	if noRequests {
		p.Status.QOSClass = v1.PodQOSBestEffort
	} else {
		p.Status.QOSClass = v1.PodQOSBurstable
	}
}

var containerNames = [3]string{"c0", "c1", "c2"}

// pickRequests draws a request list from the first cpuRungs and memRungs
// rungs of the ladders; it draws nothing and returns nil when none is true.
func (v *vocabulary) pickRequests(r *rand.Rand, cpuRungs, memRungs int, none bool) v1.ResourceList {
	if none {
		return nil
	}
	return v.requests[r.IntN(cpuRungs)][r.IntN(memRungs)]
}

// updatedPod returns a new version of old: same UID, node and spec,
// ResourceVersion rv, a revision annotation that depends on rv, and the track
// label flipped.
func updatedPod(old *v1.Pod, rv uint64) *v1.Pod {
	v := vocab()
	p := new(v1.Pod)
	*p = *old
	p.ResourceVersion = strconv.FormatUint(rv, 10)
	p.Annotations = v.annotations[rv%numRevisionAnnotations]
	if i, ok := v.appIndex[old.Labels[LabelApp]]; ok {
		a := &v.apps[i]
		if old.Labels[LabelTrack] == "stable" {
			p.Labels = a.labels[1]
		} else {
			p.Labels = a.labels[0]
		}
	}
	return p
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
