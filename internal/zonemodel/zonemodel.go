// Package zonemodel is a deliberately naive model of upstream's zone tree
// (docs/upstream-semantics.md section 6), for tests that check nodetree, the cache and its
// fuzzers against something simple: zone keys map to node names in
// insertion order, and the list interleaves the zones round-robin.
//
// Contract: a Model is not safe for concurrent use; it is owned by the test
// that made it. No method blocks. It never imports what it models.
package zonemodel

import "slices"

// Model is a naive zone tree. The zero Model is not ready: use New.
type Model struct {
	zones map[string][]string // zone key -> names, in insertion order
	order []string            // zone keys, in the order their zones appeared
}

// New returns an empty Model.
func New() *Model { return &Model{zones: map[string][]string{}} }

// Add appends name to the zone key, creating the zone last in the zone
// order. It reports false, changing nothing, if that zone lists name already.
func (m *Model) Add(name, key string) bool {
	names, ok := m.zones[key]
	if slices.Contains(names, name) {
		return false
	}
	if !ok {
		m.order = append(m.order, key)
	}
	m.zones[key] = append(names, name)
	return true
}

// Remove removes name from the zone key, dropping the zone if it empties.
// It reports false, changing nothing, if that zone does not list name.
func (m *Model) Remove(name, key string) bool {
	names := m.zones[key]
	i := slices.Index(names, name)
	if i < 0 {
		return false
	}
	names = slices.Delete(slices.Clone(names), i, i+1)
	if len(names) > 0 {
		m.zones[key] = names
		return true
	}
	delete(m.zones, key)
	m.order = slices.DeleteFunc(m.order, func(z string) bool { return z == key })
	return true
}

// List returns the names zone-interleaved: element 0 of every zone in zone
// order, then element 1, and so on.
func (m *Model) List() []string {
	var out []string
	for idx := 0; ; idx++ {
		found := false
		for _, z := range m.order {
			if idx < len(m.zones[z]) {
				out = append(out, m.zones[z][idx])
				found = true
			}
		}
		if !found {
			return out
		}
	}
}

// Count returns the number of names, a name listed in two zones twice.
func (m *Model) Count() int {
	n := 0
	for _, names := range m.zones {
		n += len(names)
	}
	return n
}

// Zones returns the zone keys in zone order (a copy).
func (m *Model) Zones() []string { return slices.Clone(m.order) }

// Lists reports whether the zone key lists name.
func (m *Model) Lists(name, key string) bool { return slices.Contains(m.zones[key], name) }

// Clone returns an independent copy of m.
func (m *Model) Clone() *Model {
	c := &Model{zones: make(map[string][]string, len(m.zones)), order: slices.Clone(m.order)}
	for k, names := range m.zones {
		c.zones[k] = slices.Clone(names)
	}
	return c
}
