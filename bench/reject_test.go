package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	upcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"

	"github.com/schedcache/schedcache"
)

// The calls schedcache used to refuse although upstream handles them (an
// empty node name, a UID change, a nil or differently named old node), and
// the ones it still refuses, each next to the real upstream cache
// (docs/rejections.md has the table).
//
// Where upstream is fine, TestRejectAccepted runs both caches through the
// same calls and compares them after every step exactly as TestDiffCache
// does (Dump, counts, pods, fresh and long-lived snapshots, errors or not).
//
// Where schedcache refuses, TestRejectRefused shows what upstream does with
// the call (a panic, or a state that contradicts itself) and that
// schedcache returns the typed error and stays equal to upstream's state
// from before the call.

// rstep is one step of a scenario on a differ.
type rstep func(d *differ)

// track makes the differ compare p's key from now on.
func (d *differ) track(p *v1.Pod) {
	k := string(p.UID)
	if _, ok := d.keyPod[k]; !ok {
		d.keys = append(d.keys, k)
		d.keyPod[k] = p
	}
}

// rPod returns a random pod, the same for the same uid.
func rPod(uid, node string) *v1.Pod {
	return newGen(uint64(len(uid))+uint64(uid[len(uid)-1])).pod(uid, node)
}

// rPodWith returns a pod with required anti-affinity and a claim, so that
// the affinity lists and the used-PVC set take part.
func rPodWith(uid, node string) *v1.Pod {
	p := rPod(uid, node)
	p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: v1.LabelHostname}},
	}}
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "claim", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claimNames[0]},
	}})
	return p
}

// renamed returns a copy of p with another UID (and name).
func renamed(p *v1.Pod, uid string) *v1.Pod {
	c := p.DeepCopy()
	c.UID, c.Name = types.UID(uid), uid
	return c
}

func rNode(name string, zone int) *v1.Node { return newGen(uint64(len(name))).node(name, zone) }

func rAddNode(n *v1.Node) rstep {
	return func(d *differ) { d.lastNode[n.Name] = n; d.checkAddNode(n) }
}

func rUpdateNode(old, n *v1.Node) rstep {
	return func(d *differ) { d.lastNode[n.Name] = n; d.checkUpdateNode(old, n) }
}

func rRemoveNode(n *v1.Node) rstep {
	return func(d *differ) { d.both("RemoveNode "+n.Name, d.up.RemoveNode(n), d.sc.RemoveNode(n)) }
}

func rPodOp(op string, p *v1.Pod) rstep {
	return func(d *differ) {
		d.track(p)
		var eu, es error
		switch op {
		case "AssumePod":
			eu, es = d.up.AssumePod(p), d.sc.AssumePod(p)
		case "RemoveAssumedPod":
			eu, es = d.up.RemoveAssumedPod(p), d.sc.RemoveAssumedPod(p)
		case "ForgetPod":
			eu, es = d.up.ForgetPod(p), d.sc.ForgetPod(p)
		case "AddPod":
			eu, es = d.up.AddPod(p), d.sc.AddPod(p)
		case "RemovePod":
			eu, es = d.up.RemovePod(p), d.sc.RemovePod(p)
		default:
			d.t.Fatalf("unknown op %s", op)
		}
		d.both(fmt.Sprintf("%s %s on %q", op, p.UID, p.Spec.NodeName), eu, es)
	}
}

// rUpdatePod updates old to nu on both caches. An old pod naming another
// live node than the cached pod's is refused by both, schedcache
// protectively (ErrPodNodeMismatch; upstream: "no corresponding pod").
func rUpdatePod(old, nu *v1.Pod) rstep {
	return func(d *differ) {
		d.track(old)
		d.track(nu)
		d.bothProtective(fmt.Sprintf("UpdatePod %s on %q -> %s on %q", old.UID, old.Spec.NodeName, nu.UID, nu.Spec.NodeName),
			d.up.UpdatePod(old, nu), d.sc.UpdatePod(old, nu), schedcache.ErrPodNodeMismatch)
	}
}

// rExpectErr runs the step and fails unless both caches returned an error
// (the step itself checks they agree).
func rExpectErr(s rstep) rstep {
	return func(d *differ) {
		before := len(d.history)
		s(d)
		if len(d.history) == before || !lastFailed(d.history[len(d.history)-1]) {
			d.fatalf("expected both caches to fail")
		}
	}
}

