package sim

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// origins says where the settings of a Config came from: the scenario
// file or preset, and the flags given on the command line. parseFlags
// makes it; it is immutable afterwards (copies of the Config share it).
type origins struct {
	sc    *Scenario         // nil: no scenario
	flags map[string]string // the flags given on the command line, by name: their values
}

// culprits are, for a setting, the scenario fields that bear on its
// checks: when the setting keeps its default, a fault is the scenario's
// field (the first the file gives). "pods-per-node" and "initial-pods"
// over-fill the nodes the scenario shapes.
var culprits = map[string][]string{
	"pods-per-node":   {"cluster.allocatable.pods", "cluster.allocatable", "podMix", "cluster.nodes"},
	"initial-pods":    {"cluster.allocatable.pods", "cluster.allocatable", "podMix", "cluster.nodes"},
	"zones":           {"cluster.nodes"},
	"sample":          {"cluster.nodes"},
	"confirm-delay":   {"run.duration"},
	"decision-time":   {"run.duration"},
	"audit-every":     {"run.duration"},
	"bind-latency":    {"run.duration"},
	"informer-jitter": {"run.duration"},
	"expiry-at":       {"run.duration"},
	"burst-interval":  {"run.duration"},
	"duration":        {"run.pods"},
}

// overfullCulprits are the scenario fields behind nodes over-full by their
// pods' requests (setup): the node shape, then the pod mix.
var overfullCulprits = []string{"cluster.allocatable", "podMix", "cluster.nodes"}

// related are, for a setting, the other flags its checks depend on: given
// on the command line, they are named with a fault of the setting.
var related = map[string][]string{
	"initial-pods":  {"nodes"},
	"zones":         {"nodes"},
	"sample":        {"nodes"},
	"confirm-delay": {"duration"},
	"decision-time": {"duration"},
	"audit-every":   {"duration"},
}

// blame turns a *UsageError about a setting (its flag's name) into an error
// naming what the user wrote: the flag when given on the command line;
// else the scenario's field, at its line, when the scenario gives it; else,
// when the setting keeps its default, the scenario field that made it
// wrong (culprits: a preset's nodes of 10 pods blame cluster.allocatable.pods,
// not -pods-per-node, which the user never gave); else the flag. Other
// errors are returned as they are.
func (c *Config) blame(err error) error {
	return c.blameWith(err, nil)
}

// blameWith is blame with the culprits of a default setting given (nil:
// those of culprits).
func (c *Config) blameWith(err error, cs []string) error {
	var ue *UsageError
	if c.origins == nil || !errors.As(err, &ue) {
		return err
	}
	o, f := c.origins, ue.Flag
	msg := ue.Msg
	var notes []string
	if _, ok := o.flags[f]; !ok {
		for _, r := range related[f] {
			if v, ok := o.flags[r]; ok {
				notes = append(notes, fmt.Sprintf("-%s %s given on the command line", r, v))
			}
		}
	}
	if cs == nil {
		cs = culprits[f]
	}
	field, hasField := scenarioField[f]
	if _, ok := o.flags[f]; ok || o.sc == nil {
		// The user's flag, or no scenario: the flag is at fault. The
		// scenario fields it meets are named.
		if o.sc != nil {
			for _, cf := range cs {
				if line, given := nodeLine(o.sc.doc, cf); given {
					notes = append(notes, fmt.Sprintf("%s of %s", cf, o.sc.where(line)))
					break
				}
			}
		}
		return &UsageError{Flag: f, Msg: withNotes(msg, notes)}
	}
	if !hasField {
		field = f // a field of the shape (shape.go)
	}
	if _, given := nodeLine(o.sc.doc, field); given || !hasField {
		return o.sc.errorAt(field, "%s", withNotes(msg, notes))
	}
	// The setting keeps its default: the scenario field that bears on it
	// is at fault.
	def := "its default"
	if d := defaultValue(f); d != "" {
		def = "its default " + d
	}
	notes = append([]string{fmt.Sprintf("%s is not given: %s", field, def)}, notes...)
	for _, cf := range cs {
		if _, given := nodeLine(o.sc.doc, cf); given {
			return o.sc.errorAt(cf, "%s", withNotes(msg, notes))
		}
	}
	return o.sc.errorAt(field, "%s", withNotes(msg, notes))
}

// withNotes appends notes to msg in parentheses.
func withNotes(msg string, notes []string) string {
	if len(notes) == 0 {
		return msg
	}
	return msg + " (" + strings.Join(notes, "; ") + ")"
}

// defaultValue is the default of flag name, as -h shows it ("" if none).
func defaultValue(name string) string {
	cfg := defaultConfig()
	if f := flagSet(&cfg, io.Discard).Lookup(name); f != nil {
		return f.DefValue
	}
	return ""
}

// where names line of the scenario: FILE:LINE (the file alone when line
// is 0).
func (sc *Scenario) where(line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", sc.source, line)
	}
	return sc.source
}

// overfull is the error of a cluster with over of its nodes over-full at
// start by their pods' requests (first: the first of them), naming the
// setting of the initial pods or the scenario's node shape or pod mix.
func (c *Config) overfull(over int, first string) error {
	f, what := "pods-per-node", fmt.Sprintf("%d pods per node at start", c.PodsPerNode)
	if c.InitialPods > 0 {
		f, what = "initial-pods", fmt.Sprintf("%d pods at start", c.InitialPods)
	}
	return c.blameWith(bad(f, "%s over-fill %d of %d nodes (first: %s)", what, over, c.Nodes, first), overfullCulprits)
}
