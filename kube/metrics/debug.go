package metrics

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
)

// ErrNilLister is returned by Compare when a lister is missing.
var ErrNilLister = errors.New("metrics: nil lister")

// Diff is what a comparison found. Every list is sorted; empty lists mean
// the cache agrees with the listers.
type Diff struct {
	MissedNodes    []string `json:"missedNodes"`    // in the node lister, not in the cache
	RedundantNodes []string `json:"redundantNodes"` // cache entries without a listed node (ghosts with pods, entries made by pods)
	MissedPods     []string `json:"missedPods"`     // assigned in the pod lister, not cached (UIDs)
	RedundantPods  []string `json:"redundantPods"`  // cached and not assumed, but not assigned in the lister (UIDs)
	MisplacedPods  []string `json:"misplacedPods"`  // cached on another node than the lister says (UIDs)
	AssumedPods    []string `json:"assumedPods"`    // assumed in the cache (not differences: bindings in flight)
}

// Empty reports whether the diff found no difference (assumed pods are
// not differences).
func (d *Diff) Empty() bool {
	return len(d.MissedNodes)+len(d.RedundantNodes)+len(d.MissedPods)+len(d.RedundantPods)+len(d.MisplacedPods) == 0
}

// Comparer compares the cache with informer listers, as upstream's
// debugger.CacheComparer: nodes by name against the cache's Dump (which
// holds ghosts, so they show as redundant, as upstream), pods by UID.
// Upstream compares every listed pod against the cache plus the
// scheduling queue; there is no queue here, so only assigned pods are
// compared, assumed pods are listed apart, and pods cached on another node
// than the lister's are reported as misplaced.
//
// Contract: Compare is safe for concurrent use; it costs one Dump (a
// barrier through the coordinator, O(nodes + pods)) and two lister lists.
type Comparer struct {
	NodeLister corelisters.NodeLister // immutable
	PodLister  corelisters.PodLister  // immutable
	Cache      *schedcache.Cache      // immutable
}

// Compare returns the differences and logs them as upstream does
// ("Cache mismatch").
func (c *Comparer) Compare(logger klog.Logger) (*Diff, error) {
	if c.NodeLister == nil || c.PodLister == nil {
		return nil, ErrNilLister
	}
	if c.Cache == nil {
		return nil, ErrNilCache
	}
	nodes, err := c.NodeLister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	pods, err := c.PodLister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	dump, err := c.Cache.Dump()
	if err != nil {
		return nil, err
	}
	d := CompareDump(nodes, pods, dump)
	if len(d.MissedNodes)+len(d.RedundantNodes) != 0 {
		logger.Info("Cache mismatch", "missedNodes", d.MissedNodes, "redundantNodes", d.RedundantNodes)
	}
	if len(d.MissedPods)+len(d.RedundantPods)+len(d.MisplacedPods) != 0 {
		logger.Info("Cache mismatch", "missedPods", d.MissedPods, "redundantPods", d.RedundantPods, "misplacedPods", d.MisplacedPods)
	}
	return d, nil
}

// CompareDump compares listed nodes and pods with a cache dump.
func CompareDump(nodes []*v1.Node, pods []*v1.Pod, dump *schedcache.Dump) *Diff {
	d := &Diff{}
	actual := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n != nil {
			actual = append(actual, n.Name)
		}
	}
	cached := make([]string, 0, len(dump.Nodes))
	for name := range dump.Nodes {
		cached = append(cached, name)
	}
	d.MissedNodes, d.RedundantNodes = compareStrings(actual, cached)

	listedNode := make(map[string]string, len(pods)) // UID -> node, assigned pods
	for _, p := range pods {
		if p != nil && p.Spec.NodeName != "" {
			listedNode[string(p.UID)] = p.Spec.NodeName
		}
	}
	cachedNode := make(map[string]string)
	for name, ni := range dump.Nodes {
		for _, pi := range ni.Pods() {
			uid := pi.Key()
			cachedNode[uid] = name
			_, assumed := dump.AssumedPods[uid]
			listed, ok := listedNode[uid]
			switch {
			case assumed:
				d.AssumedPods = append(d.AssumedPods, uid)
			case !ok:
				d.RedundantPods = append(d.RedundantPods, uid)
			case listed != name:
				d.MisplacedPods = append(d.MisplacedPods, uid)
			}
		}
	}
	for uid := range listedNode {
		if _, ok := cachedNode[uid]; !ok {
			d.MissedPods = append(d.MissedPods, uid)
		}
	}
	for _, s := range [][]string{d.MissedPods, d.RedundantPods, d.MisplacedPods, d.AssumedPods} {
		sort.Strings(s)
	}
	return d
}

