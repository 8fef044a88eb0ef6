package bench

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/watchdog"
)

// releasingM closes the benchmarks' last fixture before goleak looks.
type releasingM struct{ m *testing.M }

func (r releasingM) Run() int {
	code := r.m.Run()
	releaseFixture()
	return code
}

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(releasingM{m},
		// klog's flush daemon, started by klog's init for the process.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}
