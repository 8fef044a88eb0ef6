// Package bind holds the end-to-end tests of kube/bind: the Binder and
// the production dispatcher (ClientDispatcher) against a real
// kube-apiserver and etcd (package controlplane): pods bound through the
// binding subresource, bindings the server refuses (pod deleted,
// replaced, bound elsewhere) ending with ForgetPod, and a binding retried
// across a cut connection.
package bind
