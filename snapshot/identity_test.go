package snapshot

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestListKey(t *testing.T) {
	node := func(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1.PodSpec{NodeName: "a"}}
	s1 := NewSnapshot(nil, []*v1.Node{node("a"), node("b")})
	s2 := NewSnapshot([]*v1.Pod{pod}, []*v1.Node{node("a"), node("b")})
	if s1.ListKey() != s1.ListKey() {
		t.Fatal("a snapshot's key differs from itself")
	}
	if s1.ListKey() == s2.ListKey() {
		t.Fatal("snapshots listing different NodeInfos have equal keys")
	}
	c := NewEmptySnapshot()
	if c.ListKey() != NewEmptySnapshot().ListKey() {
		t.Fatal("empty snapshots have different keys")
	}
	if err := c.CopyFrom(s2); err != nil {
		t.Fatal(err)
	}
	if c.ListKey() != s2.ListKey() {
		t.Fatal("a copy has another key")
	}
	if err := c.CopyFrom(s1); err != nil {
		t.Fatal(err)
	}
	if c.ListKey() != s1.ListKey() || c.ListKey() == s2.ListKey() {
		t.Fatal("a refreshed copy kept the old key")
	}
	if n := testing.AllocsPerRun(100, func() { _ = s1.ListKey() }); n != 0 {
		t.Fatalf("ListKey allocates %v times", n)
	}
}
