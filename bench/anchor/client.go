package anchor

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var podsGVR = v1.SchemeGroupVersion.WithResource("pods")

// apiServer is the fake client set standing for the API server, with what
// the scheduler needs of a real one and the fake lacks:
//   - every created or changed object gets a new resourceVersion (and a
//     created one a UID and a creationTimestamp): the scheduler ignores a
//     pod update whose resourceVersion did not change, and the fake's
//     tracker leaves objects' resourceVersion alone;
//   - pods/binding sets spec.nodeName and the PodScheduled condition, as
//     the API server's binding registry does (the fake's tracker drops a
//     Binding), refusing with Conflict a pod already bound; the pod
//     informers see the bound pod.
//
// It records when each pod is bound, and on which node.
type apiServer struct {
	cs      *fake.Clientset
	tracker stampingTracker

	start time.Time // the times below are nanoseconds since start

	mu            sync.Mutex
	initBound     int
	measuredBound int
	createdAt     []int64  // measured pod i: just before its Create call
	boundAt       []int64  // measured pod i: its binding; 0 not bound
	nodeOf        []string // measured pod i's node
	podsOn        map[string]int
	conflicts     int
	deleted       int // pods deleted (the scheduler's preemption victims)
	lastBind      int64
	initDone      chan struct{} // closed when every initial pod is bound
	measuredDone  chan struct{} // closed when every measured pod is bound
	initPods      int
	measuredPods  int
}

func newAPIServer(w Workload) *apiServer {
	cs := fake.NewSimpleClientset()
	s := &apiServer{
		cs:           cs,
		start:        time.Now(),
		createdAt:    make([]int64, w.Pods),
		boundAt:      make([]int64, w.Pods),
		nodeOf:       make([]string, w.Pods),
		podsOn:       make(map[string]int, w.Nodes),
		initDone:     make(chan struct{}),
		measuredDone: make(chan struct{}),
		initPods:     w.InitPods,
		measuredPods: w.Pods,
	}
	s.tracker = stampingTracker{ObjectTracker: cs.Tracker(), rv: new(atomic.Int64)}
	if w.InitPods == 0 {
		close(s.initDone)
	}
	// Every verb goes to the stamping tracker; watches stay on the fake's
	// tracker (the stamping one delegates to it).
	cs.ReactionChain = []k8stesting.Reactor{
		&k8stesting.SimpleReactor{Verb: "create", Resource: "pods", Reaction: s.bind},
		&k8stesting.SimpleReactor{Verb: "delete", Resource: "pods", Reaction: s.countDelete},
		&k8stesting.SimpleReactor{Verb: "*", Resource: "*", Reaction: k8stesting.ObjectReaction(s.tracker)},
	}
	return s
}

// since is the time since s.start in nanoseconds, never 0.
func (s *apiServer) since() int64 { return max(int64(time.Since(s.start)), 1) }

// bind serves pods/binding; any other create of a pod goes on down the
// reaction chain. It runs under the fake's lock.
func (s *apiServer) bind(action k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := action.(k8stesting.CreateAction)
	if !ok || action.GetSubresource() != "binding" {
		return false, nil, nil
	}
	b, ok := ca.GetObject().(*v1.Binding)
	if !ok {
		return true, nil, apierrors.NewBadRequest(fmt.Sprintf("pods/binding: want a Binding, got %T", ca.GetObject()))
	}
	ns := action.GetNamespace()
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return true, nil, apierrors.NewBadRequest("pods/binding: target must be a Node, got " + b.Target.Kind)
	}
	obj, err := s.tracker.Get(podsGVR, ns, b.Name)
	if err != nil {
		return true, nil, err
	}
	p, ok := obj.(*v1.Pod)
	if !ok {
		return true, nil, apierrors.NewInternalError(fmt.Errorf("pods/binding: stored %T", obj))
	}
	if p.Spec.NodeName != "" {
		s.mu.Lock()
		s.conflicts++
		s.mu.Unlock()
		return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), b.Name,
			fmt.Errorf("pod %s is already assigned to node %q", b.Name, p.Spec.NodeName))
	}
	p.Spec.NodeName = b.Target.Name
	setScheduled(p)
	if err := s.tracker.Update(podsGVR, p, ns); err != nil {
		return true, nil, err
	}
	s.bound(ns, b.Name, b.Target.Name)
	return true, b, nil
}

// countDelete counts a pod's deletion (only the scheduler deletes pods
// here: its preemption victims) and lets the tracker serve it.
func (s *apiServer) countDelete(k8stesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	s.deleted++
	s.mu.Unlock()
	return false, nil, nil
}

// setScheduled sets the PodScheduled condition to True, as the binding
// registry does.
func setScheduled(p *v1.Pod) {
	now := metav1.Now()
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			p.Status.Conditions[i].Status = v1.ConditionTrue
			p.Status.Conditions[i].LastTransitionTime = now
			p.Status.Conditions[i].Reason, p.Status.Conditions[i].Message = "", ""
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{
		Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now,
	})
}

// bound records that pod ns/name was bound to node.
func (s *apiServer) bound(ns, name, node string) {
	now := s.since()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.podsOn[node]++
	switch {
	case ns == InitNamespace && strings.HasPrefix(name, initPrefix):
		s.initBound++
		if s.initBound == s.initPods {
			close(s.initDone)
		}
	case ns == MeasuredNamespace && strings.HasPrefix(name, measuredPrefix):
		i, err := strconv.Atoi(name[len(measuredPrefix):])
		if err != nil || i < 0 || i >= len(s.boundAt) || s.boundAt[i] != 0 {
			return
		}
		s.boundAt[i], s.nodeOf[i] = now, node
		s.lastBind = now
		s.measuredBound++
		if s.measuredBound == s.measuredPods {
			close(s.measuredDone)
		}
	}
}

// created records that measured pod i is about to be created.
func (s *apiServer) created(i int) {
	now := s.since()
	s.mu.Lock()
	s.createdAt[i] = now
	s.mu.Unlock()
}

// stampingTracker is the fake's object tracker giving each created or
// changed object a new resourceVersion, as the API server does.
type stampingTracker struct {
	k8stesting.ObjectTracker
	rv *atomic.Int64
}

func (t stampingTracker) stamp(obj runtime.Object, create bool) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	rv := t.rv.Add(1)
	m.SetResourceVersion(strconv.FormatInt(rv, 10))
	if create {
		if m.GetUID() == "" {
			m.SetUID(types.UID("uid-" + strconv.FormatInt(rv, 10)))
		}
		if ts := m.GetCreationTimestamp(); ts.IsZero() {
			m.SetCreationTimestamp(metav1.Now())
		}
	}
	return nil
}

func (t stampingTracker) Add(obj runtime.Object) error {
	if err := t.stamp(obj, true); err != nil {
		return err
	}
	return t.ObjectTracker.Add(obj)
}

func (t stampingTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	if err := t.stamp(obj, true); err != nil {
		return err
	}
	return t.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (t stampingTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	if err := t.stamp(obj, false); err != nil {
		return err
	}
	return t.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (t stampingTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if err := t.stamp(obj, false); err != nil {
		return err
	}
	return t.ObjectTracker.Patch(gvr, obj, ns, opts...)
}
