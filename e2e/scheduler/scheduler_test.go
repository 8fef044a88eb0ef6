package scheduler_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache/e2e/controlplane"
	"github.com/schedcache/schedcache/e2e/internal/leak"
	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/kube/cmd/schedcache-scheduler/app"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock in the cache fails in seconds, with every goroutine's stack
	leak.VerifyTestMain(m)
}

// Deadlines of the polling waits: generous, since CI's 2 cores also run
// the apiserver and etcd under the race detector. Nothing asserts a
// duration.
const (
	convergeTimeout = 3 * time.Minute
	pollInterval    = 200 * time.Millisecond
	testTimeout     = 10 * time.Minute
)

// deployDir holds the shipped manifests, from this package's directory.
const deployDir = "../../deploy"

// The ServiceAccount of deploy/rbac.yaml.
const (
	saNamespace = "kube-system"
	saName      = "schedcache-scheduler"
)

// namespace of the test pods.
const namespace = "default"

// testContext is a context bound to the test: cancelled at its end, and
// after testTimeout at the latest.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond, on the test's goroutine, until it holds; it
// fails the test after convergeTimeout.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: %v", what, convergeTimeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// decode reads every object of a deploy/ file.
func decode(t *testing.T, name string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, name))
	require.NoError(t, err)
	objs, err := app.DecodeManifests(data)
	require.NoError(t, err, name)
	return objs
}

