// Package kube is the root of the schedcache Kubernetes integration module:
// informer wiring (kube/informer), BindPod dispatchers (kube/bind), a
// Prometheus collector and debugging aids (kube/metrics) and a runnable
// example (kube/examples). It is a module of its own so that the core
// module never depends on client-go, kube-scheduler or Prometheus.
package kube
