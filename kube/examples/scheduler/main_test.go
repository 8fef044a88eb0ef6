package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/internal/watchdog"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

// Every bad flag is one line naming it, exit 2, no panic and no struct
// dump (issue 28: -pods -5 panicked in makeslice, -failure-rate NaN was
// accepted, -failure-rate 2 printed the SimOptions struct).
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-pods", "-5"}, "scheduler: -pods: must be 0 to 1000000, got -5; run scheduler -h for usage"},
		{[]string{"-failure-rate", "NaN"}, "scheduler: -failure-rate: must be a fraction in [0, 1) (at 1 no binding succeeds), got NaN; run scheduler -h for usage"},
		{[]string{"-failure-rate", "2"}, "scheduler: -failure-rate: must be a fraction in [0, 1) (at 1 no binding succeeds), got 2; run scheduler -h for usage"},
		{[]string{"-nodes", "0"}, "scheduler: -nodes: must be 1 to 10000, got 0; run scheduler -h for usage"},
		{[]string{"-latency", "-1s"}, "scheduler: -latency: must be 0 to 1m0s, got -1s; run scheduler -h for usage"},
		{[]string{"-nodes", "abc"}, `scheduler: -nodes: invalid value "abc": parse error; run scheduler -h for usage`},
		{[]string{"-nodez", "3"}, "scheduler: -nodez: no such flag; run scheduler -h for usage"},
		{[]string{"-seed"}, "scheduler: -seed: needs a value; run scheduler -h for usage"},
		{[]string{"stray"}, `scheduler: unexpected argument "stray" (flags only); run scheduler -h for usage`},
	} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, exitUsage, run(context.Background(), tc.args, &stdout, &stderr), tc.args)
		require.Equal(t, tc.want+"\n", stderr.String(), tc.args)
		require.Empty(t, stdout.String())
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"-h"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "-failure-rate")
}

// A run whose pods do not all fit reports the pending ones and exits 0.
func TestRunReportsPending(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"-nodes", "1", "-pods", "45", "-failure-rate", "0"}, &stdout, &stderr), stderr.String())
	require.True(t, strings.HasPrefix(stdout.String(), "scheduled 40 of 45 pods on 1 nodes: 0 bindings failed and were forgotten; 5 pods stay pending: no node fits them\n"), stdout.String())
	require.Empty(t, stderr.String())
}
