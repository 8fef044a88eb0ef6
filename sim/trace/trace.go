// Package trace records the cache calls of a loadgen run and replays them.
//
// A trace is JSON Lines: one Record per line. The first is a Begin record
// with the format Version; then one record per cache call in the order the
// run made it, with the operation, the virtual time, the object(s) as
// Kubernetes JSON and the call's result (Err: "" for nil, else the error's
// text); the last is an End record with the cache's final Totals (pod and
// node counts, per-node pod count and requested cpu/memory).
//
// Replay feeds a trace to any Target (schedcache, or the upstream cache in
// the bench module), checks each call's result against the recorded one and
// returns the recorded end totals for the caller to compare with the
// target's own.
package trace

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
)

// Version is the format version a Writer writes and a Reader accepts.
const Version = 1

// Op names one record's kind: a cache call, or Begin/End.
type Op string

// The operations. Node ops carry Node (and OldNode for UpdateNode); pod
// ops carry Pod (and OldPod for UpdatePod).
const (
	Begin         Op = "Begin"
	End           Op = "End"
	AddNode       Op = "AddNode"
	UpdateNode    Op = "UpdateNode"
	RemoveNode    Op = "RemoveNode"
	AssumePod     Op = "AssumePod"
	FinishBinding Op = "FinishBinding"
	ForgetPod     Op = "ForgetPod"
	AddPod        Op = "AddPod"
	UpdatePod     Op = "UpdatePod"
	RemovePod     Op = "RemovePod"
)

// ErrFormat is wrapped by every error about a malformed trace.
var ErrFormat = errors.New("trace: malformed trace")

// Record is one line of a trace. It is a plain value: whoever holds it
// owns it.
type Record struct {
	Op      Op       `json:"op"`
	At      int64    `json:"at"`                // virtual time in ns since the run's start
	Version int      `json:"version,omitempty"` // Begin only
	OldNode *v1.Node `json:"oldNode,omitempty"` // UpdateNode: the old object
	Node    *v1.Node `json:"node,omitempty"`
	OldPod  *v1.Pod  `json:"oldPod,omitempty"` // UpdatePod: the old object
	Pod     *v1.Pod  `json:"pod,omitempty"`
	Err     string   `json:"err,omitempty"`    // the call's error text; "" is nil
	Totals  *Totals  `json:"totals,omitempty"` // End only
}

// Totals is a cache's state summed up: counts and per-node requests,
// PerNode sorted by name.
type Totals struct {
	Pods    int         `json:"pods"`
	Nodes   int         `json:"nodes"`
	PerNode []NodeTotal `json:"perNode"`
}

// NodeTotal is one node's pod count and requested resources.
type NodeTotal struct {
	Name     string `json:"name"`
	Pods     int    `json:"pods"`
	MilliCPU int64  `json:"milliCPU"`
	Memory   int64  `json:"memory"`
}

// Diff lists the differences between want and got, at most max lines
// (0: all); none means equal.
func (t Totals) Diff(got Totals, max int) []string {
	want := t
	var d []string
	add := func(format string, a ...any) {
		if max == 0 || len(d) < max {
			d = append(d, fmt.Sprintf(format, a...))
		}
	}
	if want.Pods != got.Pods {
		add("pods: want %d, got %d", want.Pods, got.Pods)
	}
	if want.Nodes != got.Nodes {
		add("nodes: want %d, got %d", want.Nodes, got.Nodes)
	}
	g := make(map[string]NodeTotal, len(got.PerNode))
	for _, n := range got.PerNode {
		g[n.Name] = n
	}
	for _, w := range want.PerNode {
		n, ok := g[w.Name]
		switch {
		case !ok:
			add("node %s: missing", w.Name)
		case n != w:
			add("node %s: want %d pods %dm cpu %d memory, got %d pods %dm cpu %d memory", w.Name, w.Pods, w.MilliCPU, w.Memory, n.Pods, n.MilliCPU, n.Memory)
		}
		delete(g, w.Name)
	}
	extra := make([]string, 0, len(g))
	for name := range g {
		extra = append(extra, name)
	}
	sort.Strings(extra)
	for _, name := range extra {
		add("node %s: not expected", name)
	}
	return d
}

// SortNodes sorts t.PerNode by name.
func (t *Totals) SortNodes() {
	sort.Slice(t.PerNode, func(i, j int) bool { return t.PerNode[i].Name < t.PerNode[j].Name })
}

