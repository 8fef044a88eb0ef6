//go:build !race

package bench

// raceEnabled reports whether the test binary runs under the race detector.
const raceEnabled = false
