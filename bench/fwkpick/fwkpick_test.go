package fwkpick

import (
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/watchdog"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

// -plugins: "default" is every plugin; a subset keeps its order; an
// unknown, repeated or empty name is a configuration error.
func TestParsePlugins(t *testing.T) {
	all, err := ParsePlugins("default")
	if err != nil || len(all) != len(DefaultPlugins) {
		t.Fatalf("default: %v, %v", all, err)
	}
	all[0] = "changed"
	if DefaultPlugins[0] == "changed" {
		t.Fatal("ParsePlugins returned DefaultPlugins itself: a caller's edit changed the defaults")
	}
	got, err := ParsePlugins(" TaintToleration,NodeResourcesFit ")
	if err != nil || len(got) != 2 || got[0] != "TaintToleration" || got[1] != "NodeResourcesFit" {
		t.Fatalf("subset: %v, %v", got, err)
	}
	for _, bad := range []string{"", "bogus", "NodeResourcesFit,NodeResourcesFit", "NodeResourcesFit,,TaintToleration"} {
		if _, err := ParsePlugins(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParsePlugins(%q) = %v, want ErrConfig", bad, err)
		}
	}
}
