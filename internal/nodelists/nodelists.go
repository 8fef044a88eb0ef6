// Package nodelists holds upstream's rules for a snapshot's node lists,
// written once and used by every place that builds them: the cache's
// coordinator (package actor), what-if forks, UpdateSnapshot's refresh
// and NewSnapshot (package snapshot). The rules (upstream's
// updateNodeInfoSnapshotList and the used-PVC set it derives):
//   - the node list is the zone tree's list with the names that have no
//     node object skipped (Build);
//   - a list whose length differs from the tree's node count is reported
//     as an *InconsistentListError, whose map size and entry count follow
//     the cache as of each refresh (Check, Recount);
//   - the affinity, required anti-affinity and required non-host-scoped
//     anti-affinity lists are the node list filtered, in its order
//     (Affinity; upstream v1.37 builds the third beside the other two,
//     filled only under its feature gate InterPodAffinityHostnameFastPath:
//     this module always builds it);
//   - a claim is used while some listed node with its object references
//     it: a count per claim (UsePVC).
//
// The functions are pure and safe for concurrent use; state stays with
// the callers.
package nodelists

import (
	"errors"
	"fmt"
)

// ErrInconsistentList means the node list did not have as many entries as
// the zone tree has nodes (upstream's UpdateSnapshot reports the same).
var ErrInconsistentList = errors.New("schedcache: snapshot node list does not match the node tree")

// InconsistentListError describes a node list whose length differs from the
// zone tree's node count. It wraps ErrInconsistentList.
type InconsistentListError struct {
	ListLen, TreeNodes, MapLen, CacheEntries int
}

// Error is upstream's text.
func (e *InconsistentListError) Error() string {
	// Upstream v1.37.2's text, word for word (its stray space included).
	return fmt.Sprintf("snapshot state is not consistent, length of NodeInfoList=%d not equal to length of nodes in tree=%d , length of NodeInfoMap=%d, length of nodes in cache=%d, trying to recover",
		e.ListLen, e.TreeNodes, e.MapLen, e.CacheEntries)
}

func (e *InconsistentListError) Unwrap() error { return ErrInconsistentList }

// Check returns the error of a node list of listLen entries built from a
// tree of treeNodes nodes, or nil when the two agree; mapLen and entries
// are the snapshot map's size and the cache's entry count, as upstream
// reports them.
func Check(listLen, treeNodes, mapLen, entries int) error {
	if listLen == treeNodes {
		return nil
	}
	return &InconsistentListError{ListLen: listLen, TreeNodes: treeNodes, MapLen: mapLen, CacheEntries: entries}
}

// Recount returns err, an inconsistent list's error, with its map size
// and entry count brought up to mapLen and entries (upstream reports them
// as of each refresh, and they change without the list changing: a
// pods-first entry, a ghost's last pod), and whether it changed. Any
// other err is returned unchanged.
func Recount(err error, mapLen, entries int) (error, bool) {
	ie, ok := err.(*InconsistentListError)
	if !ok || (ie.MapLen == mapLen && ie.CacheEntries == entries) {
		return err, false
	}
	return &InconsistentListError{ListLen: ie.ListLen, TreeNodes: ie.TreeNodes, MapLen: mapLen, CacheEntries: entries}, true
}

// Build appends to out the node list of ids, the entries of the zone
// tree's list in its order (a negative id: a name without an entry):
// ids that are negative or whose entry has no node object (hasNode false)
// are skipped, as upstream skips the names missing from its snapshot's
// map. skipped reports whether any was.
func Build(out, ids []int32, hasNode func(id int32) bool) (order []int32, skipped bool) {
	for _, id := range ids {
		if id < 0 || !hasNode(id) {
			skipped = true
			continue
		}
		out = append(out, id)
	}
	return out, skipped
}

// Affinity appends to aff, anti and nonHost the entries of order that
// hold pods with affinity, pods with required anti-affinity and pods with
// required non-host-scoped anti-affinity (flags), in list order:
// upstream's HavePodsWithAffinityList, HavePodsWithRequiredAntiAffinityList
// and HavePodsWithRequiredNonHostScopedAntiAffinityList.
func Affinity(order []int32, flags func(id int32) (aff, anti, nonHost bool), aff, anti, nonHost []int32) ([]int32, []int32, []int32) {
	for _, id := range order {
		a, r, h := flags(id)
		if a {
			aff = append(aff, id)
		}
		if r {
			anti = append(anti, id)
		}
		if h {
			nonHost = append(nonHost, id)
		}
	}
	return aff, anti, nonHost
}

// Counts is a claim -> count table: a map of the caller's, or an editor
// of an immutable one.
type Counts interface {
	Get(claim string) (int32, bool)
	Set(claim string, n int32)
	Delete(claim string) bool
}

// UsePVC counts one more (delta +1) or one fewer (-1) listed node with its
// object referencing claim, and reports whether the claim entered the
// used set (its count went from 0 to 1) or left it (it reached 0).
func UsePVC(c Counts, claim string, delta int32) (entered, left bool) {
	prev, _ := c.Get(claim)
	n := prev + delta
	if n <= 0 {
		c.Delete(claim)
		return false, prev > 0
	}
	c.Set(claim, n)
	return prev <= 0, false
}

// MapCounts is Counts over a plain map, for a mutable owner.
type MapCounts map[string]int32

// Get returns claim's count.
func (m MapCounts) Get(claim string) (int32, bool) { n, ok := m[claim]; return n, ok }

// Set sets claim's count.
func (m MapCounts) Set(claim string, n int32) { m[claim] = n }

// Delete removes claim.
func (m MapCounts) Delete(claim string) bool { _, ok := m[claim]; delete(m, claim); return ok }
