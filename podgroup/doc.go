// Package podgroup holds the pod-group state of the scheduler cache as
// immutable, persistent values: the state upstream kube-scheduler v1.37.2
// keeps behind its GenericWorkload and CompositePodGroup feature gates
// (k8s.io/kubernetes, pkg/scheduler/backend/cache: podgroupstate.go and
// the pod-group parts of cache.go and snapshot.go).
//
// A Table holds the State of every pod group (its PodGroup object and its
// pods: all, unscheduled, assumed, assigned) and the Composite of every
// composite pod group (its CompositePodGroup object and its children). A
// Table never changes: Table.Edit returns an Editor that applies upstream's
// cache operations (AddMember, AssumeMember, AddPodGroup, ...) and
// snapshot operations (SnapshotAssume, ...) and builds a new Table sharing
// everything unchanged with the old one. A cache can therefore publish its
// Table in every snapshot without copying it, and a change to one pod of a
// group of n pods costs O(log n).
//
// Semantics are upstream's, operation for operation, including its odd
// corners (a group's state outlives its PodGroup object while it has
// pods; a pod may sit in several of a group's sets). The package differs
// only where upstream would panic (nil objects, a SchedulingGroup without
// PodGroupName) or return a wrong answer (Hierarchy past
// WorkloadMaxTreeDepth), and it reports as errors the missed events
// upstream only logs; each method's doc says so where it applies.
//
// The package depends on k8s.io/api and k8s.io/apimachinery only; Key is
// its own form of upstream's fwk.EntityKey.
package podgroup
