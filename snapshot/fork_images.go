package snapshot

import (
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/imagereg"
	"github.com/schedcache/schedcache/internal/imagetable"
	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/nodeinfo"
)

// imgOp is one node operation's change of the image registry (the
// table's summaries and stray registrations), applied with the cache's
// rule (imagereg): node name's registrations are those its object before
// the operation lists (stored) and its strays; drop is unregistered, then
// add registered, and add becomes name's object (nil: none). slot's entry
// shows add's names read from the table as of then. Immutable.
type imgOp struct {
	prev              *imgOp // the operation before, nil for the first since the last listed state
	name              string
	slot              int32
	stored, drop, add *v1.Node
}

// setOp records the edit's node operation's image change (one per edit:
// a node operation is an edit of its own).
func (e *forkEdit) setOp(op imgOp) {
	op.prev = e.imgs
	e.op, e.hasOp = op, true
}

// applyImages applies ops (newest first) to s's image registry (s.images:
// summaries and stray registrations), in order, with the cache's rule
// (imagereg.Register, Unregister, Strays), and gives each entry they set a
// node object the image summaries of its last such operation: its node's
// names read from the registry as of then, as the cache's snapshot
// published after that operation shows them (an entry deleted since is
// skipped; a ghost keeps them, invisible, as in the cache). Cost:
// O(operations x their nodes' images x log).
func applyImages(s *Snapshot, ops *imgOp) {
	if ops == nil {
		return
	}
	// The newest operation per slot is the one whose view is shown; only
	// its version of the table is kept (one Done each).
	var seq []*imgOp
	shown := make(map[int32]*imgOp)
	for o := ops; o != nil; o = o.prev {
		seq = append(seq, o)
		if _, ok := shown[o.slot]; !ok {
			shown[o.slot] = o
		}
	}
	var ed immutable.MapEditor[nodeinfo.ImageStateSummary]
	s.images.Map().EditInto(&ed)
	counts := imagereg.TableCounts{Ed: &ed}
	strays := s.images.Strays()
	views := make(map[int32]nodeinfo.ImageView, len(shown))
	var members []string
	for i := len(seq) - 1; i >= 0; i-- {
		o := seq[i]
		was, _ := strays.Get(o.name)
		members = append(append(members[:0], was...), nodeinfo.ImageNames(o.stored)...)
		members = imagereg.Unregister(members, o.drop, counts)
		members = imagereg.Register(members, o.add, counts)
		names := nodeinfo.ImageNames(o.add)
		if now := imagereg.Strays(members, names); now != nil || was != nil {
			sed := strays.Edit()
			if now == nil {
				sed.Delete(o.name)
			} else {
				sed.Set(o.name, now)
			}
			strays = sed.Done()
		}
		if o.add != nil && shown[o.slot] == o {
			t := imagetable.New(ed.Done(), strays)
			t.Map().EditInto(&ed)
			views[o.slot] = nodeinfo.ImageView{Names: names, Table: t}
		}
	}
	s.images = imagetable.New(ed.Done(), strays)
	if len(views) == 0 {
		return
	}
	ned := s.nodes.Edit()
	for slot, v := range views {
		if ni := ned.Get(int(slot)); ni != nil {
			ned.Set(int(slot), ni.WithImages(v))
		}
	}
	s.nodes = ned.Done()
}
