package sim

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// A scenario file is read twice: as a YAML node tree (go.yaml.in/yaml/v3),
// which knows the line of every key and value, and then decoded strictly
// into Scenario (sigs.k8s.io/yaml, as Kubernetes does). The tree is
// checked against Scenario's fields first (checkNode): an unknown or
// repeated key, a value of the wrong kind, NaN or an infinity is reported
// with its line and field path; every later error about a field (apply,
// Config.Validate) is given the line of that field (nodeLine).

// yamlLineError matches the YAML parser's "yaml: line N: what" errors.
var yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseNodes parses b into a YAML node tree and returns its top-level
// node (nil for an empty document), or a *ScenarioError with the line of
// a syntax error.
func parseNodes(source string, b []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		// The strict decoder's parser (YAML 1.1) gives the line of a
		// syntax error more exactly: v3 gives some one line early.
		if _, err2 := sigsyaml.YAMLToJSON(b); err2 != nil && yamlLineError.MatchString(err2.Error()) {
			err = err2
		}
		e := &ScenarioError{Source: source, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLineError.FindStringSubmatch(err.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = "not valid YAML: " + m[2]
		}
		return nil, e
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// nodeError is a fault found in the node tree: the line and field path.
type nodeError struct {
	line        int
	field, what string
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// isNull says whether n is an empty or null value (a nil pointer, an empty
// slice).
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// kindName names the kind of a node for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// jsonFields maps the JSON names of struct type t's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

// yaml11Bools are the YAML 1.1 spellings of booleans, which the strict
// decoder (YAML 1.1) accepts besides true and false.
var yaml11Bools = map[string]bool{"y": true, "yes": true, "on": true, "n": true, "no": true, "off": true}

// checkNode checks node n against type t (the field at path): its keys are
// t's fields, given once; its values have the kinds of those fields; no
// number is NaN or infinite. A type that decodes itself (Quantity,
// QuantityRange, IntRange) is checked as the struct it holds when n is a
// mapping, and accepts any scalar.
func checkNode(n *yaml.Node, t reflect.Type, path string) *nodeError {
	n = resolve(n)
	if n == nil || isNull(n) {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	fail := func(format string, args ...any) *nodeError {
		return &nodeError{line: n.Line, field: path, what: fmt.Sprintf(format, args...)}
	}
	selfDecoding := reflect.PointerTo(t).Implements(reflect.TypeFor[interface{ UnmarshalJSON([]byte) error }]())
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if selfDecoding && n.Kind == yaml.ScalarNode {
				return nil
			}
			return fail("want a mapping, got %s", kindName(n))
		}
		return checkMapping(n, path, func(key string) (reflect.Type, bool) {
			ft, ok := jsonFields(t)[key]
			return ft, ok
		}, t)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fail("want a mapping, got %s", kindName(n))
		}
		return checkMapping(n, path, func(string) (reflect.Type, bool) { return t.Elem(), true }, nil)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fail("want a list, got %s", kindName(n))
		}
		for i, c := range n.Content {
			if err := checkNode(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return fail("want a single value, got %s", kindName(n))
	}
	if selfDecoding {
		return nil
	}
	tag := n.ShortTag()
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var f float64
		if tag == "!!float" && n.Decode(&f) == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return nil // 1e3: an integer written as a float, as the decoder takes it
		}
		if tag != "!!int" {
			return fail("want an integer, got %q", n.Value)
		}
	case reflect.Float32, reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			return fail("want a number, got %q", n.Value)
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fail("want a finite number, got %q", n.Value)
		}
	case reflect.Bool:
		if tag != "!!bool" && !yaml11Bools[strings.ToLower(n.Value)] {
			return fail("want true or false, got %q", n.Value)
		}
	}
	return nil
}

// checkMapping checks the keys and values of mapping n; field gives the
// type of a key's value (false: unknown). st is the struct type whose
// fields are listed when a key is unknown (nil: a map).
func checkMapping(n *yaml.Node, path string, field func(string) (reflect.Type, bool), st reflect.Type) *nodeError {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			// "<<: *anchor" merges a mapping (or a list of them) in.
			v = resolve(v)
			merged := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				merged = v.Content
			}
			for _, m := range merged {
				if m = resolve(m); m.Kind != yaml.MappingNode {
					return &nodeError{line: m.Line, field: path, what: "a merge (<<) needs a mapping"}
				}
				if err := checkMapping(m, path, field, st); err != nil {
					return err
				}
			}
			continue
		}
		key := k.Value
		sub := key
		if path != "" {
			sub = path + "." + key
		}
		if k.Kind != yaml.ScalarNode {
			return &nodeError{line: k.Line, field: path, what: "a key must be a single value"}
		}
		if first, dup := seen[key]; dup {
			return &nodeError{line: k.Line, field: sub, what: fmt.Sprintf("given twice (first at line %d)", first)}
		}
		seen[key] = k.Line
		ft, ok := field(key)
		if !ok {
			return &nodeError{line: k.Line, field: sub, what: unknownField(key, st)}
		}
		if err := checkNode(v, ft, sub); err != nil {
			return err
		}
	}
	return nil
}

// unknownField is the message for an unknown key of struct st: the known
// fields, the likely one first when only its case differs.
func unknownField(key string, st reflect.Type) string {
	fields := jsonFields(st)
	var names []string
	for name := range fields {
		if strings.EqualFold(name, key) {
			return fmt.Sprintf("unknown field %q (did you mean %s?)", key, name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return fmt.Sprintf("unknown field %q (known: %s)", key, strings.Join(names, ", "))
}

// fieldPathToken matches one step of a field path: a key, and indexes.
var (
	fieldPathToken = regexp.MustCompile(`^([^.\[\]]+)((?:\[\d+\])*)$`)
	digits         = regexp.MustCompile(`\d+`)
)

// nodeLine returns the line of the field at path ("cluster.nodes",
// "podMix[0].cpu.max") in the tree under root, and whether the file gives
// that field. When it does not, the line is that of the deepest field of
// the path it gives (0: none).
func nodeLine(root *yaml.Node, path string) (line int, given bool) {
	n := resolve(root)
	if n == nil || path == "" {
		return 0, false
	}
	for _, step := range strings.Split(path, ".") {
		m := fieldPathToken.FindStringSubmatch(step)
		if m == nil {
			return line, false
		}
		v := mappingValue(n, m[1])
		if v == nil {
			return line, false
		}
		line, n = v.Line, v
		for _, idx := range digits.FindAllString(m[2], -1) {
			i, _ := strconv.Atoi(idx)
			if n.Kind != yaml.SequenceNode || i >= len(n.Content) {
				return line, false
			}
			n = resolve(n.Content[i])
			line = n.Line
		}
	}
	return line, true
}

// mappingValue returns the value of key in mapping n (merges followed), or
// nil. The line of a key's value is that of the key for a mapping or
// list written on the following lines: the key's line is returned then.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var merged *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if k.ShortTag() == "!!merge" {
			ms := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				ms = v.Content
			}
			for _, m := range ms {
				if merged == nil {
					merged = mappingValue(m, key)
				}
			}
			continue
		}
		if k.Value == key {
			if v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode {
				c := *v
				c.Line = k.Line
				return &c
			}
			return v
		}
	}
	return merged
}
