package sim

import (
	"flag"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// usageHint ends the message of a flag the parser refused.
const usageHint = "run loadgen -h for usage"

// The flag package's parse errors.
var (
	flagBadValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): (.*)$`)
	flagUnknown  = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	flagNoValue  = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// flagError turns an error of fs.Parse into one line: a *UsageError
// naming the flag, what is wrong and what it wants, and a hint to -h (the
// flag package would print the whole usage, about 100 lines).
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		value, name, cause := m[1], m[2], m[3]
		want := wantOf(fs.Lookup(name))
		switch {
		case cause == "value out of range" && want != "":
			cause = "out of range for " + want
		case (cause == "parse error" || strings.HasPrefix(cause, "strconv.") || strings.HasPrefix(cause, "time: ")) && want != "":
			cause = "want " + want
		}
		return &UsageError{Flag: name, Msg: fmt.Sprintf("invalid value %q: %s; %s", value, cause, usageHint)}
	}
	if m := flagUnknown.FindStringSubmatch(msg); m != nil {
		return &UsageError{Flag: m[1], Msg: fmt.Sprintf("no such flag%s; %s", suggestFlag(fs, m[1]), usageHint)}
	}
	if m := flagNoValue.FindStringSubmatch(msg); m != nil {
		want := wantOf(fs.Lookup(m[1]))
		if want == "" {
			want = "a value"
		}
		return &UsageError{Flag: m[1], Msg: fmt.Sprintf("needs %s; %s", want, usageHint)}
	}
	return fmt.Errorf("%w: %v; %s", ErrUsage, err, usageHint)
}

// wantOf says what flag f takes ("" when unknown).
func wantOf(f *flag.Flag) string {
	if f == nil {
		return ""
	}
	g, ok := f.Value.(flag.Getter)
	if !ok || g.Get() == nil {
		return ""
	}
	switch v := g.Get(); reflect.TypeOf(v) {
	case reflect.TypeFor[time.Duration]():
		return "a duration (like 5s, 250ms, 100us)"
	default:
		switch reflect.TypeOf(v).Kind() {
		case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
			return "an integer"
		case reflect.Float64:
			return "a number"
		case reflect.Bool:
			return "true or false"
		}
	}
	return ""
}

// suggestFlag names the flags closest to name (", did you mean -x?"): those
// at the least edit distance, at most 2, else those it begins; "" when
// none or more than 3.
func suggestFlag(fs *flag.FlagSet, name string) string {
	best, byDist, byPrefix := 3, []string(nil), []string(nil)
	fs.VisitAll(func(f *flag.Flag) {
		switch d := editDistance(f.Name, name); {
		case d < best:
			best, byDist = d, []string{"-" + f.Name}
		case d == best:
			byDist = append(byDist, "-"+f.Name)
		}
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			byPrefix = append(byPrefix, "-"+f.Name)
		}
	})
	close := byDist
	if best > 2 {
		close = byPrefix
	}
	if len(close) == 0 || len(close) > 3 {
		return ""
	}
	return ", did you mean " + strings.Join(close, " or ") + "?"
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
