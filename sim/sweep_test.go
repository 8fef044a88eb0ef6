package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache"
)

// sweepBase is a tiny deterministic run, without -seed and -json.
func sweepBase() []string {
	return []string{"-deterministic", "-nodes", "30", "-pods-per-node", "5", "-duration", "100ms",
		"-confirm-delay", "2ms", "-fail-rate", "0.05", "-sample", "10"}
}

type sweepSummary struct {
	Runs  int          `json:"runs"`
	Total int          `json:"sweep_runs"`
	Items []SweepEntry `json:"items"`
}

func readSummary(t *testing.T, p string) sweepSummary {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var s sweepSummary
	require.NoError(t, json.Unmarshal(b, &s))
	return s
}

// A sweep of three seeds writes three reports and a summary with three
// distinct digests; -sweep-index (or $JOB_COMPLETION_INDEX) runs only
// the chosen combination, with the same digest as in the sweep.
func TestSweepSeeds(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := append(sweepBase(), "-sweep-seeds", "3-5", "-out", dir)
	require.Equal(t, exitOK, realMain(context.Background(), args, &stdout, &stderr, false, hooks{}), stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 3, stdout.String())
	require.Contains(t, lines[0], "run 1/3 default seed=3:")
	s := readSummary(t, filepath.Join(dir, "summary.json"))
	require.Equal(t, 3, s.Runs)
	require.Len(t, s.Items, 3)
	digests := map[string]bool{}
	for i, e := range s.Items {
		require.Equal(t, int64(3+i), e.Seed)
		require.Equal(t, exitOK, e.Exit)
		require.Zero(t, e.Divergences)
		require.Positive(t, e.PodsPerSec)
		require.Positive(t, e.AttemptP99ms)
		require.True(t, strings.HasPrefix(e.Digest, "sha256:"), e.Digest)
		digests[e.Digest] = true
		b, err := os.ReadFile(filepath.Join(dir, e.File))
		require.NoError(t, err)
		var rep JSONReport
		require.NoError(t, json.Unmarshal(b, &rep))
		require.Equal(t, e.Digest, rep.Digest)
		require.Equal(t, e.Seed, rep.Config.Seed)
	}
	require.Len(t, digests, 3, "each seed is its own run")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 4, "three reports and the summary")

	// One combination by index, as an Indexed Job pod runs it.
	dir2 := t.TempDir()
	stdout.Reset()
	args = append(sweepBase(), "-sweep-seeds", "3-5", "-out", dir2, "-sweep-index", "1")
	require.Equal(t, exitOK, realMain(context.Background(), args, &stdout, &stderr, false, hooks{}), stderr.String())
	require.Contains(t, stdout.String(), "run 2/3 default seed=4:")
	one := readSummary(t, filepath.Join(dir2, "summary-1.json"))
	require.Len(t, one.Items, 1)
	require.Equal(t, 3, one.Total)
	require.Equal(t, s.Items[1].Digest, one.Items[0].Digest)
	_, err = os.Stat(filepath.Join(dir2, s.Items[1].File))
	require.NoError(t, err)

	t.Setenv(envJobIndex, "2")
	dir3 := t.TempDir()
	args = append(sweepBase(), "-sweep-seeds", "3-5", "-out", dir3)
	require.Equal(t, exitOK, realMain(context.Background(), args, io.Discard, &stderr, false, hooks{}), stderr.String())
	env := readSummary(t, filepath.Join(dir3, "summary-2.json"))
	require.Equal(t, s.Items[2].Digest, env.Items[0].Digest)
}

// Presets are swept too, each by name; the flags apply to every run.
func TestSweepPresets(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"-deterministic", "-nodes", "30", "-initial-pods", "150", "-duration", "100ms", "-pods", "0", "-sample", "10",
		"-schedulers", "2", "-sweep-presets", "standard,open-poisson", "-sweep-seeds", "1,2", "-out", dir}
	require.Equal(t, exitOK, realMain(context.Background(), args, &stdout, &stderr, false, hooks{}), stderr.String())
	s := readSummary(t, filepath.Join(dir, "summary.json"))
	require.Len(t, s.Items, 4)
	var names []string
	for _, e := range s.Items {
		names = append(names, e.File)
	}
	require.Equal(t, []string{"standard-seed1.json", "standard-seed2.json", "open-poisson-seed1.json", "open-poisson-seed2.json"}, names)
}

