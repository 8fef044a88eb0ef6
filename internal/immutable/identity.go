package immutable

// Identity returns a comparable value, without allocating: equal for two
// Vectors that share their root node, which then hold the same element at
// every index both have. Nodes reachable from a published Vector are never
// written again, and the returned value keeps the root alive, so while it
// is held no other Vector can have it with other contents.
func (v Vector[T]) Identity() any { return v.root }
