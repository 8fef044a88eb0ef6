package nodeinfo

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

func TestNewResource(t *testing.T) {
	tests := []struct {
		name string
		in   v1.ResourceList
		want Resource
	}{
		{"nil", nil, Resource{}},
		{
			"node allocatable",
			rl("cpu", "3900m", "memory", "15Gi", "ephemeral-storage", "100Gi", "pods", "110",
				"hugepages-2Mi", "0", "hugepages-1Gi", "2Gi", "example.com/foo", "4",
				"random-invalid-extended-key", "9", "attachable-volumes-csi-x", "39"),
			Resource{MilliCPU: 3900, Memory: 15 * 1024 * mi, EphemeralStorage: 100 * 1024 * mi, AllowedPodNumber: 110}.
				WithScalar("hugepages-2Mi", 0).WithScalar("hugepages-1Gi", 2*1024*mi).
				WithScalar("example.com/foo", 4).WithScalar("attachable-volumes-csi-x", 39),
		},
		{"ceil per key", rl("cpu", "0.1m", "memory", "0.1", "pods", "1.5"), Resource{MilliCPU: 1, Memory: 1, AllowedPodNumber: 2}},
		{"negative rounds like Quantity", rl("cpu", "-1500m", "memory", "-1"), Resource{MilliCPU: -1500, Memory: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NewResource(tc.in)
			require.Equal(t, tc.want, got)
			require.True(t, tc.want.Equal(got))
		})
	}
}

func TestIsScalarResourceName(t *testing.T) {
	tests := []struct {
		name v1.ResourceName
		want bool
	}{
		{"example.com/foo", true},
		{"nvidia.com/gpu", true},
		{"hugepages-2Mi", true},
		{"hugepages-", true},
		{"kubernetes.io/bar", true},
		{"foo.kubernetes.io/bar", true},
		{"attachable-volumes-aws-ebs", true},
		{"random-invalid-extended-key", false},
		{"cpu", false},
		{"memory", false},
		{"pods", false},
		{"requests.example.com/foo", false},
		{"example.com/-bad", false},
		{"a/b/c", false},
		{"/x", false},
		{"Example.COM/x", false}, // prefix must be a lower-case DNS subdomain
		{"example.com/x_y.Z-1", true},
	}
	for _, tc := range tests {
		t.Run(string(tc.name), func(t *testing.T) {
			require.Equal(t, tc.want, IsScalarResourceName(tc.name))
			require.Equal(t, tc.want, IsScalarResourceName(tc.name), "memoised answer")
		})
	}
}

func TestResourceAccessors(t *testing.T) {
	r := Resource{MilliCPU: 1}.WithScalar("b.io/x", 2).WithScalar("a.io/y", 0)
	require.Equal(t, 2, r.NumScalars())
	require.Equal(t, int64(2), r.Scalar("b.io/x"))
	require.Equal(t, int64(0), r.Scalar("a.io/y"))
	require.True(t, r.HasScalar("a.io/y"))
	require.False(t, r.HasScalar("c.io/z"))
	require.Equal(t, int64(0), r.Scalar("c.io/z"))
	require.Equal(t, []ScalarQuantity{{"a.io/y", 0}, {"b.io/x", 2}}, r.Scalars())
	require.Equal(t, map[v1.ResourceName]int64{"a.io/y": 0, "b.io/x": 2}, r.ScalarResources())

	// Returned copies do not alias r; WithScalar does not modify r.
	r.Scalars()[0].Value = 99
	r.ScalarResources()["a.io/y"] = 99
	r2 := r.WithScalar("a.io/y", 7)
	require.Equal(t, int64(0), r.Scalar("a.io/y"))
	require.Equal(t, int64(7), r2.Scalar("a.io/y"))

	require.Nil(t, Resource{}.Scalars())
	require.Nil(t, Resource{}.ScalarResources())
	require.False(t, r.Equal(r2))
	require.False(t, Resource{}.Equal(Resource{}.WithScalar("a.io/y", 0)), "zero-valued key differs from absent")
	require.Equal(t, "{MilliCPU:1 Memory:0 EphemeralStorage:0 AllowedPodNumber:0 Scalars:[a.io/y:0 b.io/x:2]}", r.String())
}

func TestHostPortInfo(t *testing.T) {
	h := HostPortInfo{}
	h.Add("", "", 80)
	h.Add("127.0.0.1", "UDP", 53)
	h.Add("127.0.0.1", "UDP", 0) // ignored
	require.Equal(t, HostPortInfo{
		"0.0.0.0":   {{Protocol: "TCP", Port: 80}: {}},
		"127.0.0.1": {{Protocol: "UDP", Port: 53}: {}},
	}, h)
	require.Equal(t, 2, h.Len())
	require.True(t, h.CheckConflict("10.0.0.1", "TCP", 80), "wildcard entry conflicts with any IP")
	require.True(t, h.CheckConflict("", "UDP", 53), "wildcard query conflicts with any IP")
	require.False(t, h.CheckConflict("10.0.0.1", "UDP", 53))
	require.False(t, h.CheckConflict("0.0.0.0", "TCP", 0))
	h.Remove("127.0.0.1", "UDP", 53)
	require.Equal(t, HostPortInfo{"0.0.0.0": {{Protocol: "TCP", Port: 80}: {}}}, h)
}
