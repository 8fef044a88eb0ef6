package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/sim/manifest"
)

// fixture is the anonymised 300-node cluster (sim/manifest/fixture_test.go
// generates it).
const fixture = "testdata/cluster-300.yaml.gz"

// A deterministic run on the fixture: the loaded nodes are the cluster,
// its bound pods the initial pods; the same seed gives the same digest.
func TestClusterFromFixtureDeterministic(t *testing.T) {
	args := []string{"-cluster-from", fixture, "-deterministic", "-duration", "300ms", "-seed", "5", "-quiet"}
	cfg, err := parseFlags(args, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 300, cfg.Nodes)
	require.Equal(t, 50, cfg.Sample)
	require.Zero(t, cfg.PodsPerNode)
	lc := cfg.Loaded
	require.NotNil(t, lc)
	var digests []string
	for range 2 {
		rep, err := run(context.Background(), cfg, nil, hooks{})
		require.NoError(t, err)
		require.True(t, rep.Consistent, "audit %+v", rep.Audit)
		require.Equal(t, len(lc.Bound), rep.InitialPods)
		require.Equal(t, 300, rep.FinalNodes)
		require.Positive(t, rep.Scheduled)
		require.Contains(t, rep.Warnings, "skipped 41 pods in phase Succeeded or Failed (the scheduler ignores them)")
		require.NotEmpty(t, rep.Digest)
		digests = append(digests, rep.Digest)
	}
	require.Equal(t, digests[0], digests[1], "the same files and seed give the same digest")
	// The run changed copies: the loaded objects are as read.
	for _, p := range lc.Pending {
		require.Empty(t, p.Spec.NodeName)
	}
}

// writeManifest writes a manifest file into dir.
func writeManifest(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

// smallManifest: two nodes (n2 tainted), a bound pod, and three pending
// pods: one that fits, one that only n2 would take (it does not tolerate
// the taint), one too large for any node.
const smallManifest = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1, labels: {topology.kubernetes.io/zone: a}}
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: n2, labels: {topology.kubernetes.io/zone: b}}
  spec:
    taints: [{key: dedicated, value: x, effect: NoSchedule}]
  status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
