// Package fakeapi gives the fake clientset what the tests and the example
// need of a real API server: pod bindings that set the pod's node, and
// watches that never share the server's objects.
package fakeapi

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// InstallBindingReactor makes pods/binding creates on cs set the pod's
// Spec.NodeName (the API server's binding), so that pod informers see the
// unassigned -> assigned update. As on a real server, a missing pod is
// NotFound, and a pod already bound, being deleted, or of another UID than
// the binding names is a Conflict.
func InstallBindingReactor(cs *fake.Clientset) {
	cs.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(k8stesting.CreateAction)
		if !ok || action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b, ok := ca.GetObject().(*v1.Binding)
		if !ok {
			return true, nil, fmt.Errorf("fakeapi: binding of type %T", ca.GetObject())
		}
		obj, err := cs.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), b.Namespace, b.Name, metav1.GetOptions{})
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		conflict := func(format string, args ...any) error {
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods/binding"}, pod.Name, fmt.Errorf(format, args...))
		}
		switch {
		case b.UID != "" && b.UID != pod.UID:
			return true, nil, conflict("Precondition failed: UID in precondition: %s, UID in object meta: %s", b.UID, pod.UID)
		case pod.DeletionTimestamp != nil:
			return true, nil, conflict("pod %s is being deleted, cannot be assigned to a host", pod.Name)
		case pod.Spec.NodeName != "":
			return true, nil, conflict("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName)
		}
		pod.Spec.NodeName = b.Target.Name
		return true, nil, cs.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), pod, pod.Namespace, metav1.UpdateOptions{})
	})
}

// InstallCopyingWatch makes every watch on cs deliver copies of the
// tracker's objects, as a real server's decoded events are. client-go
// v0.37.2's tracker hands a new watch the objects it stores (tracker.Watch
// in k8s.io/client-go/testing/fixture.go adds the existing objects without
// a copy), so an informer that transforms objects in place (upstream's
// scheduler strips managed fields) writes the tracker's own objects while
// a Get deep-copies them: a data race. The reactor goes first; it serves
// every resource as the clientset's default watch reactor does.
func InstallCopyingWatch(cs *fake.Clientset) {
	cs.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := cs.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			if e.Object != nil {
				e.Object = e.Object.DeepCopyObject()
			}
			return e, true
		}), nil
	})
}
