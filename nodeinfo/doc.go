// Package nodeinfo holds schedcache's node and pod vocabulary: Resource,
// PodInfo, the immutable NodeInfo that snapshots publish, and NodeState, the
// mutable per-node aggregate owned by exactly one shard goroutine.
//
// The aggregation rules are those of the upstream kube-scheduler
// (k8s.io/kubernetes v1.35.4, pkg/scheduler/framework) as written in
// docs/upstream-semantics.md sections 3.5, 3.6 and 4.
package nodeinfo
