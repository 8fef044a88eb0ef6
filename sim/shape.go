package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/workload"
)

// The scenario's cluster shape and pod mix (docs/loadgen.md, "Cluster
// shape", "Pod mix"): decoded into these plain values, then converted to
// a *workload.Shape by shapeOf, which validates every field.

// ScenarioAllocatable is every node's allocatable (and capacity).
type ScenarioAllocatable struct {
	CPU    *Quantity `json:"cpu"`
	Memory *Quantity `json:"memory"`
	Pods   *int64    `json:"pods"`
}

// ScenarioImages is the images the nodes hold.
type ScenarioImages struct {
	PerNode  *int `json:"perNode"`
	PoolSize *int `json:"poolSize"`
}

// ScenarioLabel is a label on a fraction of the nodes.
type ScenarioLabel struct {
	Key      string  `json:"key"`
	Value    string  `json:"value"`
	Fraction float64 `json:"fraction"`
}

// ScenarioTaint is a taint on a fraction of the nodes.
type ScenarioTaint struct {
	Key      string  `json:"key"`
	Value    string  `json:"value"`
	Effect   string  `json:"effect"`
	Fraction float64 `json:"fraction"`
}

// ScenarioToleration is a pod's toleration, as in a pod spec.
type ScenarioToleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value"`
	Effect   string `json:"effect"`
}

// ScenarioPodTemplate is one weighted kind of pod of podMix.
type ScenarioPodTemplate struct {
	Weight       *int                 `json:"weight"`
	Plain        bool                 `json:"plain"`
	Containers   *IntRange            `json:"containers"`
	CPU          *QuantityRange       `json:"cpu"`
	Memory       *QuantityRange       `json:"memory"`
	Tolerations  []ScenarioToleration `json:"tolerations"`
	NodeSelector map[string]string    `json:"nodeSelector"`
	// Name names the template for a trace's template column; RunFor
	// and FailRate are its pods' lifecycle (lifecycle.go).
	Name     string          `json:"name"`
	RunFor   *ScenarioRunFor `json:"runFor"`
	FailRate *float64        `json:"failRate"`
}

// Quantity is a Kubernetes quantity as written in a scenario: a string
// ("500Mi", "100m") or a number (4).
type Quantity string

func (q *Quantity) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*q = Quantity(s)
		return nil
	}
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	*q = Quantity(b)
	return nil
}

// QuantityRange is {min, max}, or one quantity for both.
type QuantityRange struct {
	Min Quantity `json:"min"`
	Max Quantity `json:"max"`
}

func (r *QuantityRange) UnmarshalJSON(b []byte) error { return unmarshalRange(b, &r.Min, &r.Max) }

// IntRange is {min, max}, or one integer for both.
type IntRange struct {
	Min int64 `json:"min"`
	Max int64 `json:"max"`
}

func (r *IntRange) UnmarshalJSON(b []byte) error { return unmarshalRange(b, &r.Min, &r.Max) }

