package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// docRec is one document of a file: its text, where it starts and,
// parsed on demand for error lines, its YAML tree.
type docRec struct {
	file   string
	start  int    // 1-based line of the file where data begins
	index  int    // 1-based among the file's non-empty documents; 0: the only one
	data   []byte // the document's text (YAML or JSON)
	parsed bool
	root   *yaml3.Node // nil: not parsed, or not parseable
}

// loc is where an object is: a document and, in a List, the item.
type loc struct {
	d    *docRec
	item int // -1: the document itself
}

// prefix is the path of the object within its document.
func (at loc) prefix() string {
	if at.item < 0 {
		return ""
	}
	return fmt.Sprintf("items[%d]", at.item)
}

// fault records a fault of the object at `at`; object names it ("" if
// unknown), field is the path within it.
func (l *Loader) fault(at loc, object, field, msg string, err error) {
	if l.full() {
		return
	}
	path := at.prefix()
	if field != "" {
		path = joinPath(path, field)
	}
	l.errs = append(l.errs, &Error{File: at.d.file, Line: at.d.line(path), Doc: at.d.index, Item: at.item,
		Object: object, Field: field, Msg: msg, Err: err})
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || strings.HasPrefix(b, "["):
		return a + b
	}
	return a + "." + b
}

// where formats at's position for a message: FILE:LINE (of path).
func (at loc) where(path string) string {
	p := joinPath(at.prefix(), path)
	if n := at.d.line(p); n > 0 {
		return fmt.Sprintf("%s:%d", at.d.file, n)
	}
	return at.d.file
}

// addData splits a file's content into documents and adds each.
func (l *Loader) addData(name string, data []byte) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	var docs []*docRec
	var jsons [][]byte
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		docs, jsons = l.splitJSON(name, data)
	} else {
		docs, jsons = l.splitYAML(name, data)
	}
	if len(docs) > 1 {
		for i, d := range docs {
			d.index = i + 1
		}
	}
	for i, d := range docs {
		if l.full() {
			return
		}
		l.addDoc(d, jsons[i])
	}
}

// splitJSON splits a stream of JSON values.
func (l *Loader) splitJSON(name string, data []byte) ([]*docRec, [][]byte) {
	var docs []*docRec
	var jsons [][]byte
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		off := int(dec.InputOffset())
		for off < len(data) && strings.IndexByte(" \t\r\n", data[off]) >= 0 {
			off++
		}
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return docs, jsons
		}
		if err != nil {
			line := 0
			if ok, at := kjson.SyntaxErrorOffset(err); ok {
				line = lineAt(data, int(at))
			}
			l.fileFault(name, line, "not valid JSON: "+strings.TrimPrefix(err.Error(), "json: "), err)
			return docs, jsons
		}
		docs = append(docs, &docRec{file: name, start: lineAt(data, off), data: raw})
		jsons = append(jsons, raw)
	}
}

// lineAt is the 1-based line of byte offset off.
func lineAt(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	return 1 + bytes.Count(data[:off], []byte("\n"))
}

// splitYAML splits YAML documents at --- lines (as kubectl does: a line
// that is --- alone or followed by a comment), converts each to JSON and
// drops the empty ones.
func (l *Loader) splitYAML(name string, data []byte) ([]*docRec, [][]byte) {
	var docs []*docRec
	var jsons [][]byte
	add := func(start int, text []byte) {
		j, err := yaml.YAMLToJSONStrict(text)
		if err != nil {
			l.yamlFault(&docRec{file: name, start: start, data: text}, err)
			return
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			return // only comments or nothing
		}
		docs = append(docs, &docRec{file: name, start: start, data: text})
		jsons = append(jsons, j)
	}
	start, begin, lineNo := 1, 0, 1
	for off := 0; off < len(data); lineNo++ {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
		}
		if isSeparator(data[off:next]) {
			add(start, data[begin:off])
			begin, start = next, lineNo+1
		}
		off = next
	}
	add(start, data[begin:])
	return docs, jsons
}

// isSeparator says whether line starts a new YAML document.
func isSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	if !ok {
		return false
	}
	rest = bytes.TrimSpace(rest)
	return len(rest) == 0 || rest[0] == '#'
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// yamlFault records a document that is not valid YAML (or holds what
// JSON cannot: NaN, infinities).
func (l *Loader) yamlFault(d *docRec, err error) {
	msg := err.Error()
	line, field := 0, ""
	if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
		n, _ := strconv.Atoi(msg[m[2]:m[3]])
		line = d.start + n - 1
		msg = msg[m[1]:]
	} else if strings.Contains(msg, "unsupported value") {
		if p, n, ok := findNonFinite(d.tree(), ""); ok {
			field, line = p, d.start+n-1
			msg = "a NaN or infinite number (.nan, .inf) is not a valid value"
		}
	}
	msg = strings.TrimPrefix(strings.TrimPrefix(msg, "yaml: "), "json: ")
	if l.full() {
		return
	}
	l.errs = append(l.errs, &Error{File: d.file, Line: line, Item: -1, Field: field, Msg: "not valid YAML: " + msg, Err: err})
}

