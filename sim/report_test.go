package sim

import (
	"encoding/xml"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A run shorter than 1 s (scheduling-basic-5000 schedules its pods in a
// fraction of a second) reports its throughput over one partial window,
// the whole run, not Average 0 over "0" windows (issue 28).
func TestShortRunThroughput(t *testing.T) {
	args := []string{"-preset", "scheduling-basic-5000", "-nodes", "200", "-pods", "2000", "-deterministic", "-json", "-"}
	code, rep, stderr := runJSON(t, args, hooks{})
	require.Equal(t, exitOK, code, stderr)
	require.Less(t, rep.Timing.RunSeconds, 1.0, "the run is shorter than one window")
	tp := rep.DataItems[0]
	require.Equal(t, "SchedulingThroughput", tp.Labels["Metric"])
	require.Equal(t, "1", tp.Labels["Windows"])
	secs, err := strconv.ParseFloat(tp.Labels["WindowSeconds"], 64)
	require.NoError(t, err)
	require.InDelta(t, rep.Timing.RunSeconds, secs, 0.001)
	require.Positive(t, rep.Timing.PodsPerSecOverall)
	for _, k := range []string{"Average", "Perc50", "Perc99"} {
		require.InDelta(t, rep.Timing.PodsPerSecOverall, tp.Data[k], 1e-6*rep.Timing.PodsPerSecOverall, k)
	}
	require.Contains(t, stderr, "run shorter than 1 s: one partial window")
	require.Equal(t, []float64{400}, windowsOf([]int64{200}, 500*time.Millisecond, time.Second))
	require.Empty(t, windowsOf(nil, 0, time.Second))
}

// The plot has a title with the run's configuration, gridlines, and a
// logarithmic latency axis: a p50 of microseconds under a p99 of 51 ms is
// well above the axis' bottom, not flat on zero (issue 28).
func TestSVGTitleGridLogScale(t *testing.T) {
	cfg := defaultConfig()
	cfg.Nodes, cfg.Seed, cfg.Scenario = 123, 42, "preset w3"
	r := &Report{Config: cfg, InitialPods: 3690, Shards: 2, Picker: "upstream-plugins", Scheduled: 3000,
		Elapsed: 3 * time.Second, PodsPerSec: 1000, Stopped: "duration"}
	for i := 1; i <= 3; i++ {
		r.Series = append(r.Series, SeriesRow{Seconds: float64(i), PodsPerSec: 1000, P50: 10 * time.Microsecond, P99: 51 * time.Millisecond})
	}
	r.Series = append(r.Series, SeriesRow{Seconds: 3.5}) // a window with no pod: no latency point
	var b strings.Builder
	require.NoError(t, r.WriteSVG(&b))
	svg := b.String()
	var doc struct {
		Header []struct {
			Class string `xml:"class,attr"`
			Text  string `xml:",chardata"`
		} `xml:"text"`
		Groups []struct {
			ID    string `xml:"id,attr"`
			Lines []struct {
				Class string  `xml:"class,attr"`
				Y1    float64 `xml:"y1,attr"`
			} `xml:"line"`
			Ticks []struct {
				Class string `xml:"class,attr"`
				Text  string `xml:",chardata"`
			} `xml:"text"`
			Series []struct {
				Name   string `xml:"data-name,attr"`
				Points string `xml:"points,attr"`
			} `xml:"polyline"`
		} `xml:"g"`
	}
	require.NoError(t, xml.Unmarshal([]byte(svg), &doc))
	var header []string
	for _, h := range doc.Header {
		header = append(header, h.Text)
	}
	require.Len(t, header, 3)
	require.Contains(t, header[0], "123 nodes, 3690 pods at start, seed 42, scenario preset w3")
	require.Contains(t, header[1], "4 schedulers, sample 50, picker upstream-plugins, closed-loop arrivals, real time, 2 shards")
	require.Contains(t, header[2], "3000 pods scheduled in 3s (1000 pods/s), stopped by duration")

	require.Len(t, doc.Groups, 2)
	lat := doc.Groups[1]
	require.Equal(t, "latency", lat.ID)
	grid := 0
	for _, l := range lat.Lines {
		if l.Class == "grid" {
			grid++
		}
	}
	require.GreaterOrEqual(t, grid, 5+4, "decade and time gridlines")
	var ticks []string
	for _, tx := range lat.Ticks {
		if tx.Class == "tick" {
			ticks = append(ticks, tx.Text)
		}
	}
	require.Subset(t, ticks, []string{"10µs", "100µs", "1ms", "10ms", "100ms"})
	require.Len(t, lat.Series, 2)
	ys := func(points string) []float64 {
		var out []float64
		for _, p := range strings.Fields(points) {
			_, y, ok := strings.Cut(p, ",")
			require.True(t, ok)
			v, err := strconv.ParseFloat(y, 64)
			require.NoError(t, err)
			out = append(out, v)
		}
		return out
	}
	p50, p99 := ys(lat.Series[0].Points), ys(lat.Series[1].Points)
	require.Len(t, p50, 3, "the empty window has no point")
	bottom := 0.0 // the axis' bottom: the lowest gridline
	for _, l := range lat.Lines {
		bottom = max(bottom, l.Y1)
	}
	height := 190.0 // the panel's plot area
	for i := range p50 {
		require.Greater(t, bottom-p50[i], 0.15*height, "p50 flat on the axis' bottom (a linear axis puts it 0.04 px above)")
		require.Greater(t, p50[i]-p99[i], 0.4*height, "p50 and p99 apart")
	}
}

// With a plugin picker, the pick is labelled as such, not as a snapshot
// read (issue 28).
func TestPluginPickLabel(t *testing.T) {
	args := []string{"-deterministic", "-nodes", "20", "-pods-per-node", "2", "-duration", "100ms", "-json", "-"}
	code, rep, text := runJSON(t, args, hooks{picker: &firstFit{}})
	require.Equal(t, exitOK, code, text)
	require.Contains(t, text, "pick latency:          p50 ")
	require.Contains(t, text, "(snapshot + the first-fit picker's Pick)")
	require.NotContains(t, text, "snapshot read latency")
	metrics := map[string]DataItem{}
	for _, it := range rep.DataItems {
		metrics[it.Labels["Metric"]] = it
	}
	require.Contains(t, metrics, "PickDuration")
	require.Equal(t, "first-fit", metrics["PickDuration"].Labels["Picker"])
	require.NotContains(t, metrics, "SnapshotReadDuration")

	code, rep, text = runJSON(t, args, hooks{})
	require.Equal(t, exitOK, code, text)
	require.Contains(t, text, "snapshot read latency: p50 ")
	require.Equal(t, "SnapshotReadDuration", rep.DataItems[3].Labels["Metric"])
}
