package manifest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

const nodeYAML = `apiVersion: v1
kind: Node
metadata:
  name: n1
  uid: u-n1
  labels:
    topology.kubernetes.io/zone: z1
status:
  allocatable:
    cpu: "4"
    memory: 8Gi
    pods: "110"
`

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: p1
  namespace: ns
spec:
  nodeName: n1
  containers:
  - name: c
    image: x
    resources:
      requests:
        cpu: 100m
`

const nodeJSON = `{
  "apiVersion": "v1",
  "kind": "Node",
  "metadata": {"name": "n2", "uid": "u-n2"},
  "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}
}
`

// parse loads the named contents, in order.
func parse(t *testing.T, files ...string) (*Cluster, error) {
	t.Helper()
	require.Zero(t, len(files)%2)
	l := NewLoader(Options{})
	for i := 0; i < len(files); i += 2 {
		l.Parse(files[i], []byte(files[i+1]))
	}
	return l.Done()
}

func gz(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.String()
}

func names(c *Cluster) (nodes, bound, pending []string) {
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Name)
	}
	for _, p := range c.Bound {
		bound = append(bound, p.Namespace+"/"+p.Name)
	}
	for _, p := range c.Pending {
		pending = append(pending, p.Namespace+"/"+p.Name)
	}
	return
}

func TestSingleObjectYAML(t *testing.T) {
	c, err := parse(t, "n.yaml", nodeYAML, "p.yaml", podYAML)
	require.NoError(t, err)
	nodes, bound, pending := names(c)
	require.Equal(t, []string{"n1"}, nodes)
	require.Equal(t, []string{"ns/p1"}, bound)
	require.Empty(t, pending)
	require.Equal(t, "z1", c.Nodes[0].Labels[v1.LabelTopologyZone])
	require.Equal(t, resource.MustParse("8Gi"), c.Nodes[0].Status.Allocatable[v1.ResourceMemory])
	require.Equal(t, resource.MustParse("100m"), c.Bound[0].Spec.Containers[0].Resources.Requests[v1.ResourceCPU])
	// The pod had no uid: it is given NAMESPACE/NAME.
	require.Equal(t, types.UID("ns/p1"), c.Bound[0].UID)
	require.Equal(t, 1, c.DerivedUIDs)
	require.Equal(t, []string{"n.yaml", "p.yaml"}, c.Files)
	require.Equal(t, "n.yaml,p.yaml: 1 nodes, 1 bound pods, 0 pending", c.Summary())
}

func TestSingleObjectJSON(t *testing.T) {
	c, err := parse(t, "n.json", nodeJSON)
	require.NoError(t, err)
	nodes, _, _ := names(c)
	require.Equal(t, []string{"n2"}, nodes)
	require.Equal(t, types.UID("u-n2"), c.Nodes[0].UID)
	require.Zero(t, c.DerivedUIDs)
}

// A kubectl get nodes,pods -A -o yaml dump: a List of both kinds, with
// another kind, a terminal pod and a pending one.
func TestListYAML(t *testing.T) {
	const dump = `apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
  status:
    capacity: {cpu: "4", memory: 8Gi, pods: "110"}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: d, namespace: ns}
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: ns, uid: ua}
  spec:
    nodeName: n1
    containers: [{name: c, image: x}]
- apiVersion: v1
  kind: Pod
  metadata: {name: done, namespace: ns, uid: ud}
  spec:
    nodeName: n1
    containers: [{name: c, image: x}]
  status: {phase: Succeeded}
- apiVersion: v1
  kind: Pod
  metadata: {name: wait, uid: uw}
  spec:
    containers: [{name: c, image: x}]
  status: {phase: Pending}
- apiVersion: v1
  kind: Service
  metadata: {name: s, namespace: ns}
kind: List
metadata:
  resourceVersion: ""
