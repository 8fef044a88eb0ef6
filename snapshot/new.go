package snapshot

import (
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/internal/nodelists"
	"github.com/schedcache/schedcache/nodeinfo"
)

// NewSnapshot builds a standalone snapshot from pods and nodes, independent
// of any cache, with upstream's NewSnapshot semantics: every pod is
// aggregated into the entry named by its spec.nodeName (created on demand,
// "" included); every entry is listed, nodeless ones too, so NumNodes counts
// them while Get fails for them; image sizes are per node and NumNodes
// counts the distinct nodes listing a name; the used-PVC set holds the claims
// of every pod with a node name. The list order, unspecified upstream (Go map
// order), is by name here. Pods with an empty UID are aggregated but not
// listed by Pod/RangePods; nil pods and nodes are skipped. Pods whose
// amounts node totals could not hold (a *nodeinfo.QuantityError, or one
// pod more than nodeinfo.MaxPodsPerNode on a node) are skipped too, and
// reported by the snapshot's Err, each matching
// nodeinfo.ErrQuantityOverflow (upstream would wrap the totals).
func NewSnapshot(pods []*v1.Pod, nodes []*v1.Node) *Snapshot {
	var gen int64
	nextGen := func() int64 { gen++; return gen }
	states := make(map[string]*nodeinfo.NodeState)
	entry := func(name string) *nodeinfo.NodeState {
		s, ok := states[name]
		if !ok {
			s = nodeinfo.NewNodeState(nextGen)
			states[name] = s
		}
		return s
	}
	b := newBuilder()
	keys := make(map[string]struct{})
	var refused []error // pods whose amounts node totals could not hold
	for _, p := range pods {
		pi, err := nodeinfo.NewPodInfoAnyUID(p)
		if err != nil {
			if p != nil {
				refused = append(refused, err)
			}
			continue
		}
		if s := entry(p.Spec.NodeName); s.NumPods() >= nodeinfo.MaxPodsPerNode {
			refused = append(refused, fmt.Errorf("pod %s/%s: node %q already holds %d pods: %w",
				p.Namespace, p.Name, p.Spec.NodeName, s.NumPods(), nodeinfo.ErrQuantityOverflow))
			continue
		}
		entry(p.Spec.NodeName).AddPod(pi)
		if pi.Key() != "" {
			b.SetPod(pi.Key(), p, false)
			keys[pi.Key()] = struct{}{}
		}
		if p.Spec.NodeName != "" {
			for _, k := range pi.PVCKeys() {
				b.SetPVC(k, true)
			}
		}
	}
	imageNodes := make(map[string]map[string]struct{})
	for _, n := range nodes {
		if n == nil {
			continue
		}
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				if imageNodes[name] == nil {
					imageNodes[name] = make(map[string]struct{})
				}
				imageNodes[name][n.Name] = struct{}{}
			}
		}
	}
	for _, n := range nodes {
		if n == nil {
			continue
		}
		s := entry(n.Name)
		s.SetNode(n)
		images := make(map[string]nodeinfo.ImageStateSummary)
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				images[name] = nodeinfo.ImageStateSummary{Size: img.SizeBytes, NumNodes: len(imageNodes[name])}
			}
		}
		s.SetImageStates(images)
	}
	names := make([]string, 0, len(states))
	for name := range states {
		names = append(names, name)
	}
	sort.Strings(names)
	order := make([]int32, len(names))
	infos := make([]*nodeinfo.NodeInfo, len(names))
	for i, name := range names {
		slot := int32(i)
		ni := states[name].Clone()
		b.SetNode(slot, ni)
		if ni.Node() != nil {
			b.SetIndex(name, slot)
		}
		order[i], infos[i] = slot, ni
	}
	aff, anti, nonHost := nodelists.Affinity(order, func(slot int32) (bool, bool, bool) {
		return listFlags(infos[slot])
	}, nil, nil, nil)
	b.SetLists(order, immutable.SeqOf(aff), immutable.SeqOf(anti), immutable.SeqOf(nonHost), errors.Join(refused...))
	s := b.Commit(0, len(states), len(keys))
	s.published = false
	return s
}
