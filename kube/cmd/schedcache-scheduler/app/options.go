package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// Defaults of the options.
const (
	DefaultSchedulerName  = "schedcache-scheduler"
	DefaultLeaseName      = "schedcache-scheduler"
	DefaultLeaseNamespace = "kube-system"
	DefaultHTTPAddr       = ":10351"
	DefaultStartupTimeout = time.Minute
)

// Options configure the scheduler. The zero value of a field means its
// default. Plain value; Run does not modify it.
type Options struct {
	// ConfigFile is a KubeSchedulerConfiguration file
	// (kubescheduler.config.k8s.io/v1), read, defaulted and validated as
	// kube-scheduler does. Empty: upstream's defaults with one profile
	// named SchedulerName.
	ConfigFile string
	// Config, when not nil, is used instead of ConfigFile (tests); it is
	// validated as a file's would be.
	Config *config.KubeSchedulerConfiguration
	// SchedulerName names the one profile when there is no
	// configuration (default DefaultSchedulerName).
	SchedulerName string

	// Kubeconfig is a kubeconfig file; empty: the configuration's
	// clientConnection.kubeconfig, else the in-cluster configuration.
	Kubeconfig string
	// Master overrides the kubeconfig's server address.
	Master string
	// RestConfig, when not nil, is used instead of a kubeconfig (tests).
	RestConfig *rest.Config
	// Client, when not nil, is used instead of a client built from the
	// REST configuration (tests with a fake clientset).
	Client clientset.Interface

	// LeaderElect turns leader election on a Lease on (the
	// configuration's leaderElection.leaderElect sets it too; either is
	// enough, NoLeaderElect turns it off).
	LeaderElect   bool
	NoLeaderElect bool
	// LeaseName and LeaseNamespace name the Lease (defaults
	// DefaultLeaseName, DefaultLeaseNamespace). They are never taken from
	// the configuration, whose default would be kube-scheduler's own.
	LeaseName, LeaseNamespace string
	// Identity of this replica in the Lease (default hostname_random).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod override the
	// configuration's leaderElection durations when not zero.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// HTTPAddr serves /healthz, /readyz and /metrics (default
	// DefaultHTTPAddr; "off" serves nothing).
	HTTPAddr string
	// StartupTimeout bounds the wait for the API server and the
	// informers at start (default DefaultStartupTimeout).
	StartupTimeout time.Duration
	// SkipPermissionCheck skips the start-up check that the scheduler's
	// identity may do everything it needs (SelfSubjectAccessReviews).
	SkipPermissionCheck bool
	// PodInitialBackoff and PodMaxBackoff override the configuration's
	// podInitialBackoffSeconds and podMaxBackoffSeconds when not zero:
	// how long an unschedulable pod waits before its next attempt.
	PodInitialBackoff, PodMaxBackoff time.Duration

	// Logger (default klog.Background()).
	Logger klog.Logger
}

// ErrInvalidConfig is wrapped by every *ConfigError.
var ErrInvalidConfig = errors.New("invalid configuration")

// ConfigError is a configuration refused before any work: Source names
// where it came from (a flag, a file, Options.Config). Immutable.
type ConfigError struct {
	Source string
	Err    error
}

func (e *ConfigError) Error() string { return fmt.Sprintf("%s: %v", e.Source, e.Err) }

// Unwrap gives ErrInvalidConfig and the cause.
func (e *ConfigError) Unwrap() []error { return []error{ErrInvalidConfig, e.Err} }

// ErrUsage is ParseFlags' error for -h and bad flags.
var ErrUsage = errors.New("usage")

// ParseFlags parses the command line (without the program name) into
// Options. Errors (bad flags, -h) wrap ErrUsage; usage goes to out.
func ParseFlags(args []string, out io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("schedcache-scheduler", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.ConfigFile, "config", "", "a KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1); empty: upstream's defaults with one profile named -scheduler-name")
	fs.StringVar(&o.SchedulerName, "scheduler-name", DefaultSchedulerName, "the profile's schedulerName when there is no -config: the scheduler binds only pods whose spec.schedulerName it names")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "a kubeconfig file; empty: the configuration's clientConnection.kubeconfig, else the in-cluster configuration")
	fs.StringVar(&o.Master, "master", "", "the API server's address, overriding the kubeconfig's")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader on a Lease before scheduling (also on when the configuration's leaderElection.leaderElect is true)")
	fs.BoolVar(&o.NoLeaderElect, "no-leader-elect", false, "never elect a leader, whatever the configuration says")
	fs.StringVar(&o.LeaseName, "lease-name", DefaultLeaseName, "the leader election Lease's name")
	fs.StringVar(&o.LeaseNamespace, "lease-namespace", DefaultLeaseNamespace, "the leader election Lease's namespace")
	fs.StringVar(&o.Identity, "identity", "", "this replica's identity in the Lease (default the host name and a random suffix)")
	fs.StringVar(&o.HTTPAddr, "http-addr", DefaultHTTPAddr, `address serving /healthz, /readyz and /metrics over HTTP; "off" serves nothing`)
	fs.DurationVar(&o.StartupTimeout, "startup-timeout", DefaultStartupTimeout, "how long to wait at start for the API server and the informers")
	fs.BoolVar(&o.SkipPermissionCheck, "skip-permission-check", false, "skip the start-up check of the permissions the scheduler needs")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", ErrUsage, fs.Args())
	}
	if o.LeaderElect && o.NoLeaderElect {
		return o, fmt.Errorf("%w: -leader-elect and -no-leader-elect together", ErrUsage)
	}
	return o, nil
}

