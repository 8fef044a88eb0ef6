package nodeinfo

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Every per-pod amount a node sums is accepted exactly up to
// MaxPodQuantity in absolute value and refused one past it, with a
// QuantityError naming the pod, the resource and the amount.
func TestPodQuantityBound(t *testing.T) {
	max := fmt.Sprint(MaxPodQuantity)
	over := fmt.Sprint(MaxPodQuantity + 1)
	maxM, overM := max+"m", over+"m" // millicores
	type want struct {
		res     v1.ResourceName
		nonZero bool
		value   int64
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want *want // nil: accepted
	}{
		{"cpu at the bound", mkPod("u", withContainers(ctr("a", rl("cpu", maxM, "memory", "1")))), nil},
		{"cpu one over", mkPod("u", withContainers(ctr("a", rl("cpu", overM, "memory", "1")))), &want{"cpu", false, MaxPodQuantity + 1}},
		{"cpu at minus the bound", mkPod("u", withContainers(ctr("a", rl("cpu", "-"+maxM, "memory", "1")))), nil},
		{"cpu one under minus the bound", mkPod("u", withContainers(ctr("a", rl("cpu", "-"+overM, "memory", "1")))), &want{"cpu", false, -MaxPodQuantity - 1}},
		{"cpu rounds up past the bound", mkPod("u", withContainers(ctr("a", rl("cpu", max+"001u", "memory", "1")))), &want{"cpu", false, MaxPodQuantity + 1}},
		{"memory at the bound", mkPod("u", withContainers(ctr("a", rl("memory", max, "cpu", "1")))), nil},
		{"memory one over", mkPod("u", withContainers(ctr("a", rl("memory", over, "cpu", "1")))), &want{"memory", false, MaxPodQuantity + 1}},
		{"memory far over (saturated)", mkPod("u", withContainers(ctr("a", rl("memory", "1e30", "cpu", "1")))), &want{"memory", false, 1<<63 - 1}},
		{"ephemeral at the bound", mkPod("u", withContainers(ctr("a", rl("ephemeral-storage", max)))), nil},
		{"ephemeral one over", mkPod("u", withContainers(ctr("a", rl("ephemeral-storage", over)))), &want{"ephemeral-storage", false, MaxPodQuantity + 1}},
		{"scalar at the bound", mkPod("u", withContainers(ctr("a", rl("example.com/gpu", max, "hugepages-2Mi", max)))), nil},
		{"scalar one over", mkPod("u", withContainers(ctr("a", rl("example.com/gpu", "1", "hugepages-2Mi", over)))), &want{"hugepages-2Mi", false, MaxPodQuantity + 1}},
		{"two containers sum past the bound", mkPod("u", withContainers(ctr("a", rl("memory", max, "cpu", "1")), ctr("b", rl("memory", "1", "cpu", "1")))),
			&want{"memory", false, MaxPodQuantity + 1}},
		{"overhead pushes past the bound", mkPod("u", withContainers(ctr("a", rl("cpu", maxM, "memory", "1"))), withOverhead(rl("cpu", "1m"))),
			&want{"cpu", false, MaxPodQuantity + 1}},
		{"overhead brings back under the bound", mkPod("u", withContainers(ctr("a", rl("cpu", overM, "memory", "1"))), withOverhead(rl("cpu", "-1m"))), nil},
		{"non-zero cpu past the bound (default 100m for a container without cpu)",
			mkPod("u", withContainers(ctr("a", rl("cpu", fmt.Sprint(MaxPodQuantity-50)+"m", "memory", "1")), ctr("b", rl("memory", "1")))),
			&want{"cpu", true, MaxPodQuantity + 50}},
		{"non-zero memory past the bound (default 200Mi)",
			mkPod("u", withContainers(ctr("a", rl("memory", max, "cpu", "1")), ctr("b", rl("cpu", "1"))), withOverhead(rl("memory", "-1"))),
			&want{"memory", true, MaxPodQuantity - 1 + DefaultMemoryRequest}},
		{"pod-level request past the bound", mkPod("u", withContainers(ctr("a", rl("cpu", "1"))), withPodRequests(rl("cpu", overM))),
			&want{"cpu", false, MaxPodQuantity + 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPodInfo(tc.pod)
			if tc.want == nil {
				require.NoError(t, err)
				require.NotNil(t, p)
				return
			}
			require.Nil(t, p)
			require.ErrorIs(t, err, ErrQuantityOverflow)
			var qe *QuantityError
			require.True(t, errors.As(err, &qe))
			require.Equal(t, "u", qe.Key)
			require.Equal(t, "ns/pod-u", qe.Pod)
			require.Equal(t, tc.want.res, qe.Resource)
			require.Equal(t, tc.want.nonZero, qe.NonZero)
			require.Equal(t, tc.want.value, qe.Value)
			require.Contains(t, err.Error(), string(tc.want.res))
			require.Contains(t, err.Error(), fmt.Sprint(tc.want.value))
			// NewPodInfoAnyUID (NewSnapshot's) refuses it too.
			_, err = NewPodInfoAnyUID(tc.pod)
			require.ErrorIs(t, err, ErrQuantityOverflow)
		})
	}
}

