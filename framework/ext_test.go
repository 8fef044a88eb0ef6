package framework

import (
	"sync"
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

func TestNodeInfoMemo(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	ni := NewNodeInfoForTest(node)
	if ni.Memo() != nil {
		t.Fatal("fresh NodeInfo has a memo")
	}
	const n = 8
	got := make([]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i] = ni.SetMemo(i) })
	}
	wg.Wait()
	for i := range n {
		if got[i] != got[0] || ni.Memo() != got[0] {
			t.Fatalf("SetMemo results differ: %v, memo %v", got, ni.Memo())
		}
	}
	if ni.SetMemo("other") != got[0] {
		t.Fatal("a second SetMemo replaced the first value")
	}
	c := ni.WithImageStates(map[string]ImageStateSummary{"img": {Size: 1, NumNodes: 1}})
	if c.Memo() != nil {
		t.Fatal("WithImageStates copied the memo")
	}
	if c.Node() != node || c.Generation() != ni.Generation() || c.NumImageStates() != 1 {
		t.Fatalf("WithImageStates lost fields: %v", c)
	}
	var nilNode *NodeInfo
	if nilNode.Memo() != nil || nilNode.SetMemo(1) != 1 {
		t.Fatal("nil NodeInfo memo")
	}
	if ni.SetMemo(nil) != nil {
		t.Fatal("SetMemo(nil) returned non-nil")
	}
}
