package schedcache_test

import (
	"sort"
	"testing"

	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type snapshotPodEntry = snapshot.PodEntry

func sortStrings(s []string) { sort.Strings(s) }
