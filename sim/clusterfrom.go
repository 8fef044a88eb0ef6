package sim

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim/manifest"
	"github.com/schedcache/schedcache/workload"
)

// Clusters from manifests (-cluster-from, a scenario's cluster.manifests;
// docs/loadgen.md, "Clusters from manifests"): the nodes of the files are
// the cluster, their bound pods the initial pods, their pending pods the
// first pods the schedulers take (before any generated pod). Package
// manifest reads and checks the files.

// ClusterFromError is an immutable value: the manifests named by Source
// ("-cluster-from", or a scenario's cluster.manifests) did not load. It
// wraps ErrUsage and the loader's error (manifest.Errors: each
// *manifest.Error names the file, line, object and field).
type ClusterFromError struct {
	Source string
	Err    error
}

func (e *ClusterFromError) Error() string {
	var es manifest.Errors
	if errors.As(e.Err, &es) && len(es) > 1 {
		return fmt.Sprintf("%s: %d faults:\n  %s", e.Source, len(es), strings.ReplaceAll(e.Err.Error(), "\n", "\n  "))
	}
	return e.Source + ": " + e.Err.Error()
}

// Unwrap returns ErrUsage and the loader's error.
func (e *ClusterFromError) Unwrap() []error { return []error{ErrUsage, e.Err} }

// splitPaths parses -cluster-from's comma list.
func splitPaths(s string) ([]string, error) {
	if s == "" {
		return nil, nil // no manifests: the generated cluster
	}
	paths := strings.Split(s, ",")
	for _, p := range paths {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("an empty path in the list %q", s)
		}
	}
	return paths, nil
}

// loadClusterFrom reads c.ClusterFrom into c.Loaded and sizes c by it:
// Nodes is the number of nodes loaded. source names the setting in
// errors.
func (c *Config) loadClusterFrom(source string) error {
	lc, err := manifest.Load(c.ClusterFrom, manifest.Options{CheckPod: checkLoadedPod})
	if err != nil {
		return &ClusterFromError{Source: source, Err: err}
	}
	switch {
	case len(lc.Nodes) > maxNodes:
		return &ClusterFromError{Source: source, Err: fmt.Errorf("%d nodes; the simulator holds at most %d", len(lc.Nodes), maxNodes)}
	case len(lc.Bound) > maxInitialPods:
		return &ClusterFromError{Source: source, Err: fmt.Errorf("%d bound pods; the simulator holds at most %d", len(lc.Bound), maxInitialPods)}
	case len(lc.Pending) > maxInitialPods:
		return &ClusterFromError{Source: source, Err: fmt.Errorf("%d pending pods; the simulator holds at most %d", len(lc.Pending), maxInitialPods)}
	}
	c.Loaded = lc
	c.Nodes = len(lc.Nodes)
	return nil
}

// checkLoadedPod refuses what the cache would: a pod whose amounts are
// beyond nodeinfo's bounds.
func checkLoadedPod(p *v1.Pod) error {
	_, err := nodeinfo.NewPodInfo(p)
	return err
}

// clusterFromFlags loads -cluster-from when it was given (set holds the
// flags given explicitly), after a scenario's manifests if any, and
// refuses the flags that size a generated cluster alongside manifests.
func (c *Config) clusterFromFlags(set map[string]bool) error {
	if set["cluster-from"] {
		c.Loaded = nil
		if len(c.ClusterFrom) == 0 {
			return nil
		}
	}
	if len(c.ClusterFrom) == 0 {
		return nil
	}
	for _, f := range []string{"nodes", "pods-per-node", "initial-pods", "zones"} {
		if set[f] {
			return bad(f, "not with -cluster-from (or a scenario's cluster.manifests): the manifests are the cluster")
		}
	}
	if c.Loaded != nil {
		return nil // the scenario's, loaded by apply
	}
	c.PodsPerNode, c.InitialPods, c.Zones = 0, 0, 0
	return c.loadClusterFrom("-cluster-from")
}