- apiVersion: v1
  kind: Pod
  metadata: {name: running, namespace: ns}
  spec:
    nodeName: n1
    containers: [{name: c, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: fits, namespace: ns}
spec:
  containers: [{name: c, resources: {requests: {cpu: 500m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: tainted-only, namespace: ns}
spec:
  nodeSelector: {topology.kubernetes.io/zone: b}
  containers: [{name: c}]
---
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: ns}
spec:
  containers: [{name: c, resources: {requests: {cpu: "100"}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: ns}
`

// The pending pods of the manifests are the first pods the schedulers
// take, in order, before any generated pod.
func TestClusterFromPendingPods(t *testing.T) {
	for _, det := range []bool{true, false} {
		t.Run(map[bool]string{true: "deterministic", false: "real time"}[det], func(t *testing.T) {
			path := writeManifest(t, t.TempDir(), "c.yaml", smallManifest)
			args := []string{"-cluster-from", path, "-duration", "200ms", "-keep-pods", "-schedulers", "1", "-fail-rate", "0"}
			if det {
				args = append(args, "-deterministic")
			}
			cfg, err := parseFlags(args, &bytes.Buffer{})
			require.NoError(t, err)
			require.Equal(t, 2, cfg.Nodes)
			require.Equal(t, 2, cfg.Sample, "the default sample is at most the nodes")
			var fits podRecord
			var tainted, huge bool
			rep, err := run(context.Background(), cfg, nil, hooks{beforeAudit: func(_ *schedcache.Cache, truth *Truth) {
				fits, _ = truth.pods.Load("ns/fits")
				r, ok := truth.pods.Load("ns/tainted-only")
				tainted = ok && r.Node != ""
				r, ok = truth.pods.Load("ns/huge")
				huge = ok && r.Node != ""
			}})
			require.NoError(t, err)
			require.True(t, rep.Consistent, "audit %+v", rep.Audit)
			require.Equal(t, 1, rep.InitialPods)
			require.Equal(t, "n1", fits.Node)
			require.True(t, fits.Bound)
			require.False(t, tainted, "no node takes tainted-only")
			require.False(t, huge, "no node takes huge")
			require.GreaterOrEqual(t, rep.Unschedulable, int64(2))
			require.Contains(t, rep.Warnings, "skipped 1 objects that are not v1 Nodes or Pods: 1 Deployment (apps/v1)")
			require.Contains(t, rep.Warnings, "6 objects had no metadata.uid: a node was given its name, a pod NAMESPACE/NAME")
		})
	}
}

// A run that ends before it takes every pending pod says so.
func TestClusterFromPendingLeft(t *testing.T) {
	path := writeManifest(t, t.TempDir(), "c.yaml", smallManifest)
	cfg, err := parseFlags([]string{"-cluster-from", path, "-deterministic", "-duration", "1ms", "-decision-time", "1ms", "-schedulers", "1", "-confirm-delay", "0s"}, &bytes.Buffer{})
	require.NoError(t, err)
	rep, err := run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.Contains(t, rep.Warnings, "the run ended before 2 of the 3 pending pods of the manifests were tried")
}

// A loaded cluster whose pods over-fill its nodes is run as it is, with
// a warning (a generated one is refused).
func TestClusterFromOverfull(t *testing.T) {
	over := strings.Replace(smallManifest, `cpu: "1"}}}]`, `cpu: "6"}}}]`, 1)
	path := writeManifest(t, t.TempDir(), "c.yaml", over)
	cfg, err := parseFlags([]string{"-cluster-from", path, "-deterministic", "-duration", "50ms"}, &bytes.Buffer{})
	require.NoError(t, err)
	rep, err := run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.OverfullAtStart)
	require.Contains(t, rep.Warnings, "1 of 2 nodes are over-full at start, as the manifests have them (first: n1 requests 6000m cpu, 0 MiB for 1 pods; allocatable 4000m, 8192 MiB, 110 pods)")
}

// Through the command: exit 0 with the fixture, 2 with every bad input,
// each with its message.
func TestClusterFromMain(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"-cluster-from", fixture, "-deterministic", "-duration", "200ms"}, &out, &errOut, false)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "300 nodes, 3335 pods at start")
	require.Contains(t, out.String(), "; cluster from "+fixture+"\n")
	require.Contains(t, out.String(), "consistent: true")
	out.Reset()
	require.Equal(t, 0, Main(context.Background(), []string{"-cluster-from", fixture, "-deterministic", "-duration", "100ms", "-json", "-"}, &out, &errOut, false), errOut.String())
	var rep struct {
		Config JSONConfig `json:"config"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Equal(t, []string{fixture}, rep.Config.ClusterFrom)
	require.Equal(t, 300, rep.Config.Nodes)

	dir := t.TempDir()
	badQty := writeManifest(t, dir, "bad.yaml", strings.Replace(smallManifest, "cpu: 500m", "cpu: lots", 1))
	orphan := writeManifest(t, dir, "orphan.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeName: gone\n  containers: [{name: c}]\n")
	twoFaults := writeManifest(t, dir, "two.yaml", strings.Replace(strings.Replace(smallManifest, "cpu: 500m", "cpu: lots", 1), "name: huge", "name: huge, colour: red", 1))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-cluster-from", filepath.Join(dir, "missing.yaml")},
			"loadgen: -cluster-from: " + filepath.Join(dir, "missing.yaml") + ": stat " + filepath.Join(dir, "missing.yaml") + ": no such file or directory\n"},
		{[]string{"-cluster-from", badQty},
			"loadgen: -cluster-from: " + badQty + `:25: document 2, pod ns/fits: spec.containers[0].resources.requests.cpu: "lots" is not a quantity (like 500m, 2Gi or 1.5)` + "\n"},
		{[]string{"-cluster-from", fixture + "," + orphan},
			"loadgen: -cluster-from: " + orphan + `:5: pod default/p: spec.nodeName: node "gone" is not in the files (remove the pod, clear spec.nodeName to have it scheduled, or add the node)` + "\n"},
		{[]string{"-cluster-from", twoFaults},
			"loadgen: -cluster-from: 2 faults:\n  " + twoFaults + `:25: document 2, pod ns/fits: spec.containers[0].resources.requests.cpu: "lots" is not a quantity (like 500m, 2Gi or 1.5)` +
				"\n  " + twoFaults + ":36: document 4, pod ns/huge: metadata.colour: unknown field\n"},
		{[]string{"-cluster-from", fixture, "-nodes", "10"}, "loadgen: -nodes: not with -cluster-from (or a scenario's cluster.manifests): the manifests are the cluster\n"},
		{[]string{"-cluster-from", fixture, "-pods-per-node", "10"}, "loadgen: -pods-per-node: not with -cluster-from (or a scenario's cluster.manifests): the manifests are the cluster\n"},
		{[]string{"-cluster-from", fixture, "-initial-pods", "10"}, "loadgen: -initial-pods: not with -cluster-from (or a scenario's cluster.manifests): the manifests are the cluster\n"},
		{[]string{"-cluster-from", fixture, "-zones", "2"}, "loadgen: -zones: not with -cluster-from (or a scenario's cluster.manifests): the manifests are the cluster\n"},
		{[]string{"-cluster-from", fixture, "-sample", "301"}, "loadgen: -sample: 301 is more than the 300 nodes\n"},
	} {
		out.Reset()
		errOut.Reset()
		code := Main(context.Background(), tc.args, &out, &errOut, false)
		require.Equal(t, 2, code, "%v: %s", tc.args, errOut.String())
		require.Equal(t, tc.want, errOut.String(), "%v", tc.args)
		require.Empty(t, out.String())
	}
}

