package fwkpick

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	v1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// A plugin that panics fails the attempt of the pod it was running for,
// not the run. Upstream's runtime calls Score and NormalizeScore (and,
// here, Filter) on its parallelizer's goroutines, whose crash handler
// re-panics: a recover around the framework's entry points cannot catch
// those. So every plugin the picker runs is wrapped (guarded) as its
// factory builds it: each call of an extension point the picker runs
// (PreFilter and its AddPod/RemovePod, Filter, PreScore, Score,
// NormalizeScore, SignPod) recovers a panic into an Error status carrying
// a *PanicError, which the runtime passes up like any plugin error, and
// Pick returns it as a *sim.AttemptError. A panicking factory fails
// New or NewFramework with a *PanicError.

// ErrPluginPanic is wrapped by every *PanicError.
var ErrPluginPanic = errors.New("fwkpick: plugin panicked")

// PanicError is a plain value: a plugin's panic, recovered. Plugin is ""
// when the panic was not inside a plugin (the cycle itself).
type PanicError struct {
	Plugin string // the plugin's name
	Point  string // the extension point's method: "Filter", "Score", "New" (its factory), …
	Value  any    // what it panicked with
	Stack  []byte // the panicking goroutine's stack (not in Error)
}

func (e *PanicError) Error() string {
	if e.Plugin == "" {
		return fmt.Sprintf("fwkpick: panic in the scheduling cycle (%s): %v", e.Point, e.Value)
	}
	return fmt.Sprintf("fwkpick: plugin %q panicked in %s: %v", e.Plugin, e.Point, e.Value)
}

// Unwrap gives ErrPluginPanic, and the panic's value when it is an error.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPluginPanic, err}
	}
	return []error{ErrPluginPanic}
}

// recovered turns a recovered value into a *PanicError.
func recovered(plugin, point string, r any) *PanicError {
	return &PanicError{Plugin: plugin, Point: point, Value: r, Stack: debug.Stack()}
}

// statusOf stores the Error status of a recovered panic in *st.
func statusOf(st **fwk.Status, plugin, point string, r any) {
	*st = fwk.AsStatus(recovered(plugin, point, r))
}

// guardFactory wraps f: the plugin it builds is guarded, and a panic of
// f itself is an error.
func guardFactory(name string, f frameworkruntime.PluginFactory, wrap bool) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args kruntime.Object, h fwk.Handle) (p fwk.Plugin, err error) {
		defer func() {
			if r := recover(); r != nil {
				p, err = nil, recovered(name, "New", r)
			}
		}()
		p, err = f(ctx, args, h)
		if err != nil || p == nil || !wrap {
			return p, err
		}
		return guard(p), nil
	}
}

// guard wraps p. The wrapper implements PreFilter, Filter, PreScore and
// Score whatever p implements (the picker's frameworks enable each plugin
// by name at exactly the extension points the real one serves, so the
// framework never calls one p lacks), and SignPlugin only when p does
// (the runtime checks it to decide whether pods can be signed).
func guard(p fwk.Plugin) fwk.Plugin {
	g := &guarded{name: p.Name(), p: p}
	g.preFilter, _ = p.(fwk.PreFilterPlugin)
	g.filter, _ = p.(fwk.FilterPlugin)
	g.preScore, _ = p.(fwk.PreScorePlugin)
	g.score, _ = p.(fwk.ScorePlugin)
	bp := bindPoints{p: p}
	if s, ok := p.(fwk.SignPlugin); ok {
		gs := &guardedSigner{guarded: g, sign: s}
		if bp.any() {
			return &guardedSignerBinding{guardedSigner: gs, bindPoints: bp}
		}
		return gs
	}
	if bp.any() {
		return &guardedBinding{guarded: g, bindPoints: bp}
	}
	return g
}

// bindPoints passes the binding cycle's extension points and PreEnqueue
// through to p, unguarded: the binding cycle runs them on the node
// picker's goroutine, which recovers their panics (bind.go). As with the
// guarded points, the framework only calls those p serves.
type bindPoints struct{ p fwk.Plugin }

