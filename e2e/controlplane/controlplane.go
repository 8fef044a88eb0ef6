// Package controlplane starts a real Kubernetes control plane inside a test
// process: an embedded etcd (go.etcd.io/etcd/server/v3/embed) and a real
// kube-apiserver built from k8s.io/kubernetes v1.37.2's sources (the
// cmd/kube-apiserver/app/testing server that upstream's integration tests
// use). Nothing is downloaded or executed: both servers run as goroutines
// of the test binary, on loopback ports chosen at random, with their data
// in the test's temporary directory.
//
// The apiserver authorizes with Node and RBAC (--authorization-mode
// Node,RBAC), as a production cluster does: the admin config (AdminConfig)
// is the apiserver's loopback identity (system:masters), and
// ServiceAccountConfig returns a config authenticated with a real
// ServiceAccount token that RBAC checks. CompactEtcd compacts etcd's
// history, which makes watches resumed from older revisions fail with 410
// Gone (with the watch cache off: Options.DisableWatchCache); a Proxy in
// front of the apiserver cuts a client off and lets it back.
//
// Everything Start starts stops at the test's Cleanup, in reverse order:
// proxies, then the apiserver (it waits until the apiserver's Run
// returns), then the etcd client and etcd.
//
// Start costs a few seconds of CPU (the apiserver installs every built-in
// API and runs its post-start hooks); tests that need independent clusters
// start one each, tests that can share one should.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// Stage names the part of Start that failed.
type Stage string

// The stages of Start.
const (
	StageEtcd       Stage = "etcd"        // starting the embedded etcd
	StageEtcdClient Stage = "etcd client" // the client CompactEtcd uses
	StageAPIServer  Stage = "kube-apiserver"
	StageClient     Stage = "admin client"
)

// StartError reports why Start failed: the stage and the cause.
type StartError struct {
	Stage Stage
	Err   error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("controlplane: starting %s: %v", e.Stage, e.Err)
}
func (e *StartError) Unwrap() error { return e.Err }

// OpError reports a failed ControlPlane operation after Start: the
// operation ("CompactEtcd", "ServiceAccountConfig", ...), the object it
// concerned, and the cause.
type OpError struct {
	Op     string
	Object string
	Err    error
}

