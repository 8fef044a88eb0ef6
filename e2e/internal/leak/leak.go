// Package leak is the e2e packages' goroutine-leak check:
// goleak.VerifyTestMain, with one goroutine ignored and a settling step,
// both for upstream's kube-apiserver and client-go behaviour explained
// below.
package leak

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apiserver/pkg/server/healthz"
)

// Options are the goleak options of VerifyTestMain: they ignore only
// goroutines that upstream's code starts once per process and never
// stops. Call it before the tests run (VerifyTestMain does).
//
// k8s.io/apiserver/pkg/server/healthz: the "log" health check
// (LogHealthz, a package-level value every kube-apiserver installs)
// starts, on its first Check and under a sync.Once, a wait.Forever that
// flushes klog every minute for the life of the process. As upstream's
// integration framework does before its own leak checks
// (test/integration/framework/goleak.go, IgnoreBackgroundGoroutines),
// Options runs that check once, so the goroutine exists now, and ignores
// the goroutines running at this point (IgnoreCurrent: that one and
// those the test binary and package initialisers started).
func Options() []goleak.Option {
	_ = healthz.LogHealthz.Check(nil)
	return []goleak.Option{goleak.IgnoreCurrent()}
}

// settleTimeout bounds settle.
const settleTimeout = time.Minute

// settle waits, running the garbage collector, until no goroutine but
// Options' is left, or settleTimeout has passed. Transports of client-go's
// TLS cache that reload their client certificate from files (the
// apiserver's own clients, e.g. its front-proxy client) run a
// certificate-rotation goroutine and workqueue that stop only when the
// transport is garbage collected (client-go's ClientsAllowTLSCacheGC,
// on by default: a runtime.AddCleanup cancels them). Upstream's leak
// check collects garbage between its retries for the same reason
// (test/integration/framework/goleak.go, goleakFindRetry). Anything
// still running afterwards is reported by goleak.
func settle(opts []goleak.Option) {
	deadline := time.Now().Add(settleTimeout)
	for {
		runtime.GC()
		if goleak.Find(opts...) == nil || time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settlingM runs the tests, then settles.
type settlingM struct {
	m    *testing.M      // immutable: the tests' M
	opts []goleak.Option // immutable: what settle ignores
}

func (s settlingM) Run() int {
	code := s.m.Run()
	settle(s.opts)
	return code
}

// VerifyTestMain runs the tests and fails the binary if goroutines other
// than Options' are still running once they have all returned and the
// garbage collector has run.
func VerifyTestMain(m *testing.M) {
	opts := Options()
	goleak.VerifyTestMain(settlingM{m: m, opts: opts}, opts...)
}
