// Package kube is the root of the schedcache Kubernetes integration module:
// informer wiring (kube/informer), BindPod dispatchers (kube/bind), a
// Prometheus collector and debugging aids (kube/metrics) and a runnable
// example (kube/examples). It is a module of its own so that the core
// module never depends on client-go, kube-scheduler or Prometheus.
//
// The module follows upstream kube-scheduler v1.37.2 (k8s.io/kubernetes
// v1.37.2, k8s.io/kube-scheduler and k8s.io/client-go v0.37.2): its
// event handlers, API calls and cache metrics.
package kube
