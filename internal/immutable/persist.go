// Package immutable provides persistent (immutable, structurally shared) data
// structures for publishing copy-on-write snapshots in time proportional to
// what changed.
//
// A version (a Vector or a Map value) never changes once it exists: any
// number of goroutines may read it while one owner goroutine builds the next
// version with an editor. An editor (VectorEditor, MapEditor) mutates in
// place only the nodes it created itself and copies, once, every node it
// shares with earlier versions before changing it. Done ends the edit: the
// editor's nodes become part of the returned version and are never mutated
// again.
//
// Publishing a version to other goroutines needs a happens-before edge (a
// channel send, an atomic store, a mutex), as for any Go value.
package immutable

import "sync/atomic"

const (
	levelBits = 5
	width     = 1 << levelBits
	levelMask = width - 1
)

// editToken marks the nodes created by one editor: a number no other editor
// of the process had, from newToken. 0 marks a finished editor.
type editToken uint64

var lastToken atomic.Uint64

// newToken returns a token no editor has had. It allocates nothing, so an
// editor reused through EditInto costs no allocation per edit.
func newToken() editToken { return editToken(lastToken.Add(1)) }