// tree parses d with yaml.v3 (once) for the lines of error messages.
func (d *docRec) tree() *yaml3.Node {
	if !d.parsed {
		d.parsed = true
		var n yaml3.Node
		if yaml3.Unmarshal(d.data, &n) == nil && n.Kind == yaml3.DocumentNode && len(n.Content) > 0 {
			d.root = n.Content[0]
		}
	}
	return d.root
}

// line returns the file's line of the field at path in d (a key's line;
// as deep as the path exists), or 0 if d does not parse.
func (d *docRec) line(path string) int {
	n := d.tree()
	if n == nil {
		return 0
	}
	line := n.Line
	rest := path
	for rest != "" {
		for n.Kind == yaml3.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch n.Kind {
		case yaml3.MappingNode:
			best, bestLen := -1, -1
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if len(k) > bestLen && (rest == k || strings.HasPrefix(rest, k+".") || strings.HasPrefix(rest, k+"[")) {
					best, bestLen = i, len(k)
				}
			}
			if best < 0 {
				return d.start + line - 1
			}
			line = n.Content[best].Line
			n = n.Content[best+1]
			rest = strings.TrimPrefix(rest[bestLen:], ".")
		case yaml3.SequenceNode:
			j := strings.IndexByte(rest, ']')
			if !strings.HasPrefix(rest, "[") || j < 0 {
				return d.start + line - 1
			}
			i, err := strconv.Atoi(rest[1:j])
			if err != nil || i < 0 || i >= len(n.Content) {
				return d.start + line - 1
			}
			n = n.Content[i]
			line = n.Line
			rest = strings.TrimPrefix(rest[j+1:], ".")
		default:
			return d.start + line - 1
		}
	}
	return d.start + line - 1
}

// findNonFinite finds a float scalar that is NaN or infinite.
func findNonFinite(n *yaml3.Node, path string) (string, int, bool) {
	if n == nil {
		return "", 0, false
	}
	switch n.Kind {
	case yaml3.ScalarNode:
		if n.ShortTag() == "!!float" {
			switch strings.ToLower(strings.TrimLeft(n.Value, "+-")) {
			case ".nan", ".inf":
				return path, n.Line, true
			}
		}
	case yaml3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if p, line, ok := findNonFinite(n.Content[i+1], joinPath(path, n.Content[i].Value)); ok {
				return p, line, ok
			}
		}
	case yaml3.SequenceNode:
		for i, c := range n.Content {
			if p, line, ok := findNonFinite(c, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, line, ok
			}
		}
	}
	return "", 0, false
}

// maxListDepth bounds Lists within Lists.
const maxListDepth = 4

// addDoc adds the objects of one document (JSON text j).
func (l *Loader) addDoc(d *docRec, j []byte) {
	l.addObject(loc{d: d, item: -1}, j, "", "", 0)
}

// str decodes a JSON string field ("" when absent).
func str(fields map[string]json.RawMessage, key string) (string, error) {
	raw, ok := fields[key]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &s); err != nil {
		return "", fmt.Errorf("%s is not a string", clip(raw))
	}
	return s, nil
}

// listItemKind is the kind of a typed List's items that lack one:
// PodList's are Pods. A plain List gives none.
func listItemKind(kind string) string {
	if kind == "List" {
		return ""
	}
	return strings.TrimSuffix(kind, "List")
}

// addObject adds the object (or List) raw at `at`; apiVersion and kind
// are the defaults a typed List gives its items.
func (l *Loader) addObject(at loc, raw []byte, defAPIVersion, defKind string, depth int) {
	var fields map[string]json.RawMessage
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &fields); err != nil || fields == nil {
		l.fault(at, "", "", "not a Kubernetes object: want a mapping with apiVersion and kind, got "+clip(raw), nil)
		return
	}
	apiVersion, err := str(fields, "apiVersion")
	if err != nil {
		l.fault(at, "", "apiVersion", err.Error(), nil)
		return
	}
	kind, err := str(fields, "kind")
	if err != nil {
		l.fault(at, "", "kind", err.Error(), nil)
		return
	}
	if apiVersion == "" {
		apiVersion = defAPIVersion
	}
	if kind == "" {
		kind = defKind
	}
	items, isList := fields["items"]
	switch {
	case kind == "":
		l.fault(at, "", "kind", "missing: every object needs apiVersion and kind", nil)
	case strings.HasSuffix(kind, "List") && isList:
		l.addList(at, kind, apiVersion, items, depth)
	case kind == "Node" || kind == "Pod":
		switch {
		case apiVersion == "":
			l.fault(at, "", "apiVersion", fmt.Sprintf("missing: a %s is v1", kind), nil)
		case apiVersion == "v1":
			if kind == "Node" {
				l.addNode(at, raw)
			} else {
				l.addPod(at, raw)
			}
		case strings.Contains(apiVersion, "/"):
			l.c.Skipped[kind+" ("+apiVersion+")"]++ // another API group's kind of that name
		default:
			l.fault(at, "", "apiVersion", fmt.Sprintf("%q: a %s is v1", apiVersion, kind), nil)
		}
	default:
		if apiVersion == "" {
			apiVersion = "no apiVersion"
		}
		l.c.Skipped[kind+" ("+apiVersion+")"]++
	}
}

