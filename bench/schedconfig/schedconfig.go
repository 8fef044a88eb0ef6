// Package schedconfig reads a KubeSchedulerConfiguration as kube-scheduler
// does: upstream's scheme decodes it (strictly: an unknown field is an
// error), converts it to the internal type and applies the v1 defaults;
// upstream's validation checks it. It is the one place the bench module
// does so: bench/anchor (the real kube-scheduler) and bench/fwkpick (the
// simulator's real-plugin picker) both read their files here.
package schedconfig

import (
	"errors"
	"fmt"
	"os"
	"reflect"

	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// ErrInvalid is wrapped by every refusal of this package.
var ErrInvalid = errors.New("invalid scheduler configuration")

// Error is a configuration refused. Source names where it came from (the
// file's path, or what the caller calls an in-memory configuration).
type Error struct {
	Source string
	Err    error
}

func (e *Error) Error() string { return fmt.Sprintf("%v (%s): %v", ErrInvalid, e.Source, e.Err) }

// Unwrap gives ErrInvalid and the cause.
func (e *Error) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// File is a plain value: a configuration file read, defaulted and
// validated.
type File struct {
	// Path is the file's path as given.
	Path string
	// Config is the internal configuration upstream's scheme made of
	// the file, defaulted.
	Config *config.KubeSchedulerConfiguration
	// Written lists, per profile (in Config.Profiles' order), the plugin
	// names the file itself enables at any extension point, multiPoint
	// included, before the defaults are merged in: what the file asks
	// for, as opposed to what upstream's defaults add. Nil for a
	// profile the defaults made (a file with no profiles).
	Written [][]string
}

// Default is kube-scheduler's configuration when given none: an empty v1
// KubeSchedulerConfiguration decoded with upstream's scheme, which
// defaults it (one profile, default-scheduler, with the default plugins,
// weights and arguments; percentageOfNodesToScore 0, adaptive;
// parallelism 16). scheduler_perf starts from the same.
func Default() (*config.KubeSchedulerConfiguration, error) {
	gvk := configv1.SchemeGroupVersion.WithKind("KubeSchedulerConfiguration")
	cfg := config.KubeSchedulerConfiguration{}
	if _, _, err := scheme.Codecs.UniversalDecoder().Decode(nil, &gvk, &cfg); err != nil {
		return nil, fmt.Errorf("schedconfig: default configuration: %w", err)
	}
	cfg.TypeMeta.APIVersion = configv1.SchemeGroupVersion.String()
	return &cfg, nil
}

// LoadFile is Read's configuration.
func LoadFile(path string) (*config.KubeSchedulerConfiguration, error) {
	f, err := Read(path)
	if err != nil {
		return nil, err
	}
	return f.Config, nil
}

// Read reads the file at path as kube-scheduler's --config does
// (cmd/kube-scheduler/app/options' loadConfig: upstream's universal
// decoder, which converts and defaults) and validates it with upstream's
// ValidateKubeSchedulerConfiguration. A refusal is an *Error naming the
// file, with upstream's message.
func Read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Source: path, Err: err}
	}
	return Decode(data, path)
}

// Decode is Read of data, named source in its errors.
func Decode(data []byte, source string) (*File, error) {
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, &Error{Source: source, Err: err}
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, &Error{Source: source, Err: fmt.Errorf("not a KubeSchedulerConfiguration: %s", gvk)}
	}
	cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	if err := Validate(cfg); err != nil {
		return nil, &Error{Source: source, Err: err}
	}
	f := &File{Path: source, Config: cfg}
	// The same bytes, not defaulted: what the file itself names. The
	// universal decoder accepted them, so this decodes too; v1 is the
	// only version the scheme serves.
	raw, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, &Error{Source: source, Err: err}
	}
	if v, ok := raw.(*configv1.KubeSchedulerConfiguration); ok && len(v.Profiles) == len(cfg.Profiles) {
		f.Written = make([][]string, len(v.Profiles))
		for i, p := range v.Profiles {
			if p.Plugins != nil {
				f.Written[i] = enabledNames(reflect.ValueOf(*p.Plugins))
			}
		}
	}
	return f, nil
}

// Validate is upstream's validation of a configuration.
func Validate(cfg *config.KubeSchedulerConfiguration) error {
	return validation.ValidateKubeSchedulerConfiguration(cfg)
}

// enabledNames lists the names enabled in every PluginSet field of
// plugins (a v1 or internal Plugins value), each once, in field order.
func enabledNames(plugins reflect.Value) []string {
	var out []string
	seen := map[string]bool{}
	for i := range plugins.NumField() {
		enabled := plugins.Field(i).FieldByName("Enabled")
		if !enabled.IsValid() {
			continue
		}
		for j := range enabled.Len() {
			name := enabled.Index(j).FieldByName("Name").String()
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// PluginSets returns each extension point's PluginSet of p (pointers into
// p), keyed by the field's name ("MultiPoint", "Filter", …), in the
// type's field order.
func PluginSets(p *config.Plugins) []NamedSet {
	v := reflect.ValueOf(p).Elem()
	var out []NamedSet
	for i := range v.NumField() {
		if set, ok := v.Field(i).Addr().Interface().(*config.PluginSet); ok {
			out = append(out, NamedSet{Point: v.Type().Field(i).Name, Set: set})
		}
	}
	return out
}

// NamedSet is one extension point's plugins in a profile.
type NamedSet struct {
	Point string            // the config.Plugins field: "MultiPoint", "Filter", …
	Set   *config.PluginSet // points into the profile
}