`
	c, err := parse(t, "dump.yaml", dump)
	require.NoError(t, err)
	nodes, bound, pending := names(c)
	require.Equal(t, []string{"n1"}, nodes)
	require.Equal(t, []string{"ns/a"}, bound)
	require.Equal(t, []string{"default/wait"}, pending)
	require.Equal(t, map[string]int{"Deployment (apps/v1)": 1, "Service (v1)": 1}, c.Skipped)
	require.Equal(t, 1, c.Terminal)
	// No allocatable: the capacity stands for it.
	require.Equal(t, 1, c.AllocatableFromCapacity)
	require.Equal(t, resource.MustParse("4"), c.Nodes[0].Status.Allocatable[v1.ResourceCPU])
	require.Equal(t, []string{
		"skipped 2 objects that are not v1 Nodes or Pods: 1 Deployment (apps/v1), 1 Service (v1)",
		"skipped 1 pods in phase Succeeded or Failed (the scheduler ignores them)",
		"1 objects had no metadata.uid: a node was given its name, a pod NAMESPACE/NAME",
		"1 nodes had no status.allocatable: they were given their status.capacity",
	}, c.Notes())
}

// The API's own lists (kubectl get --raw /api/v1/nodes): items without
// apiVersion and kind, in JSON.
func TestNodeListAndPodListJSON(t *testing.T) {
	const nodes = `{"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "7"},
 "items": [{"metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "1"}}},
           {"metadata": {"name": "b"}}]}`
	const pods = `{"apiVersion": "v1", "kind": "PodList",
 "items": [{"metadata": {"name": "p", "namespace": "x"}, "spec": {"containers": [{"name": "c"}]}}]}`
	c, err := parse(t, "nodes.json", nodes, "pods.json", pods)
	require.NoError(t, err)
	ns, bound, pending := names(c)
	require.Equal(t, []string{"a", "b"}, ns)
	require.Empty(t, bound)
	require.Equal(t, []string{"x/p"}, pending)
	require.Equal(t, 1, c.NoAllocatable)
	require.Equal(t, types.UID("a"), c.Nodes[0].UID)
	require.Equal(t, 3, c.DerivedUIDs)
}

func TestMultiDocumentYAML(t *testing.T) {
	multi := "# a cluster\n---\n" + nodeYAML + "--- # the pod\n" + podYAML + "---\n# nothing\n---\n" +
		strings.Replace(strings.Replace(podYAML, "p1", "p2", 1), "  nodeName: n1\n", "", 1)
	c, err := parse(t, "multi.yaml", multi)
	require.NoError(t, err)
	nodes, bound, pending := names(c)
	require.Equal(t, []string{"n1"}, nodes)
	require.Equal(t, []string{"ns/p1"}, bound)
	require.Equal(t, []string{"ns/p2"}, pending)
}

func TestJSONStream(t *testing.T) {
	pod := `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"}, "spec": {"nodeName": "n2", "containers": [{"name": "c"}]}}`
	c, err := parse(t, "s.json", nodeJSON+pod+"\n")
	require.NoError(t, err)
	nodes, bound, _ := names(c)
	require.Equal(t, []string{"n2"}, nodes)
	require.Equal(t, []string{"x/p"}, bound)
}

func TestGzip(t *testing.T) {
	multi := nodeYAML + "---\n" + podYAML
	c, err := parse(t, "a.yaml.gz", gz(t, multi), "b", gz(t, nodeJSON))
	require.NoError(t, err)
	nodes, bound, _ := names(c)
	require.Equal(t, []string{"n1", "n2"}, nodes)
	require.Equal(t, []string{"ns/p1"}, bound)
	// The magic bytes decide, not the name.
	_, err = parse(t, "c.gz", multi)
	require.NoError(t, err)
}

func TestFilesAndDirectories(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "cluster")
	require.NoError(t, os.Mkdir(sub, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "1-nodes.json"), []byte(nodeJSON), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "0-nodes.yaml.gz"), []byte(gz(t, nodeYAML)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "README.md"), []byte("not read"), 0o644))
	pods := filepath.Join(dir, "pods.yml")
	require.NoError(t, os.WriteFile(pods, []byte(podYAML), 0o644))
	c, err := Load([]string{sub, pods}, Options{})
	require.NoError(t, err)
	nodes, bound, _ := names(c)
	require.Equal(t, []string{"n1", "n2"}, nodes)
	require.Equal(t, []string{"ns/p1"}, bound)
	require.Equal(t, []string{filepath.Join(sub, "0-nodes.yaml.gz"), filepath.Join(sub, "1-nodes.json"), pods}, c.Files)

	_, err = Load([]string{filepath.Join(dir, "missing.yaml")}, Options{})
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorIs(t, err, ErrInvalid)
	require.EqualError(t, err, filepath.Join(dir, "missing.yaml")+": stat "+filepath.Join(dir, "missing.yaml")+": no such file or directory")

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	_, err = Load([]string{empty}, Options{})
	require.EqualError(t, err, empty+": a directory with no .yaml, .yml or .json file (compressed or not)")
}

