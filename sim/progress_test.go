package sim

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestBar(t *testing.T) {
	for _, c := range []struct {
		frac float64
		want string
	}{
		{0, "[..........]   0%"},
		{0.45, "[####......]  45%"},
		{1, "[##########] 100%"},
		{2, "[##########] 100%"},          // clamped
		{-1, "[..........]   0%"},         // clamped
		{math.NaN(), "[..........]   0%"}, // a 0/0 fraction
	} {
		if got := bar(c.frac, 10); got != c.want {
			t.Errorf("bar(%v) = %q, want %q", c.frac, got, c.want)
		}
	}
}

// On a terminal the bar is redrawn in place on one line (carriage return,
// erase), at most every barEvery; a line printed after it starts on a new line; a
// nil writer writes nothing.
func TestProgressBarRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, tty: true, barLen: 4}
	p.tick(0.5, "loading %d", 1)
	p.tick(0.75, "loading %d", 2) // within barEvery: skipped
	if got := buf.String(); got != "\r\x1b[K[##..]  50% loading 1" {
		t.Fatalf("first draw: %q", got)
	}
	p.last = time.Now().Add(-barEvery)
	p.tick(1, "loading %d", 3)
	p.printf("done\n")
	want := "\r\x1b[K[##..]  50% loading 1\r\x1b[K[####] 100% loading 3\ndone\n"
	if got := buf.String(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if strings.Count(buf.String(), "\n") != 2 {
		t.Fatalf("the bar must stay on one line: %q", buf.String())
	}
	silent := &progress{}
	silent.tick(0.5, "x")
	silent.printf("y")
}

// Not on a terminal, the figures are plain lines, at most one per
// lineEvery, and none in a phase's first phaseDelay.
func TestProgressPlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, false)
	require.False(t, p.tty)
	p.printf("loading\n")
	p.tick(0.5, "loading %d", 1) // the phase has just begun
	require.Equal(t, "loading\n", buf.String())
	p.since = time.Now().Add(-phaseDelay)
	p.tick(0.5, "loading %d", 2)
	p.tick(0.6, "loading %d", 3) // within lineEvery
	p.last = time.Now().Add(-lineEvery)
	p.tick(-1, "loading %d", 4) // no fraction
	p.runTick(0.25, 2*time.Second, true, 1000, 7)
	p.last = time.Now().Add(-lineEvery)
	p.runTick(0.5, 3*time.Second, true, 1500, 0)
	want := "loading\nloading 2 (50%)\nloading 4\n" +
		"scheduling: 3s virtual, 1500 pods scheduled (500 pods/s), 0 pending (50%)\n"
	require.Equal(t, want, buf.String())
	require.NotContains(t, buf.String(), "\r")

	tty := newProgress(terminal{&buf}, false)
	require.True(t, tty.tty)
	require.Equal(t, &buf, tty.w)
}

// progressWriter: stderr on a terminal (marked) or with -progress; nil
// with -quiet, or off a terminal without -progress.
func TestProgressWriter(t *testing.T) {
	var buf bytes.Buffer
	cfg := defaultConfig()
	require.Nil(t, progressWriter(&buf, false, cfg))
	require.Equal(t, terminal{&buf}, progressWriter(&buf, true, cfg))
	cfg.Progress = true
	require.Equal(t, &buf, progressWriter(&buf, false, cfg))
	cfg.Quiet = true
	require.Nil(t, progressWriter(&buf, true, cfg))
	require.Nil(t, progressWriter(&buf, false, cfg))
}

// A phase's ticker goroutine draws the status it is given and stops with
// end (twice is fine); with no writer none is started.
func TestProgressPhase(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var buf bytes.Buffer
	p := newProgress(&buf, true)
	asked := make(chan struct{}, 1)
	end := p.phase(func(d time.Duration) (float64, string) {
		select {
		case asked <- struct{}{}:
		default:
		}
		return -1, "building cluster: busy"
	})
	<-asked
	end()
	end()
	p.mu.Lock()
	out := buf.String()
	p.mu.Unlock()
	require.Contains(t, out, "building cluster: busy\n")
	require.Equal(t, "building cluster: 1.2s", func() string { _, s := elapsed("building cluster")(1234 * time.Millisecond); return s }())

	silent := newProgress(nil, true)
	silent.phase(func(time.Duration) (float64, string) { panic("a silent progress asks nothing") })()
}

// A run long enough to tick, in deterministic mode with the ticks forced
// (hooks.forceProgress, no waiting on the clock): off a terminal
// (-progress) every phase is a plain line and the scheduling phase's live
// figures are lines with pods/s; on a terminal the bar is redrawn in
// place; -quiet writes nothing.
func TestProgressRunNotTerminal(t *testing.T) {
	args := []string{"-deterministic", "-nodes", "50", "-pods-per-node", "5", "-duration", "2s", "-sample", "5", "-keep-pods", "-fail-rate", "0"}
	var stdout, stderr bytes.Buffer
	code := realMain(context.Background(), append(args, "-progress"), &stdout, &stderr, false, hooks{forceProgress: true})
	require.Equal(t, exitOK, code, stderr.String())
	out := stderr.String()
	for _, want := range []string{"building cluster: 50 nodes", "loading 50 nodes and 250 pods\n", "loaded in ",
		"scheduling for 2s of virtual time", "auditing "} {
		require.Contains(t, out, want)
	}
	require.Regexp(t, `(?m)^scheduling: [0-9.]+m?s virtual, [0-9]+ pods scheduled \([0-9]+ pods/s\), 0 pending \([0-9]+%\)$`, out)
	require.NotContains(t, out, "\r", "plain lines off a terminal")

	stderr.Reset()
	code = realMain(context.Background(), args, &stdout, &stderr, true, hooks{forceProgress: true})
	require.Equal(t, exitOK, code, stderr.String())
	require.Contains(t, stderr.String(), "\r\x1b[K[")
	require.Contains(t, stderr.String(), "pods/s")

	stderr.Reset()
	code = realMain(context.Background(), append(args, "-quiet", "-progress"), &stdout, &stderr, true, hooks{forceProgress: true})
	require.Equal(t, exitOK, code, stderr.String())
	require.Empty(t, stderr.String())
}