// lastFailed reports whether the differ's last recorded call failed on
// upstream (both records "op -> upstream ERR / schedcache ERR").
func lastFailed(h string) bool {
	i := strings.LastIndex(h, "-> upstream ")
	return i >= 0 && !strings.HasPrefix(h[i+len("-> upstream "):], "<nil>")
}

// rEntry checks that both Dumps have (or lack) an entry named name.
func rEntry(name string, want bool) rstep {
	return func(d *differ) {
		_, okU := d.up.c.Dump().Nodes[name]
		ds, err := d.sc.c.Dump()
		if err != nil {
			d.fatalf("Dump: %v", err)
		}
		_, okS := ds.Nodes[name]
		if okU != want || okS != want {
			d.fatalf("entry %q: upstream %v, schedcache %v, want %v", name, okU, okS, want)
		}
	}
}

// rSnapshotErr checks whether a fresh upstream UpdateSnapshot fails (the
// differ checks schedcache agrees).
func rSnapshotErr(want bool) rstep {
	return func(d *differ) {
		err := d.up.c.UpdateSnapshot(discard, upcache.NewEmptySnapshot())
		if (err != nil) != want {
			d.fatalf("upstream UpdateSnapshot error %v, want error %v", err, want)
		}
	}
}

func runScenario(t *testing.T, steps []rstep) *differ {
	t.Helper()
	d := newDiffer(t, 1)
	for i, s := range steps {
		d.step = i
		s(d)
		d.compare()
	}
	return d
}

func TestRejectAccepted(t *testing.T) {
	n0, n1 := rNode("n0", 1), rNode("n1", 2)
	pa, pb, pc := rPodWith("pa", ""), rPod("pb", ""), rPodWith("pc", "")
	scenarios := map[string][]rstep{
		// Upstream keys entries by the pod's node name, "" included: a
		// nodeless entry "" that NodeCount and Dump count, that snapshots
		// never show, and that goes with its last pod.
		"AssumePod without a node name": {
			rAddNode(n0),
			rPodOp("AssumePod", pa), rEntry("", true),
			rPodOp("AssumePod", pb),
			rPodOp("AddPod", pa),                  // confirmed on ""
			rPodOp("AddPod", withNode(pb, "n0")),  // confirmed on another node: leaves ""
			rUpdatePod(pa, withNode(pa, "")),      // an update on ""
			rExpectErr(rPodOp("ForgetPod", pa)),   // not assumed
			rPodOp("RemovePod", withNode(pa, "")), // the entry goes with its last pod
			rEntry("", false),
			rPodOp("AssumePod", pc),
			rPodOp("ForgetPod", pc), rEntry("", false),
			rPodOp("AssumePod", pc),
			rPodOp("RemovePod", withNode(pc, "")), rEntry("", false),
			rPodOp("AssumePod", pc),
			rPodOp("RemoveAssumedPod", pc), rEntry("", false),
		},
		// UpdatePod finds the pod by the old UID, removes it and adds the
		// new pod under its own UID.
		"UpdatePod renames the pod": {
			rAddNode(n0), rAddNode(n1),
			rPodOp("AddPod", withNode(pa, "n0")),
			rPodOp("AddPod", withNode(pb, "n0")),
			rUpdatePod(withNode(pa, "n0"), renamed(withNode(pa, "n0"), "pz")),
			rExpectErr(rUpdatePod(withNode(pa, "n0"), withNode(pa, "n0"))), // the old UID is gone
			rUpdatePod(renamed(withNode(pa, "n0"), "pz"), withNode(rPod("pz", "n0"), "n0")),
			rPodOp("RemovePod", renamed(withNode(pa, "n0"), "pz")),
			// A rename on a pods-first entry holding only that pod: the
			// entry is removed and created again, as upstream.
			rPodOp("AddPod", withNode(pc, "g")),
			rUpdatePod(withNode(pc, "g"), renamed(withNode(pc, "g"), "py")),
			rEntry("g", true),
			rPodOp("RemovePod", withNode(rPod("py", ""), "")), rEntry("g", false),
			// A rename on "" too.
			rPodOp("AddPod", pc),
			rUpdatePod(pc, renamed(pc, "px")),
			rPodOp("RemovePod", renamed(pc, "px")), rEntry("", false),
		},
		// The old object names a node that has an object but not the pod:
		// upstream's NodeInfo.RemovePod fails ("no corresponding pod"),
		// nothing changes; schedcache returns ErrPodNodeMismatch.
		"UpdatePod whose old pod names another live node": {
			rAddNode(n0), rAddNode(n1),
			rPodOp("AddPod", withNode(pa, "n0")),
			rExpectErr(rUpdatePod(withNode(pa, "n1"), withNode(pa, "n0"))),
			rUpdatePod(withNode(pa, "n0"), withNode(pa, "n0")),
		},
		// A nil old node has zone key "": with a new node without zone
		// labels upstream's zone tree has nothing to move.
		"UpdateNode with a nil old node and a zoneless new node": {
			rUpdateNode(nil, rNode("a", 0)), // no entry: added
			rAddNode(rNode("b", 0)),
			rUpdateNode(nil, rNode("b", 0)), // replaces the object
			rPodOp("AddPod", withNode(pb, "c")),
			rUpdateNode(nil, rNode("c", 0)), // a pods-first entry gets its object, and no tree listing (upstream)
			rSnapshotErr(false),
			rExpectErr(rRemoveNode(rNode("c", 0))), // upstream: the name is not in the tree
			// A zoned node updated to a zoneless object with a nil old
			// node: equal keys (""), so it stays listed in its old zone.
			rAddNode(rNode("z", 1)),
			rUpdateNode(nil, rNode("z", 0)),
			rExpectErr(rRemoveNode(rNode("z", 0))), // not in zone "": upstream fails too
		},
		// The old object only serves the zone move: with equal zone keys it
		// is not used at all, and a name that its zone does not list is
		// ignored.
		"UpdateNode with an old node of another name": {
			rAddNode(n0), rAddNode(n1),
			rUpdateNode(rNode("n1", 1), rNode("n0", 1)), // same zone key: the tree is untouched
			rUpdateNode(rNode("n1", 1), rNode("n0", 3)), // n1 is listed in zone 2, not 1: only n0 moves
			rUpdateNode(rNode("x", 2), rNode("n0", 1)),  // x is nowhere: only n0 moves
			rUpdateNode(rNode("x", 2), rNode("y", 3)),   // no entry for y: added
			rPodOp("AddPod", withNode(pb, "g")),
			rUpdateNode(rNode("g", 1), rNode("h", 2)), // g is a pods-first entry, not listed
		},
		// A node removed with the wrong zone stays listed in its real zone
		// (RemoveNode fails; upstream's snapshot then fails too). An
		// UpdateNode whose old object carries that name and zone removes
		// the stale name: no live node is touched, and upstream is
		// consistent again.
		"UpdateNode whose old name is a stale listing": {
			rAddNode(n0), rAddNode(n1),
			rExpectErr(rRemoveNode(rNode("n1", 3))),
			rSnapshotErr(true),
			rUpdateNode(rNode("n1", 2), rNode("n0", 3)),
			rSnapshotErr(false),
		},
	}
	for _, name := range sortedKeys(scenarios) {
		t.Run(name, func(t *testing.T) { runScenario(t, scenarios[name]) })
	}
}