func (e *OpError) Error() string {
	if e.Object == "" {
		return fmt.Sprintf("controlplane: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("controlplane: %s %s: %v", e.Op, e.Object, e.Err)
}
func (e *OpError) Unwrap() error { return e.Err }

var (
	// ErrNilTest is returned by Start for a nil testing.TB.
	ErrNilTest = errors.New("controlplane: nil testing.TB")
	// ErrEtcdNotReady is wrapped when etcd does not become ready in time.
	ErrEtcdNotReady = errors.New("embedded etcd not ready")
	// ErrNotAllowed is wrapped by WaitAllowed when access is still denied
	// when its context ends.
	ErrNotAllowed = errors.New("access not allowed")
	// ErrPanic is wrapped when the upstream code Start calls panics.
	ErrPanic = errors.New("panic in upstream code")
	// ErrNilConfig is wrapped by WaitAllowed for a nil config.
	ErrNilConfig = errors.New("nil rest.Config")
)

// Options configures Start. The zero value is a production-like control
// plane: watch cache on, Node,RBAC authorization.
type Options struct {
	// DisableWatchCache starts the apiserver with --watch-cache=false, so
	// that lists and watches are served from etcd. A watch resumed from a
	// revision older than etcd's compaction then fails with 410 Gone at
	// once (with the watch cache on, a watch fails with 410 only once its
	// resource version has left the cache's event window, which holds at
	// least 75 s of events; compaction does not shorten it).
	DisableWatchCache bool
	// APIServerFlags are appended to the kube-apiserver flags (later
	// flags win).
	APIServerFlags []string
	// EtcdReadyTimeout bounds the wait for etcd; 0 means one minute.
	EtcdReadyTimeout time.Duration
}

// ControlPlane is a running etcd and kube-apiserver. Its methods are safe
// for concurrent use.
type ControlPlane struct {
	admin      *rest.Config         // immutable; copied out by AdminConfig
	client     kubernetes.Interface // immutable; the admin clientset
	etcd       *embed.Etcd          // owned: closed at the test's Cleanup
	etcdClient *clientv3.Client     // owned: closed at the test's Cleanup
	etcdURL    string               // immutable
	prefix     string               // immutable: the apiserver's storage prefix in etcd
	proxiesMu  sync.Mutex           // guards proxies
	proxies    []*Proxy             // guarded by proxiesMu; closed at Cleanup
}

// DefaultAPIServerFlags are the flags Start always passes, before
// Options.APIServerFlags.
var DefaultAPIServerFlags = []string{
	// Authorization as in production (the default is AlwaysAllow).
	"--authorization-mode=Node,RBAC",
	// No service-account controller runs here: without this every pod
	// would need its namespace's "default" ServiceAccount to exist.
	"--disable-admission-plugins=ServiceAccount",
	// The loopback address is not a valid endpoint for the kubernetes
	// Service; upstream's integration tests turn the reconciler off too.
	"--endpoint-reconciler-type=none",
	// The peer proxy forwards requests between the apiservers of a
	// mixed-version HA control plane; a single apiserver never uses it.
	// Its client transport reloads a client certificate from files, with
	// a rotation goroutine that outlives the apiserver (it stops only
	// when the garbage collector finds the transport unreachable, which
	// it did not within a minute of a teardown here): one goroutine leak
	// per Start.
	"--feature-gates=UnknownVersionInteroperabilityProxy=false",
}

// Start starts etcd and kube-apiserver for tb and registers their
// shutdown with tb.Cleanup. It returns once the apiserver's /healthz is ok
// and the "default" namespace exists. On error everything started so far
// is stopped by the same Cleanup.
func Start(tb testing.TB, opts Options) (cp *ControlPlane, err error) {
	if tb == nil {
		return nil, ErrNilTest
	}
	tb.Helper()
	stage := StageEtcd
	defer func() {
		if r := recover(); r != nil {
			cp, err = nil, &StartError{Stage: stage, Err: fmt.Errorf("%w: %v", ErrPanic, r)}
		}
	}()
	cp = &ControlPlane{}
	tb.Cleanup(cp.closeProxies) // registered first: runs last, after the apiserver stopped

	if cp.etcd, err = startEtcd(tb, opts.EtcdReadyTimeout); err != nil {
		return nil, &StartError{Stage: stage, Err: err}
	}
	e := cp.etcd
	tb.Cleanup(e.Close)
	cp.etcdURL = "http://" + e.Clients[0].Addr().String()

	stage = StageEtcdClient
	if cp.etcdClient, err = clientv3.New(clientv3.Config{
		Endpoints:   []string{cp.etcdURL},
		DialTimeout: 20 * time.Second,
		Logger:      errorLogger("etcd-client"),
	}); err != nil {
		return nil, &StartError{Stage: stage, Err: err}
	}
	ec := cp.etcdClient
	tb.Cleanup(func() { _ = ec.Close() })

	stage = StageAPIServer
	cp.prefix = path.Join("/", sanitize(tb.Name()), "registry")
	storage := storagebackend.NewDefaultConfig(cp.prefix, nil)
	storage.Transport.ServerList = []string{cp.etcdURL}
	flags := append([]string{}, DefaultAPIServerFlags...)
	if opts.DisableWatchCache {
		flags = append(flags, "--watch-cache=false")
	}
	flags = append(flags, opts.APIServerFlags...)
	instance := kubeapiservertesting.NewDefaultTestServerOptions()
	// The invariant checks scrape the apiserver's metrics at teardown to
	// catch upstream's own regressions; they are not this project's
	// assertions.
	instance.DisableInvariantChecks = true
	server, err := kubeapiservertesting.StartTestServer(tb, instance, flags, storage)
	if err != nil {
		return nil, &StartError{Stage: stage, Err: err}
	}
	// TearDownFn stops the apiserver, waits until its Run returned and
	// closes StartTestServer's own etcd client.
	tb.Cleanup(server.TearDownFn)

	stage = StageClient
	cp.admin = rest.CopyConfig(server.ClientConfig)
	if cp.client, err = kubernetes.NewForConfig(cp.admin); err != nil {
		return nil, &StartError{Stage: stage, Err: err}
	}
	return cp, nil
}

// MustStart is Start that fails tb (t.Fatal) on error.
func MustStart(tb testing.TB, opts Options) *ControlPlane {
	tb.Helper()
	cp, err := Start(tb, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return cp
}

// sanitize makes a test name usable as an etcd key prefix.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, name)
}

// errorLogger is a zap logger that writes errors (and worse) to stderr:
// etcd's info logs would drown the test's output, and a logger bound to
// testing.T would panic when etcd logs after the test returned.
func errorLogger(name string) *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.ErrorLevel)).Named(name)
}

// startEtcd starts a single-member etcd on two free loopback ports, with
// its data in a directory of tb's TempDir. Ports are found by listening
// on port 0 and closing the listener, so another process may take one
// before etcd binds it: a start that fails for that reason is retried on
// new ports.
func startEtcd(tb testing.TB, readyTimeout time.Duration) (*embed.Etcd, error) {
	if readyTimeout <= 0 {
		readyTimeout = time.Minute
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		cfg := embed.NewConfig()
		cfg.Name = "e2e"
		cfg.Dir = tb.TempDir()
		// Tests never restart etcd or keep its data: skip fsync, as
		// upstream's embedded test etcd does.
		cfg.UnsafeNoFsync = true
		clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
		peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(errorLogger("etcd-server"))
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			if isAddrInUse(err) {
				continue
			}
			return nil, err
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, nil
		case err := <-e.Err():
			e.Close()
			return nil, err
		case <-time.After(readyTimeout):
			e.Close()
			return nil, fmt.Errorf("%w after %v", ErrEtcdNotReady, readyTimeout)
		}
	}
	return nil, lastErr
}