// settings are the options resolved: defaults applied, configuration
// loaded and validated. Immutable after resolve.
type settings struct {
	cfg                        *config.KubeSchedulerConfiguration
	schedulerNames             map[string]bool
	leaderElect                bool
	leaseName, leaseNamespace  string
	identity                   string
	leaseDuration              time.Duration
	renewDeadline              time.Duration
	retryPeriod                time.Duration
	httpAddr                   string
	startupTimeout             time.Duration
	initialBackoff, maxBackoff time.Duration
	logger                     klog.Logger
}

// resolve applies the defaults and loads the configuration; every
// refusal is a *ConfigError.
func (o Options) resolve() (*settings, error) {
	s := &settings{logger: o.Logger, httpAddr: o.HTTPAddr, startupTimeout: o.StartupTimeout,
		leaseName: o.LeaseName, leaseNamespace: o.LeaseNamespace, identity: o.Identity}
	if s.logger.GetSink() == nil {
		s.logger = klog.Background()
	}
	if s.httpAddr == "" {
		s.httpAddr = DefaultHTTPAddr
	}
	if s.startupTimeout == 0 {
		s.startupTimeout = DefaultStartupTimeout
	}
	if s.startupTimeout < 0 {
		return nil, &ConfigError{Source: "-startup-timeout", Err: fmt.Errorf("negative: %v", o.StartupTimeout)}
	}
	if s.leaseName == "" {
		s.leaseName = DefaultLeaseName
	}
	if s.leaseNamespace == "" {
		s.leaseNamespace = DefaultLeaseNamespace
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"LeaseDuration", o.LeaseDuration}, {"RenewDeadline", o.RenewDeadline}, {"RetryPeriod", o.RetryPeriod},
		{"PodInitialBackoff", o.PodInitialBackoff}, {"PodMaxBackoff", o.PodMaxBackoff}} {
		if d.v < 0 {
			return nil, &ConfigError{Source: "Options." + d.name, Err: fmt.Errorf("negative: %v", d.v)}
		}
	}
	cfg, err := o.loadConfig()
	if err != nil {
		return nil, err
	}
	s.cfg = cfg
	s.schedulerNames = map[string]bool{}
	for _, p := range cfg.Profiles {
		s.schedulerNames[p.SchedulerName] = true
	}
	s.leaderElect = (o.LeaderElect || cfg.LeaderElection.LeaderElect) && !o.NoLeaderElect
	s.leaseDuration = pick(o.LeaseDuration, cfg.LeaderElection.LeaseDuration.Duration)
	s.renewDeadline = pick(o.RenewDeadline, cfg.LeaderElection.RenewDeadline.Duration)
	s.retryPeriod = pick(o.RetryPeriod, cfg.LeaderElection.RetryPeriod.Duration)
	if s.leaderElect && (s.leaseDuration <= s.renewDeadline || float64(s.renewDeadline) <= 1.2*float64(s.retryPeriod) || s.retryPeriod <= 0) {
		return nil, &ConfigError{Source: "leaderElection", Err: fmt.Errorf(
			"want leaseDuration > renewDeadline > 1.2 × retryPeriod > 0, got %v, %v, %v", s.leaseDuration, s.renewDeadline, s.retryPeriod)}
	}
	s.initialBackoff = pick(o.PodInitialBackoff, time.Duration(cfg.PodInitialBackoffSeconds)*time.Second)
	s.maxBackoff = pick(o.PodMaxBackoff, time.Duration(cfg.PodMaxBackoffSeconds)*time.Second)
	if s.initialBackoff <= 0 || s.maxBackoff < s.initialBackoff {
		return nil, &ConfigError{Source: "podInitialBackoffSeconds/podMaxBackoffSeconds", Err: fmt.Errorf(
			"want 0 < initial ≤ max, got %v and %v", s.initialBackoff, s.maxBackoff)}
	}
	if s.identity == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "schedcache-scheduler"
		}
		s.identity = host + "_" + randomSuffix()
	}
	return s, nil
}