// Every fault, with its message: file, line, document, item, object,
// field.
func TestFaults(t *testing.T) {
	pod := func(repl ...string) string {
		return strings.NewReplacer(repl...).Replace(podYAML)
	}
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"unknown field", []string{"p.yaml", pod("    image: x\n", "    image: x\n    colour: red\n")},
			"p.yaml:11: pod ns/p1: spec.containers[0].colour: unknown field"},
		{"unknown field in metadata (case matters)", []string{"p.yaml", pod("  name: p1\n", "  name: p1\n  Labels: {}\n")},
			"p.yaml:5: pod ns/p1: metadata.Labels: unknown field"},
		{"duplicate field in JSON", []string{"n.json", strings.Replace(nodeJSON, `"uid": "u-n2"`, `"uid": "u-n2", "uid": "again"`, 1)},
			"n.json:4: node n2: metadata.uid: duplicate field"},
		{"duplicate key in YAML", []string{"p.yaml", pod("  namespace: ns\n", "  namespace: ns\n  name: again\n")},
			`p.yaml:6: not valid YAML: key "name" already set in map`},
		{"bad quantity", []string{"p.yaml", pod("cpu: 100m", "cpu: lots")},
			`p.yaml:13: pod ns/p1: spec.containers[0].resources.requests.cpu: "lots" is not a quantity (like 500m, 2Gi or 1.5)`},
		{"bad quantity suffix", []string{"n.yaml", strings.Replace(nodeYAML, "memory: 8Gi", "memory: 8Qi", 1)},
			`n.yaml:11: node n1: status.allocatable.memory: "8Qi" is not a quantity (like 500m, 2Gi or 1.5)`},
		{"negative quantity", []string{"p.yaml", pod("cpu: 100m", "cpu: -100m")},
			"p.yaml:13: pod ns/p1: spec.containers[0].resources.requests.cpu: -100m is negative"},
		{"huge quantity", []string{"n.yaml", strings.Replace(nodeYAML, "memory: 8Gi", "memory: 1e400", 1)},
			"n.yaml:11: node n1: status.allocatable.memory: 10e399 is more than 9007199254740992"},
		{"wrong type", []string{"n.yaml", strings.Replace(nodeYAML, "zone: z1", "zone: 1", 1)},
			"n.yaml:7: node n1: metadata.labels.topology.kubernetes.io/zone: 1 is not a string"},
		{"wrong type in a list", []string{"p.yaml", pod("  - name: c\n", "  - name: 7\n")},
			"p.yaml:9: pod ns/p1: spec.containers[0].name: 7 is not a string"},
		{"bad time", []string{"p.yaml", pod("  namespace: ns\n", "  namespace: ns\n  creationTimestamp: yesterday\n")},
			`p.yaml:6: pod ns/p1: metadata.creationTimestamp: "yesterday" is not a time (RFC 3339, like 2025-01-01T00:00:00Z)`},
		{"NaN", []string{"p.yaml", pod("cpu: 100m", "cpu: .nan")},
			"p.yaml:13: spec.containers[0].resources.requests.cpu: not valid YAML: a NaN or infinite number (.nan, .inf) is not a valid value"},
		{"YAML syntax", []string{"p.yaml", pod("  nodeName: n1\n", "  nodeName: n1\n   bad: indent\n")},
			"p.yaml:8: not valid YAML: mapping values are not allowed in this context"},
		{"YAML syntax in a later document", []string{"m.yaml", nodeYAML + "---\n" + pod("  nodeName: n1\n", "  nodeName: n1\n   bad: indent\n")},
			"m.yaml:21: not valid YAML: mapping values are not allowed in this context"},
		{"JSON syntax", []string{"n.json", strings.Replace(nodeJSON, `"kind": "Node",`, `"kind": "Node"`, 1)},
			`n.json:4: not valid JSON: invalid character '"' after object key:value pair`},
		{"not an object", []string{"x.yaml", "just text\n"},
			`x.yaml:1: not a Kubernetes object: want a mapping with apiVersion and kind, got "just text"`},
		{"no kind", []string{"p.yaml", pod("kind: Pod\n", "")},
			"p.yaml:1: kind: missing: every object needs apiVersion and kind"},
		{"kind not a string", []string{"p.yaml", pod("kind: Pod\n", "kind: [Pod]\n")},
			`p.yaml:2: kind: ["Pod"] is not a string`},
		{"no apiVersion", []string{"p.yaml", pod("apiVersion: v1\n", "")},
			"p.yaml:1: apiVersion: missing: a Pod is v1"},
		{"wrong apiVersion", []string{"p.yaml", pod("apiVersion: v1\n", "apiVersion: v2\n")},
			`p.yaml:1: apiVersion: "v2": a Pod is v1`},
		{"node without name", []string{"n.yaml", strings.Replace(nodeYAML, "  name: n1\n", "", 1)},
			"n.yaml:3: metadata.name: missing: every node needs a name"},
		{"pod without name", []string{"p.yaml", pod("  name: p1\n", "")},
			"p.yaml:3: metadata.name: missing: every pod needs a name"},
		{"namespaced node", []string{"n.yaml", strings.Replace(nodeYAML, "  name: n1\n", "  name: n1\n  namespace: x\n", 1)},
			`n.yaml:5: node n1: metadata.namespace: "x": nodes are not namespaced`},
		{"no container", []string{"n.yaml", nodeYAML, "p.yaml", pod("  containers:\n  - name: c\n    image: x\n    resources:\n      requests:\n        cpu: 100m\n", "  containers: []\n")},
			"p.yaml:8: pod ns/p1: spec.containers: empty: a pod needs at least one container"},
		{"pod on a node not in the files", []string{"n.yaml", nodeYAML, "p.yaml", pod("nodeName: n1", "nodeName: gone")},
			`p.yaml:7: pod ns/p1: spec.nodeName: node "gone" is not in the files (remove the pod, clear spec.nodeName to have it scheduled, or add the node)`},
		{"duplicate node name", []string{"a.yaml", nodeYAML, "b.yaml", "# again\n" + strings.Replace(nodeYAML, "u-n1", "u-other", 1)},
			"b.yaml:5: node n1: metadata.name: duplicate node name (first at a.yaml:4)"},
		{"duplicate node uid", []string{"a.yaml", nodeYAML, "b.json", strings.Replace(nodeJSON, "u-n2", "u-n1", 1)},
			`b.json:4: node n2: metadata.uid: duplicate uid "u-n1" (first: node n1 at a.yaml:5)`},
		{"duplicate pod", []string{"n.yaml", nodeYAML, "p.yaml", podYAML + "---\n" + podYAML},
			"p.yaml:18: document 2, pod ns/p1: metadata.name: duplicate pod namespace/name (first at p.yaml:4)"},
		{"duplicate pod uid", []string{"n.yaml", nodeYAML, "p.yaml", pod("  name: p1\n", "  name: p1\n  uid: u\n") + "---\n" + pod("  name: p1\n", "  name: p2\n  uid: u\n")},
			`p.yaml:20: document 2, pod ns/p2: metadata.uid: duplicate uid "u" (first: pod ns/p1 at p.yaml:5)`},
		{"derived uid taken", []string{"n.yaml", nodeYAML, "p.yaml", pod("  name: p1\n", "  name: p1\n  uid: ns/p2\n") + "---\n" + pod("  name: p1\n", "  name: p2\n")},
			`p.yaml:18: document 2, pod ns/p2: metadata.uid: duplicate uid "ns/p2" (first: pod ns/p1 at p.yaml:5)`},
		{"no node", []string{"p.yaml", strings.Replace(podYAML, "  nodeName: n1\n", "", 1)},
			"p.yaml: no v1 Node in the files: the simulator needs a cluster to schedule onto"},
		{"no node in several files", []string{"a.yaml", "# empty\n", "b.json", "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\"}"},
			"a.yaml: no v1 Node in the 2 files: the simulator needs a cluster to schedule onto"},
		{"fault in a List item", []string{"l.yaml", "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(nodeYAML, "\n"), "\n", "\n  ") + "\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n2}\n  spec: {unschedulable: maybe}\n"},
			`l.yaml:19: items[1], node n2: spec.unschedulable: "maybe" is not a boolean`},
		{"items not a list", []string{"l.yaml", "apiVersion: v1\nkind: List\nitems: {a: 1}\n"},
			`l.yaml:3: items: not a list of objects: {"a":1}`},
		{"corrupt gzip", []string{"x.gz", "\x1f\x8bnot gzip at all"},
			"x.gz: gzip: invalid header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.files...)
			require.EqualError(t, err, tc.want)
			require.ErrorIs(t, err, ErrInvalid)
			var e *Error
			require.ErrorAs(t, err, &e)
		})
	}
}

