package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A flag the parser refuses is one line naming the flag, what is wrong
// and what it wants, with a hint to -h, exit 2 (issue 28: the flag
// package printed about 100 lines of usage).
func TestFlagParseErrorsOneLine(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-nodes", "abc"}, `loadgen: -nodes: invalid value "abc": want an integer; run loadgen -h for usage`},
		{[]string{"-nodes", "99999999999999999999"}, `loadgen: -nodes: invalid value "99999999999999999999": out of range for an integer; run loadgen -h for usage`},
		{[]string{"-duration", "5"}, `loadgen: -duration: invalid value "5": want a duration (like 5s, 250ms, 100us); run loadgen -h for usage`},
		{[]string{"-fail-rate", "half"}, `loadgen: -fail-rate: invalid value "half": want a number; run loadgen -h for usage`},
		{[]string{"-deterministic=maybe"}, `loadgen: -deterministic: invalid value "maybe": want true or false; run loadgen -h for usage`},
		{[]string{"-node", "5"}, `loadgen: -node: no such flag, did you mean -nodes?; run loadgen -h for usage`},
		{[]string{"-seed"}, `loadgen: -seed: needs an integer; run loadgen -h for usage`},
		{[]string{"stray"}, `loadgen: invalid configuration: unexpected argument "stray" (loadgen takes flags only); run loadgen -h for usage`},
		{[]string{"-sweep-seeds", "1-2", "-out", t.TempDir(), "-nodes", "x"}, `loadgen: -nodes: invalid value "x": want an integer; run loadgen -h for usage`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.Equal(t, exitUsage, realMain(context.Background(), tc.args, &stdout, &stderr, false, hooks{}))
			require.Equal(t, tc.want+"\n", stderr.String())
			require.Empty(t, stdout.String())
		})
	}
	// -h still prints every flag.
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, realMain(context.Background(), []string{"-h"}, &stdout, &stderr, false, hooks{}))
	require.Greater(t, strings.Count(stderr.String(), "\n"), 50)
	require.Contains(t, stderr.String(), "-nodes int")
}
