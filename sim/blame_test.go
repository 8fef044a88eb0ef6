package sim

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// An over-full cluster is blamed on what the user wrote: the scenario's
// field, at its line, or the flag given on the command line, never a flag
// the user did not give (issue 28: a scenario's over-full cluster was
// blamed on -pods-per-node).
func TestOverfullBlame(t *testing.T) {
	cases := []struct {
		name, body string
		flags      []string
		want       string
	}{
		{"node pod capacity below the default pods per node",
			"run:\n  duration: 1s\ncluster:\n  nodes: 10\n  allocatable: {cpu: \"4\", memory: 32Gi, pods: 10}\n", nil,
			"s.yaml:5: cluster.allocatable.pods: 30 exceeds the node pod capacity (10): the cluster would be over-full (cluster.podsPerNode is not given: its default 30)"},
		{"initial pods over-fill the nodes by their requests",
			"run:\n  duration: 1s\ncluster:\n  nodes: 10\n  initialPods: 1000\n", nil,
			"s.yaml:5: cluster.initialPods: 1000 pods at start over-fill 10 of 10 nodes (first: node-00000 requests"},
		{"small nodes over-filled by the default pods per node",
			"run:\n  duration: 1s\ncluster:\n  nodes: 10\n  allocatable:\n    cpu: 1\n", nil,
			"s.yaml:5: cluster.allocatable: 30 pods per node at start over-fill 10 of 10 nodes (first: node-00000 requests"},
		{"a flag shrinks the scenario's cluster",
			"run:\n  duration: 1s\ncluster:\n  nodes: 10\n  initialPods: 1000\n", []string{"-nodes", "5"},
			"s.yaml:5: cluster.initialPods: 1000 pods exceed the pod capacity of 5 nodes (110 each) (-nodes 5 given on the command line)"},
		{"the user's flag over the scenario's capacity",
			"run:\n  duration: 1s\ncluster:\n  nodes: 10\n  podsPerNode: 5\n  allocatable: {pods: 20}\n", []string{"-pods-per-node", "30"},
			"-pods-per-node: 30 exceeds the node pod capacity (20): the cluster would be over-full (cluster.allocatable.pods of "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeScenario(t, tc.body)
			var stderr bytes.Buffer
			args := append([]string{"-scenario", p, "-deterministic", "-quiet"}, tc.flags...)
			require.Equal(t, exitUsage, realMain(context.Background(), args, io.Discard, &stderr, false, hooks{}))
			require.Contains(t, stderr.String(), tc.want)
			if tc.flags == nil {
				require.NotContains(t, stderr.String(), "-pods-per-node")
				require.NotContains(t, stderr.String(), "-initial-pods")
			}
		})
	}
	var stderr bytes.Buffer
	args := []string{"-preset", "scheduling-basic-5000", "-nodes", "5"}
	require.Equal(t, exitUsage, realMain(context.Background(), args, io.Discard, &stderr, false, hooks{}))
	require.Contains(t, stderr.String(), "preset scheduling-basic-5000:10: cluster.initialPods: 1000 pods exceed the pod capacity of 5 nodes (110 each) (-nodes 5 given on the command line)")
}