func TestErrorFields(t *testing.T) {
	_, err := parse(t, "m.yaml", nodeYAML+"---\n"+strings.Replace(podYAML, "cpu: 100m", "cpu: x", 1))
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, Error{File: "m.yaml", Line: 26, Doc: 2, Item: -1, Object: "pod ns/p1",
		Field: "spec.containers[0].resources.requests.cpu", Msg: `"x" is not a quantity (like 500m, 2Gi or 1.5)`}, Error{
		File: e.File, Line: e.Line, Doc: e.Doc, Item: e.Item, Object: e.Object, Field: e.Field, Msg: e.Msg})
	require.ErrorIs(t, e, resource.ErrFormatWrong)
}

// Several faults are reported together, at most MaxErrors.
func TestManyFaults(t *testing.T) {
	var b strings.Builder
	for range MaxErrors + 5 {
		b.WriteString("---\n" + strings.Replace(podYAML, "cpu: 100m", "cpu: x", 1))
	}
	_, err := parse(t, "m.yaml", b.String())
	var es Errors
	require.ErrorAs(t, err, &es)
	require.Len(t, es, MaxErrors)
	require.Equal(t, "m.yaml:14: document 1, pod ns/p1: spec.containers[0].resources.requests.cpu: \"x\" is not a quantity (like 500m, 2Gi or 1.5)", es[0].Error())
	require.Equal(t, 28, es[1].Line)
	require.True(t, strings.HasSuffix(err.Error(), "\n(stopped after 20 faults)"))
}

