// Package workload generates the standard cluster and the standard operation
// streams of docs/workloads.md, deterministically from a seed.
//
// It is shared by the load generator, the benchmarks (which run the same
// workloads on schedcache and on the upstream cache) and tests, so it depends
// only on k8s.io/api, k8s.io/apimachinery and the standard library.
//
// Every object it returns is read-only, as an informer's objects are: to save
// memory, objects share immutable parts (resource lists, label maps, affinity
// terms, volumes, image names, conditions) with one another. A caller that
// needs to change an object must DeepCopy it first.
//
// A [Shape] in [ClusterSpec] changes the nodes (allocatable, images, labels,
// taints, cordons on a seeded fraction of them) and the pods (weighted
// [PodTemplate]s); a nil Shape is the standard cluster, object for object.
// [Cluster.NewNode] and [Cluster.NewPod] make further objects of a
// cluster's shape.
//
// Randomness comes from math/rand/v2 with a PCG source; [NewRand] builds one
// from an int64 seed. The same seed gives the same output on every platform,
// and Build gives the same cluster whatever GOMAXPROCS is.
package workload
