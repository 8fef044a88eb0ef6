package sim

import (
	"fmt"
	"io"
	"strings"
)

// Counting is implemented by a NodePicker that counts what it does
// besides its rejections (a memo's hits and misses, say). After the
// schedulers have stopped, the run sums each counter, by name, over its
// node pickers and reports the sums in the order the first picker gives
// them. Counters is called from the run's main goroutine only.
type Counting interface {
	Counters() []PickerCounter
}

// PickerCounter is a plain value: one named count of a node picker.
type PickerCounter struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// counters sums the counters of the node pickers that count.
func (sp *schedPickers) counters() []PickerCounter {
	var out []PickerCounter
	at := map[string]int{}
	for _, np := range sp.pickers {
		c, ok := np.(Counting)
		if !ok {
			continue
		}
		for _, pc := range c.Counters() {
			i, seen := at[pc.Name]
			if !seen {
				i = len(out)
				at[pc.Name] = i
				out = append(out, PickerCounter{Name: pc.Name})
			}
			out[i].Value += pc.Value
		}
	}
	return out
}

// printCounters writes the picker's counters line of the text report.
func (r *Report) printCounters(w io.Writer) {
	if len(r.PickerCounters) == 0 {
		return
	}
	parts := make([]string, len(r.PickerCounters))
	for i, c := range r.PickerCounters {
		parts[i] = fmt.Sprintf("%s %d", c.Name, c.Value)
	}
	fmt.Fprintf(w, "counters:  %s\n", strings.Join(parts, ", "))
}
