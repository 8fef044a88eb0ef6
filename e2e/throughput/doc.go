// Package throughput measures, on a real kube-apiserver (package
// controlplane) with fake nodes (Node objects only, no kubelets), how
// many pods per second schedcache-scheduler (its app package, in process)
// binds, beside upstream's kube-scheduler (k8s.io/kubernetes
// pkg/scheduler.New and Run, the same module version) on the same server
// in the same run. It is a long measurement, not a test: TestThroughput
// is skipped unless THROUGHPUT=1 (e2e/throughput.sh runs it).
package throughput
