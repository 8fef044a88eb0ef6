package schedcache_test

import (
	"sort"
	"testing"

	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/snapshot"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

type snapshotPodEntry = snapshot.PodEntry

func sortStrings(s []string) { sort.Strings(s) }
