package manifest

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// MaxQuantity bounds every quantity Load accepts: 2^53, whose
// thousandths (a milli-value) still fit an int64.
const MaxQuantity = 1 << 53

var maxQuantity = *resource.NewQuantity(MaxQuantity, resource.DecimalSI)

// checkResources checks every quantity of rl (the field at path):
// non-negative and at most MaxQuantity. It says whether all are.
func (l *Loader) checkResources(at loc, object, path string, rl v1.ResourceList) bool {
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	sort.Strings(names)
	ok := true
	for _, n := range names {
		q := rl[v1.ResourceName(n)]
		switch {
		case q.Sign() < 0:
			l.fault(at, object, path+"."+n, fmt.Sprintf("%s is negative", q.String()), nil)
			ok = false
		case q.Cmp(maxQuantity) > 0:
			l.fault(at, object, path+"."+n, fmt.Sprintf("%s is more than %d", q.String(), int64(MaxQuantity)), nil)
			ok = false
		}
	}
	return ok
}

// addNode decodes, checks and keeps a v1 Node.
func (l *Loader) addNode(at loc, raw []byte) {
	n := new(v1.Node)
	if !l.decode(at, "Node", raw, n) {
		return
	}
	n.ManagedFields = nil
	if n.Name == "" {
		l.fault(at, "", "metadata.name", "missing: every node needs a name", nil)
		return
	}
	object := objectName("Node", "", n.Name)
	if n.Namespace != "" {
		l.fault(at, object, "metadata.namespace", fmt.Sprintf("%q: nodes are not namespaced", n.Namespace), nil)
		return
	}
	ok := l.checkResources(at, object, "status.capacity", n.Status.Capacity)
	if !l.checkResources(at, object, "status.allocatable", n.Status.Allocatable) || !ok {
		return
	}
	switch {
	case len(n.Status.Allocatable) > 0:
	case len(n.Status.Capacity) > 0:
		n.Status.Allocatable = n.Status.Capacity
		l.c.AllocatableFromCapacity++
	default:
		l.c.NoAllocatable++
	}
	if n.UID == "" {
		n.UID = types.UID(n.Name)
		l.c.DerivedUIDs++
	}
	l.nodes = append(l.nodes, n)
	l.nodeLoc = append(l.nodeLoc, at)
}

// addPod decodes, checks and keeps a v1 Pod (or counts a terminal one).
func (l *Loader) addPod(at loc, raw []byte) {
	p := new(v1.Pod)
	if !l.decode(at, "Pod", raw, p) {
		return
	}
	p.ManagedFields = nil
	if p.Name == "" {
		l.fault(at, "", "metadata.name", "missing: every pod needs a name", nil)
		return
	}
	if p.Namespace == "" {
		p.Namespace = v1.NamespaceDefault
	}
	object := objectName("Pod", p.Namespace, p.Name)
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		l.c.Terminal++
		return
	}
	if len(p.Spec.Containers) == 0 {
		l.fault(at, object, "spec.containers", "empty: a pod needs at least one container", nil)
		return
	}
	ok := true
	for _, cs := range []struct {
		field string
		cs    []v1.Container
	}{{"spec.initContainers", p.Spec.InitContainers}, {"spec.containers", p.Spec.Containers}} {
		for i := range cs.cs {
			r := &cs.cs[i].Resources
			f := fmt.Sprintf("%s[%d].resources", cs.field, i)
			ok = l.checkResources(at, object, f+".requests", r.Requests) && ok
			ok = l.checkResources(at, object, f+".limits", r.Limits) && ok
		}
	}
	ok = l.checkResources(at, object, "spec.overhead", p.Spec.Overhead) && ok
	if r := p.Spec.Resources; r != nil {
		ok = l.checkResources(at, object, "spec.resources.requests", r.Requests) && ok
		ok = l.checkResources(at, object, "spec.resources.limits", r.Limits) && ok
	}
	if !ok {
		return
	}
	if p.UID == "" {
		p.UID = types.UID(p.Namespace + "/" + p.Name)
		l.c.DerivedUIDs++
	}
	if l.opts.CheckPod != nil {
		if err := l.opts.CheckPod(p); err != nil {
			l.fault(at, object, "", err.Error(), err)
			return
		}
	}
	l.pods = append(l.pods, p)
	l.podLoc = append(l.podLoc, at)
}

// crossCheck checks the objects of every file together: unique names
// and uids, pods bound to nodes of the files, at least one node.
func (l *Loader) crossCheck() {
	if len(l.errs) > 0 {
		return // the objects with faults are missing: what follows would mislead
	}
	nodes := make(map[string]int, len(l.nodes))
	nodeUIDs := make(map[types.UID]int, len(l.nodes))
	for i, n := range l.nodes {
		at := l.nodeLoc[i]
		object := objectName("Node", "", n.Name)
		if j, dup := nodes[n.Name]; dup {
			l.fault(at, object, "metadata.name", "duplicate node name (first at "+l.nodeLoc[j].where("metadata.name")+")", nil)
			continue
		}
		nodes[n.Name] = i
		if j, dup := nodeUIDs[n.UID]; dup {
			l.fault(at, object, "metadata.uid", fmt.Sprintf("duplicate uid %q (first: node %s at %s)", n.UID, l.nodes[j].Name, l.nodeLoc[j].where("metadata.uid")), nil)
			continue
		}
		nodeUIDs[n.UID] = i
	}
	names := make(map[types.NamespacedName]int, len(l.pods))
	uids := make(map[types.UID]int, len(l.pods))
	for i, p := range l.pods {
		at := l.podLoc[i]
		object := objectName("Pod", p.Namespace, p.Name)
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		if j, dup := names[key]; dup {
			l.fault(at, object, "metadata.name", "duplicate pod namespace/name (first at "+l.podLoc[j].where("metadata.name")+")", nil)
			continue
		}
		names[key] = i
		if j, dup := uids[p.UID]; dup {
			q := l.pods[j]
			l.fault(at, object, "metadata.uid", fmt.Sprintf("duplicate uid %q (first: pod %s/%s at %s)", p.UID, q.Namespace, q.Name, l.podLoc[j].where("metadata.uid")), nil)
			continue
		}
		uids[p.UID] = i
		if nn := p.Spec.NodeName; nn != "" {
			if _, ok := nodes[nn]; !ok {
				l.fault(at, object, "spec.nodeName", fmt.Sprintf("node %q is not in the files (remove the pod, clear spec.nodeName to have it scheduled, or add the node)", nn), nil)
			}
		}
	}
	if len(l.nodes) == 0 && len(l.errs) == 0 {
		file := "(no file)"
		if len(l.files) > 0 {
			file = l.files[0]
		}
		msg := "no v1 Node in the files: the simulator needs a cluster to schedule onto"
		if len(l.files) > 1 {
			msg = fmt.Sprintf("no v1 Node in the %d files: the simulator needs a cluster to schedule onto", len(l.files))
		}
		l.errs = append(l.errs, &Error{File: file, Item: -1, Msg: msg})
	}
}
