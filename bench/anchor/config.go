package anchor

import (
	"errors"
	"fmt"
	"os"

	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// ErrInvalidConfig is wrapped by every error about the scheduler's
// configuration: one upstream's validation refuses, a file that does not
// decode, or profiles scheduler.New cannot build (an unknown plugin).
var ErrInvalidConfig = errors.New("invalid scheduler configuration")

// ConfigError is a configuration refused. Source names where it came from:
// the file, or "Options.Config".
type ConfigError struct {
	Source string
	Err    error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("anchor: %v (%s): %v", ErrInvalidConfig, e.Source, e.Err)
}

// Unwrap gives ErrInvalidConfig and the cause.
func (e *ConfigError) Unwrap() []error { return []error{ErrInvalidConfig, e.Err} }

// DefaultConfig is kube-scheduler's configuration when given none: an
// empty kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration decoded
// with upstream's scheme, which defaults it (the default profile,
// default-scheduler, with its plugins, weights and arguments;
// percentageOfNodesToScore 0, adaptive; parallelism 16). scheduler_perf
// starts from the same (newDefaultComponentConfig).
func DefaultConfig() (*config.KubeSchedulerConfiguration, error) {
	gvk := configv1.SchemeGroupVersion.WithKind("KubeSchedulerConfiguration")
	cfg := config.KubeSchedulerConfiguration{}
	if _, _, err := scheme.Codecs.UniversalDecoder().Decode(nil, &gvk, &cfg); err != nil {
		return nil, fmt.Errorf("anchor: default configuration: %w", err)
	}
	cfg.TypeMeta.APIVersion = configv1.SchemeGroupVersion.String()
	return &cfg, nil
}

// LoadConfigFile reads a KubeSchedulerConfiguration file as kube-scheduler
// does (upstream's scheme decodes and defaults it) and validates it with
// upstream's validation. A refusal is a *ConfigError naming the file.
func LoadConfigFile(path string) (*config.KubeSchedulerConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{Source: path, Err: err}
	}
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, &ConfigError{Source: path, Err: err}
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, &ConfigError{Source: path, Err: fmt.Errorf("not a KubeSchedulerConfiguration: %s", gvk)}
	}
	cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	if err := validateConfig(cfg); err != nil {
		return nil, &ConfigError{Source: path, Err: err}
	}
	return cfg, nil
}

// validateConfig is upstream's validation, plus what the anchor needs.
func validateConfig(cfg *config.KubeSchedulerConfiguration) error {
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return err
	}
	for _, p := range cfg.Profiles {
		if p.SchedulerName == "default-scheduler" {
			return nil
		}
	}
	return errors.New(`no profile is named "default-scheduler", the workloads' schedulerName`)
}