func pick(override, fromConfig time.Duration) time.Duration {
	if override != 0 {
		return override
	}
	return fromConfig
}

// LoadConfig returns the configuration opts describe (Options.Config,
// Options.ConfigFile, or the defaults), validated as Run validates it; a
// refusal is a *ConfigError.
func LoadConfig(opts Options) (*config.KubeSchedulerConfiguration, error) { return opts.loadConfig() }

// loadConfig returns the configuration: Options.Config, the file, or
// upstream's defaults with one profile named SchedulerName; validated.
func (o Options) loadConfig() (*config.KubeSchedulerConfiguration, error) {
	var cfg *config.KubeSchedulerConfiguration
	source := o.ConfigFile
	switch {
	case o.Config != nil:
		cfg, source = o.Config.DeepCopy(), "Options.Config"
	case o.ConfigFile != "":
		data, err := os.ReadFile(o.ConfigFile)
		if err != nil {
			return nil, &ConfigError{Source: "-config", Err: err}
		}
		obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
		if err != nil {
			return nil, &ConfigError{Source: o.ConfigFile, Err: fmt.Errorf("not a KubeSchedulerConfiguration: %w", err)}
		}
		var ok bool
		if cfg, ok = obj.(*config.KubeSchedulerConfiguration); !ok {
			return nil, &ConfigError{Source: o.ConfigFile, Err: fmt.Errorf("a %s, not a KubeSchedulerConfiguration", gvk)}
		}
		cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	default:
		def, err := latest.Default()
		if err != nil {
			return nil, &ConfigError{Source: "upstream's default configuration", Err: err}
		}
		cfg, source = def, "-scheduler-name"
		name := o.SchedulerName
		if name == "" {
			name = DefaultSchedulerName
		}
		cfg.Profiles[0].SchedulerName = name
		cfg.LeaderElection.LeaderElect = false // on with -leader-elect
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, &ConfigError{Source: source, Err: err}
	}
	if len(cfg.Extenders) > 0 {
		return nil, &ConfigError{Source: source, Err: errors.New("extenders are not supported")}
	}
	for _, p := range cfg.Profiles {
		if p.SchedulerName == v1.DefaultSchedulerName {
			return nil, &ConfigError{Source: source, Err: fmt.Errorf(
				"profile %q is the default scheduler's name: this scheduler runs beside kube-scheduler; name its profiles otherwise (pods choose it with spec.schedulerName)",
				v1.DefaultSchedulerName)}
		}
	}
	return cfg, nil
}

// restConfig is the REST configuration: Options.RestConfig, a kubeconfig
// (flag, then the configuration's), or in-cluster. A refusal is a
// *ConfigError naming the source.
func (o Options) restConfig(cfg *config.KubeSchedulerConfiguration) (*rest.Config, error) {
	if o.RestConfig != nil {
		return rest.CopyConfig(o.RestConfig), nil
	}
	path, source := o.Kubeconfig, "-kubeconfig"
	if path == "" && cfg.ClientConnection.Kubeconfig != "" {
		path, source = cfg.ClientConnection.Kubeconfig, "clientConnection.kubeconfig"
	}
	if path == "" && o.Master == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, &ConfigError{Source: "in-cluster configuration", Err: fmt.Errorf(
				"%w (outside a cluster, give -kubeconfig)", err)}
		}
		return withConnection(rc, cfg), nil
	}
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, &ConfigError{Source: source, Err: err}
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags(o.Master, path)
	if err != nil {
		return nil, &ConfigError{Source: source, Err: fmt.Errorf("kubeconfig %q: %w", path, err)}
	}
	return withConnection(rc, cfg), nil
}

// withConnection applies the configuration's clientConnection (QPS,
// burst, content type) as kube-scheduler does.
func withConnection(rc *rest.Config, cfg *config.KubeSchedulerConfiguration) *rest.Config {
	cc := cfg.ClientConnection
	if cc.QPS != 0 {
		rc.QPS = cc.QPS
	}
	if cc.Burst != 0 {
		rc.Burst = int(cc.Burst)
	}
	if cc.ContentType != "" {
		rc.ContentType = cc.ContentType
	}
	if cc.AcceptContentTypes != "" {
		rc.AcceptContentTypes = cc.AcceptContentTypes
	}
	rc.UserAgent = strings.TrimSpace(DefaultSchedulerName + " " + rest.DefaultKubernetesUserAgent())
	return rc
}