// upPanics runs f and returns what it panicked with, or nil.
func upPanics(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// refusal is one call schedcache refuses.
type refusal struct {
	setup []rstep
	// sc makes the call on schedcache; it must fail with want.
	sc   func(c *schedcache.Cache) error
	want error
	// up makes the same call on upstream (after schedcache's call was
	// checked) and reports how upstream breaks.
	up func(t *testing.T, d *differ)
}

func TestRejectRefused(t *testing.T) {
	n0, n1 := rNode("n0", 1), rNode("n1", 2)
	pa, pb := rPodWith("pa", "n0"), rPod("pb", "n0")

	// podsOn lists the UIDs upstream's entry name holds, in order.
	podsOn := func(d *differ, name string) []string {
		ni := d.up.c.Dump().Nodes[name]
		if ni == nil {
			return nil
		}
		var out []string
		for _, p := range ni.GetPods() {
			out = append(out, string(p.GetPod().UID))
		}
		slices.Sort(out)
		return out
	}
	cases := map[string]refusal{
		// Upstream's removePod(old) finds no entry for the old node, logs,
		// and drops the pod's state; addPod(new) then adds the pod to the
		// cached node a second time.
		"UpdatePod whose old pod names a node without entry": {
			setup: []rstep{rAddNode(n0), rPodOp("AddPod", pa)},
			sc: func(c *schedcache.Cache) error {
				return c.UpdatePod(discard, withNode(pa, "nowhere"), withNode(pa, "n0"))
			},
			want: schedcache.ErrPodNodeMismatch,
			up: func(t *testing.T, d *differ) {
				if err := d.up.UpdatePod(withNode(pa, "nowhere"), withNode(pa, "n0")); err != nil {
					t.Fatalf("upstream UpdatePod: %v", err)
				}
				if got := podsOn(d, "n0"); !slices.Equal(got, []string{"pa", "pa"}) {
					t.Fatalf("upstream n0 pods %v, want pa twice", got)
				}
			},
		},
		// Upstream's NodeInfo.RemovePod on a nodeless entry that lacks the
		// pod builds its error from the nil node's name: a panic.
		"UpdatePod whose old pod names a nodeless entry": {
			setup: []rstep{rAddNode(n0), rPodOp("AddPod", pa), rPodOp("AddPod", rPod("pg", "g"))},
			sc: func(c *schedcache.Cache) error {
				return c.UpdatePod(discard, withNode(pa, "g"), withNode(pa, "n0"))
			},
			want: schedcache.ErrPodNodeMismatch,
			up: func(t *testing.T, d *differ) {
				if v := upPanics(func() { _ = d.up.UpdatePod(withNode(pa, "g"), withNode(pa, "n0")) }); v == nil {
					t.Fatal("upstream did not panic")
				}
			},
		},
		// Upstream removes pa and adds the new pod under pb's key: n0 holds
		// two pods with UID pb, and pb's own state (assumed here) now
		// describes the new pod.
		"UpdatePod to a UID cached as another pod": {
			setup: []rstep{rAddNode(n0), rPodOp("AddPod", pa), rPodOp("AssumePod", pb)},
			sc: func(c *schedcache.Cache) error {
				return c.UpdatePod(discard, pa, renamed(pa, "pb"))
			},
			want: schedcache.ErrUIDMismatch,
			up: func(t *testing.T, d *differ) {
				if err := d.up.UpdatePod(pa, renamed(pa, "pb")); err != nil {
					t.Fatalf("upstream UpdatePod: %v", err)
				}
				if got := podsOn(d, "n0"); !slices.Equal(got, []string{"pb", "pb"}) {
					t.Fatalf("upstream n0 pods %v, want pb twice", got)
				}
				if n := d.up.PodCount(); n != 2 {
					t.Fatalf("upstream PodCount %d, want 2 (one key)", n)
				}
			},
		},
		// Upstream's removePod(old) succeeds, then addPod(new) fails on
		// the empty UID: the pod is gone and an error is returned.
		// schedcache refuses the call before anything changes (empty UIDs
		// are refused everywhere, with the state intact).
		"UpdatePod with an empty new UID": {
			setup: []rstep{rAddNode(n0), rPodOp("AddPod", pa)},
			sc: func(c *schedcache.Cache) error {
				return c.UpdatePod(discard, pa, renamed(pa, ""))
			},
			want: schedcache.ErrEmptyUID,
			up: func(t *testing.T, d *differ) {
				if err := d.up.UpdatePod(pa, renamed(pa, "")); err == nil {
					t.Fatal("upstream UpdatePod succeeded")
				}
				if n := d.up.PodCount(); n != 0 {
					t.Fatalf("upstream PodCount %d, want 0 (the pod removed before the error)", n)
				}
			},
		},
		// The existing exit case, for completeness.
		"UpdatePod to another node": {
			setup: []rstep{rAddNode(n0), rAddNode(n1), rPodOp("AddPod", pa)},
			sc: func(c *schedcache.Cache) error {
				return c.UpdatePod(discard, pa, withNode(pa, "n1"))
			},
			want: schedcache.ErrCorrupted,
		},
		// Upstream's nodeTree.updateNode reads the nil old node's labels:
		// a panic, after it created the entry and listed the node.
		"UpdateNode with a nil old node and a zoned new node": {
			setup: []rstep{rAddNode(n0)},
			sc: func(c *schedcache.Cache) error {
				_, err := c.UpdateNode(discard, nil, rNode("n9", 1))
				return err
			},
			want: schedcache.ErrNilNode,
			up: func(t *testing.T, d *differ) {
				if v := upPanics(func() { _ = d.up.UpdateNode(nil, rNode("n9", 1)) }); v == nil {
					t.Fatal("upstream did not panic")
				}
				if _, ok := d.up.c.Dump().Nodes["n9"]; !ok {
					t.Fatal("upstream panicked before creating the entry: the test no longer shows a half-applied call")
				}
			},
		},
		"UpdateNode with a nil old node and a zoned new node, existing node": {
			setup: []rstep{rAddNode(n0)},
			sc: func(c *schedcache.Cache) error {
				_, err := c.UpdateNode(discard, nil, rNode("n0", 2))
				return err
			},
			want: schedcache.ErrNilNode,
			up: func(t *testing.T, d *differ) {
				if v := upPanics(func() { _ = d.up.UpdateNode(nil, rNode("n0", 2)) }); v == nil {
					t.Fatal("upstream did not panic")
				}
			},
		},
		// Upstream removes n1, another live node, from the zone tree: n1
		// keeps its object (Get finds it) but is never listed again, and
		// UpdateSnapshot reports nothing.
		"UpdateNode whose old name is another live node": {
			setup: []rstep{rAddNode(n0), rAddNode(n1)},
			sc: func(c *schedcache.Cache) error {
				_, err := c.UpdateNode(discard, rNode("n1", 2), rNode("n0", 3))
				return err
			},
			want: schedcache.ErrNodeNameMismatch,
			up: func(t *testing.T, d *differ) {
				_ = d.up.UpdateNode(rNode("n1", 2), rNode("n0", 3))
				s := upcache.NewEmptySnapshot()
				if err := d.up.c.UpdateSnapshot(discard, s); err != nil {
					t.Fatalf("upstream UpdateSnapshot: %v", err)
				}
				l, _ := s.NodeInfos().List()
				if _, err := s.NodeInfos().Get("n1"); err != nil || slices.Contains(upNames(l), "n1") {
					t.Fatalf("upstream: Get(n1) error %v, list %v; want n1 found but unlisted", err, upNames(l))
				}
			},
		},
	}
	for _, name := range sortedKeys(cases) {
		t.Run(name, func(t *testing.T) {
			rc := cases[name]
			d := runScenario(t, rc.setup)
			before, err := d.sc.c.Dump()
			if err != nil {
				t.Fatal(err)
			}
			err = rc.sc(d.sc.c)
			if !errors.Is(err, rc.want) {
				t.Fatalf("schedcache: error %v, want %v", err, rc.want)
			}
			var pe *schedcache.PodError
			var ne *schedcache.NodeError
			var ce *schedcache.CorruptionError
			if !errors.As(err, &pe) && !errors.As(err, &ne) && !errors.As(err, &ce) && !errors.Is(err, schedcache.ErrEmptyUID) {
				t.Fatalf("schedcache: error %T is not a PodError, NodeError or CorruptionError", err)
			}
			after, _ := d.sc.c.Dump()
			if a, b := sortedKeys(before.Nodes), sortedKeys(after.Nodes); !slices.Equal(a, b) {
				t.Fatalf("schedcache entries changed: %v -> %v", a, b)
			}
			d.step = len(rc.setup)
			d.compare() // schedcache still equals upstream before the call
			if rc.up != nil {
				rc.up(t, d)
			}
		})
	}
}

// TestRejectRandom runs TestDiffCache's random sequences with the calls
// this file is about mixed in: pods assumed and added without a node name,
// renames, updates whose old pod names another node, UpdateNode with a nil
// old node or an old node of another name. Calls schedcache refuses are not
// made on upstream (it would panic or corrupt itself); the comparison after
// the step then checks that schedcache changed nothing.
func TestRejectRandom(t *testing.T) {
	total := stepsFor(1500, 15000)
	const sequences = 3
	for seq := range sequences {
		t.Run(fmt.Sprintf("seq=%d", seq), func(t *testing.T) {
			d := newDiffer(t, uint64(seq)+101)
			for d.step = 0; d.step < total/sequences; d.step++ {
				if d.g.pct(30) {
					d.stepReject()
				} else {
					d.stepOnce()
				}
				d.compare()
			}
			t.Logf("%d steps: %s", total/sequences, d.countsLine())
		})
	}
}

// refused records a call schedcache refused (and upstream was spared).
func (d *differ) refused(op string, es, want error) {
	d.t.Helper()
	d.history = append(d.history, fmt.Sprintf("%d: %s -> schedcache refuses: %v", d.step, op, es))
	if !errors.Is(es, want) {
		d.fatalf("%s: schedcache error %v, want %v", op, es, want)
	}
	kind, _, _ := strings.Cut(op, " ")
	d.counts[kind+"/refused"]++
}

// stepReject applies one of the calls of this file.
func (d *differ) stepReject() {
	g := d.g
	st := d.state()
	added := keysWhere(st, func(k string) bool { return !st.assumed[k] })
	switch x := g.r.IntN(100); {
	case x < 20: // AssumePod or AddPod without a node name
		uid := d.newUID()
		p := g.pod(uid, "")
		d.keyPod[uid] = p
		if g.pct(50) {
			d.both("AssumePod "+uid+` on ""`, d.up.AssumePod(p), d.sc.AssumePod(p))
		} else {
			d.both("AddPod "+uid+` on ""`, d.up.AddPod(p), d.sc.AddPod(p))
		}

	case x < 45: // UpdatePod to another UID: free (rename) or cached (refused)
		if len(added) == 0 {
			return
		}
		old := st.stored[d.randomKey(added)]
		var uid string
		if g.pct(70) || len(st.stored) < 2 {
			uid = d.newUID()
		} else {
			uid = d.randomKey(keysWhere(st, func(k string) bool { return k != string(old.UID) }))
		}
		nu := g.pod(uid, old.Spec.NodeName)
		op := fmt.Sprintf("UpdatePod %s -> %s on %q", old.UID, uid, old.Spec.NodeName)
		if _, cached := st.stored[uid]; cached {
			d.refused(op, d.sc.UpdatePod(old, nu), schedcache.ErrUIDMismatch)
			return
		}
		d.keyPod[uid] = nu
		d.both(op, d.up.UpdatePod(old, nu), d.sc.UpdatePod(old, nu))

	case x < 60: // UpdatePod whose old pod names another node
		if len(added) == 0 {
			return
		}
		s := st.stored[d.randomKey(added)]
		old := withNode(s, d.otherNode(s.Spec.NodeName))
		nu := g.pod(string(s.UID), s.Spec.NodeName)
		op := fmt.Sprintf("UpdatePod %s old on %q (cached on %q)", s.UID, old.Spec.NodeName, s.Spec.NodeName)
		if slices.Contains(st.live, old.Spec.NodeName) {
			d.bothProtective(op, d.up.UpdatePod(old, nu), d.sc.UpdatePod(old, nu), schedcache.ErrPodNodeMismatch) // upstream: "no corresponding pod"
			return
		}
		d.refused(op, d.sc.UpdatePod(old, nu), schedcache.ErrPodNodeMismatch)

	case x < 75: // UpdateNode(nil, n): n zoneless, new or already zoneless
		var name string
		switch {
		case len(st.absent) > 0 && g.pct(50):
			name = st.absent[g.r.IntN(len(st.absent))]
		case len(st.live) > 0:
			name = st.live[g.r.IntN(len(st.live))]
		default:
			return
		}
		zone := 0
		if slices.Contains(st.live, name) && zoneOf(d.lastNode[name]) != 0 {
			zone = g.r.IntN(len(diffZones))
			if zone == 0 {
				zone = 1
			}
			n := g.node(name, zone)
			d.refused("UpdateNode nil -> "+name, errOf(d.sc.c.UpdateNode(discard, nil, n)), schedcache.ErrNilNode)
			return
		}
		n := g.node(name, zone)
		d.lastNode[name] = n
		d.checkUpdateNode(nil, n)

	default: // UpdateNode(old, n) with old of another name; n keeps its zone
		var name string
		zone := g.r.IntN(len(diffZones))
		switch {
		case len(st.absent) > 0 && g.pct(40):
			name = st.absent[g.r.IntN(len(st.absent))]
		case len(st.live) > 0:
			name = st.live[g.r.IntN(len(st.live))]
			zone = zoneOf(d.lastNode[name])
		default:
			return
		}
		n := g.node(name, zone)
		oldName := d.otherNode(name)
		if g.pct(20) {
			oldName = "x" + oldName // never an entry
		}
		old := d.lastNode[oldName]
		if old == nil || g.pct(40) {
			old = g.node(oldName, g.r.IntN(len(diffZones)))
		}
		op := fmt.Sprintf("UpdateNode %s zone %d -> %s zone %d", oldName, zoneOf(old), name, zone)
		_, es := d.sc.c.UpdateNode(discard, old, n)
		if errors.Is(es, schedcache.ErrNodeNameMismatch) {
			d.refused(op, es, schedcache.ErrNodeNameMismatch)
			if !slices.Contains(st.live, oldName) {
				d.fatalf("%s refused, but upstream has no live node %s", op, oldName)
			}
			return
		}
		d.lastNode[name] = n
		d.both(op, d.up.UpdateNode(old, n), es)
		ni, _ := d.sc.c.GetNode(name)
		d.checkReturnedNode(op, name, ni)
	}
}

func errOf(_ *schedcache.NodeInfo, err error) error { return err }
