package nodeinfo

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodExtension(t *testing.T) {
	t.Cleanup(func() { SetPodExtension(nil) })
	calls := 0
	SetPodExtension(func(pod *v1.Pod) any {
		calls++
		if pod.Labels["x"] == "" {
			return nil
		}
		return "ext-" + pod.Labels["x"]
	})
	with := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a", Labels: map[string]string{"x": "1"}}}
	without := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "b"}}
	pi, err := NewPodInfo(with)
	if err != nil {
		t.Fatal(err)
	}
	if got := pi.Extension(); got != "ext-1" {
		t.Fatalf("Extension = %v, want ext-1", got)
	}
	pj, _ := NewPodInfo(without)
	if pj.Extension() != nil || pj.extra != nil {
		t.Fatalf("a pod the extension ignores got %v (extra %v)", pj.Extension(), pj.extra)
	}
	if calls != 2 {
		t.Fatalf("extension ran %d times for 2 PodInfos", calls)
	}
	if _, err := NewPodInfo(nil); err == nil || calls != 2 {
		t.Fatalf("nil pod: err %v, calls %d", err, calls)
	}
	SetPodExtension(nil)
	pk, _ := NewPodInfo(with)
	if pk.Extension() != nil {
		t.Fatal("extension kept after unregistering")
	}
	if pi.Extension() != "ext-1" {
		t.Fatal("an existing PodInfo lost its extension")
	}
	var nilInfo *PodInfo
	if nilInfo.Extension() != nil {
		t.Fatal("nil PodInfo has an extension")
	}
}

func TestNodeExtension(t *testing.T) {
	calls := 0
	SetNodeExtension(func(n *NodeInfo) any { calls++; return n.NumPods() })
	defer SetNodeExtension(nil)
	s := NewNodeState(nil)
	s.SetNode(mkNode("n", rl("cpu", "1")))
	s.AddPod(mustPodInfo(t, mkPod("a", withContainers(ctr("c", rl("cpu", "100m"))))))
	ni := s.Freeze()
	if ni.Extension() != 1 || calls != 1 {
		t.Fatalf("extension %v after %d calls, want 1 after 1", ni.Extension(), calls)
	}
	if s.Freeze() != ni || calls != 1 {
		t.Fatal("an unchanged NodeState re-froze or re-ran the extension")
	}
	c := ni.WithImageStates(map[string]ImageStateSummary{"x": {Size: 1, NumNodes: 1}})
	if c.Extension() != 1 || calls != 2 {
		t.Fatalf("copy: extension %v after %d calls, want it computed for the copy", c.Extension(), calls)
	}
	SetNodeExtension(nil)
	s.AddPod(mustPodInfo(t, mkPod("b", withContainers(ctr("c", rl("cpu", "100m"))))))
	if s.Freeze().Extension() != nil {
		t.Fatal("extension after unregistering")
	}
	var nilNode *NodeInfo
	if nilNode.Extension() != nil {
		t.Fatal("nil NodeInfo extension")
	}
}
