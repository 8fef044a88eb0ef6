// Package informer holds the end-to-end tests of kube/informer: a
// schedcache.Cache fed by client-go informers from a real kube-apiserver
// and etcd (package controlplane), compared with the API server under
// storms, compaction, cut-off clients and watch bookmarks.
package informer
