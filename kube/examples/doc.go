// Package examples wires the pieces of the kube module into a small
// scheduler over a fake clientset: informers feeding the cache, a Placer
// choosing nodes on the cache's snapshots, BindPod through a simulated
// dispatcher that binds in the fake API server, the binding's informer
// update confirming the assumed pod, and the Prometheus collector and
// comparer reading the result. Run it from the repository root with
//
//	go -C kube run ./examples/scheduler
//
// (kube is a module of its own: go run ./kube/examples/scheduler does not
// work from the root; cd kube && go run ./examples/scheduler does).
package examples
