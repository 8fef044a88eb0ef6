// Package throughput measures, on a real kube-apiserver (package
// controlplane) with fake nodes (Node objects only, no kubelets), how
// many pods per second schedcache-scheduler (its app package, in process)
// binds, beside upstream's kube-scheduler (k8s.io/kubernetes
// pkg/scheduler.New and Run, the same module version) on the same server
// in the same run. With THROUGHPUT=1 (e2e/throughput.sh sets it)
// TestThroughput is the measurement, at 5,000 nodes by default; without
// it, it runs the same code at 50 nodes and 40 pods, a smoke test CI
// runs that both schedulers bind every pod in both modes.
package throughput
