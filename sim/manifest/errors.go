package manifest

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid marks every fault Load reports: a file that cannot be read,
// a document that does not decode, an object that fails validation.
var ErrInvalid = errors.New("invalid manifest")

// Error is an immutable value: one fault in a manifest file, with where
// it is. It wraps ErrInvalid and, when there is one, the underlying error
// (an *fs.PathError for a missing file, say).
type Error struct {
	// File is the file as given to Load (or the name given to Parse).
	File string
	// Line is the 1-based line in the file (decompressed); 0: unknown.
	Line int
	// Doc is the 1-based document of a file that holds more than one
	// (YAML documents separated by ---, or a stream of JSON values); 0:
	// the file holds one document, or the fault is not in one.
	Doc int
	// Item is the 0-based index in the items of a List; -1: not in a List.
	Item int
	// Object names the object: "node NAME" or "pod NAMESPACE/NAME"; ""
	// when it has no name or is not a node or pod.
	Object string
	// Field is the field path within the object, as Kubernetes writes
	// it: spec.containers[0].resources.requests.cpu; "" for the whole
	// object or document.
	Field string
	// Msg says what is wrong.
	Msg string
	// Err is the underlying error, if any.
	Err error
}

// Error formats the fault as FILE:LINE: document D, items[I]: OBJECT:
// FIELD: MSG, leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	var where []string
	if e.Doc > 0 {
		where = append(where, fmt.Sprintf("document %d", e.Doc))
	}
	if e.Item >= 0 {
		where = append(where, fmt.Sprintf("items[%d]", e.Item))
	}
	if e.Object != "" {
		where = append(where, e.Object)
	}
	b.WriteString(": ")
	if len(where) > 0 {
		b.WriteString(strings.Join(where, ", "))
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns ErrInvalid and the underlying error.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}

// MaxErrors is how many faults Load collects before it stops reading.
const MaxErrors = 20

// Errors is what Load returns when it finds faults: every fault (at most
// MaxErrors) in the order found. It wraps each of them, so errors.As
// finds the first *Error and errors.Is(err, ErrInvalid) holds.
type Errors []*Error

// Error is one fault per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	s := strings.Join(lines, "\n")
	if len(es) >= MaxErrors {
		s += fmt.Sprintf("\n(stopped after %d faults)", MaxErrors)
	}
	return s
}

// Unwrap returns the faults.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
