package anchor

import (
	"errors"
	"fmt"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/schedcache/schedcache/bench/schedconfig"
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

// DefaultConfig is kube-scheduler's configuration when given none
// (schedconfig.Default: the v1 defaults, default-scheduler, adaptive
// percentageOfNodesToScore, parallelism 16). scheduler_perf starts from
// the same (newDefaultComponentConfig).
func DefaultConfig() (*config.KubeSchedulerConfiguration, error) {
	cfg, err := schedconfig.Default()
	if err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	return cfg, nil
}

// LoadConfigFile reads a KubeSchedulerConfiguration file as kube-scheduler
// does (schedconfig.Read: upstream's scheme decodes and defaults it,
// upstream's validation checks it), then checks what the anchor needs. A
// refusal is a *ConfigError naming the file.
func LoadConfigFile(path string) (*config.KubeSchedulerConfiguration, error) {
	cfg, err := schedconfig.LoadFile(path)
	if se := (*schedconfig.Error)(nil); errors.As(err, &se) {
		return nil, &ConfigError{Source: se.Source, Err: se.Err}
	}
	if err != nil {
		return nil, &ConfigError{Source: path, Err: err}
	}
	if err := validateConfig(cfg); err != nil {
		return nil, &ConfigError{Source: path, Err: err}
	}
	return cfg, nil
}

// validateConfig is upstream's validation, plus what the anchor needs.
func validateConfig(cfg *config.KubeSchedulerConfiguration) error {
	if err := schedconfig.Validate(cfg); err != nil {
		return err
	}
	for _, p := range cfg.Profiles {
		if p.SchedulerName == "default-scheduler" {
			return nil
		}
	}
	return errors.New(`no profile is named "default-scheduler", the workloads' schedulerName`)
}