// compareStrings is upstream's: sorted set differences.
func compareStrings(actual, cached []string) (missed, redundant []string) {
	missed, redundant = []string{}, []string{}
	sort.Strings(actual)
	sort.Strings(cached)
	i, j := 0, 0
	for i < len(actual) || j < len(cached) {
		switch {
		case j == len(cached) || (i < len(actual) && actual[i] < cached[j]):
			missed = append(missed, actual[i])
			i++
		case i == len(actual) || actual[i] > cached[j]:
			redundant = append(redundant, cached[j])
			j++
		default:
			i++
			j++
		}
	}
	return missed, redundant
}

// DumpNode is one cache entry in a JSON dump.
type DumpNode struct {
	Name        string            `json:"name"`
	Deleted     bool              `json:"deleted"` // no node object: a ghost or an entry made by pods
	Requested   DumpResource      `json:"requested"`
	Allocatable DumpResource      `json:"allocatable"`
	Pods        []DumpPod         `json:"pods"`
	Images      int               `json:"images"`
	Generation  int64             `json:"generation"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// DumpResource is a Resource in a JSON dump.
type DumpResource struct {
	MilliCPU         int64            `json:"milliCPU"`
	Memory           int64            `json:"memory"`
	EphemeralStorage int64            `json:"ephemeralStorage"`
	AllowedPodNumber int64            `json:"allowedPodNumber"`
	Scalars          map[string]int64 `json:"scalars,omitempty"`
}

// DumpPod is one pod in a JSON dump.
type DumpPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Assumed   bool   `json:"assumed"`
	Phase     string `json:"phase,omitempty"`
	Nominated string `json:"nominatedNode,omitempty"`
}

// DumpDoc is the document WriteJSON writes.
type DumpDoc struct {
	Stats       schedcache.Stats `json:"stats"`
	Nodes       []DumpNode       `json:"nodes"` // by name
	AssumedPods []string         `json:"assumedPods"`
	Diff        *Diff            `json:"diff,omitempty"` // when a Comparer was given
}

func dumpResource(r schedcache.Resource) DumpResource {
	out := DumpResource{MilliCPU: r.MilliCPU, Memory: r.Memory, EphemeralStorage: r.EphemeralStorage, AllowedPodNumber: r.AllowedPodNumber}
	if r.NumScalars() > 0 {
		out.Scalars = map[string]int64{}
		for name, v := range r.ScalarResources() {
			out.Scalars[string(name)] = v
		}
	}
	return out
}

// BuildDump reads the cache (one Dump, as upstream's CacheDumper) into a
// DumpDoc; cmp, when not nil, adds its Diff.
func BuildDump(c *schedcache.Cache, cmp *Comparer, logger klog.Logger) (*DumpDoc, error) {
	if c == nil {
		return nil, ErrNilCache
	}
	dump, err := c.Dump()
	if err != nil {
		return nil, err
	}
	doc := &DumpDoc{Stats: c.Stats(), Nodes: make([]DumpNode, 0, len(dump.Nodes)), AssumedPods: make([]string, 0, len(dump.AssumedPods))}
	for name, ni := range dump.Nodes {
		n := DumpNode{Name: name, Deleted: ni.Node() == nil, Requested: dumpResource(ni.Requested()),
			Allocatable: dumpResource(ni.Allocatable()), Images: ni.NumImageStates(), Generation: ni.Generation(), Pods: []DumpPod{}}
		if ni.Node() != nil {
			n.Labels = ni.Node().Labels
		}
		for _, pi := range ni.Pods() {
			p := pi.Pod()
			_, assumed := dump.AssumedPods[pi.Key()]
			n.Pods = append(n.Pods, DumpPod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Assumed: assumed,
				Phase: string(p.Status.Phase), Nominated: p.Status.NominatedNodeName})
		}
		slices.SortFunc(n.Pods, func(a, b DumpPod) int {
			if a.UID < b.UID {
				return -1
			}
			if a.UID > b.UID {
				return 1
			}
			return 0
		})
		doc.Nodes = append(doc.Nodes, n)
	}
	sort.Slice(doc.Nodes, func(i, j int) bool { return doc.Nodes[i].Name < doc.Nodes[j].Name })
	for k := range dump.AssumedPods {
		doc.AssumedPods = append(doc.AssumedPods, k)
	}
	sort.Strings(doc.AssumedPods)
	if cmp != nil {
		if doc.Diff, err = cmp.Compare(logger); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// WriteJSON writes BuildDump's document to w, indented.
func WriteJSON(w io.Writer, c *schedcache.Cache, cmp *Comparer, logger klog.Logger) error {
	doc, err := BuildDump(c, cmp, logger)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// DumpHandler serves WriteJSON's document over HTTP (upstream's debugger
// dumps on a signal; an endpoint suits a library). cmp may be nil.
func DumpHandler(c *schedcache.Cache, cmp *Comparer, logger klog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		doc, err := BuildDump(c, cmp, logger)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			logger.Error(err, "writing the cache dump")
		}
	})
}