// MaxPodsPerNode pods each at +MaxPodQuantity (and, on another node, at
// -MaxPodQuantity) in every summed amount: the totals are exact, with the
// sign of the amounts (no wrap), and removing the pods returns them to 0.
func TestNodeTotalsAtTheBound(t *testing.T) {
	for _, sign := range []string{"", "-"} {
		t.Run("sign="+sign, func(t *testing.T) {
			max := sign + fmt.Sprint(MaxPodQuantity)
			pod := mkPod("u", withContainers(ctr("a", rl("cpu", max+"m", "memory", max, "ephemeral-storage", max, "example.com/gpu", max))))
			p, err := NewPodInfo(pod)
			require.NoError(t, err)
			want := int64(MaxPodsPerNode) * MaxPodQuantity
			if sign == "-" {
				want = -want
			}
			s := NewNodeState(nil)
			s.SetNode(mkNode("n", rl("cpu", "9223372036854775807m", "memory", "9223372036854775807")))
			for range MaxPodsPerNode {
				s.AddPod(p)
			}
			n := s.Freeze()
			r := n.Requested()
			require.Equal(t, want, r.MilliCPU)
			require.Equal(t, want, r.Memory)
			require.Equal(t, want, r.EphemeralStorage)
			require.Equal(t, want, r.Scalar("example.com/gpu"))
			require.Equal(t, want, n.NonZeroRequested().MilliCPU)
			require.Equal(t, want, n.NonZeroRequested().Memory)
			require.Equal(t, int64(1<<63-1), n.Allocatable().MilliCPU) // allocatable near MaxInt64 is kept as is
			for range MaxPodsPerNode {
				require.NoError(t, s.RemovePodInfo(p, false, false, false))
			}
			n = s.Freeze()
			require.Zero(t, n.Requested().MilliCPU)
			require.Zero(t, n.Requested().Memory)
			require.Zero(t, n.Requested().Scalar("example.com/gpu"))
			require.Zero(t, n.NonZeroRequested().Memory)
		})
	}
}

// loadNum's shortcut for whole amounts gives what the full conversion
// gives, at both scales, for whole, fractional, negative, decimal-backed
// and overflowing amounts.
func TestLoadNumShortcutMatchesFullConversion(t *testing.T) {
	inputs := []string{"0", "1", "-3", "250m", "1500m", "0.5m", "1k", "1Gi", "256Mi", "1.5",
		"1e3", "0.001", "9223372036854775807", "-9223372036854775808", "9223372036854775k",
		"9223372036854775", "9223372036854776", "-9223372036854776", "123456789012345678901234567890", "1n"}
	for _, in := range inputs {
		q := resource.MustParse(in)
		for _, scale := range []resource.Scale{0, resource.Milli} {
			got, want := loadNum(&q, scale), loadNumChecked(&q, scale)
			if want.q == nil {
				require.Nil(t, got.q, "%s at %d: want int64 %d", in, scale, want.v)
				require.Equal(t, want.v, got.v, "%s at %d", in, scale)
			} else {
				require.NotNil(t, got.q, "%s at %d: want exact %s, got int64 %d", in, scale, want.q, got.v)
				require.Zero(t, want.q.Cmp(*got.q), "%s at %d", in, scale)
			}
		}
	}
	// Built, not parsed: a value with a positive scale, and a decimal one.
	for _, q := range []resource.Quantity{*resource.NewScaledQuantity(7, 3), *resource.NewScaledQuantity(math.MaxInt64/100, 3), *resource.NewMilliQuantity(1234, resource.DecimalSI)} {
		for _, scale := range []resource.Scale{0, resource.Milli} {
			got, want := loadNum(&q, scale), loadNumChecked(&q, scale)
			require.Equal(t, want.q == nil, got.q == nil, "%s at %d", q.String(), scale)
			if want.q == nil {
				require.Equal(t, want.v, got.v)
			}
		}
	}
}
