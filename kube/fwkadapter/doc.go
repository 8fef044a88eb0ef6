// Package fwkadapter lets the upstream kube-scheduler plugins
// (k8s.io/kube-scheduler/framework interfaces, v0.35.4) run on schedcache
// snapshots.
//
//   - Lister: a *snapshot.Snapshot seen as fwk.SharedLister. It copies
//     nothing of the cluster: NodeInfo and PodInfo values are the
//     snapshot's own pointers under this package's types. List() builds a
//     []fwk.NodeInfo only when the snapshot's list changed (ListKey) and
//     otherwise returns the previous one in O(1), as upstream's snapshot
//     returns its list.
//   - NodeInfo: a published *framework.NodeInfo seen as fwk.NodeInfo. Its
//     fwk-shaped views (the pod lists as []fwk.PodInfo, the resources, the
//     host ports) are built when the NodeInfo is made, on the shard's
//     goroutine before it is published, through the node extension Enable
//     registers (NewLister calls it), and kept in it for good: once per
//     NodeInfo, which unchanged nodes share across snapshots; no published
//     NodeInfo is ever written. The image summaries' map is built on first
//     GetImageStates and kept in that view (this package's own cache).
//     It is read-only: the mutation methods refuse (ErrReadOnly); Snapshot()
//     returns a MutableNodeInfo, a private copy that follows upstream's
//     aggregation rules (preemption's dry run and the nominated-pods pass
//     mutate that copy).
//   - PodInfo: a *framework.PodInfo seen as fwk.PodInfo. Its affinity
//     terms are parsed once per pod object, by NewPodInfo on the goroutine
//     that builds the PodInfo (the cache's caller, never its coordinator),
//     through the pod extension this package registers in its init.
//   - Resource (mutable, as upstream's) and the read-only resource views.
//
// Views share the snapshot's objects: nothing returned by a published view
// (slices, maps, *v1.Pod, *v1.Node) may be modified, exactly as with
// upstream's snapshot.
package fwkadapter
