// Package watchdog turns a wait on the cache that never ends into a fast
// failure that names every goroutine: a test binary enables it from its
// TestMain, and from then on each wait the cache makes its callers do (a
// synchronous call's reply, a send to a full mailbox, Stop's handshake,
// Submit's backpressure) that lasts longer than the limit prints the
// stacks of all goroutines to stderr and panics with a *StallError.
//
// Contract: off (limit 0) unless Enable was called; then Recv, Send and
// Wait cost one timer per wait that does not complete at once. It is a
// test aid, never enabled by the library itself: a deadlock in a test
// then fails in seconds, with the goroutine holding the token named,
// instead of hanging until the test binary's -timeout. Inside a
// testing/synctest bubble the timer is the bubble's, so a deadlock there
// fails as soon as every goroutine of the bubble is blocked.
package watchdog

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// Default is the limit Enable sets when SCHEDCACHE_WATCHDOG does not say
// otherwise: longer than any wait of a correct test on a loaded 2-core
// machine under the race detector, short enough to fail in seconds.
const Default = 15 * time.Second

// Env names the environment variable that overrides the limit Enable
// sets: a duration ("30s"), or "0" to turn the watchdog off (to debug a
// hang in a debugger, say).
const Env = "SCHEDCACHE_WATCHDOG"

// limit is the current limit in nanoseconds; 0: off. Atomic: set by
// Enable (TestMain, before the tests), read by every wait.
var limit atomic.Int64

// out receives the report of a stall; a variable so that the package's
// own tests can read it. Written only before the tests run.
var out io.Writer = os.Stderr

// Enable turns the watchdog on for the whole process with limit d, or
// with the limit Env gives when it is set (a value that is not a
// duration >= 0 is reported on stderr and ignored). Call it from TestMain,
// before m.Run. A test binary asked to run benchmarks (-test.bench) keeps
// it off: a benchmark times the waits, and a timer per wait would count.
func Enable(d time.Duration) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		return
	}
	if s, ok := os.LookupEnv(Env); ok {
		v, err := time.ParseDuration(s)
		if s == "0" {
			v, err = 0, nil
		}
		if err != nil || v < 0 {
			fmt.Fprintf(out, "watchdog: %s=%q is not a duration >= 0; using %v\n", Env, s, d)
		} else {
			d = v
		}
	}
	limit.Store(int64(d))
}

// Override sets the limit to d and the stall report's destination to w
// (nil: stderr) until restore is called: for a test that checks a stall
// is reported. Not safe to call while another test waits on the cache.
func Override(d time.Duration, w io.Writer) (restore func()) {
	oldLimit, oldOut := limit.Load(), out
	if w == nil {
		w = os.Stderr
	}
	limit.Store(int64(d))
	out = w
	return func() { limit.Store(oldLimit); out = oldOut }
}

// Limit returns the current limit; 0 means off.
func Limit() time.Duration { return time.Duration(limit.Load()) }

// StallError is the value Recv, Send and Wait panic with when a wait
// outlasts the limit.
type StallError struct {
	What  string        // the wait, e.g. "reply to AssumePod"
	Limit time.Duration // the limit it outlasted
}

func (e *StallError) Error() string {
	return fmt.Sprintf("schedcache watchdog: %s: no progress in %v (a deadlock?); the stacks of all goroutines are above", e.What, e.Limit)
}

// Recv receives from ch. With the watchdog on, a receive still waiting
// after the limit is a stall.
func Recv[T any](ch <-chan T, what string) T {
	d := Limit()
	if d <= 0 {
		return <-ch
	}
	select {
	case v := <-ch:
		return v
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case v := <-ch:
		return v
	case <-t.C:
		stall(what, d)
		panic("unreachable")
	}
}

// Send sends v on ch. With the watchdog on, a send still waiting after
// the limit is a stall.
func Send[T any](ch chan<- T, v T, what string) {
	d := Limit()
	if d <= 0 {
		ch <- v
		return
	}
	select {
	case ch <- v:
		return
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case ch <- v:
	case <-t.C:
		stall(what, d)
	}
}

// Wait waits until done is closed or has a value; see Recv.
func Wait(done <-chan struct{}, what string) { Recv(done, what) }

// Timer returns a channel that fires once the limit has passed, for a
// select of the caller's own, and the function that stops it; the
// channel is nil (never fires) when the watchdog is off. When it fires
// the caller calls Stalled.
func Timer() (<-chan time.Time, func()) {
	d := Limit()
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// Stalled reports the wait what as a stall: it prints every goroutine's
// stack and panics with a *StallError.
func Stalled(what string) { stall(what, Limit()) }

// stall prints every goroutine's stack and panics with a *StallError.
func stall(what string, d time.Duration) {
	e := &StallError{What: what, Limit: d}
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	fmt.Fprintf(out, "\n%v\n\n%s\n", e, buf)
	panic(e)
}
