package fwkpick_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/bench/fwkpick"
	"github.com/schedcache/schedcache/bench/schedconfig"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim"
)

// zoneA is an out-of-tree Filter plugin: it admits only the nodes
// labelled zone=a, and panics for a pod named "bad". Stateless.
type zoneA struct{}

func (zoneA) Name() string { return "ZoneA" }

func (zoneA) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if pod.Name == "bad" {
		panic("ZoneA: a bug")
	}
	if ni.Node().Labels["zone"] != "a" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "not in zone a")
	}
	return nil
}

// Example_outOfTree registers an out-of-tree plugin as kube-scheduler's
// app.WithPlugin would (fwkpick.Config.OutOfTree), enables it from a
// KubeSchedulerConfiguration, and picks: the plugin's Filter decides, and
// its panic fails that pod's attempt with a typed error, not the program.
func Example_outOfTree() {
	file, err := schedconfig.Decode([]byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    filter:
      enabled:
      - name: ZoneA
`), "example.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := fwkpick.New(fwkpick.Config{File: file, OutOfTree: frameworkruntime.Registry{
		"ZoneA": func(context.Context, kruntime.Object, fwk.Handle) (fwk.Plugin, error) { return zoneA{}, nil },
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	ctx := context.Background()
	c, err := schedcache.New(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	for i, zone := range []string{"b", "a", "b"} {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{"zone": zone}},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"),
				v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}}}
		if _, err := c.AddNode(klog.Background(), n); err != nil {
			fmt.Println(err)
			return
		}
	}
	np, err := p.NewFramework(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	rej := make([]int64, len(p.Plugins()))
	for _, name := range []string{"good", "bad"} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns-0", UID: types.UID(name)},
			Spec: v1.PodSpec{SchedulerName: v1.DefaultSchedulerName, Containers: []v1.Container{{Name: "c"}}}}
		info, err := nodeinfo.NewPodInfo(pod)
		if err != nil {
			fmt.Println(err)
			return
		}
		node, err := np.Pick(ctx, c.Snapshot(), info, rand.New(rand.NewPCG(1, 2)), rej)
		var pe *fwkpick.PanicError
		switch {
		case errors.As(err, &pe) && errors.Is(err, sim.ErrAttempt):
			fmt.Printf("%s: attempt failed: plugin %s panicked in %s: %v\n", name, pe.Plugin, pe.Point, pe.Value)
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Printf("%s: %s\n", name, node)
		}
	}
	for i, plugin := range p.Plugins() {
		if strings.HasPrefix(plugin, "Zone") {
			fmt.Printf("%s rejected %d nodes\n", plugin, rej[i])
		}
	}
	// Output:
	// good: node-1
	// bad: attempt failed: plugin ZoneA panicked in Filter: ZoneA: a bug
	// ZoneA rejected 2 nodes
}
