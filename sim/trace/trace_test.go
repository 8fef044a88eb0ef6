package trace

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/watchdog"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}}}
}

func pod(name, nodeName string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
}

// A trace written by a Writer reads back call for call; replaying it on a
// cache gives the recorded results (an error included) and totals, and a
// cache that answers otherwise is reported.
func TestWriteReadReplay(t *testing.T) {
	ctx := context.Background()
	rec, err := schedcache.New(ctx)
	require.NoError(t, err)
	defer rec.Close()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	tg := CacheTarget(rec)
	calls := []Record{
		{Op: AddNode, Node: node("n1")},
		{Op: AddNode, Node: node("n2")},
		{Op: AssumePod, Pod: pod("a", "n1")},
		{Op: FinishBinding, Pod: pod("a", "n1")},
		{Op: AddPod, Pod: pod("a", "n1")},
		{Op: AssumePod, Pod: pod("a", "n1")}, // already added: an error
		{Op: AddPod, Pod: pod("b", "n2")},
		{Op: UpdatePod, OldPod: pod("b", "n2"), Pod: pod("b", "n2")},
		{Op: UpdateNode, OldNode: node("n2"), Node: node("n2")},
		{Op: RemovePod, Pod: pod("b", "n2")},
	}
	errs := 0
	for i, c := range calls {
		c.At = int64(i)
		err := Apply(tg, c)
		if err != nil {
			errs++
		}
		require.NoError(t, w.Call(c, err))
	}
	require.Equal(t, 1, errs)
	tot, err := CacheTotals(rec)
	require.NoError(t, err)
	require.Equal(t, Totals{Pods: 1, Nodes: 2, PerNode: []NodeTotal{{"n1", 1, 500, 1 << 30}, {"n2", 0, 0, 0}}}, tot)
	require.NoError(t, w.Close(tot))

	fresh, err := schedcache.New(ctx)
	require.NoError(t, err)
	defer fresh.Close()
	var seen []Op
	res, err := ReplayFunc(ctx, CacheTarget(fresh), NewReader(bytes.NewReader(buf.Bytes())), func(i int, r Record, err error) {
		require.Equal(t, len(seen), i)
		seen = append(seen, r.Op)
	})
	require.NoError(t, err)
	require.Len(t, seen, len(calls))
	require.Equal(t, len(calls), res.Calls)
	require.Zero(t, res.Mismatches)
	require.Zero(t, res.TextDiffs)
	require.Equal(t, &tot, res.End)
	got, err := CacheTotals(fresh)
	require.NoError(t, err)
	require.Empty(t, res.End.Diff(got, 0))

	// A target that fails every AddPod: both AddPods are mismatches, and so
	// are UpdatePod and RemovePod of the pod it never added.
	fresh2, err := schedcache.New(ctx)
	require.NoError(t, err)
	defer fresh2.Close()
	res, err = Replay(ctx, failAddPod{CacheTarget(fresh2)}, NewReader(bytes.NewReader(buf.Bytes())))
	require.NoError(t, err)
	require.Equal(t, 4, res.Mismatches)
	require.Equal(t, []Op{AddPod, AddPod, UpdatePod, RemovePod}, []Op{res.Kept[0].Op, res.Kept[1].Op, res.Kept[2].Op, res.Kept[3].Op})
	require.Equal(t, AddPod, res.Kept[0].Op)
	require.Equal(t, "ns/a", res.Kept[0].Object)
	require.Equal(t, "", res.Kept[0].Want)
	require.Equal(t, "refused", res.Kept[0].Got)
	require.Contains(t, res.Kept[0].String(), `recorded nil, got "refused"`)
	// The pod it assumed but never added still counts, as recorded.
	got, err = CacheTotals(fresh2)
	require.NoError(t, err)
	require.Empty(t, res.End.Diff(got, 0))
}

type failAddPod struct{ Target }

func (failAddPod) AddPod(*v1.Pod) error { return errors.New("refused") }

// Malformed traces are errors wrapping ErrFormat, naming the line.
func TestReaderErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{`{"op":"AddNode"}` + "\n", "line 1"},
		{`{"op":"Begin","version":2}` + "\n", "version 2"},
		{`{"op":"Begin","version":1}` + "\n" + `{"op":"Nope"}` + "\n", `line 2: unknown op "Nope"`},
		{`{"op":"Begin","version":1}` + "\n" + `{"op":"AddPod"}` + "\n", "AddPod without a pod"},
		{`{"op":"Begin","version":1}` + "\n" + `{"op":"UpdateNode","node":{}}` + "\n", "needs node and oldNode"},
		{`{"op":"Begin","version":1}` + "\n" + `{"op":"End"}` + "\n", "End record without totals"},
		{`{"op":"Begin","version":1}` + "\n" + `{` + "\n", "line 2"},
	} {
		_, err := Replay(context.Background(), nil, NewReader(strings.NewReader(tc.in)))
		require.ErrorIs(t, err, ErrFormat, tc.in)
		require.ErrorContains(t, err, tc.want)
	}
	// A call after End.
	in := `{"op":"Begin","version":1}` + "\n" + `{"op":"End","totals":{"pods":0,"nodes":0,"perNode":null}}` + "\n" + `{"op":"RemoveNode","node":{}}` + "\n"
	_, err := Replay(context.Background(), nil, NewReader(strings.NewReader(in)))
	require.ErrorIs(t, err, ErrFormat)
	// A Begin record alone is an empty trace, read to the end.
	_, err = NewReader(strings.NewReader(`{"op":"Begin","version":1}` + "\n")).Next()
	require.Equal(t, io.EOF, err)
}

// Diff names each difference and honours its limit.
func TestTotalsDiff(t *testing.T) {
	a := Totals{Pods: 2, Nodes: 2, PerNode: []NodeTotal{{"a", 1, 1, 1}, {"b", 1, 1, 1}}}
	require.Empty(t, a.Diff(a, 0))
	b := Totals{Pods: 3, Nodes: 2, PerNode: []NodeTotal{{"a", 2, 1, 1}, {"c", 0, 0, 0}}}
	d := a.Diff(b, 0)
	require.Equal(t, []string{"pods: want 2, got 3",
		"node a: want 1 pods 1m cpu 1 memory, got 2 pods 1m cpu 1 memory",
		"node b: missing", "node c: not expected"}, d)
	require.Len(t, a.Diff(b, 2), 2)
}