// any says whether p serves one of them.
func (b bindPoints) any() bool {
	switch b.p.(type) {
	case fwk.ReservePlugin, fwk.PermitPlugin, fwk.PreBindPlugin, fwk.BindPlugin, fwk.PostBindPlugin, fwk.PreEnqueuePlugin:
		return true
	}
	return false
}

func (b bindPoints) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	return b.p.(fwk.ReservePlugin).Reserve(ctx, state, pod, node)
}
func (b bindPoints) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) {
	b.p.(fwk.ReservePlugin).Unreserve(ctx, state, pod, node)
}
func (b bindPoints) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) (*fwk.Status, time.Duration) {
	return b.p.(fwk.PermitPlugin).Permit(ctx, state, pod, node)
}
func (b bindPoints) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	return b.p.(fwk.PreBindPlugin).PreBindPreFlight(ctx, state, pod, node)
}
func (b bindPoints) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	return b.p.(fwk.PreBindPlugin).PreBind(ctx, state, pod, node)
}
func (b bindPoints) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	return b.p.(fwk.BindPlugin).Bind(ctx, state, pod, node)
}
func (b bindPoints) PostBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) {
	b.p.(fwk.PostBindPlugin).PostBind(ctx, state, pod, node)
}
func (b bindPoints) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	return b.p.(fwk.PreEnqueuePlugin).PreEnqueue(ctx, pod)
}

// guardedBinding is a guarded plugin with binding-cycle points.
type guardedBinding struct {
	*guarded
	bindPoints
}

// guardedSignerBinding is a guarded SignPlugin with binding-cycle points.
type guardedSignerBinding struct {
	*guardedSigner
	bindPoints
}

// Unguard returns the plugin a guarded one wraps (p itself otherwise).
func Unguard(p fwk.Plugin) fwk.Plugin {
	switch g := p.(type) {
	case *guarded:
		return g.p
	case *guardedSigner:
		return g.p
	case *guardedBinding:
		return g.guarded.p
	case *guardedSignerBinding:
		return g.guardedSigner.p
	}
	return p
}

// guarded is immutable: a plugin whose calls recover panics.
type guarded struct {
	name      string
	p         fwk.Plugin
	preFilter fwk.PreFilterPlugin // nil: p is none
	filter    fwk.FilterPlugin
	preScore  fwk.PreScorePlugin
	score     fwk.ScorePlugin
}

// notServed is the status of a call of an extension point p lacks (the
// framework never makes one: see guard).
func (g *guarded) notServed(point string) *fwk.Status {
	return fwk.AsStatus(fmt.Errorf("fwkpick: plugin %q has no %s extension point", g.name, point))
}

func (g *guarded) Name() string { return g.name }

// PreFilter is the plugin's, or, for a plugin the carry keeps in a cycle
// that has one, the carry's (carry.go).
func (g *guarded) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (res *fwk.PreFilterResult, st *fwk.Status) {
	if carries(g.name) {
		if c := carryOf(state); c != nil {
			defer func() {
				if r := recover(); r != nil {
					res = nil
					statusOf(&st, g.name, "PreFilter", r)
				}
			}()
			return c.preFilter(ctx, g, state, pod, nodes)
		}
	}
	return g.runPreFilter(ctx, state, pod, nodes)
}

// runPreFilter is the plugin's PreFilter.
func (g *guarded) runPreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (res *fwk.PreFilterResult, st *fwk.Status) {
	if g.preFilter == nil {
		return nil, g.notServed("PreFilter")
	}
	defer func() {
		if r := recover(); r != nil {
			res = nil
			statusOf(&st, g.name, "PreFilter", r)
		}
	}()
	return g.preFilter.PreFilter(ctx, state, pod, nodes)
}

