package overload

import "k8s.io/klog/v2"

var klogger = klog.Background()
