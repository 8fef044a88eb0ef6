// Package imagereg holds upstream's image registry rule (the scheduler
// cache's addNodeImageStates and removeNodeImageStates, 3.5 in
// docs/upstream-semantics.md), shared by the cache's coordinator (package
// actor, on its mutable registry) and by what-if forks (package snapshot,
// on a persistent nodeinfo.ImageTable), so that both count image names
// with one implementation. It has no state and no goroutines; its
// functions are safe for concurrent use on distinct arguments.
//
// Upstream keeps, per image name, a summary {Size, Nodes} whose Nodes is
// a set of node names. Here a registry keeps per name the size and the
// number of nodes (Counts), and per node name the image names registered
// for it (members: upstream's "the sets that contain this node name").
// The rule is upstream's:
//   - registering a node adds its name to the set of every image name it
//     lists, once (a name it is already a member of is skipped); a name
//     not registered is created with the size of the first image of the
//     node listing it, and an existing name's size never changes;
//   - unregistering a node (the object passed in, which may list other
//     images than the one registered) removes its name from the sets of
//     the names that object lists and it is a member of; a name left
//     with no nodes leaves the registry (registered again, it is created
//     anew with the size its next first node lists).
package imagereg

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/nodeinfo"
)

// Counts is a registry's per-name summaries, changed by Register and
// Unregister. Implementations are owned by their caller's goroutine.
type Counts interface {
	// Join counts one more node listing name; a name not registered is
	// registered with size.
	Join(name string, size int64)
	// Leave counts one node fewer listing name (a registered name with
	// the node a member); at zero nodes the name leaves the registry.
	Leave(name string)
}

// smallSet is the size up to which membership is checked by scanning a
// slice; larger registrations use a map, so a node listing many images
// costs O(images), not O(images^2).
const smallSet = 32

func numNames(node *v1.Node) int {
	n := 0
	for i := range node.Status.Images {
		n += len(node.Status.Images[i].Names)
	}
	return n
}

// Register registers node (upstream's addNodeImageStates): members are the
// image names registered for node.Name so far; it returns them with the
// names node lists that were not (appended in node's order; members'
// array is reused). Each name joined is counted with c.Join.
func Register(members []string, node *v1.Node, c Counts) []string {
	if node == nil {
		return members
	}
	var member map[string]struct{}
	if len(members)+numNames(node) > smallSet {
		member = make(map[string]struct{}, len(members))
		for _, n := range members {
			member[n] = struct{}{}
		}
	}
	for i := range node.Status.Images {
		img := &node.Status.Images[i]
		for _, name := range img.Names {
			if member != nil {
				if _, ok := member[name]; ok {
					continue // already a member: the size stays the first one's
				}
				member[name] = struct{}{}
			} else if slices.Contains(members, name) {
				continue
			}
			c.Join(name, img.SizeBytes)
			members = append(members, name)
		}
	}
	return members
}

// Unregister unregisters node (upstream's removeNodeImageStates of the
// node passed in): members are the image names registered for node.Name;
// it returns them without the names node lists (members' array is reused,
// in place). Each name left is counted with c.Leave.
func Unregister(members []string, node *v1.Node, c Counts) []string {
	if node == nil || len(members) == 0 {
		return members
	}
	if len(members)+numNames(node) > smallSet {
		gone := make(map[string]struct{}, numNames(node))
		for i := range node.Status.Images {
			for _, name := range node.Status.Images[i].Names {
				gone[name] = struct{}{}
			}
		}
		kept := members[:0]
		for _, name := range members {
			if _, ok := gone[name]; ok {
				c.Leave(name)
			} else {
				kept = append(kept, name)
			}
		}
		clear(members[len(kept):])
		return kept
	}
	for i := range node.Status.Images {
		for _, name := range node.Status.Images[i].Names {
			if j := slices.Index(members, name); j >= 0 {
				members = slices.Delete(members, j, j+1)
				c.Leave(name)
			}
		}
	}
	return members
}

// Strays returns the names of members (the names registered for a node
// name) that names (nodeinfo.ImageNames of its node object now, nil if it
// has none) lacks: the registrations its node object does not explain,
// which upstream keeps after a RemoveNode or an unregistration passed
// another object than the one registered. members hold every one of names
// (a node object's names are registered with it), so it is nil when the
// lengths are equal. The result is fresh.
func Strays(members, names []string) []string {
	if len(members) == len(names) {
		return nil
	}
	var out []string
	if len(names) > smallSet {
		has := make(map[string]struct{}, len(names))
		for _, n := range names {
			has[n] = struct{}{}
		}
		for _, m := range members {
			if _, ok := has[m]; !ok {
				out = append(out, m)
			}
		}
		return out
	}
	for _, m := range members {
		if !slices.Contains(names, m) {
			out = append(out, m)
		}
	}
	return out
}

// TableCounts is Counts on an editor of a nodeinfo.ImageTable's summaries
// (a persistent map: what forks edit). A value; the editor is its owner's.
type TableCounts struct {
	Ed *immutable.MapEditor[nodeinfo.ImageStateSummary]
}

// Join implements Counts.
func (t TableCounts) Join(name string, size int64) {
	v, ok := t.Ed.Get(name)
	if !ok {
		v = nodeinfo.ImageStateSummary{Size: size}
	}
	v.NumNodes++
	t.Ed.Set(name, v)
}

// Leave implements Counts.
func (t TableCounts) Leave(name string) {
	v, ok := t.Ed.Get(name)
	switch {
	case !ok:
	case v.NumNodes <= 1:
		t.Ed.Delete(name)
	default:
		v.NumNodes--
		t.Ed.Set(name, v)
	}
}