// A run whose audit diverges makes the sweep exit 3, after every run.
func TestSweepDivergence(t *testing.T) {
	dir := t.TempDir()
	n := 0
	h := hooks{beforeAudit: func(_ *schedcache.Cache, truth *Truth) {
		n++
		if n == 1 { // the first run's truth forgets a bound pod
			var victim podRecord
			truth.pods.Range(func(_ string, r podRecord) bool { victim = r; return !r.Bound })
			truth.Delete(victim.Pod)
		}
	}}
	var stdout bytes.Buffer
	args := append(sweepBase(), "-sweep-seeds", "1,2", "-out", dir)
	require.Equal(t, exitDivergence, realMain(context.Background(), args, &stdout, io.Discard, false, h))
	s := readSummary(t, filepath.Join(dir, "summary.json"))
	require.Len(t, s.Items, 2)
	require.Equal(t, exitDivergence, s.Items[0].Exit)
	require.Positive(t, s.Items[0].Divergences)
	require.Equal(t, exitOK, s.Items[1].Exit)
}

// Bad sweep specifications are refused before any run with exit code 2.
func TestSweepRejects(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-sweep-seeds", "1-3"}, "-out"},
		{[]string{"-out", dir}, "-out"},
		{[]string{"-sweep-index", "0", "-out", dir}, "-sweep-index"},
		{[]string{"-sweep-seeds", "", "-out", dir}, "-sweep-seeds"},
		{[]string{"-sweep-seeds", "3-1", "-out", dir}, "backwards"},
		{[]string{"-sweep-seeds", "1-x", "-out", dir}, "-sweep-seeds"},
		{[]string{"-sweep-seeds", "1,,2", "-out", dir}, "-sweep-seeds"},
		{[]string{"-sweep-seeds", "1-3,2", "-out", dir}, "twice"},
		{[]string{"-sweep-seeds", "1-20000", "-out", dir}, "at most"},
		{[]string{"-sweep-seeds", "-9223372036854775808-9223372036854775807", "-out", dir}, "at most"},
		{[]string{"-sweep-seeds", "1-3", "-out", dir, "-sweep-index", "3"}, "out of range"},
		{[]string{"-sweep-seeds", "1-3", "-out", dir, "-sweep-index", "-1"}, "-sweep-index"},
		{[]string{"-sweep-seeds", "1-3", "-out", dir, "-sweep-index", "x"}, "-sweep-index"},
		{[]string{"-sweep-seeds", "1-3", "-out", dir, "-seed", "4"}, "-seed"},
		{[]string{"-sweep-seeds", "1-3", "-out", dir, "-json", "-"}, "-json"},
		{[]string{"-sweep-seeds", "1-3", "-out", dir, "-svg", "x.svg"}, "-svg"},
		{[]string{"-sweep-seeds", "1-3", "-out", dir, "-nodes", "0"}, "-nodes"},
		{[]string{"-sweep-seeds", "1-3", "-sweep-seeds", "4", "-out", dir}, "twice"},
		{[]string{"-sweep-seeds", "1-3", "-out", filepath.Join(file, "sub")}, "-out"},
		{[]string{"-sweep-presets", "standard,nope", "-out", dir}, "nope"},
		{[]string{"-sweep-presets", "standard,standard", "-out", dir}, "twice"},
		{[]string{"-sweep-presets", "standard", "-preset", "w3", "-out", dir}, "-preset"},
		{[]string{"-sweep-presets", "standard", "-sweep-scenarios", "a.yaml", "-out", dir}, "not both"},
		{[]string{"-sweep-scenarios", filepath.Join(dir, "missing.yaml"), "-out", dir}, "missing.yaml"},
		{[]string{"-sweep-scenarios", "a/x.yaml,b/x.yml", "-out", dir}, "collide"},
		{[]string{"-sweep-seeds"}, "needs a value"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := realMain(context.Background(), tc.args, &stdout, &stderr, false, hooks{
				beforeAudit: func(*schedcache.Cache, *Truth) { t.Error("a run started") },
			})
			require.Equal(t, exitUsage, code, "stderr: %s", stderr.String())
			require.Contains(t, stderr.String(), tc.want)
			require.Empty(t, stdout.String())
		})
	}
	t.Setenv(envJobIndex, "seven")
	var stderr bytes.Buffer
	require.Equal(t, exitUsage, realMain(context.Background(), []string{"-sweep-seeds", "1-3", "-out", dir}, io.Discard, &stderr, false, hooks{}))
	require.Contains(t, stderr.String(), envJobIndex)

	// An index out of range names the variable it came from (issue 28).
	t.Setenv(envJobIndex, "7")
	stderr.Reset()
	require.Equal(t, exitUsage, realMain(context.Background(), []string{"-sweep-seeds", "1-3", "-out", dir}, io.Discard, &stderr, false, hooks{}))
	require.Contains(t, stderr.String(), "-sweep-index (from $JOB_COMPLETION_INDEX): 7 is out of range: the sweep has 3 runs (0 to 2)")
	stderr.Reset()
	require.Equal(t, exitUsage, realMain(context.Background(), []string{"-sweep-seeds", "1-3", "-out", dir, "-sweep-index", "3"}, io.Discard, &stderr, false, hooks{}))
	require.Contains(t, stderr.String(), "loadgen: -sweep-index: 3 is out of range", "the flag wins over the variable")
}

