package sim

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// -record PATH.gz writes a gzip trace, and -replay reads gzip traces,
// told by their first bytes whatever their name (issue 28: -replay
// x.jsonl.gz failed on the gzip header).
func TestReplayGzip(t *testing.T) {
	dir := t.TempDir()
	plain, gz := filepath.Join(dir, "run.jsonl"), filepath.Join(dir, "run.jsonl.gz")
	code, a, stderr := runJSON(t, recArgs(plain), hooks{})
	require.Equal(t, exitOK, code, stderr)
	code, b, stderr := runJSON(t, recArgs(gz), hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, a.Digest, b.Digest, "compressing the trace does not change the run")

	raw, err := os.ReadFile(gz)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(raw, gzipMagic), "-record .gz wrote no gzip")
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	var unzipped bytes.Buffer
	_, err = unzipped.ReadFrom(zr)
	require.NoError(t, err)
	want, err := os.ReadFile(plain)
	require.NoError(t, err)
	require.Equal(t, string(want), unzipped.String(), "the gzip trace holds the plain one")

	// gzip -k of a plain trace, and a gzip trace under a name without .gz.
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, err = zw.Write(want)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	kept, renamed := filepath.Join(dir, "kept.jsonl.gz"), filepath.Join(dir, "trace.bin")
	require.NoError(t, os.WriteFile(kept, zb.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(renamed, raw, 0o644))
	for _, p := range []string{gz, kept, renamed, plain} {
		code, out, stderr := replay(t, p)
		require.Equal(t, exitOK, code, "%s: %s%s", p, out, stderr)
		require.Contains(t, out, "final totals match the recorded ones", p)
	}

	// A file that begins like gzip but is not: exit 2, named.
	bad := filepath.Join(dir, "bad.gz")
	require.NoError(t, os.WriteFile(bad, []byte{0x1f, 0x8b, 0, 0}, 0o644))
	code, _, stderr = replay(t, bad)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "loadgen: -replay: "+bad+": gzip:")
}
