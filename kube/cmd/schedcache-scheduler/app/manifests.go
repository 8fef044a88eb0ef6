package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// DecodeManifests returns the objects of a multi-document YAML (or JSON)
// manifest such as the files of deploy/, in order, decoded with
// client-go's scheme; empty and null documents are skipped. An error
// names the document (counting from 1) that failed.
func DecodeManifests(data []byte) ([]runtime.Object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []runtime.Object
	for doc := 1; ; doc++ {
		var raw runtime.RawExtension
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", doc, err)
		}
		if b := bytes.TrimSpace(raw.Raw); len(b) == 0 || bytes.Equal(b, []byte("null")) {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", doc, err)
		}
		out = append(out, obj)
	}
}
