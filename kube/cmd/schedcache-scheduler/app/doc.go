// Package app is schedcache-scheduler: a secondary Kubernetes scheduler
// on schedcache's cache, running upstream's default plugins over its
// snapshots (kube/fwkadapter), binding through kube/bind's
// ClientDispatcher, with leader election on a Lease and an HTTP endpoint
// for health and metrics. Main is the command; New and Scheduler.Run run
// it in process. docs/kube-integration.md describes what it does and how
// to deploy it (deploy/).
package app
