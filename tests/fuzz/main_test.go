package fuzz

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/watchdog"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}