// unmarshalRange decodes {min, max} (unknown fields refused) into lo and
// hi, or one value into both.
func unmarshalRange[T any](b []byte, lo, hi *T) error {
	if len(b) > 0 && b[0] == '{' {
		var p struct {
			Min T `json:"min"`
			Max T `json:"max"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return err
		}
		*lo, *hi = p.Min, p.Max
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*lo, *hi = v, v
	return nil
}

// shapeError is a fault in the cluster shape or pod mix: field is the
// scenario field.
func shapeError(field, format string, args ...any) error {
	return &UsageError{Flag: field, Msg: fmt.Sprintf(format, args...)}
}

// parseQuantity parses q as a positive (or, with zeroOK, non-negative)
// amount: CPU in millicores (milli), else bytes or a count, at most
// nodeinfo.MaxPodQuantity.
func parseQuantity(field string, q Quantity, milli, zeroOK bool) (int64, error) {
	v, err := resource.ParseQuantity(strings.TrimSpace(string(q)))
	if err != nil {
		return 0, shapeError(field, "not a quantity (like 4, 100m, 32Gi): %q", string(q))
	}
	limit := resource.NewQuantity(nodeinfo.MaxPodQuantity, resource.DecimalSI)
	if milli {
		limit = resource.NewMilliQuantity(nodeinfo.MaxPodQuantity, resource.DecimalSI)
	}
	switch {
	case v.Sign() < 0 || (v.Sign() == 0 && !zeroOK):
		return 0, shapeError(field, "must be positive, got %s", string(q))
	case v.Cmp(*limit) > 0:
		return 0, shapeError(field, "at most %s, got %s", limit.String(), string(q))
	}
	if milli {
		return v.MilliValue(), nil
	}
	return v.Value(), nil
}

func fraction(field string, f float64) error {
	if math.IsNaN(f) || f < 0 || f > 1 {
		return shapeError(field, "must be a fraction in [0, 1], got %v", f)
	}
	return nil
}

func labelKV(field, key, value string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return shapeError(field, "key %q: %s", key, errs[0])
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return shapeError(field, "value %q: %s", value, errs[0])
	}
	return nil
}

// shapeOf returns the workload shape of the scenario's cluster and pod
// mix, or nil when it sets none of them (the standard shape), or a
// *UsageError naming the field at fault.
func shapeOf(c *ScenarioCluster, mix []ScenarioPodTemplate) (*workload.Shape, error) {
	s := &workload.Shape{}
	set := false
	if c != nil {
		if a := c.Allocatable; a != nil {
			set = true
			var err error
			if a.CPU != nil {
				if s.CPUMilli, err = parseQuantity("cluster.allocatable.cpu", *a.CPU, true, false); err != nil {
					return nil, err
				}
			}
			if a.Memory != nil {
				if s.MemoryBytes, err = parseQuantity("cluster.allocatable.memory", *a.Memory, false, false); err != nil {
					return nil, err
				}
			}
			if a.Pods != nil {
				if *a.Pods < 1 || *a.Pods > nodeinfo.MaxPodsPerNode {
					return nil, shapeError("cluster.allocatable.pods", "must be 1 to %d, got %d", nodeinfo.MaxPodsPerNode, *a.Pods)
				}
				s.MaxPods = *a.Pods
			}
		}
		if im := c.Images; im != nil {
			set = true
			s.Images = &workload.ImageShape{PerNode: workload.ImagesPerNode, PoolSize: workload.ImagePoolSize}
			if im.PoolSize != nil {
				if *im.PoolSize < 0 || *im.PoolSize > workload.ImagePoolSize {
					return nil, shapeError("cluster.images.poolSize", "must be 0 to %d, got %d", workload.ImagePoolSize, *im.PoolSize)
				}
				s.Images.PoolSize = *im.PoolSize
				s.Images.PerNode = min(s.Images.PerNode, *im.PoolSize)
			}
			if im.PerNode != nil {
				if *im.PerNode < 0 || *im.PerNode > s.Images.PoolSize {
					return nil, shapeError("cluster.images.perNode", "must be 0 to poolSize (%d), got %d", s.Images.PoolSize, *im.PerNode)
				}
				s.Images.PerNode = *im.PerNode
			}
		}
		for i, l := range c.Labels {
			set = true
			f := fmt.Sprintf("cluster.labels[%d]", i)
			if err := labelKV(f, l.Key, l.Value); err != nil {
				return nil, err
			}
			if err := fraction(f+".fraction", l.Fraction); err != nil {
				return nil, err
			}
			s.Labels = append(s.Labels, workload.LabelRule{Key: l.Key, Value: l.Value, Fraction: l.Fraction})
		}
		for i, t := range c.Taints {
			set = true
			f := fmt.Sprintf("cluster.taints[%d]", i)
			if err := labelKV(f, t.Key, t.Value); err != nil {
				return nil, err
			}
			eff := v1.TaintEffect(t.Effect)
			switch eff {
			case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			default:
				return nil, shapeError(f+".effect", "must be NoSchedule, PreferNoSchedule or NoExecute, got %q", t.Effect)
			}
			if err := fraction(f+".fraction", t.Fraction); err != nil {
				return nil, err
			}
			s.Taints = append(s.Taints, workload.TaintRule{Key: t.Key, Value: t.Value, Effect: eff, Fraction: t.Fraction})
		}
		if c.Unschedulable != nil {
			set = true
			if err := fraction("cluster.unschedulable", *c.Unschedulable); err != nil {
				return nil, err
			}
			s.Unschedulable = *c.Unschedulable
		}
	}
	for i, t := range mix {
		set = true
		f := fmt.Sprintf("podMix[%d]", i)
		pt := workload.PodTemplate{Weight: 1, Plain: t.Plain}
		if t.Weight != nil {
			if *t.Weight < 1 || *t.Weight > 1_000_000 {
				return nil, shapeError(f+".weight", "must be 1 to 1000000, got %d", *t.Weight)
			}
			pt.Weight = *t.Weight
		}
		if r := t.Containers; r != nil {
			if r.Min < 1 || r.Max > workload.MaxContainers || r.Min > r.Max {
				return nil, shapeError(f+".containers", "need 1 <= min <= max <= %d, got {min: %d, max: %d}", workload.MaxContainers, r.Min, r.Max)
			}
			pt.Containers = workload.Range{Min: r.Min, Max: r.Max}
		}
		for _, q := range []struct {
			name  string
			r     *QuantityRange
			milli bool
			dst   *workload.Range
		}{{"cpu", t.CPU, true, &pt.CPUMilli}, {"memory", t.Memory, false, &pt.MemoryBytes}} {
			if q.r == nil {
				continue
			}
			lo, err := parseQuantity(f+"."+q.name+".min", q.r.Min, q.milli, true)
			if err != nil {
				return nil, err
			}
			hi, err := parseQuantity(f+"."+q.name+".max", q.r.Max, q.milli, false)
			if err != nil {
				return nil, err
			}
			if lo > hi {
				return nil, shapeError(f+"."+q.name, "min %s is more than max %s", string(q.r.Min), string(q.r.Max))
			}
			// A pod's total (every container, init containers too) stays
			// within nodeinfo.MaxPodQuantity.
			if hi > nodeinfo.MaxPodQuantity/8 {
				return nil, shapeError(f+"."+q.name+".max", "too large: a pod's containers would request more than the cache holds (%d)", nodeinfo.MaxPodQuantity)
			}
			*q.dst = workload.Range{Min: lo, Max: hi}
		}
		for j, tol := range t.Tolerations {
			tf := fmt.Sprintf("%s.tolerations[%d]", f, j)
			op := v1.TolerationOperator(tol.Operator)
			switch op {
			case "":
				op = v1.TolerationOpEqual
			case v1.TolerationOpEqual, v1.TolerationOpExists:
			default:
				return nil, shapeError(tf+".operator", "must be Equal or Exists, got %q", tol.Operator)
			}
			switch {
			case op == v1.TolerationOpExists && tol.Value != "":
				return nil, shapeError(tf+".value", "must be empty with operator Exists, got %q", tol.Value)
			case tol.Key == "" && op != v1.TolerationOpExists:
				return nil, shapeError(tf+".key", "an empty key (all taints) needs operator Exists")
			}
			if tol.Key != "" {
				if err := labelKV(tf, tol.Key, tol.Value); err != nil {
					return nil, err
				}
			}
			eff := v1.TaintEffect(tol.Effect)
			switch eff {
			case "", v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			default:
				return nil, shapeError(tf+".effect", "must be empty (all), NoSchedule, PreferNoSchedule or NoExecute, got %q", tol.Effect)
			}
			pt.Tolerations = append(pt.Tolerations, v1.Toleration{Key: tol.Key, Operator: op, Value: tol.Value, Effect: eff})
		}
		if len(t.NodeSelector) > 0 {
			pt.NodeSelector = make(map[string]string, len(t.NodeSelector))
			for k, v := range t.NodeSelector {
				if err := labelKV(f+".nodeSelector", k, v); err != nil {
					return nil, err
				}
				pt.NodeSelector[k] = v
			}
		}
		s.PodMix = append(s.PodMix, pt)
	}
	if !set {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, shapeError("cluster", "%v", err)
	}
	return s, nil
}

// podCap is the pod capacity of a node of the run's shape.
func (c *Config) podCap() int64 {
	if c.Shape != nil && c.Shape.MaxPods > 0 {
		return c.Shape.MaxPods
	}
	return workload.NodePods
}

// fits says whether pod may go on node n by its taints, cordon and labels,
// as the NodeUnschedulable, TaintToleration (NoSchedule and NoExecute
// taints) and NodeAffinity (nodeSelector) plugins decide.
func fits(pod *v1.Pod, n *v1.Node) bool {
	if len(pod.Spec.Tolerations) == 0 && len(pod.Spec.NodeSelector) == 0 {
		return !unschedulable(n)
	}
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	if n.Spec.Unschedulable && !tolerates(pod.Spec.Tolerations, &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}) {
		return false
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if (t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute) && !tolerates(pod.Spec.Tolerations, t) {
			return false
		}
	}
	return true
}

func tolerates(ts []v1.Toleration, taint *v1.Taint) bool {
	for i := range ts {
		if ts[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}
