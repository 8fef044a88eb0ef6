package sim

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress reports a run's phases on stderr: a line when each begins
// (building the cluster, loading, scheduling, auditing), then, once a
// phase has lasted phaseDelay, live figures: on a terminal a bar redrawn
// in place (carriage return, erase line) at most every barEvery; else a
// plain line at most every lineEvery. A nil writer (-quiet, or stderr not
// a terminal without -progress) writes nothing and starts nothing.
//
// Contract: safe for concurrent use. The run's main goroutine (or the
// event loop) calls printf, tick and runTick; a phase's ticker goroutine
// (phase) draws too, each draw under mu. The goroutine phase starts is
// owned by phase's caller, which stops and joins it with the function
// phase returns.
type progress struct {
	w      io.Writer // immutable; nil: silent
	tty    bool      // immutable: a terminal (redraw in place); else plain lines
	force  bool      // immutable: tests: every tick draws, at once, and phase tickers tick every forceEvery
	barLen int       // immutable; 0: 30 cells

	mu     sync.Mutex
	since  time.Time     // guarded by mu: when the current phase began (the last printf)
	last   time.Time     // guarded by mu: the last draw in this phase (zero: none)
	drawn  bool          // guarded by mu: a bar is on the current line (terminal)
	rateAt time.Duration // guarded by mu: the run time at the last runTick draw (live rate)
	rateN  int64         // guarded by mu: the pods scheduled then
}

const (
	barEvery   = 250 * time.Millisecond // a terminal's bar: at most 4 redraws a second
	lineEvery  = 5 * time.Second        // plain lines: at most one per 5 s
	phaseDelay = time.Second            // a phase shows figures once it has lasted this
	forceEvery = time.Millisecond       // a phase ticker's period in tests (force)
)

// terminal marks a progress writer that is a terminal: the bar is redrawn
// in place. A plain value.
type terminal struct{ io.Writer }

// progressWriter is where a run's progress goes: stderr, marked a
// terminal when tty, when stderr is a terminal or -progress is given and
// -quiet is not; else nil (no progress).
func progressWriter(stderr io.Writer, tty bool, cfg Config) io.Writer {
	switch {
	case cfg.Quiet || (!tty && !cfg.Progress):
		return nil
	case tty:
		return terminal{stderr}
	}
	return stderr
}

// newProgress returns the progress of a run writing to w (see
// progressWriter); force is the tests' hook (hooks.forceProgress).
func newProgress(w io.Writer, force bool) *progress {
	p := &progress{w: w, force: force, since: time.Now()}
	if t, ok := w.(terminal); ok {
		p.w, p.tty = t.Writer, true
	}
	return p
}

// printf writes a line (format ends it), after the bar if one is drawn,
// and begins a new phase.
func (p *progress) printf(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\n")
		p.drawn = false
	}
	fmt.Fprintf(p.w, format, args...)
	p.since, p.last = time.Now(), time.Time{}
	p.rateAt, p.rateN = 0, 0
}

// due says whether a draw is due now. The caller holds mu.
func (p *progress) due(now time.Time) bool {
	if p.force {
		return true
	}
	if now.Sub(p.since) < phaseDelay {
		return false
	}
	every := lineEvery
	if p.tty {
		every = barEvery
	}
	return p.last.IsZero() || now.Sub(p.last) >= every
}

// draw draws the figures: the bar filled to frac (none when frac < 0) and
// text. The caller holds mu.
func (p *progress) draw(now time.Time, frac float64, text string) {
	p.last = now
	if p.tty {
		if frac >= 0 {
			text = bar(frac, p.barLen) + " " + text
		}
		fmt.Fprint(p.w, "\r\x1b[K"+text)
		p.drawn = true
		return
	}
	if frac >= 0 {
		text += fmt.Sprintf(" (%d%%)", int(min(frac, 1)*100))
	}
	fmt.Fprintln(p.w, text)
}

// tick draws frac (clamped to [0, 1]; < 0: no bar) and a status text, if
// a draw is due.
func (p *progress) tick(frac float64, format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); p.due(now) {
		p.draw(now, frac, fmt.Sprintf(format, args...))
	}
}

// runTick draws the scheduling phase's live figures, if a draw is due:
// the run time at (virtual in deterministic mode), the pods scheduled and
// the rate since the last draw (pods/s of run time), the pods pending.
func (p *progress) runTick(frac float64, at time.Duration, virtual bool, scheduled int64, pending int) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if !p.due(now) {
		return
	}
	rate := 0.0
	if dt := at - p.rateAt; dt > 0 {
		rate = float64(scheduled-p.rateN) / dt.Seconds()
	}
	p.rateAt, p.rateN = at, scheduled
	round, kind := 100*time.Millisecond, ""
	if virtual {
		round, kind = time.Millisecond, " virtual"
	}
	p.draw(now, frac, fmt.Sprintf("scheduling: %v%s, %d pods scheduled (%.0f pods/s), %d pending", at.Truncate(round), kind, scheduled, rate, pending))
}

// phase draws status's figures while the caller works on something it
// cannot tick from (building the cluster, waiting for the cache, the
// audit): a goroutine asks status, at most as often as tick draws, for
// the fraction done (< 0: unknown) and a text, given the time since phase
// was called. status must be safe to call from that goroutine. The
// returned end stops the goroutine and waits for it; it may be called
// more than once. With a nil writer no goroutine is started.
func (p *progress) phase(status func(elapsed time.Duration) (frac float64, text string)) (end func()) {
	if p.w == nil {
		return func() {}
	}
	start := time.Now()
	stop, done := make(chan struct{}), make(chan struct{})
	period := barEvery
	if p.force {
		period = forceEvery
	}
	go func() { // owned by phase's caller: end stops it
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			p.mu.Lock()
			if now := time.Now(); p.due(now) {
				frac, text := status(now.Sub(start))
				p.draw(now, frac, text)
			}
			p.mu.Unlock()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
		})
	}
}

// elapsed is a phase's status with no fraction: its name and how long
// it has lasted.
func elapsed(name string) func(time.Duration) (float64, string) {
	return func(d time.Duration) (float64, string) {
		return -1, fmt.Sprintf("%s: %v", name, d.Truncate(100*time.Millisecond))
	}
}

// bar renders frac as "[#####.....]  45%" with n cells (30 when n is 0).
func bar(frac float64, n int) string {
	if n <= 0 {
		n = 30
	}
	if !(frac >= 0) { // NaN too
		frac = 0
	}
	frac = min(frac, 1)
	full := int(frac * float64(n))
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", n-full) + "] " + fmt.Sprintf("%3d%%", int(frac*100))
}
