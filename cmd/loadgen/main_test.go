package main

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/watchdog"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

// A regular file is not a terminal, so progress lines stay off when the
// output is redirected.
func TestIsTerminalFalseForFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("a regular file reported as a terminal")
	}
}
