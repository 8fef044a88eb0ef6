// Package imagetable holds one version of a cache's image registry, the
// type behind nodeinfo.ImageTable. It lives here, not in nodeinfo, so
// that its constructors and accessors, whose types are the module's
// internal persistent maps, are not part of nodeinfo's public API; only
// the cache, forks and snapshots make and read tables.
package imagetable

import "github.com/schedcache/schedcache/internal/immutable"

// Table is one version of an image registry: for every image name some
// node lists, the summary S a clone taken at that version shows, and the
// stray registrations: per node name, the image names registered for it
// that its node object (if any) does not list, which upstream keeps
// after a RemoveNode passed another object than the one registered, or
// one that failed in the zone tree (a what-if fork continuing from this
// version needs them to count as the cache would). It is immutable and
// safe for concurrent use; versions share structure. A nil *Table is an
// empty one.
type Table[S any] struct {
	m      immutable.Map[S]        // immutable
	strays immutable.Map[[]string] // node name -> stray image names; immutable, values too
}

// New returns the table holding m and the stray registrations strays
// (node name -> image names, each slice immutable); both are immutable
// from then on.
func New[S any](m immutable.Map[S], strays immutable.Map[[]string]) *Table[S] {
	return &Table[S]{m: m, strays: strays}
}

// Get returns the summary of name, if some node lists it.
func (t *Table[S]) Get(name string) (S, bool) {
	if t == nil {
		var zero S
		return zero, false
	}
	return t.m.Get(name)
}

// Map returns the table's contents.
func (t *Table[S]) Map() immutable.Map[S] {
	if t == nil {
		return immutable.Map[S]{}
	}
	return t.m
}

// Strays returns the table's stray registrations (node name -> the image
// names registered for it beyond its node object's); the slices must not
// be written.
func (t *Table[S]) Strays() immutable.Map[[]string] {
	if t == nil {
		return immutable.Map[[]string]{}
	}
	return t.strays
}