// applyRBAC creates deploy/rbac.yaml's objects as the admin, and
// nothing else: the ServiceAccount has only what the file grants (and
// what every authenticated identity has: discovery, self reviews).
func applyRBAC(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane) {
	t.Helper()
	admin := cp.Client()
	for _, obj := range decode(t, "rbac.yaml") {
		var err error
		switch o := obj.(type) {
		case *v1.ServiceAccount:
			// The apiserver creates kube-system in a post-start hook,
			// which Start does not wait for.
			require.NoError(t, cp.EnsureNamespace(ctx, o.Namespace))
			_, err = admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			require.NoError(t, cp.EnsureNamespace(ctx, o.Namespace))
			_, err = admin.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			require.NoError(t, cp.EnsureNamespace(ctx, o.Namespace))
			_, err = admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected %T in rbac.yaml", obj)
		}
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
}

// configFile writes deploy/config.yaml's KubeSchedulerConfiguration (its
// ConfigMap's data) to a file and returns its path.
func configFile(t *testing.T) string {
	t.Helper()
	objs := decode(t, "config.yaml")
	require.Len(t, objs, 1)
	cm, ok := objs[0].(*v1.ConfigMap)
	require.True(t, ok, "config.yaml holds a %T", objs[0])
	data, ok := cm.Data["config.yaml"]
	require.True(t, ok, "config.yaml's ConfigMap has no config.yaml key")
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	return p
}

// addNode creates a ready node with cpu CPUs, without the not-ready taint
// the apiserver's admission gives new nodes (no node controller runs to
// take it off).
func addNode(t *testing.T, ctx context.Context, admin kubernetes.Interface, name, cpu string) {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{v1.LabelHostname: name}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	n.Spec.Taints = nil
	n, err = admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	resources := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}
	n.Status = v1.NodeStatus{
		Capacity:    resources,
		Allocatable: resources,
		Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
	}
	_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// addPod creates a pod asking for half a CPU, for the scheduler named
// scheduler.
func addPod(t *testing.T, ctx context.Context, admin kubernetes.Interface, name, scheduler string) *v1.Pod {
	t.Helper()
	p, err := admin.CoreV1().Pods(namespace).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1.PodSpec{SchedulerName: scheduler, Containers: []v1.Container{{Name: "c", Image: "pause",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	return p
}

// nodeOf is the pod's spec.nodeName on the server.
func nodeOf(t *testing.T, ctx context.Context, admin kubernetes.Interface, name string) string {
	t.Helper()
	p, err := admin.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	return p.Spec.NodeName
}

// replica is one scheduler running in process, as the Deployment's
// container runs it (deploy/config.yaml, leader election on), with short
// leader election durations.
type replica struct {
	sc     *app.Scheduler     // immutable
	cancel context.CancelFunc // immutable: stops Run
	done   chan error         // immutable: receives Run's result, once
	once   sync.Once          // guards err
	err    error              // Run's result; written under once
}

// stop ends Run and returns its result; it may be called again.
func (r *replica) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}

// exited reports whether Run has returned by itself.
func (r *replica) exited() (bool, error) {
	select {
	case err := <-r.done:
		r.done <- err // for stop
		return true, err
	default:
		return false, nil
	}
}

func startReplica(t *testing.T, ctx context.Context, cfg *rest.Config, id string) *replica {
	t.Helper()
	rctx, cancel := context.WithCancel(ctx)
	sc, err := app.New(rctx, app.Options{RestConfig: cfg, ConfigFile: configFile(t), Identity: id, HTTPAddr: "127.0.0.1:0",
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 200 * time.Millisecond,
		PodInitialBackoff: 50 * time.Millisecond, PodMaxBackoff: time.Second, Logger: klog.Background().WithName(id)})
	if err != nil {
		cancel()
		t.Fatalf("app.New %s: %v", id, err)
	}
	r := &replica{sc: sc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- sc.Run(rctx) }() // owned by the replica: stop waits for it
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// TestScheduler runs schedcache-scheduler as the ServiceAccount of
// deploy/rbac.yaml, with exactly that file's rules applied, on one
// control plane for its subtests, which run in order.
func TestScheduler(t *testing.T) {
	ctx := testContext(t)
	cp := controlplane.MustStart(t, controlplane.Options{})
	admin := cp.Client()

	// Without the shipped RBAC, the start-up check names every missing
	// permission; bad credentials are named as such.
	t.Run("refused identity", func(t *testing.T) {
		bare, err := cp.ServiceAccountConfig(ctx, saNamespace, "nobody")
		require.NoError(t, err)
		_, err = app.New(ctx, app.Options{RestConfig: bare, HTTPAddr: "off", LeaderElect: true})
		var pe *app.PermissionError
		require.ErrorAs(t, err, &pe)
		require.ErrorIs(t, err, app.ErrForbidden)
		require.Len(t, pe.Missing, len(app.RequiredPermissions(app.DefaultLeaseNamespace, app.DefaultLeaseName, true)))

		bad := rest.AnonymousClientConfig(cp.AdminConfig())
		bad.BearerToken = "not-a-token"
		_, err = app.New(ctx, app.Options{RestConfig: bad, HTTPAddr: "off", StartupTimeout: 30 * time.Second})
		require.ErrorIs(t, err, app.ErrUnauthorized)
	})

	applyRBAC(t, ctx, cp)
	sa, err := cp.ServiceAccountConfig(ctx, saNamespace, saName)
	require.NoError(t, err)
	// RBAC applies bindings through its informers: wait until the
	// Role's and the ClusterRole's rules are in force before the
	// start-up check asks.
	require.NoError(t, controlplane.WaitAllowed(ctx, sa, authorizationv1.ResourceAttributes{
		Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: app.DefaultLeaseNamespace, Name: app.DefaultLeaseName}))
	require.NoError(t, controlplane.WaitAllowed(ctx, sa, authorizationv1.ResourceAttributes{
		Verb: "create", Resource: "pods", Subresource: "binding", Namespace: namespace}))
	addNode(t, ctx, admin, "n1", "2")
	addNode(t, ctx, admin, "n2", "2")

	// The shipped RBAC is enough: two replicas authenticated as the
	// ServiceAccount bind the pods naming them, leave other schedulers'
	// pods alone, elect one leader, and the second takes over when the
	// first stops (releasing the Lease).
	t.Run("deployed: binds its pods, standby takes over", func(t *testing.T) {
		addPod(t, ctx, admin, "mine-1", app.DefaultSchedulerName)
		addPod(t, ctx, admin, "mine-2", app.DefaultSchedulerName)
		addPod(t, ctx, admin, "theirs", v1.DefaultSchedulerName)
		addPod(t, ctx, admin, "other", "other-scheduler")

		r1, r2 := startReplica(t, ctx, sa, "r1"), startReplica(t, ctx, sa, "r2")
		eventually(t, ctx, "mine-1 and mine-2 bound", func() bool {
			return nodeOf(t, ctx, admin, "mine-1") != "" && nodeOf(t, ctx, admin, "mine-2") != ""
		})
		var leader, standby *replica
		eventually(t, ctx, "one leader", func() bool {
			switch l1, l2 := r1.sc.Leading(), r2.sc.Leading(); {
			case l1 && !l2:
				leader, standby = r1, r2
			case l2 && !l1:
				leader, standby = r2, r1
			default:
				return false
			}
			return true
		})
		lease, err := admin.CoordinationV1().Leases(app.DefaultLeaseNamespace).Get(ctx, app.DefaultLeaseName, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, lease.Spec.HolderIdentity)
		require.Equal(t, leader.sc.Identity(), *lease.Spec.HolderIdentity)

		// The leader stops (and releases the Lease); the other takes over
		// and binds a new pod.
		require.NoError(t, leader.stop())
		eventually(t, ctx, "the standby leads", standby.sc.Leading)
		addPod(t, ctx, admin, "mine-3", app.DefaultSchedulerName)
		eventually(t, ctx, "mine-3 bound", func() bool { return nodeOf(t, ctx, admin, "mine-3") != "" })

		// Other schedulers' pods were left alone throughout.
		require.Empty(t, nodeOf(t, ctx, admin, "theirs"))
		require.Empty(t, nodeOf(t, ctx, admin, "other"))
		require.NoError(t, standby.stop())
	})

	// A replica whose connection is cut off keeps running and keeps its
	// cache; once the connection is back it leads again and binds the pod
	// created meanwhile, without a restart.
	t.Run("connection loss: cache kept, binding resumes", func(t *testing.T) {
		proxy := cp.MustNewProxy(t)
		r := startReplica(t, ctx, proxy.Config(sa), "r3")
		before := addPod(t, ctx, admin, "before", app.DefaultSchedulerName)
		eventually(t, ctx, "before bound", func() bool { return nodeOf(t, ctx, admin, "before") != "" })
		eventually(t, ctx, "r3 leads", r.sc.Leading)

		require.NoError(t, proxy.Cut())
		addPod(t, ctx, admin, "during", app.DefaultSchedulerName)
		// Cut off, the replica cannot renew the Lease: it stops
		// scheduling, and keeps running with its cache.
		eventually(t, ctx, "r3 stops leading while cut off", func() bool { return !r.sc.Leading() })
		st := r.sc.Cache().Stats()
		require.Equal(t, 2, st.Nodes, "the cache keeps its nodes while cut off")
		_, err := r.sc.Cache().GetPod(before)
		require.NoError(t, err, "the cache keeps its pods while cut off")
		exited, err := r.exited()
		require.False(t, exited, "the scheduler stopped while cut off: %v", err)
		require.Empty(t, nodeOf(t, ctx, admin, "during"))

		require.NoError(t, proxy.Restore())
		eventually(t, ctx, "during bound after the restore", func() bool { return nodeOf(t, ctx, admin, "during") != "" })
		exited, err = r.exited()
		require.False(t, exited, "the scheduler stopped: %v", err)
		require.Positive(t, proxy.Stats().Cuts)
		require.NoError(t, r.stop())
	})
}
