// Package examples wires the pieces of the kube module into a small
// scheduler over a fake clientset: informers feeding the cache, a Placer
// choosing nodes on the cache's snapshots, BindPod through a simulated
// dispatcher that binds in the fake API server, the binding's informer
// update confirming the assumed pod, and the Prometheus collector and
// comparer reading the result. Run it with
//
//	go run ./examples/scheduler
package examples
