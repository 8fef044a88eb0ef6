// Command loadgen simulates a large cluster against schedcache, in process:
// it builds a cluster from a seed or a scenario file, loads it into the
// cache, runs schedulers, binders and informers against it, audits the cache
// against the simulated API server and reports (text, JSON, CSV, SVG).
//
// With no flags it runs the standard 5,000-node cluster for 5 seconds.
// SIGUSR1 makes a real-time run audit the cache at once. SIGINT (Ctrl-C)
// and SIGTERM (what a Job's pod receives) stop the run: its report is
// written, and a run that would have exited 0 exits 128 + the signal's
// number (130, 143).
// The simulator is package github.com/schedcache/schedcache/sim; its doc and
// docs/loadgen.md describe every flag, scenario field and exit code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/schedcache/schedcache/sim"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	// SIGINT and SIGTERM cancel ctx: the run stops and reports.
	stops := make(chan os.Signal, 1)
	signal.Notify(stops, os.Interrupt, syscall.SIGTERM)
	var first os.Signal // written by the goroutine below before stopped is closed
	stopped := make(chan struct{})
	go func() { // owned by main: ends when stops is closed below
		defer close(stopped)
		for s := range stops {
			if first == nil {
				first = s
				cancel()
			}
		}
	}()
	// SIGUSR1 asks a real-time run for an audit now (see docs/loadgen.md).
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	audits := make(chan struct{}, 1) // one asked for during the load waits for the run
	go func() {                      // owned by main: ends when usr1 is closed below
		for range usr1 {
			select {
			case audits <- struct{}{}:
			default: // the run is busy or over: an audit is already under way
			}
		}
	}()
	code := sim.MainWithAudits(ctx, os.Args[1:], os.Stdout, os.Stderr, isTerminal(os.Stderr), audits)
	signal.Stop(usr1)
	close(usr1)
	signal.Stop(stops)
	close(stops)
	<-stopped
	cancel()
	os.Exit(exitCode(code, first))
}

// exitCode is the process's exit code: code, except that a run stopped by
// sig (nil: none) that would have exited 0 exits 128 + sig's number
// (SIGINT 130, SIGTERM 143), the shell's convention; its report has been
// written.
func exitCode(code int, sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok && code == 0 {
		return 128 + int(s)
	}
	return code
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
