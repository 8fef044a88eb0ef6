package fwkpick

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/bench/schedconfig"
	scfw "github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim"
)

// exampleConfig is the documented example (docs/loadgen.md).
const exampleConfig = "../testdata/kube-scheduler-config.yaml"

// writeConfig writes text to a file of t's and returns its path.
func writeConfig(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

const v1Head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

// loadCluster returns a cache of n 4-CPU nodes, node-0 holding a pod of
// busy CPUs; it closes when t ends.
func loadCluster(t *testing.T, n int, busy string) *schedcache.Cache {
	t.Helper()
	c, err := schedcache.New(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for i := range n {
		_, err := c.AddNode(klog.Background(), cpuNode(fmt.Sprintf("node-%d", i)))
		require.NoError(t, err)
	}
	require.NoError(t, c.AddPod(klog.Background(), cpuPod("busy", "node-0", busy)))
	return c
}

// pick runs one Pick of a 500m pod of scheduler sched.
func pick(t *testing.T, np *NodePicker, c *schedcache.Cache, name, sched string, rej []int64) (string, error) {
	t.Helper()
	pod := cpuPod(name, "", "500m")
	pod.Spec.SchedulerName = sched
	info, err := scfw.NewPodInfo(pod)
	require.NoError(t, err)
	return np.Pick(context.Background(), c.Snapshot(), info, rand.New(rand.NewPCG(1, 1)), rej)
}

// The example file: two profiles, the global and per-profile
// percentageOfNodesToScore and parallelism as upstream resolves them, the
// unfed plugins of upstream's defaults left out; a pod goes to the
// profile of its schedulerName (default-scheduler spreads to an empty
// node, bin-packing's MostAllocated packs onto the busy one), and a pod
// of no profile's fails its attempt with ErrNoProfile.
func TestConfigFileProfiles(t *testing.T) {
	f, err := schedconfig.Read(exampleConfig)
	require.NoError(t, err)
	p, err := New(Config{File: f})
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, []string{"default-scheduler", "bin-packing"}, p.SchedulerNames())
	require.Equal(t, 8, p.par)
	require.Equal(t, int32(50), p.profiles[0].pct, "the global percentage")
	require.Equal(t, int32(100), p.profiles[1].pct, "the profile's own")
	require.Equal(t, 500, p.NumFeasibleNodesToFind(1000), "the first profile's 50%")
	require.Equal(t, []string{"DynamicResources", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"}, p.Dropped()["bin-packing"])
	require.Contains(t, p.Plugins(), "NodeResourcesFit")
	require.NotContains(t, p.Plugins(), "VolumeBinding")
	require.NotContains(t, p.profiles[1].plugins, "ImageLocality", "disabled in bin-packing")
	require.Contains(t, p.profiles[0].plugins, "ImageLocality")

	c := loadCluster(t, 4, "2")
	np, err := p.NewFramework(context.Background())
	require.NoError(t, err)
	rej := make([]int64, len(p.Plugins()))
	got, err := pick(t, np, c, "spread", "default-scheduler", rej)
	require.NoError(t, err)
	require.NotEqual(t, "node-0", got, "LeastAllocated avoids the busy node")
	got, err = pick(t, np, c, "packed", "bin-packing", rej)
	require.NoError(t, err)
	require.Equal(t, "node-0", got, "MostAllocated packs onto the busy node")
	got, err = pick(t, np, c, "defaulted", "", rej)
	require.NoError(t, err)
	require.NotEqual(t, "node-0", got, `"" is default-scheduler`)

	_, err = pick(t, np, c, "lost", "nobody", rej)
	require.ErrorIs(t, err, ErrNoProfile)
	require.ErrorIs(t, err, sim.ErrAttempt)
	var ae *sim.AttemptError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "no-profile", ae.Reason)
	require.Contains(t, err.Error(), `"nobody"`)
}

// Bad configurations are refused by New with ErrConfig, naming the file
// (or the field) and the cause; bad files are refused by schedconfig.Read
// with upstream's message and the file's name.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		read       bool // Read refuses it (else New does)
		want       string
	}{
		{"malformed", v1Head + "profiles: [\n", true, "yaml"},
		{"apiVersion", "apiVersion: kubescheduler.config.k8s.io/v9\nkind: KubeSchedulerConfiguration\n", true, "v9"},
		{"kind", "apiVersion: v1\nkind: Pod\n", true, "Pod"},
		{"unknown-field", v1Head + "parallelizm: 3\n", true, "parallelizm"},
		{"percentage", v1Head + "percentageOfNodesToScore: 101\n", true, "percentageOfNodesToScore"},
		{"profile-percentage", v1Head + "profiles:\n- schedulerName: a\n  percentageOfNodesToScore: 101\n", true, "percentageOfNodesToScore"},
		{"args", v1Head + "profiles:\n- pluginConfig:\n  - name: NodeResourcesBalancedAllocation\n    args: {resources: [{name: cpu, weight: -1}]}\n", true, "weight"},
		// Upstream's validation misses NodeResourcesFit's arguments (its
		// table names "NodeResourcesFitArgs"); the plugin's factory
		// refuses them, as kube-scheduler's scheduler.New would.
		{"fit-args", v1Head + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: -1}]}\n", false, "weight"},
		{"extender", v1Head + "extenders:\n- {urlPrefix: 'http://x', filterVerb: f}\n", false, "extender"},
		{"parallelism", v1Head + "parallelism: -1\n", true, "parallelism"},
		{"duplicate-profile", v1Head + "profiles:\n- schedulerName: a\n- schedulerName: a\n", true, "Duplicate"},
		{"unknown-plugin", v1Head + "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: NoSuchPlugin\n", false, `unknown plugin "NoSuchPlugin" (enabled at Filter)`},
		{"unfed-plugin", v1Head + "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: VolumeBinding\n", false, "VolumeBinding (enabled at MultiPoint) needs PersistentVolumes"},
		{"not-a-filter", v1Head + "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: PrioritySort\n", false, "does not extend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.name+".yaml", tc.text)
			f, err := schedconfig.Read(path)
			if tc.read {
				require.ErrorIs(t, err, schedconfig.ErrInvalid)
				require.ErrorContains(t, err, path)
				require.ErrorContains(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			p, err := New(Config{File: f})
			if p != nil {
				_ = p.Close()
			}
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, tc.want)
		})
	}
	f, err := schedconfig.Read(exampleConfig)
	require.NoError(t, err)
	_, err = New(Config{File: f, Parallelism: 4})
	require.ErrorIs(t, err, ErrConfig, "File with the flags' fields")
	_, err = New(Config{OutOfTree: frameworkruntime.Registry{"NodeName": nil}})
	require.ErrorIs(t, err, ErrConfig, "an out-of-tree name already in-tree")
	require.ErrorContains(t, err, "NodeName")
	bad := *f
	bad.Config = f.Config.DeepCopy()
	bad.Config.Parallelism = 0
	_, err = New(Config{File: &bad})
	require.ErrorIs(t, err, ErrConfig, "an in-memory configuration is validated too")
	require.ErrorContains(t, err, "parallelism")
}