func TestCheckPodAndLimits(t *testing.T) {
	l := NewLoader(Options{CheckPod: func(p *v1.Pod) error {
		if p.Name == "p1" {
			return errors.New("refused")
		}
		return nil
	}})
	l.Parse("n.yaml", []byte(nodeYAML))
	l.Parse("p.yaml", []byte(podYAML))
	_, err := l.Done()
	require.EqualError(t, err, "p.yaml:1: pod ns/p1: refused")

	l = NewLoader(Options{MaxBytes: 10})
	l.Parse("n.yaml", []byte(nodeYAML))
	_, err = l.Done()
	require.EqualError(t, err, "n.yaml: larger than 10 bytes")
	l = NewLoader(Options{MaxBytes: 1000})
	l.Parse("n.yaml.gz", []byte(gz(t, nodeYAML+strings.Repeat("#\n", 1000))))
	_, err = l.Done()
	require.EqualError(t, err, "n.yaml.gz: larger than 1000 bytes once decompressed")
}

// managedFields are dropped: the scheduler's informer drops them too.
func TestManagedFieldsDropped(t *testing.T) {
	c, err := parse(t, "n.yaml", strings.Replace(nodeYAML, "  uid: u-n1\n", "  uid: u-n1\n  managedFields:\n  - manager: kubelet\n    operation: Update\n", 1))
	require.NoError(t, err)
	require.Nil(t, c.Nodes[0].ManagedFields)
}
