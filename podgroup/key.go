package podgroup

import (
	"cmp"
	"encoding/binary"
	"strconv"
)

// Kind is the kind of group a Key names. The zero Kind is invalid.
type Kind uint8

const (
	// PodGroupKind names a PodGroup (scheduling.k8s.io/v1beta1).
	PodGroupKind Kind = iota + 1
	// CompositeKind names a CompositePodGroup (scheduling.k8s.io/v1alpha3).
	CompositeKind
)

// String returns upstream's fwk.EntityKeyType of k: "podgroup" or
// "compositepodgroup" ("Kind(n)" for an invalid kind).
func (k Kind) String() string {
	switch k {
	case PodGroupKind:
		return "podgroup"
	case CompositeKind:
		return "compositepodgroup"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Key names a pod group or a composite pod group, as upstream's
// fwk.EntityKey does. A plain comparable value, safe to copy and share.
type Key struct {
	Kind      Kind   // PodGroupKind or CompositeKind
	Namespace string // the group's namespace
	Name      string // the group's name
}

// PodGroupKey returns the key of pod group namespace/name.
func PodGroupKey(namespace, name string) Key {
	return Key{Kind: PodGroupKind, Namespace: namespace, Name: name}
}

// CompositeKey returns the key of composite pod group namespace/name.
func CompositeKey(namespace, name string) Key {
	return Key{Kind: CompositeKind, Namespace: namespace, Name: name}
}

// String returns "kind/namespace/name", as fwk.EntityKey.String does:
// "podgroup/ns/name" or "compositepodgroup/ns/name".
func (k Key) String() string {
	return k.Kind.String() + "/" + k.Namespace + "/" + k.Name
}

// compareKeys orders keys by kind, then namespace, then name.
func compareKeys(a, b Key) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// mapKey is the key of namespace/name in a Table's maps (one map per
// kind): the namespace's length as a uvarint, the namespace, the name. The
// length prefix keeps it unambiguous whatever bytes the names hold.
func mapKey(namespace, name string) string {
	var b [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(b[:], uint64(len(namespace)))
	return string(b[:n]) + namespace + name
}

// childKey is the key of k in a Composite's children: its kind's byte,
// then mapKey.
func childKey(k Key) string {
	return string([]byte{byte(k.Kind)}) + mapKey(k.Namespace, k.Name)
}
