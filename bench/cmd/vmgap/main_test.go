package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGapsAdd(t *testing.T) {
	var g Gaps
	for _, d := range []time.Duration{5 * time.Microsecond, 10 * time.Microsecond, 11 * time.Microsecond, 41 * time.Microsecond, 2 * time.Millisecond} {
		g.Add(d, 10*time.Microsecond)
	}
	want := Gaps{N: 3, Over: 2, Total: 11*time.Microsecond + 41*time.Microsecond + 2*time.Millisecond, Max: 2 * time.Millisecond}
	if g != want {
		t.Fatalf("got %+v, want %+v", g, want)
	}
	if s := g.Summary(time.Second); !strings.HasPrefix(s, "3 gaps (2 > 40µs), 2.1ms in all (0.2% of 1s), max 2ms") {
		t.Fatalf("summary %q", s)
	}
}

func TestParseSteal(t *testing.T) {
	v, err := parseSteal(strings.NewReader("cpu  624 0 658 18457 73 0 7 8 0 0\ncpu0 1 2 3 4 5 6 7 99 0 0\n"))
	if err != nil || v != 8 {
		t.Fatalf("got %d, %v; want 8 (the aggregate line's eighth number)", v, err)
	}
	for _, in := range []string{"cpu 1 2 3\n", "intr 5\n", ""} {
		if _, err := parseSteal(strings.NewReader(in)); err == nil {
			t.Errorf("parseSteal(%q): no error", in)
		}
	}
}

func TestRun(t *testing.T) {
	var buf bytes.Buffer
	if err := run(&buf, 1, 50*time.Millisecond, 10*time.Microsecond, true); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"vmgap: GOMAXPROCS=", "spinner 0: ", "ping-pong round trip: n="} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "n=0 ") {
		t.Errorf("ping-pong recorded nothing:\n%s", out)
	}
	if err := run(&buf, -1, time.Second, time.Microsecond, false); err == nil {
		t.Error("negative spinners accepted")
	}
}