// addList adds the items of a List.
func (l *Loader) addList(at loc, kind, apiVersion string, raw json.RawMessage, depth int) {
	if depth >= maxListDepth {
		l.fault(at, "", "items", fmt.Sprintf("Lists nested more than %d deep", maxListDepth), nil)
		return
	}
	var items []json.RawMessage
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &items); err != nil {
		l.fault(at, "", "items", "not a list of objects: "+clip(raw), nil)
		return
	}
	if at.item >= 0 {
		// A List within a List: its items' paths are not tracked; the
		// faults point at the outer item.
		for _, it := range items {
			l.addObject(at, it, apiVersion, listItemKind(kind), depth+1)
		}
		return
	}
	for i, it := range items {
		if l.full() {
			return
		}
		l.addObject(loc{d: at.d, item: i}, it, apiVersion, listItemKind(kind), depth+1)
	}
}

// nameOf reads metadata.name and namespace of raw for error messages,
// whatever else is wrong with it.
func nameOf(kind string, raw []byte) string {
	var o struct {
		Metadata struct {
			Name      any `json:"name"`
			Namespace any `json:"namespace"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &o)
	name, _ := o.Metadata.Name.(string)
	ns, _ := o.Metadata.Namespace.(string)
	return objectName(kind, ns, name)
}

// objectName is "node NAME", "pod NAMESPACE/NAME" ("default" when the
// namespace is empty), or "" without a name.
func objectName(kind, ns, name string) string {
	switch {
	case name == "":
		return ""
	case kind == "Node":
		return "node " + name
	case ns == "":
		ns = "default"
	}
	return "pod " + ns + "/" + name
}

// decode decodes raw into obj strictly, recording every fault; it says
// whether obj is usable.
func (l *Loader) decode(at loc, kind string, raw []byte, obj any) bool {
	strict, err := kjson.UnmarshalStrict(raw, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		name := nameOf(kind, raw)
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			if f := locate(v, reflect.TypeOf(obj).Elem(), ""); f != nil {
				l.fault(at, name, f.path, leafMessage(f.val, f.err), f.err)
				return false
			}
		}
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		l.fault(at, name, field, err.Error(), err)
		return false
	}
	if len(strict) > 0 {
		name := nameOf(kind, raw)
		for _, e := range strict {
			field, msg := "", e.Error()
			var fe kjson.FieldError
			if errors.As(e, &fe) {
				field = fe.FieldPath()
				msg, _, _ = strings.Cut(msg, " \"")
			}
			l.fault(at, name, field, msg, e)
		}
		return false
	}
	return true
}

// clip quotes a JSON value for a message, cut to 60 bytes.
func clip(raw []byte) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// leafMessage says why the JSON value v did not decode (err).
func leafMessage(v any, err error) string {
	b, _ := json.Marshal(v)
	val := clip(b)
	var te *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case errors.Is(err, resource.ErrFormatWrong), errors.Is(err, resource.ErrNumeric), errors.Is(err, resource.ErrSuffix):
		return val + " is not a quantity (like 500m, 2Gi or 1.5)"
	case errors.As(err, &pe):
		return val + " is not a time (RFC 3339, like 2025-01-01T00:00:00Z)"
	case errors.As(err, &te):
		return fmt.Sprintf("%s is not a %s", val, typeName(te.Type))
	}
	return val + ": " + err.Error()
}

// typeName names a Go type as a JSON value.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number in range of " + t.Kind().String()
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Map, reflect.Struct:
		return "mapping"
	}
	return t.String()
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// leafFault is a value that does not decode: its path, the value and
// the error.
type leafFault struct {
	path string
	val  any
	err  error
}

// locate finds the first value in v (generic JSON, numbers as
// json.Number), keys in sorted order, that does not decode into its
// field of type t; nil if none.
func locate(v any, t reflect.Type, path string) *leafFault {
	if v == nil {
		return nil // null decodes into anything
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	leaf := func() *leafFault {
		b, err := json.Marshal(v)
		if err != nil {
			return &leafFault{path, v, err}
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(b, reflect.New(t).Interface()); err != nil {
			return &leafFault{path, v, err}
		}
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return leaf()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return leaf()
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				continue // an unknown field: the strict errors name it
			}
			if f := locate(m[k], ft, joinPath(path, k)); f != nil {
				return f
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return leaf()
		}
		for _, k := range sortedKeys(m) {
			if f := locate(m[k], t.Elem(), joinPath(path, k)); f != nil {
				return f
			}
		}
	case reflect.Slice:
		s, ok := v.([]any)
		if !ok || t.Elem().Kind() == reflect.Uint8 {
			return leaf()
		}
		for i, e := range s {
			if f := locate(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); f != nil {
				return f
			}
		}
	case reflect.Interface:
	default:
		return leaf()
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonFields maps the JSON names of t's fields (inlined structs
// flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(","+opts+",", ",inline,")) {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