// Writer writes a trace. Not safe for concurrent use; Close flushes it
// (it does not close the underlying io.Writer).
type Writer struct {
	w     *bufio.Writer // owned by the caller's goroutine
	enc   *json.Encoder // owned by the caller's goroutine; writes to w
	begun bool          // owned by the caller's goroutine
	err   error         // owned by the caller's goroutine; the first write error
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer {
	bw := bufio.NewWriterSize(w, 1<<16)
	return &Writer{w: bw, enc: json.NewEncoder(bw)}
}

// Write appends rec (after the Begin record, written first). The first
// error is sticky.
func (w *Writer) Write(rec Record) error {
	if w.err != nil {
		return w.err
	}
	if !w.begun {
		w.begun = true
		if err := w.enc.Encode(Record{Op: Begin, Version: Version}); err != nil {
			w.err = err
			return err
		}
	}
	if err := w.enc.Encode(rec); err != nil {
		w.err = err
	}
	return w.err
}

// Call records one cache call's result: err nil is recorded as "".
func (w *Writer) Call(rec Record, err error) error {
	if err != nil {
		rec.Err = err.Error()
	}
	return w.Write(rec)
}

// Close writes the End record with t and flushes.
func (w *Writer) Close(t Totals) error {
	if err := w.Write(Record{Op: End, Totals: &t}); err != nil {
		return err
	}
	if err := w.w.Flush(); err != nil {
		w.err = err
	}
	return w.err
}

// Reader reads a trace. Not safe for concurrent use.
type Reader struct {
	s    *bufio.Scanner // owned by the caller's goroutine
	line int            // owned by the caller's goroutine
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 1<<16), 64<<20)
	return &Reader{s: s}
}

// Next returns the next record (the Begin record is checked and skipped),
// io.EOF after the last. Errors about the content wrap ErrFormat.
func (r *Reader) Next() (Record, error) {
	for r.s.Scan() {
		r.line++
		var rec Record
		if err := json.Unmarshal(r.s.Bytes(), &rec); err != nil {
			return Record{}, fmt.Errorf("%w: line %d: %v", ErrFormat, r.line, err)
		}
		if r.line == 1 {
			if rec.Op != Begin || rec.Version != Version {
				return Record{}, fmt.Errorf("%w: line 1: want a Begin record of version %d, got op %q version %d", ErrFormat, Version, rec.Op, rec.Version)
			}
			continue
		}
		if err := rec.check(); err != nil {
			return Record{}, fmt.Errorf("%w: line %d: %v", ErrFormat, r.line, err)
		}
		return rec, nil
	}
	if err := r.s.Err(); err != nil {
		return Record{}, err
	}
	if r.line == 0 {
		return Record{}, fmt.Errorf("%w: empty", ErrFormat)
	}
	return Record{}, io.EOF
}

func (rec Record) check() error {
	switch rec.Op {
	case AddNode, RemoveNode:
		if rec.Node == nil {
			return fmt.Errorf("%s without a node", rec.Op)
		}
	case UpdateNode:
		if rec.Node == nil || rec.OldNode == nil {
			return fmt.Errorf("%s needs node and oldNode", rec.Op)
		}
	case AssumePod, FinishBinding, ForgetPod, AddPod, RemovePod:
		if rec.Pod == nil {
			return fmt.Errorf("%s without a pod", rec.Op)
		}
	case UpdatePod:
		if rec.Pod == nil || rec.OldPod == nil {
			return fmt.Errorf("%s needs pod and oldPod", rec.Op)
		}
	case End:
		if rec.Totals == nil {
			return fmt.Errorf("an %s record without totals", End)
		}
	default:
		return fmt.Errorf("unknown op %q", rec.Op)
	}
	return nil
}

// Target is the set of synchronous cache calls a trace holds. Replay calls
// it from one goroutine.
type Target interface {
	AddNode(n *v1.Node) error
	UpdateNode(oldNode, newNode *v1.Node) error
	RemoveNode(n *v1.Node) error
	AssumePod(p *v1.Pod) error
	FinishBinding(p *v1.Pod) error
	ForgetPod(p *v1.Pod) error
	AddPod(p *v1.Pod) error
	UpdatePod(oldPod, newPod *v1.Pod) error
	RemovePod(p *v1.Pod) error
}

// Apply makes rec's call on t and returns its error (nil for End).
func Apply(t Target, rec Record) error {
	switch rec.Op {
	case AddNode:
		return t.AddNode(rec.Node)
	case UpdateNode:
		return t.UpdateNode(rec.OldNode, rec.Node)
	case RemoveNode:
		return t.RemoveNode(rec.Node)
	case AssumePod:
		return t.AssumePod(rec.Pod)
	case FinishBinding:
		return t.FinishBinding(rec.Pod)
	case ForgetPod:
		return t.ForgetPod(rec.Pod)
	case AddPod:
		return t.AddPod(rec.Pod)
	case UpdatePod:
		return t.UpdatePod(rec.OldPod, rec.Pod)
	case RemovePod:
		return t.RemovePod(rec.Pod)
	}
	return nil
}

// Mismatch is one call whose result differs from the recorded one.
type Mismatch struct {
	Index  int    // 0-based call index
	Op     Op     // the call
	At     int64  // virtual ns
	Object string // the node's or pod's name
	Want   string // recorded error text, "" for nil
	Got    string // the target's error text, "" for nil
}

