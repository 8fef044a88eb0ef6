package sim

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/schedcache/schedcache"
)

func profileArgs(extra ...string) []string {
	return append([]string{"-deterministic", "-nodes", "30", "-pods-per-node", "5", "-duration", "50ms", "-sample", "5"}, extra...)
}

// requirePprof checks that path holds a pprof profile: gzip-compressed
// protocol buffers, not empty.
func requirePprof(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err, "%s: not a pprof profile (gzip)", path)
	b, err := io.ReadAll(zr)
	require.NoError(t, err, path)
	require.NotEmpty(t, b, path)
	// Walk the top-level fields of the Profile message: they must
	// cover the bytes exactly, with sample_type (1) and string_table (6).
	fields := map[uint64]bool{}
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		require.Positive(t, n, "%s: bad field tag", path)
		b = b[n:]
		switch tag & 7 {
		case 0:
			_, n = binary.Uvarint(b)
			require.Positive(t, n, "%s: bad varint", path)
		case 1:
			n = 8
		case 2:
			l, m := binary.Uvarint(b)
			require.Positive(t, m, "%s: bad length", path)
			n = m + int(l)
		case 5:
			n = 4
		default:
			t.Fatalf("%s: wire type %d", path, tag&7)
		}
		require.LessOrEqual(t, n, len(b), "%s: truncated field %d", path, tag>>3)
		b = b[n:]
		fields[tag>>3] = true
	}
	require.True(t, fields[1] && fields[6], "%s: no sample_type or string_table: %v", path, fields)
}

// -cpuprofile, -memprofile and -trace write their files, complete and
// parsable, with no temporary file left beside them.
func TestProfileFiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof"), filepath.Join(dir, "run.trace")
	var stdout, stderr bytes.Buffer
	code := realMain(context.Background(), profileArgs("-cpuprofile", cpu, "-memprofile", mem, "-trace", tr), &stdout, &stderr, false, hooks{})
	require.Equal(t, exitOK, code, stderr.String())
	requirePprof(t, cpu)
	requirePprof(t, mem)
	b, err := os.ReadFile(tr)
	require.NoError(t, err)
	require.Regexp(t, `^go 1\.[0-9]+ trace\x00`, string(b[:min(len(b), 16)]), "trace magic")
	require.Greater(t, len(b), 16)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 3, "temporary files left: %v", entries)

	// A sweep profiles all its runs into one set of files.
	out := filepath.Join(dir, "sweep")
	sweepCPU := filepath.Join(dir, "sweep.pprof")
	code = realMain(context.Background(), profileArgs("-sweep-seeds", "1-2", "-out", out, "-cpuprofile", sweepCPU), &stdout, &stderr, false, hooks{})
	require.Equal(t, exitOK, code, stderr.String())
	requirePprof(t, sweepCPU)
}

// A profile's bad path, stdout or a path another output takes, and an
// address -pprof cannot listen on, are refused before the run (exit 2, a
// line naming the flag), and no output file is left.
func TestProfileRefused(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "r.json")
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"-cpuprofile", filepath.Join(dir, "missing", "cpu.pprof")}, "-cpuprofile"},
		{[]string{"-memprofile", dir}, "-memprofile"},
		{[]string{"-trace", "-"}, "-trace"},
		{[]string{"-trace", js}, "-trace"},
		{[]string{"-pprof", "256.0.0.1:bad"}, "-pprof"},
	} {
		var stdout, stderr bytes.Buffer
		args := profileArgs(append([]string{"-json", js}, c.args...)...)
		code := realMain(context.Background(), args, &stdout, &stderr, false, hooks{})
		require.Equal(t, exitUsage, code, "%v: %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.flag, c.args)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%v: %q", c.args, stderr.String())
		require.NotContains(t, stderr.String(), "building cluster")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "%v: files left", c.args)
	}
}

// -pprof serves net/http/pprof while the run runs, says where on stderr,
// and its server goroutine is stopped when the command returns.
func TestProfilePprofServer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var stdout, stderr bytes.Buffer
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var got string
	h := hooks{beforeAudit: func(*schedcache.Cache, *Truth) {
		// The event loop's goroutine, the one that wrote stderr.
		m := regexp.MustCompile(`pprof at (http://\S+/debug/pprof/)`).FindStringSubmatch(stderr.String())
		require.NotNil(t, m, stderr.String())
		resp, err := client.Get(m[1] + "cmdline")
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		got = string(b)
	}}
	code := realMain(context.Background(), profileArgs("-pprof", "127.0.0.1:0"), &stdout, &stderr, false, h)
	require.Equal(t, exitOK, code, stderr.String())
	require.NotEmpty(t, got, "the server answered nothing")
	m := regexp.MustCompile(`pprof at (http://\S+/debug/pprof/)`).FindStringSubmatch(stderr.String())
	_, err := client.Get(m[1])
	require.Error(t, err, "the server still answers after the command returned")
}
