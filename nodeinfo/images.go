package nodeinfo

import (
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/imagetable"
)

// ImageTable is one version of a cache's image registry: for every image
// name some node lists, the summary a clone taken at that version shows
// (the size the first node reported and how many nodes list the name),
// and the stray registrations upstream keeps. Immutable and safe for
// concurrent use; only the cache, forks and snapshots make them. Get
// returns a name's summary; a nil table is empty.
type ImageTable = imagetable.Table[ImageStateSummary]

// ImageView is immutable: the image names a node object lists (each once,
// in the order of first appearance) and the registry version a clone reads
// their summaries from.
type ImageView struct {
	Names []string    // immutable
	Table *ImageTable // immutable
}

// ImageNames returns node's image names, each once, in the order of first
// appearance (upstream keys a node's ImageStates by these). The result is
// fresh; nil for a node without images.
func ImageNames(node *v1.Node) []string {
	if node == nil {
		return nil
	}
	n := 0
	for i := range node.Status.Images {
		n += len(node.Status.Images[i].Names)
	}
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	var seen map[string]struct{}
	if n > 16 {
		seen = make(map[string]struct{}, n)
	}
	for i := range node.Status.Images {
		for _, name := range node.Status.Images[i].Names {
			if seen != nil {
				if _, dup := seen[name]; dup {
					continue
				}
				seen[name] = struct{}{}
			} else if containsString(out, name) {
				continue
			}
			out = append(out, name)
		}
	}
	return out
}

func containsString(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// firstSize returns the size node lists first for name (0 if none).
func firstSize(node *v1.Node, name string) int64 {
	if node == nil {
		return 0
	}
	for i := range node.Status.Images {
		for _, n := range node.Status.Images[i].Names {
			if n == name {
				return node.Status.Images[i].SizeBytes
			}
		}
	}
	return 0
}

// imageSummary returns the summary of one of n's image names read from its
// table; a name the table lacks shows the node's own size and no nodes.
func (n *NodeInfo) imageSummary(name string) ImageStateSummary {
	if s, ok := n.imageTable.Get(name); ok {
		return s
	}
	return ImageStateSummary{Size: firstSize(n.node, name)}
}

// WithImageTable returns a copy of n whose image summaries are read from t
// (a clone of the same entry taken at another registry version); n itself
// is returned if it already reads t, lists no images or has explicit
// summaries.
func (n *NodeInfo) WithImageTable(t *ImageTable) *NodeInfo {
	if n == nil || n.imageTable == t || n.imageStates != nil || len(n.imageNames) == 0 {
		return n
	}
	c := n.copyFields()
	c.imageTable = t
	return c.withExtension()
}

// WithImages returns a copy of n whose image summaries are v's names read
// from v's table.
func (n *NodeInfo) WithImages(v ImageView) *NodeInfo {
	if n == nil {
		return nil
	}
	c := n.copyFields()
	c.imageStates, c.imageNames, c.imageTable = nil, v.Names, v.Table
	return c.withExtension()
}

// SamePVCKeys reports whether a and b reference the same PVC keys (their
// PVCRefCounts have the same key sets; counts may differ). A nil NodeInfo
// references none.
func SamePVCKeys(a, b *NodeInfo) bool {
	var x, y []pvcRef
	if a != nil {
		x = a.pvcRefs
	}
	if b != nil {
		y = b.pvcRefs
	}
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i].key != y[i].key {
			return false
		}
	}
	return true
}

// DiffPVCKeys calls fn, in key order, for each PVC key that exactly one of
// a and b references: added is true for a key only b references, false
// for one only a references (a nil NodeInfo references none). Cost:
// O(keys of a and b) by one merge of the two sorted lists; nothing if
// they share one list (a Freeze that changed no claim).
func DiffPVCKeys(a, b *NodeInfo, fn func(key string, added bool)) {
	mergePVCRefs(a, b, func(key string, ca, cb int) {
		if ca == 0 || cb == 0 {
			fn(key, cb != 0)
		}
	})
}

// mergePVCRefs walks the sorted reference lists of a and b together and
// calls fn, in key order, for every key either references, with its count
// in each (0 where absent). Nothing if they share one list.
func mergePVCRefs(a, b *NodeInfo, fn func(key string, ca, cb int)) {
	var x, y []pvcRef
	if a != nil {
		x = a.pvcRefs
	}
	if b != nil {
		y = b.pvcRefs
	}
	if len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0]) {
		return
	}
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case j == len(y) || (i < len(x) && x[i].key < y[j].key):
			fn(x[i].key, x[i].count, 0)
			i++
		case i == len(x) || y[j].key < x[i].key:
			fn(y[j].key, 0, y[j].count)
			j++
		default:
			fn(x[i].key, x[i].count, y[j].count)
			i++
			j++
		}
	}
}

// SamePVCCounts reports whether a and b have the same PVCRefCounts (keys
// and counts). A nil NodeInfo references none.
func SamePVCCounts(a, b *NodeInfo) bool {
	same := true
	DiffPVCCounts(a, b, func(string, int) { same = false })
	return same
}

// DiffPVCCounts calls fn, in key order, for each PVC key whose reference
// count differs between a and b, with the change from a to b (a key only
// one of them references counts 0 in the other). Entries sharing their
// references are skipped in O(1). A nil NodeInfo references none.
func DiffPVCCounts(a, b *NodeInfo, fn func(key string, delta int)) {
	mergePVCRefs(a, b, func(key string, ca, cb int) {
		if ca != cb {
			fn(key, cb-ca)
		}
	})
}

// RangePVCKeys calls fn for each PVC key n references, in key order.
func (n *NodeInfo) RangePVCKeys(fn func(key string)) {
	if n == nil {
		return
	}
	for _, r := range n.pvcRefs {
		fn(r.key)
	}
}