func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

// freePorts returns n loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// AdminConfig returns a copy of the admin config: the apiserver's
// loopback identity (group system:masters), straight to the apiserver.
// QPS and Burst are raised (1000/10000) as upstream's test server sets
// them.
func (cp *ControlPlane) AdminConfig() *rest.Config { return rest.CopyConfig(cp.admin) }

// Client returns the admin clientset.
func (cp *ControlPlane) Client() kubernetes.Interface { return cp.client }

// EtcdClient returns the etcd client (owned by the ControlPlane: do not
// close it).
func (cp *ControlPlane) EtcdClient() *clientv3.Client { return cp.etcdClient }

// EtcdPrefix returns the apiserver's key prefix in etcd.
func (cp *ControlPlane) EtcdPrefix() string { return cp.prefix }

// EtcdRevision returns etcd's current revision.
func (cp *ControlPlane) EtcdRevision(ctx context.Context) (int64, error) {
	resp, err := cp.etcdClient.Get(ctx, cp.prefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, &OpError{Op: "EtcdRevision", Err: err}
	}
	return resp.Header.Revision, nil
}

// CompactEtcd compacts etcd's history up to its current revision (and
// waits until the compaction is applied to the backend) and returns that
// revision. Afterwards a watch or list at an older resource version fails
// with 410 Gone where it is served by etcd (every watch with
// Options.DisableWatchCache; with the watch cache on, lists with an exact
// resource version).
func (cp *ControlPlane) CompactEtcd(ctx context.Context) (int64, error) {
	rev, err := cp.EtcdRevision(ctx)
	if err != nil {
		return 0, &OpError{Op: "CompactEtcd", Err: err}
	}
	if _, err := cp.etcdClient.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, &OpError{Op: "CompactEtcd", Object: "revision " + strconv.FormatInt(rev, 10), Err: err}
	}
	return rev, nil
}

// ServiceAccountConfig returns a config authenticated as the ServiceAccount
// namespace/name, straight to the apiserver, with a bound token valid for
// an hour. The namespace and the ServiceAccount are created if missing.
// The account has only what RBAC grants it (GrantClusterRole).
func (cp *ControlPlane) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	key := namespace + "/" + name
	if err := cp.EnsureNamespace(ctx, namespace); err != nil {
		return nil, &OpError{Op: "ServiceAccountConfig", Object: key, Err: err}
	}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cp.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, &OpError{Op: "ServiceAccountConfig", Object: key, Err: err}
	}
	expiry := int64(3600)
	tr, err := cp.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return nil, &OpError{Op: "ServiceAccountConfig", Object: key, Err: err}
	}
	cfg := rest.AnonymousClientConfig(cp.admin) // TLS trust and server name, no credentials
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// EnsureNamespace creates namespace if it does not exist.
func (cp *ControlPlane) EnsureNamespace(ctx context.Context, namespace string) error {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cp.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return &OpError{Op: "EnsureNamespace", Object: namespace, Err: err}
	}
	return nil
}

// GrantClusterRole binds the ClusterRole role (for example
// "system:kube-scheduler", which the apiserver's RBAC bootstrap creates)
// to the ServiceAccount namespace/name, cluster-wide. RBAC applies new
// bindings asynchronously (its informers): use WaitAllowed before relying
// on them.
func (cp *ControlPlane) GrantClusterRole(ctx context.Context, namespace, name, role string) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e:" + role + ":" + namespace + ":" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	if _, err := cp.client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return &OpError{Op: "GrantClusterRole", Object: role + " to " + namespace + "/" + name, Err: err}
	}
	return nil
}

// WaitAllowed polls (SelfSubjectAccessReview, as cfg's identity) until
// attrs are allowed or ctx ends; then it returns an *OpError wrapping
// ErrNotAllowed (and ctx's error).
func WaitAllowed(ctx context.Context, cfg *rest.Config, attrs authorizationv1.ResourceAttributes) error {
	object := attrs.Verb + " " + attrs.Resource
	if cfg == nil {
		return &OpError{Op: "WaitAllowed", Object: object, Err: ErrNilConfig}
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return &OpError{Op: "WaitAllowed", Object: object, Err: err}
	}
	var last error
	for {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
		res, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		switch {
		case err != nil:
			last = err
		case res.Status.Allowed:
			return nil
		default:
			last = fmt.Errorf("%s", res.Status.Reason)
		}
		select {
		case <-ctx.Done():
			return &OpError{Op: "WaitAllowed", Object: object, Err: errors.Join(ErrNotAllowed, last, ctx.Err())}
		case <-time.After(100 * time.Millisecond):
		}
	}
}