func (m Mismatch) String() string {
	q := func(s string) string {
		if s == "" {
			return "nil"
		}
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("call %d (%s %s at %dns): recorded %s, got %s", m.Index, m.Op, m.Object, m.At, q(m.Want), q(m.Got))
}

// maxKept is how many mismatches a Result keeps; the counts go on.
const maxKept = 100

// Result is what a replay found.
type Result struct {
	Calls int // calls replayed
	// Mismatches counts calls where one side erred and the other did not;
	// Kept holds the first ones.
	Mismatches int
	Kept       []Mismatch
	// TextDiffs counts calls where both erred with different texts (the
	// same outcome, worded differently: another implementation's words);
	// KeptText holds the first ones.
	TextDiffs int
	KeptText  []Mismatch
	// End is the recorded final state; nil if the trace had no End record
	// (a truncated trace).
	End *Totals
}

// Replay replays r against t. It stops at the first read error or when ctx
// is done.
func Replay(ctx context.Context, t Target, r *Reader) (Result, error) {
	return ReplayFunc(ctx, t, r, nil)
}

// ReplayFunc is Replay that also calls each (if not nil) after every call
// with its index, record and the target's error.
func ReplayFunc(ctx context.Context, t Target, r *Reader, each func(i int, rec Record, err error)) (Result, error) {
	var res Result
	for {
		if res.Calls%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return res, err
			}
		}
		rec, err := r.Next()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		if rec.Op == End {
			res.End = rec.Totals
			continue
		}
		if res.End != nil {
			return res, fmt.Errorf("%w: a %s record after End", ErrFormat, rec.Op)
		}
		got := ""
		callErr := Apply(t, rec)
		if callErr != nil {
			got = callErr.Error()
		}
		if each != nil {
			each(res.Calls, rec, callErr)
		}
		if got != rec.Err {
			m := Mismatch{Index: res.Calls, Op: rec.Op, At: rec.At, Object: rec.object(), Want: rec.Err, Got: got}
			if (got == "") != (rec.Err == "") {
				res.Mismatches++
				if len(res.Kept) < maxKept {
					res.Kept = append(res.Kept, m)
				}
			} else {
				res.TextDiffs++
				if len(res.KeptText) < maxKept {
					res.KeptText = append(res.KeptText, m)
				}
			}
		}
		res.Calls++
	}
}

func (rec Record) object() string {
	switch {
	case rec.Pod != nil:
		return rec.Pod.Namespace + "/" + rec.Pod.Name
	case rec.Node != nil:
		return rec.Node.Name
	}
	return ""
}

// CacheTarget adapts a schedcache Cache to Target (the node calls drop
// their NodeInfo result).
func CacheTarget(c *schedcache.Cache) Target { return cacheTarget{c} }

type cacheTarget struct{ c *schedcache.Cache } // immutable

var discard = klog.Background()

func (t cacheTarget) AddNode(n *v1.Node) error { _, err := t.c.AddNode(discard, n); return err }
func (t cacheTarget) UpdateNode(o, n *v1.Node) error {
	_, err := t.c.UpdateNode(discard, o, n)
	return err
}
func (t cacheTarget) RemoveNode(n *v1.Node) error   { return t.c.RemoveNode(discard, n) }
func (t cacheTarget) AssumePod(p *v1.Pod) error     { return t.c.AssumePod(discard, p) }
func (t cacheTarget) FinishBinding(p *v1.Pod) error { return t.c.FinishBinding(discard, p) }
func (t cacheTarget) ForgetPod(p *v1.Pod) error     { return t.c.ForgetPod(discard, p) }
func (t cacheTarget) AddPod(p *v1.Pod) error        { return t.c.AddPod(discard, p) }
func (t cacheTarget) UpdatePod(o, n *v1.Pod) error  { return t.c.UpdatePod(discard, o, n) }
func (t cacheTarget) RemovePod(p *v1.Pod) error     { return t.c.RemovePod(discard, p) }

// CacheTotals sums up c after waiting for every call before it (Sync):
// pod and node counts, and each node of the latest snapshot.
func CacheTotals(c *schedcache.Cache) (Totals, error) {
	if err := c.Sync(); err != nil {
		return Totals{}, err
	}
	pods, err := c.PodCount()
	if err != nil {
		return Totals{}, err
	}
	t := Totals{Pods: pods, Nodes: c.NodeCount()}
	snap := c.Snapshot()
	t.PerNode = make([]NodeTotal, 0, snap.NumNodes())
	snap.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		req := ni.Requested()
		t.PerNode = append(t.PerNode, NodeTotal{Name: ni.Node().Name, Pods: ni.NumPods(), MilliCPU: req.MilliCPU, Memory: req.Memory})
		return true
	})
	t.SortNodes()
	return t, nil
}
