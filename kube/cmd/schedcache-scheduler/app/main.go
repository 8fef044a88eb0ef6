package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit codes of Main.
const (
	ExitOK      = 0
	ExitFailure = 1 // the scheduler could not start or stopped on an error
	ExitUsage   = 2 // bad flags or configuration
)

// Main runs the command with args (without the program name) until ctx
// ends and returns its exit code; the cause of a failure is one line on
// stderr. It never exits the process and recovers a panic into
// ExitFailure.
func Main(ctx context.Context, args []string, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "schedcache-scheduler: internal error: %v\n", r)
			code = ExitFailure
		}
	}()
	opts, err := ParseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, ErrUsage) && errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		fmt.Fprintf(stderr, "schedcache-scheduler: %v\n", err)
		return ExitUsage
	}
	if err := Run(ctx, opts); err != nil {
		fmt.Fprintf(stderr, "schedcache-scheduler: %v\n", err)
		if errors.Is(err, ErrInvalidConfig) {
			return ExitUsage
		}
		return ExitFailure
	}
	return ExitOK
}
