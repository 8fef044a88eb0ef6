package snapshot

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schedcache/schedcache/internal/errs"
	"github.com/schedcache/schedcache/nodeinfo"
)

// Fork.RemoveHostPorts removes ports from a node's set whatever pod uses
// them, skips ports the node does not use, refuses an unknown node and is
// undone by a revert; the base never changes.
func TestForkRemoveHostPorts(t *testing.T) {
	port := func(p int32) []v1.Container {
		return []v1.Container{{Name: "c", Ports: []v1.ContainerPort{{HostPort: p, ContainerPort: 80}}}}
	}
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{UID: "a", Name: "a", Namespace: "ns"}, Spec: v1.PodSpec{NodeName: "n1", Containers: port(81)}},
		{ObjectMeta: metav1.ObjectMeta{UID: "b", Name: "b", Namespace: "ns"}, Spec: v1.PodSpec{NodeName: "n1", Containers: port(82)}},
	}
	nodes := []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	base := NewSnapshot(pods, nodes)
	f := base.Fork()
	p := f.Point()
	hp := func(port int32) nodeinfo.HostPort { return nodeinfo.NewHostPort("", "TCP", port) }
	require.NoError(t, f.RemoveHostPorts("n1", []nodeinfo.HostPort{hp(81), hp(99)}))
	n1, err := f.Snapshot().Get("n1")
	require.NoError(t, err)
	require.False(t, n1.HasHostPort("0.0.0.0", "TCP", 81))
	require.True(t, n1.HasHostPort("0.0.0.0", "TCP", 82))
	require.Equal(t, 2, n1.NumPods(), "the pods stay")
	err = f.RemoveHostPorts("nope", []nodeinfo.HostPort{hp(81)})
	require.ErrorIs(t, err, errs.ErrNodeNotFound)
	require.NoError(t, f.RevertTo(p))
	n1, _ = f.Snapshot().Get("n1")
	require.True(t, n1.HasHostPort("0.0.0.0", "TCP", 81))
	b1, _ := base.Get("n1")
	require.True(t, b1.HasHostPort("0.0.0.0", "TCP", 81))
}
