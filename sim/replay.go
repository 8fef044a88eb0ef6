package sim

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/sim/trace"
)

// replayPath returns the -replay path when args ask for a replay, and an
// error when they mix -replay with other flags.
func replayPath(args []string) (path string, ok bool, err error) {
	found := false
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "replay" {
			found = true
		}
	}
	if !found {
		return "", false, nil
	}
	fs := flag.NewFlagSet("loadgen -replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&path, "replay", "", "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return "", true, bad("replay", "needs a path and no other flag or argument: loadgen -replay PATH")
	}
	if path == "" {
		return "", true, bad("replay", "needs a trace file")
	}
	return path, true, nil
}

// runReplay replays the trace at path against a fresh cache, checks every
// call's result and the final totals against the recorded ones, and
// prints what it found. Exit 3 on any mismatch.
func runReplay(ctx context.Context, path string, stdout, stderr io.Writer) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: -replay:", err)
		return exitUsage
	}
	defer f.Close()
	r, err := openTrace(f) // gzip or not, by its first bytes
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: -replay: %s: %v\n", path, err)
		return exitUsage
	}
	c, err := schedcache.New(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: -replay:", err)
		return exitFailed
	}
	defer c.Close()
	res, err := trace.Replay(ctx, trace.CacheTarget(c), trace.NewReader(r))
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: -replay: after %d calls: %v\n", res.Calls, err)
		return exitFailed
	}
	got, err := trace.CacheTotals(c)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: -replay:", err)
		return exitFailed
	}
	bad := res.Mismatches + res.TextDiffs
	fmt.Fprintf(stdout, "replayed %d calls: %d results differ from the recorded ones (%d error/nil, %d error text)\n", res.Calls, bad, res.Mismatches, res.TextDiffs)
	for _, m := range append(res.Kept, res.KeptText...) {
		fmt.Fprintln(stdout, "  mismatch:", m)
	}
	fmt.Fprintf(stdout, "final state: %d pods, %d nodes\n", got.Pods, got.Nodes)
	if res.End == nil {
		fmt.Fprintln(stdout, "the trace has no End record (truncated): final totals not checked")
		bad++
	} else if d := res.End.Diff(got, 20); len(d) > 0 {
		fmt.Fprintln(stdout, "final totals differ from the recorded ones:")
		for _, l := range d {
			fmt.Fprintln(stdout, "  "+l)
		}
		bad++
	} else {
		fmt.Fprintln(stdout, "final totals match the recorded ones")
	}
	if bad > 0 {
		fmt.Fprintln(stderr, "loadgen: the replay diverges from the recorded trace")
		return exitDivergence
	}
	return exitOK
}