// evenOnly is an out-of-tree Filter and Score plugin: it rejects the
// odd-numbered nodes and scores the highest-numbered node best; it panics
// in Filter (or Score) for a pod named "panic-filter" ("panic-score").
// Stateless.
type evenOnly struct{}

const evenOnlyName = "EvenOnly"

// errScore is what EvenOnly's Score panics with.
var errScore = errors.New("evenOnly: score told to panic")

func (evenOnly) Name() string { return evenOnlyName }

func nodeNumber(ni fwk.NodeInfo) int {
	var n int
	_, _ = fmt.Sscanf(ni.Node().Name, "node-%d", &n)
	return n
}

func (evenOnly) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if pod.Name == "panic-filter" {
		panic("evenOnly: filter told to panic")
	}
	if nodeNumber(ni)%2 == 1 {
		return fwk.NewStatus(fwk.Unschedulable, "odd node")
	}
	return nil
}

func (evenOnly) Score(_ context.Context, _ fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	if pod.Name == "panic-score" {
		panic(errScore) // on the parallelizer's goroutine
	}
	return int64(nodeNumber(ni)) * 10, nil
}

func (evenOnly) ScoreExtensions() fwk.ScoreExtensions { return nil }

func newEvenOnly(context.Context, kruntime.Object, fwk.Handle) (fwk.Plugin, error) {
	return evenOnly{}, nil
}