func (g *guarded) PreFilterExtensions() (ext fwk.PreFilterExtensions) {
	if g.preFilter == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			ext = nil
		}
	}()
	e := g.preFilter.PreFilterExtensions()
	if e == nil {
		return nil
	}
	return guardedPreFilterExt{name: g.name, e: e}
}

func (g *guarded) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (st *fwk.Status) {
	if g.filter == nil {
		return g.notServed("Filter")
	}
	defer func() {
		if r := recover(); r != nil {
			statusOf(&st, g.name, "Filter", r)
		}
	}()
	return g.filter.Filter(ctx, state, pod, ni)
}

// PreScore is the plugin's, or, for a plugin the carry keeps in a cycle
// that has one, the carry's (carry.go).
func (g *guarded) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (st *fwk.Status) {
	if carries(g.name) {
		if c := carryOf(state); c != nil {
			defer func() {
				if r := recover(); r != nil {
					c.np.listOverride = nil
					statusOf(&st, g.name, "PreScore", r)
				}
			}()
			return c.preScore(ctx, g, state, pod, nodes)
		}
	}
	return g.runPreScore(ctx, state, pod, nodes)
}

// runPreScore is the plugin's PreScore.
func (g *guarded) runPreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (st *fwk.Status) {
	if g.preScore == nil {
		return g.notServed("PreScore")
	}
	defer func() {
		if r := recover(); r != nil {
			statusOf(&st, g.name, "PreScore", r)
		}
	}()
	return g.preScore.PreScore(ctx, state, pod, nodes)
}

func (g *guarded) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (score int64, st *fwk.Status) {
	if g.score == nil {
		return 0, g.notServed("Score")
	}
	defer func() {
		if r := recover(); r != nil {
			score = 0
			statusOf(&st, g.name, "Score", r)
		}
	}()
	return g.score.Score(ctx, state, pod, ni)
}

func (g *guarded) ScoreExtensions() (ext fwk.ScoreExtensions) {
	if g.score == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			ext = nil
		}
	}()
	e := g.score.ScoreExtensions()
	if e == nil {
		return nil
	}
	return guardedScoreExt{name: g.name, e: e}
}

// guardedSigner is a guarded SignPlugin.
type guardedSigner struct {
	*guarded
	sign fwk.SignPlugin // immutable
}

func (g *guardedSigner) SignPod(ctx context.Context, pod *v1.Pod) (frags []fwk.SignFragment, st *fwk.Status) {
	defer func() {
		if r := recover(); r != nil {
			frags = nil
			statusOf(&st, g.name, "SignPod", r)
		}
	}()
	return g.sign.SignPod(ctx, pod)
}

// guardedPreFilterExt is immutable: guarded PreFilterExtensions.
type guardedPreFilterExt struct {
	name string
	e    fwk.PreFilterExtensions
}

func (g guardedPreFilterExt) AddPod(ctx context.Context, state fwk.CycleState, pod *v1.Pod, add fwk.PodInfo, ni fwk.NodeInfo) (st *fwk.Status) {
	defer func() {
		if r := recover(); r != nil {
			statusOf(&st, g.name, "AddPod", r)
		}
	}()
	return g.e.AddPod(ctx, state, pod, add, ni)
}

func (g guardedPreFilterExt) RemovePod(ctx context.Context, state fwk.CycleState, pod *v1.Pod, rm fwk.PodInfo, ni fwk.NodeInfo) (st *fwk.Status) {
	defer func() {
		if r := recover(); r != nil {
			statusOf(&st, g.name, "RemovePod", r)
		}
	}()
	return g.e.RemovePod(ctx, state, pod, rm, ni)
}

// guardedScoreExt is immutable: guarded ScoreExtensions.
type guardedScoreExt struct {
	name string
	e    fwk.ScoreExtensions
}

func (g guardedScoreExt) NormalizeScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, scores fwk.NodeScoreList) (st *fwk.Status) {
	defer func() {
		if r := recover(); r != nil {
			statusOf(&st, g.name, "NormalizeScore", r)
		}
	}()
	return g.e.NormalizeScore(ctx, state, pod, scores)
}
