module github.com/schedcache/schedcache

go 1.25.0

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	k8s.io/api v0.35.4 // indirect
	k8s.io/apimachinery v0.35.4 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)
