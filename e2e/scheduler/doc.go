// Package scheduler holds the end-to-end tests of schedcache-scheduler
// (kube/cmd/schedcache-scheduler, its app package run in process) against
// a real kube-apiserver with RBAC on (package controlplane), as the
// ServiceAccount of deploy/rbac.yaml with exactly that file's rules: the
// pods naming it are bound and others left alone, two replicas elect one
// leader and the second takes over, and a cut connection is survived
// without a restart.
package scheduler
