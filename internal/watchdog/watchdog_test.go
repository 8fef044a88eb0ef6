package watchdog

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setLimit sets the limit for one test and restores it after.
func setLimit(t *testing.T, d time.Duration) {
	old := limit.Load()
	limit.Store(int64(d))
	t.Cleanup(func() { limit.Store(old) })
}

// stalled runs f and returns the *StallError it panicked with (nil if it
// returned) and what it printed.
func stalled(t *testing.T, f func()) (*StallError, string) {
	var buf bytes.Buffer
	old := out
	out = &buf
	defer func() { out = old }()
	var got *StallError
	func() {
		defer func() {
			if r := recover(); r != nil {
				got = r.(*StallError)
			}
		}()
		f()
	}()
	return got, buf.String()
}

func TestOffWaitsAndPasses(t *testing.T) {
	setLimit(t, 0)
	ch := make(chan int, 1)
	ch <- 7
	require.Equal(t, 7, Recv(ch, "x"))
	Send(ch, 8, "x")
	require.Equal(t, 8, <-ch)
	c, stop := Timer()
	require.Nil(t, c, "off: a nil channel, never fires")
	stop()
}

func TestReadyWaitsDoNotStall(t *testing.T) {
	setLimit(t, time.Hour)
	ch := make(chan int)
	go func() { ch <- 1 }()
	require.Equal(t, 1, Recv(ch, "x"))
	done := make(chan struct{})
	go func() { <-ch; close(done) }()
	Send(ch, 2, "x")
	Wait(done, "x")
}

// A wait that outlasts the limit panics with a *StallError naming the
// wait, after printing every goroutine's stack (this test's among them).
func TestStallReportsEveryGoroutine(t *testing.T) {
	setLimit(t, 20*time.Millisecond)
	never := make(chan int)
	block := make(chan struct{})
	defer close(block)
	go func() { <-block }() // a goroutine the dump must name
	for _, tc := range []struct {
		what string
		f    func()
	}{
		{"recv", func() { Recv(never, "recv") }},
		{"send", func() { Send(never, 1, "send") }},
		{"wait", func() { Wait(block, "wait") }},
		{"timer", func() {
			c, stop := Timer()
			defer stop()
			select {
			case <-never:
			case <-c:
				Stalled("timer")
			}
		}},
	} {
		start := time.Now()
		e, dump := stalled(t, tc.f)
		require.NotNil(t, e, tc.what)
		require.Equal(t, tc.what, e.What)
		require.Equal(t, 20*time.Millisecond, e.Limit)
		require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
		require.Contains(t, e.Error(), tc.what)
		require.Contains(t, dump, e.Error())
		require.Contains(t, dump, "TestStallReportsEveryGoroutine")
		require.GreaterOrEqual(t, strings.Count(dump, "goroutine "), 3, "all goroutines, not only the caller")
	}
}

func TestEnableReadsEnv(t *testing.T) {
	old := limit.Load()
	t.Cleanup(func() { limit.Store(old) })
	for _, tc := range []struct {
		env  string
		want time.Duration
	}{
		{"", 5 * time.Second}, // unset below
		{"0", 0},
		{"0s", 0},
		{"2m", 2 * time.Minute},
		{"bogus", 5 * time.Second},
		{"-1s", 5 * time.Second},
	} {
		if tc.env == "" {
			t.Setenv(Env, "")
			require.NoError(t, os.Unsetenv(Env))
		} else {
			t.Setenv(Env, tc.env)
		}
		var buf bytes.Buffer
		saved := out
		out = &buf
		Enable(5 * time.Second)
		out = saved
		require.Equal(t, tc.want, Limit(), "env %q", tc.env)
		if tc.want == 5*time.Second && tc.env != "" {
			require.Contains(t, buf.String(), Env, "a bad value is reported")
		}
	}
}