// evenOnlyConfig enables EvenOnly at multiPoint with a weight that
// outweighs the default scores.
const evenOnlyConfig = v1Head + `profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - {name: EvenOnly, weight: 50}
`

// An out-of-tree plugin, registered through Config.OutOfTree and enabled
// by the file, changes the decisions (only even nodes, the highest
// first) and counts its rejections; a panic in its Filter (called here on
// the picker's goroutine or the parallelizer's) or Score (always on the
// parallelizer's) fails that pod's attempt with a *PanicError naming it,
// wrapped in a *sim.AttemptError, and the next Pick goes on normally.
func TestOutOfTreePlugin(t *testing.T) {
	f, err := schedconfig.Decode([]byte(evenOnlyConfig), "even.yaml")
	require.NoError(t, err)
	for _, par := range []int{1, 16} {
		t.Run(fmt.Sprint("parallelism-", par), func(t *testing.T) {
			f := *f
			f.Config = f.Config.DeepCopy()
			f.Config.Parallelism = int32(par)
			p, err := New(Config{File: &f, OutOfTree: frameworkruntime.Registry{evenOnlyName: newEvenOnly}})
			require.NoError(t, err)
			defer p.Close()
			require.Contains(t, p.Plugins(), evenOnlyName)
			c := loadCluster(t, 6, "100m")
			np, err := p.NewFramework(context.Background())
			require.NoError(t, err)
			rej := make([]int64, len(p.Plugins()))
			got, err := pick(t, np, c, "p", "", rej)
			require.NoError(t, err)
			require.Equal(t, "node-4", got, "the highest even node")
			require.Equal(t, int64(3), rej[p.index[evenOnlyName]], "the three odd nodes")

			for _, tc := range []struct{ pod, point string }{{"panic-filter", "Filter"}, {"panic-score", "Score"}} {
				_, err = pick(t, np, c, tc.pod, "", rej)
				require.ErrorIs(t, err, sim.ErrAttempt, tc.pod)
				require.ErrorIs(t, err, ErrPluginPanic, tc.pod)
				var pe *PanicError
				require.ErrorAs(t, err, &pe, tc.pod)
				require.Equal(t, evenOnlyName, pe.Plugin)
				require.Equal(t, tc.point, pe.Point)
				require.NotEmpty(t, pe.Stack)
				if tc.point == "Score" {
					require.ErrorIs(t, err, errScore, "an error value stays in the chain")
				}
				var ae *sim.AttemptError
				require.ErrorAs(t, err, &ae)
				require.Equal(t, "plugin-panic", ae.Reason)
			}
			got, err = pick(t, np, c, "after", "", rej)
			require.NoError(t, err)
			require.Equal(t, "node-4", got, "the picker goes on")
		})
	}
	// A factory that panics fails New, naming the plugin.
	_, err = New(Config{File: f, OutOfTree: frameworkruntime.Registry{evenOnlyName: func(context.Context, kruntime.Object, fwk.Handle) (fwk.Plugin, error) {
		panic("no")
	}}})
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorIs(t, err, ErrPluginPanic)
	require.True(t, strings.Contains(err.Error(), evenOnlyName), err.Error())
	// Unguard gives the plugin back.
	require.Equal(t, evenOnly{}, Unguard(guard(evenOnly{})))
	require.True(t, errors.Is(attemptError(nil), nil))
}