// applyManifests loads a scenario's cluster.manifests: paths relative to
// the scenario file's directory; not with the fields that size a
// generated cluster.
func (sc *Scenario) applyManifests(cfg *Config, fail func(field, format string, args ...any) error) error {
	c := sc.Cluster
	for _, f := range []struct {
		name string
		set  bool
	}{{"cluster.nodes", c.Nodes != nil}, {"cluster.podsPerNode", c.PodsPerNode != nil}, {"cluster.initialPods", c.InitialPods != nil}, {"cluster.zones", c.Zones != nil}} {
		if f.set {
			return fail("cluster.manifests", "not with %s: the manifests are the cluster", f.name)
		}
	}
	paths := make([]string, len(c.Manifests))
	for i, p := range c.Manifests {
		if strings.TrimSpace(p) == "" {
			return fail(fmt.Sprintf("cluster.manifests[%d]", i), "an empty path")
		}
		if !filepath.IsAbs(p) && !strings.HasPrefix(sc.source, "preset ") {
			p = filepath.Join(filepath.Dir(sc.source), p)
		}
		paths[i] = p
	}
	cfg.ClusterFrom = paths
	cfg.PodsPerNode, cfg.InitialPods, cfg.Zones = 0, 0, 0
	where := "scenario " + sc.source
	if line, _ := nodeLine(sc.doc, "cluster.manifests"); line > 0 {
		where = fmt.Sprintf("%s:%d", sc.source, line)
	}
	return cfg.loadClusterFrom(where + ": cluster.manifests")
}

// validateLoaded checks that a loaded cluster sizes the run.
func (c *Config) validateLoaded() error {
	switch {
	case c.Loaded == nil && len(c.ClusterFrom) > 0:
		return bad("cluster-from", "the manifests are not loaded (parseFlags loads them)")
	case c.Loaded == nil:
		return nil
	case c.Nodes != len(c.Loaded.Nodes):
		return bad("nodes", "%d, but -cluster-from loaded %d nodes: the manifests are the cluster", c.Nodes, len(c.Loaded.Nodes))
	case c.PodsPerNode != 0 || c.InitialPods != 0:
		return bad("pods-per-node", "not with -cluster-from: the manifests' bound pods are the initial pods")
	case c.Zones != 0:
		return bad("zones", "not with -cluster-from: the nodes keep their zone labels")
	}
	return nil
}

// loadedCluster is the cluster of c.Loaded as the run uses it: copies of
// the nodes and bound pods (a run changes its objects; a sweep or a test
// runs one Config more than once), and the image pool and shape of the
// generator for the nodes and pods the run makes.
func loadedCluster(cfg Config) *workload.Cluster {
	cl := workload.Build(workload.ClusterSpec{Seed: cfg.Seed, Shape: cfg.Shape})
	cl.Spec.Nodes = len(cfg.Loaded.Nodes)
	cl.Nodes = make([]*v1.Node, len(cfg.Loaded.Nodes))
	for i, n := range cfg.Loaded.Nodes {
		cl.Nodes[i] = n.DeepCopy()
	}
	cl.Pods = make([]*v1.Pod, len(cfg.Loaded.Bound))
	for i, p := range cfg.Loaded.Bound {
		cl.Pods[i] = p.DeepCopy()
	}
	return cl
}

// initLoaded readies the loaded cluster's pending pods (copies) for the
// schedulers and notes what the loader left out.
func (e *env) initLoaded(cfg Config, prog *progress) {
	if cfg.Loaded == nil {
		return
	}
	prog.printf("cluster from %s\n", cfg.Loaded.Summary())
	e.pending = make([]*v1.Pod, len(cfg.Loaded.Pending))
	for i, p := range cfg.Loaded.Pending {
		e.pending[i] = p.DeepCopy()
	}
	e.warnings = append(e.warnings, cfg.Loaded.Notes()...)
}

// takeLoaded returns the next pending pod of the manifests, or nil once
// every one was taken. Any goroutine may call it.
func (e *env) takeLoaded() *v1.Pod {
	if int64(len(e.pending)) <= e.pendingNext.Load() {
		return nil // none, or every one taken: no contention on the counter
	}
	i := e.pendingNext.Add(1) - 1
	if i >= int64(len(e.pending)) {
		return nil
	}
	p := e.pending[i]
	e.pending[i] = nil
	return p
}

// noteLoadedLeft warns of the manifests' pending pods the run ended
// before taking.
func (e *env) noteLoadedLeft() {
	if len(e.pending) == 0 {
		return
	}
	if left := int64(len(e.pending)) - min(e.pendingNext.Load(), int64(len(e.pending))); left > 0 {
		e.warnings = append(e.warnings, fmt.Sprintf("the run ended before %d of the %d pending pods of the manifests were tried", left, len(e.pending)))
	}
}

// overfullCause says why nodes are over-full at start.
func overfullCause(cfg Config) string {
	if cfg.Loaded != nil {
		return "as the manifests have them"
	}
	return "the generator's tail"
}
