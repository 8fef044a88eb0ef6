// Package manifest loads a cluster, its nodes and pods, from Kubernetes
// manifests: the files people keep their objects in, or a dump of a live
// cluster (kubectl get nodes,pods -A -o yaml, or -o json).
//
// A file holds JSON or YAML, gzip-compressed or not (told by its first
// bytes, not its name): a single object, a List (kind List, NodeList,
// PodList or any other *List with items), several YAML documents
// separated by ---, or a stream of JSON values. v1 Nodes and Pods are
// kept; every other kind is skipped and counted (Cluster.Skipped), as are
// pods in phase Succeeded or Failed (the scheduler ignores them).
//
// Objects are decoded as the API server decodes them: field names are
// case-sensitive, and an unknown or duplicate field is a fault. Every
// fault is an *Error naming the file, line, document, List item, object
// and field; Load returns them all (up to MaxErrors) as Errors. The rules
// beyond decoding are on Load.
package manifest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Cluster is what Load read: immutable once returned (callers that
// change its objects copy them first).
type Cluster struct {
	// Files are the files read, in order (a directory's files expanded).
	Files []string
	// Nodes are the v1 Nodes, in the order of the files.
	Nodes []*v1.Node
	// Bound are the pods with spec.nodeName (not terminal), in order.
	Bound []*v1.Pod
	// Pending are the pods without spec.nodeName (not terminal), in order.
	Pending []*v1.Pod
	// Skipped counts the objects that are not v1 Nodes or Pods, by
	// "Kind (apiVersion)".
	Skipped map[string]int
	// Terminal counts the pods skipped for phase Succeeded or Failed.
	Terminal int
	// DerivedUIDs counts the objects that had no metadata.uid and were
	// given one: a node its name, a pod NAMESPACE/NAME.
	DerivedUIDs int
	// AllocatableFromCapacity counts the nodes without
	// status.allocatable, which were given their status.capacity.
	AllocatableFromCapacity int
	// NoAllocatable counts the nodes with neither: no pod fits them.
	NoAllocatable int
}

// Notes says, one sentence each, what Load left out or filled in.
func (c *Cluster) Notes() []string {
	var out []string
	if len(c.Skipped) > 0 {
		kinds := make([]string, 0, len(c.Skipped))
		total := 0
		for k, n := range c.Skipped {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
			total += n
		}
		sort.Strings(kinds)
		out = append(out, fmt.Sprintf("skipped %d objects that are not v1 Nodes or Pods: %s", total, strings.Join(kinds, ", ")))
	}
	if c.Terminal > 0 {
		out = append(out, fmt.Sprintf("skipped %d pods in phase Succeeded or Failed (the scheduler ignores them)", c.Terminal))
	}
	if c.DerivedUIDs > 0 {
		out = append(out, fmt.Sprintf("%d objects had no metadata.uid: a node was given its name, a pod NAMESPACE/NAME", c.DerivedUIDs))
	}
	if c.AllocatableFromCapacity > 0 {
		out = append(out, fmt.Sprintf("%d nodes had no status.allocatable: they were given their status.capacity", c.AllocatableFromCapacity))
	}
	if c.NoAllocatable > 0 {
		out = append(out, fmt.Sprintf("%d nodes have neither status.allocatable nor status.capacity: no pod fits them", c.NoAllocatable))
	}
	return out
}

// Summary is one line: the files, nodes, bound and pending pods.
func (c *Cluster) Summary() string {
	return fmt.Sprintf("%s: %d nodes, %d bound pods, %d pending", strings.Join(c.Files, ","), len(c.Nodes), len(c.Bound), len(c.Pending))
}

// Options is a plain value: how Load checks what it reads.
type Options struct {
	// CheckPod, when not nil, is called on every pod kept (its
	// namespace and uid filled in); an error is a fault of that pod.
	CheckPod func(*v1.Pod) error
	// MaxBytes bounds each file, decompressed; 0: DefaultMaxBytes.
	MaxBytes int64
}

// DefaultMaxBytes bounds a file, decompressed, by default.
const DefaultMaxBytes = 4 << 30

// Load reads the files (a directory stands for its .yaml, .yml and
// .json files, compressed or not, in name order) and returns the cluster
// they hold, or Errors. Beyond decoding, it checks that:
//
//   - every node and pod has metadata.name, and no node has a namespace
//     (a pod without one is in "default");
//   - no two nodes share a name, no two pods a namespace/name, no two
//     nodes or two pods a uid (an object without metadata.uid is given
//     one: a node its name, a pod NAMESPACE/NAME);
//   - a pod's spec.nodeName names a node of the files (a dump taken while
//     a node went away holds such pods: remove them, or clear their
//     spec.nodeName to have them scheduled);
//   - a pod has at least one container;
//   - every quantity of a node's capacity and allocatable, a container's
//     requests and limits, a pod's overhead and pod-level resources is
//     between 0 and MaxQuantity;
//   - the files hold at least one node.
//
// A node without status.allocatable is given its status.capacity.
// metadata.managedFields is dropped (the scheduler's informer drops it
// too).
func Load(paths []string, opts Options) (*Cluster, error) {
	l := NewLoader(opts)
	for _, p := range paths {
		l.AddFile(p)
	}
	return l.Done()
}

// Loader reads files one by one (AddFile, Parse) and checks them
// together (Done). It is used by one goroutine at a time.
type Loader struct {
	opts    Options
	files   []string
	nodes   []*v1.Node
	nodeLoc []loc
	pods    []*v1.Pod
	podLoc  []loc
	c       Cluster
	errs    Errors
}

// NewLoader returns an empty Loader.
func NewLoader(opts Options) *Loader {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	return &Loader{opts: opts, c: Cluster{Skipped: map[string]int{}}}
}

// full says whether MaxErrors faults are collected: reading stops.
func (l *Loader) full() bool { return len(l.errs) >= MaxErrors }

// fileFault records a fault of a whole file.
func (l *Loader) fileFault(file string, line int, msg string, err error) {
	if l.full() {
		return
	}
	l.errs = append(l.errs, &Error{File: file, Line: line, Item: -1, Msg: msg, Err: err})
}

// manifestExts are the names a directory's files need to be read.
var manifestExts = []string{".yaml", ".yml", ".json", ".yaml.gz", ".yml.gz", ".json.gz"}

// AddFile reads the file at path, or the manifests of the directory.
func (l *Loader) AddFile(path string) {
	if l.full() {
		return
	}
	st, err := os.Stat(path)
	if err != nil {
		l.fileFault(path, 0, err.Error(), err)
		return
	}
	if !st.IsDir() {
		l.addFile(path)
		return
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		l.fileFault(path, 0, err.Error(), err)
		return
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		for _, ext := range manifestExts {
			if strings.HasSuffix(e.Name(), ext) {
				l.addFile(filepath.Join(path, e.Name()))
				n++
				break
			}
		}
	}
	if n == 0 {
		l.fileFault(path, 0, "a directory with no .yaml, .yml or .json file (compressed or not)", nil)
	}
}

func (l *Loader) addFile(path string) {
	f, err := os.Open(path)
	if err != nil {
		l.fileFault(path, 0, err.Error(), err)
		return
	}
	defer f.Close()
	l.read(path, f)
}

// Parse reads one file's content, named name in errors.
func (l *Loader) Parse(name string, data []byte) {
	l.read(name, bytes.NewReader(data))
}

// read reads r whole (decompressing gzip, told by its magic bytes) and
// adds its documents.
func (l *Loader) read(name string, r io.Reader) {
	l.files = append(l.files, name)
	data, err := readAll(r, l.opts.MaxBytes)
	if err != nil {
		l.fileFault(name, 0, err.Error(), err)
		return
	}
	l.addData(name, data)
}

// gzipMagic starts every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// readAll reads r, gunzipped if it starts with gzip's magic bytes, up to
// max bytes.
func readAll(r io.Reader, max int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	if !bytes.HasPrefix(raw, gzipMagic) {
		return raw, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, gzipError(err)
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, max+1))
	if err != nil {
		return nil, gzipError(err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes once decompressed", max)
	}
	return data, nil
}

// gzipError names gzip in err, once.
func gzipError(err error) error {
	if strings.HasPrefix(err.Error(), "gzip: ") {
		return err
	}
	return fmt.Errorf("gzip: %w", err)
}

// Done checks the objects read together and returns the cluster, or
// the faults found (Errors) since the Loader was made.
func (l *Loader) Done() (*Cluster, error) {
	l.crossCheck()
	if len(l.errs) > 0 {
		return nil, l.errs
	}
	c := l.c
	c.Files = l.files
	c.Nodes = l.nodes
	for _, p := range l.pods {
		if p.Spec.NodeName != "" {
			c.Bound = append(c.Bound, p)
		} else {
			c.Pending = append(c.Pending, p)
		}
	}
	return &c, nil
}
