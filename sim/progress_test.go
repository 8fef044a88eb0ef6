package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
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

// The bar is redrawn in place on one line (carriage return, erase), at
// most every barEvery; a line printed after it starts on a new line; a
// nil writer writes nothing.
func TestProgressBarRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, barLen: 4}
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
