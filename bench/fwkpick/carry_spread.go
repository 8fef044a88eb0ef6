package fwkpick

import (
	"math"
	"reflect"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
)

// PodTopologySpread's carried state (carry.go). Its PreFilter state holds
// the constraints, the matching pods per topology value (TpValueToMatchNum)
// and, per constraint, the two topology values with the fewest
// (CriticalPaths, whose first is the minimum Filter compares skew with).
// AddPod and RemovePod keep the counts exact but update the two paths
// only as far as the values they touch, so after several of them the
// paths may no longer be the two smallest counts (upstream's comment on
// CriticalPaths says as much: PreFilter computes them exactly, updates
// keep them only for preemption's one-node changes). A carried state is
// therefore used only when its paths are the two smallest counts, as a
// fresh PreFilter makes them (which of equal counts comes first being, in
// upstream too, the order of a map); otherwise the cycle runs PreFilter.
// Filter reads only the first path's count (the minimum); the rest of the
// paths matter only to AddPod and RemovePod on the cycle's state, which
// the framework calls for pods nominated to a node: so in a cycle with no
// nominated pod (anywhere) a state whose first path holds the minimum
// count is used, its other path as it stands (loose).
// The state's fields are exported (for upstream's tests); they are read
// here by reflection, never written.

// carriablePTS reports whether pod's PodTopologySpread state can be
// carried: spread constraints of its own (PreFilter then reads nothing
// of the cluster's services or controllers), no deferred resize.
func carriablePTS(pod *v1.Pod) bool {
	return len(pod.Spec.TopologySpreadConstraints) > 0 && !resource.IsPodResizeDeferred(pod)
}

// spreadFields returns the state's Constraints, CriticalPaths and
// TpValueToMatchNum, or false when d is not shaped so.
func spreadFields(d fwk.StateData) (cons, paths reflect.Value, counts []map[string]int, ok bool) {
	v := reflect.ValueOf(d)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return cons, paths, nil, false
	}
	v = v.Elem()
	cons, paths = v.FieldByName("Constraints"), v.FieldByName("CriticalPaths")
	tp := v.FieldByName("TpValueToMatchNum")
	if !cons.IsValid() || !paths.IsValid() || !tp.IsValid() || cons.Kind() != reflect.Slice ||
		paths.Kind() != reflect.Slice || !tp.CanInterface() {
		return cons, paths, nil, false
	}
	counts, ok = tp.Interface().([]map[string]int)
	if !ok || cons.Len() != len(counts) || paths.Len() != len(counts) {
		return cons, paths, nil, false
	}
	return cons, paths, counts, true
}

// spreadSelectorsSet reports whether every constraint of the state has a
// selector that is not empty: PreFilter counts no pod for an empty one,
// AddPod every pod, so such a state is not carried.
func spreadSelectorsSet(d fwk.StateData) bool {
	cons, _, _, ok := spreadFields(d)
	if !ok {
		return false
	}
	for i := range cons.Len() {
		f := cons.Index(i).FieldByName("Selector")
		if !f.IsValid() || !f.CanInterface() {
			return false
		}
		sel, ok := f.Interface().(labels.Selector)
		if !ok || sel == nil || sel.Empty() {
			return false
		}
	}
	return true
}

// spreadStateExact reports whether the state's critical paths are, per
// constraint, the two smallest counts of its topology values (each path
// naming a value with its count), or the empty path where there are
// fewer values: what PreFilter computes from the same counts. With loose,
// only the first path's count is checked (the minimum, what Filter reads).
func spreadStateExact(d fwk.StateData, loose bool) bool {
	_, paths, counts, ok := spreadFields(d)
	if !ok {
		return false
	}
	for i, m := range counts {
		p := paths.Index(i)
		if p.Kind() != reflect.Pointer || p.IsNil() || p.Elem().Kind() != reflect.Array || p.Elem().Len() != 2 {
			return false
		}
		m1, m2 := math.MaxInt32, math.MaxInt32
		for v, n := range m {
			if v == "" {
				return false // "" is also the empty path's value
			}
			switch {
			case n < m1:
				m1, m2 = n, m1
			case n < m2:
				m2 = n
			}
		}
		var vals [2]string
		for k, want := range [2]int{m1, m2} {
			e := p.Elem().Index(k)
			tv, mn := e.FieldByName("TopologyValue"), e.FieldByName("MatchNum")
			if !tv.IsValid() || !mn.IsValid() || tv.Kind() != reflect.String || mn.Kind() != reflect.Int {
				return false
			}
			vals[k] = tv.String()
			if int(mn.Int()) != want {
				return false
			}
			if loose {
				break
			}
			if n, has := m[vals[k]]; has {
				if n != want {
					return false
				}
			} else if vals[k] != "" || want != math.MaxInt32 || len(m) > k {
				return false
			}
		}
		if !loose && vals[0] != "" && vals[0] == vals[1] {
			return false
		}
	}
	return true
}
