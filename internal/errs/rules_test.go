package errs

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each rule refuses exactly the states the cache refuses, with its error.
func TestRules(t *testing.T) {
	none, assumedA, addedA := Cached{}, Cached{OK: true, Assumed: true, Node: "a"}, Cached{OK: true, Node: "a"}
	on := func(node string) *v1.Pod { return &v1.Pod{Spec: v1.PodSpec{NodeName: node}} }
	no := func(string) bool { return false }
	yes := func(string) bool { return true }
	check := func(name string, err, want error) {
		t.Helper()
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
		}
	}
	var corrupt *CorruptionError
	check("assume new", CheckAssume("k", "a", none, no), nil)
	check("assume cached", CheckAssume("k", "a", addedA, no), ErrPodAlreadyCached)
	check("assume full", CheckAssume("k", "a", none, yes), ErrTooManyPods)
	apply, err := CheckForget("ForgetPod", "k", on("a"), none)
	check("forget absent", err, nil)
	if apply {
		t.Error("forget absent applies")
	}
	_, err = CheckForget("ForgetPod", "k", on("b"), assumedA)
	check("forget other node", err, ErrPodNodeMismatch)
	_, err = CheckForget("ForgetPod", "k", on("a"), addedA)
	check("forget added", err, ErrPodNotAssumed)
	if apply, err := CheckForget("ForgetPod", "k", on("a"), assumedA); !apply || err != nil {
		t.Errorf("forget assumed: %v %v", apply, err)
	}
	check("add added", CheckAdd("k", "a", addedA, no), ErrPodAlreadyAdded)
	check("confirm on own full node", CheckAdd("k", "a", assumedA, yes), nil)
	check("confirm on other full node", CheckAdd("k", "b", assumedA, yes), ErrTooManyPods)
	check("update absent", CheckUpdate("k", on("a"), "k", "a", none, no), ErrPodNotFound)
	check("update assumed", CheckUpdate("k", on("a"), "k", "a", assumedA, no), ErrPodAssumed)
	if err := CheckUpdate("k", on("a"), "k", "b", addedA, no); !errors.As(err, &corrupt) {
		t.Errorf("update to other node: %v", err)
	}
	check("update old names other node", CheckUpdate("k", on("b"), "k", "a", addedA, no), ErrPodNodeMismatch)
	check("update to taken uid", CheckUpdate("k", on("a"), "k2", "a", addedA, yes), ErrUIDMismatch)
	check("rename", CheckUpdate("k", on("a"), "k2", "a", addedA, no), nil)
	check("remove absent", CheckRemove("k", on("a"), none), ErrPodNotFound)
	check("remove without node name", CheckRemove("k", on(""), addedA), nil)
	if err := CheckRemove("k", on("b"), assumedA); !errors.As(err, &corrupt) {
		t.Errorf("remove naming another node: %v", err)
	}
}