// The errors are typed: ErrUsage, and the manifest's *Error with its
// place.
func TestClusterFromErrorTypes(t *testing.T) {
	path := writeManifest(t, t.TempDir(), "bad.yaml", strings.Replace(smallManifest, "cpu: 500m", "cpu: lots", 1))
	_, err := parseFlags([]string{"-cluster-from", path}, &bytes.Buffer{})
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorIs(t, err, manifest.ErrInvalid)
	var ce *ClusterFromError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "-cluster-from", ce.Source)
	var me *manifest.Error
	require.ErrorAs(t, err, &me)
	require.Equal(t, 25, me.Line)
	require.Equal(t, "spec.containers[0].resources.requests.cpu", me.Field)

	// A Config built by hand is checked too.
	cfg := defaultConfig()
	cfg.ClusterFrom = []string{path}
	require.EqualError(t, cfg.Validate(), "-cluster-from: the manifests are not loaded (parseFlags loads them)")
	good := writeManifest(t, t.TempDir(), "c.yaml", smallManifest)
	cfg, err = parseFlags([]string{"-cluster-from", good, "-duration", "1s"}, &bytes.Buffer{})
	require.NoError(t, err)
	cfg.Nodes = 3
	require.EqualError(t, cfg.Validate(), "-nodes: 3, but -cluster-from loaded 2 nodes: the manifests are the cluster")
	cfg.Nodes, cfg.PodsPerNode = 2, 1
	require.EqualError(t, cfg.Validate(), "-pods-per-node: not with -cluster-from: the manifests' bound pods are the initial pods")
}

// -cluster-from takes a comma list; an empty entry is refused.
func TestSplitPaths(t *testing.T) {
	p, err := splitPaths("a.yaml,dir")
	require.NoError(t, err)
	require.Equal(t, []string{"a.yaml", "dir"}, p)
	p, err = splitPaths("")
	require.NoError(t, err)
	require.Nil(t, p)
	_, err = splitPaths("a,,b")
	require.EqualError(t, err, `an empty path in the list "a,,b"`)
	var errOut bytes.Buffer
	require.Equal(t, 2, Main(context.Background(), []string{"-cluster-from", "a,"}, &bytes.Buffer{}, &errOut, false))
	require.Contains(t, errOut.String(), "-cluster-from")
	require.Contains(t, errOut.String(), `an empty path in the list "a,"`)
}

// A scenario's cluster.manifests: paths relative to the scenario file;
// -cluster-from replaces them; the fields and flags that size a generated
// cluster are refused alongside.
func TestClusterFromScenario(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "c.yaml", smallManifest)
	writeManifest(t, dir, "bad.yaml", strings.Replace(smallManifest, "cpu: 500m", "cpu: lots", 1))
	sc := writeManifest(t, dir, "s.yaml", "run:\n  duration: 100ms\ncluster:\n  seed: 3\n  manifests: [c.yaml]\n")
	cfg, err := parseFlags([]string{"-scenario", sc, "-deterministic"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 2, cfg.Nodes)
	require.Equal(t, []string{filepath.Join(dir, "c.yaml")}, cfg.ClusterFrom)
	rep, err := run(context.Background(), cfg, nil, hooks{})
	require.NoError(t, err)
	require.True(t, rep.Consistent)
	require.Equal(t, 1, rep.InitialPods)

	cfg, err = parseFlags([]string{"-scenario", sc, "-cluster-from", fixture}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 300, cfg.Nodes, "the flag replaces the scenario's manifests")

	withNodes := writeManifest(t, dir, "n.yaml", "run:\n  duration: 100ms\ncluster:\n  nodes: 5\n  manifests: [c.yaml]\n")
	badScenario := writeManifest(t, dir, "b.yaml", "run:\n  duration: 100ms\ncluster:\n  manifests:\n  - bad.yaml\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", withNodes}, withNodes + ":5: cluster.manifests: not with cluster.nodes: the manifests are the cluster\n"},
		{[]string{"-scenario", badScenario}, badScenario + ":4: cluster.manifests: " + filepath.Join(dir, "bad.yaml") +
			`:25: document 2, pod ns/fits: spec.containers[0].resources.requests.cpu: "lots" is not a quantity (like 500m, 2Gi or 1.5)` + "\n"},
		{[]string{"-scenario", sc, "-nodes", "3"}, "-nodes: not with -cluster-from (or a scenario's cluster.manifests): the manifests are the cluster\n"},
	} {
		var errOut bytes.Buffer
		require.Equal(t, 2, Main(context.Background(), tc.args, &bytes.Buffer{}, &errOut, false), errOut.String())
		require.Equal(t, "loadgen: "+tc.want, errOut.String())
	}
}
