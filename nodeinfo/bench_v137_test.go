package nodeinfo

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkNewPodInfoV137 computes the requests of pods as a v1.37 kubelet
// reports them: a running pod has container statuses and the pod-level
// status.resources and status.allocatedResources
// (InPlacePodLevelResourcesVerticalScaling, on by default since v1.36);
// the other cases are an infeasible resize and sidecar statuses.
func BenchmarkNewPodInfoV137(b *testing.B) {
	running := typicalPod("u", true)
	withPodStatus(requests(rl("cpu", "350m", "memory", "384Mi")), rl("cpu", "350m", "memory", "384Mi"))(running)
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
	}{
		{"podstatus", running},
		{"infeasible", mkPod("u", withContainers(ctr("app", rl("cpu", "250m", "memory", "256Mi")), ctr("proxy", rl("cpu", "100m", "memory", "128Mi"))),
			withStatus("app", rl("cpu", "250m", "memory", "256Mi"), rl("cpu", "500m", "memory", "256Mi")), infeasible)},
		{"sidecar+status", mkPod("u", withContainers(ctr("app", rl("cpu", "250m", "memory", "256Mi"))),
			withInit(ctr("init", rl("cpu", "1", "memory", "64Mi")), sidecar("side", rl("cpu", "50m", "memory", "32Mi"))),
			withStatus("app", rl("cpu", "250m", "memory", "256Mi"), rl("cpu", "250m", "memory", "256Mi")),
			withInitStatus("side", rl("cpu", "50m", "memory", "32Mi"), rl("cpu", "50m", "memory", "32Mi")))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewPodInfo(tc.pod); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