// -svg draws the run's 1 s windows: a well-formed SVG with both panels'
// titles and one point per window in every series.
func TestSVG(t *testing.T) {
	p := filepath.Join(t.TempDir(), "plot.svg")
	csvPath := filepath.Join(t.TempDir(), "series.csv")
	args := []string{"-csv", csvPath, "-deterministic", "-nodes", "60", "-pods-per-node", "10", "-schedulers", "2", "-decision-time", "1ms",
		"-duration", "3s", "-arrival", "poisson", "-rate", "1000", "-svg", p}
	require.Equal(t, exitOK, realMain(context.Background(), args, io.Discard, io.Discard, false, hooks{}))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		Groups  []struct {
			ID     string `xml:"id,attr"`
			Titles []struct {
				Class string `xml:"class,attr"`
				Text  string `xml:",chardata"`
			} `xml:"text"`
			Lines []struct {
				Name   string `xml:"data-name,attr"`
				Points string `xml:"points,attr"`
			} `xml:"polyline"`
			Circles []struct{} `xml:"circle"`
		} `xml:"g"`
	}
	require.NoError(t, xml.Unmarshal(b, &doc))
	require.Len(t, doc.Groups, 2)
	wantTitles := []string{svgTitleThroughput, svgTitleLatency}
	wantLines := [][]string{{"pods/s"}, {"p50", "p99"}}
	for i, g := range doc.Groups {
		var title string
		for _, tx := range g.Titles {
			if tx.Class == "title" {
				title = tx.Text
			}
		}
		require.Equal(t, wantTitles[i], title)
		require.Len(t, g.Lines, len(wantLines[i]))
		for j, l := range g.Lines {
			require.Equal(t, wantLines[i][j], l.Name)
			require.Len(t, strings.Fields(l.Points), 3, "one point per 1 s window: %s", l.Points)
		}
		require.Len(t, g.Circles, 3*len(wantLines[i]))
	}
	// The same windows as the CSV's rows.
	c, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(string(c)), "\n"), 1+3)
	require.Contains(t, string(b), "Throughput (pods/s per 1 s window)")
	require.Contains(t, string(b), "Attempt latency per 1 s window (log scale): p50, p99")
}

// A -svg path that cannot be created is refused before the run.
func TestSVGBadPath(t *testing.T) {
	var stderr bytes.Buffer
	code := realMain(context.Background(), []string{"-svg", filepath.Join(t.TempDir(), "missing", "p.svg")}, io.Discard, &stderr, false, hooks{
		beforeAudit: func(*schedcache.Cache, *Truth) { t.Error("the run started") },
	})
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr.String(), "-svg")
}

// Scenario files are swept by file, named by their base names; without
// -sweep-seeds each run keeps the seed of its file or flags.
func TestSweepScenarioFiles(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"-deterministic", "-nodes", "30", "-initial-pods", "150", "-duration", "100ms", "-pods", "0", "-sample", "10",
		"-schedulers", "2", "-sweep-scenarios", "scenarios/standard.yaml,scenarios/open-poisson.yaml", "-out", dir}
	require.Equal(t, exitOK, realMain(context.Background(), args, &stdout, &stderr, false, hooks{}), stderr.String())
	s := readSummary(t, filepath.Join(dir, "summary.json"))
	require.Len(t, s.Items, 2)
	require.Equal(t, "standard-seed1.json", s.Items[0].File)
	require.Equal(t, "open-poisson", s.Items[1].Name)
	b, err := os.ReadFile(filepath.Join(dir, s.Items[1].File))
	require.NoError(t, err)
	var rep JSONReport
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Equal(t, "poisson", rep.Arrivals.Mode, "the scenario file's arrivals apply")
	require.Equal(t, s.Items[1].Digest, rep.Digest)
}
