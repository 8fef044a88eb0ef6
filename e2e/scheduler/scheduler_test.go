package scheduler_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
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
func addNode(t *testing.T, ctx context.Context, admin kubernetes.Interface, name, cpu string, labels ...string) {
	t.Helper()
	l := map[string]string{v1.LabelHostname: name}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	n, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{})
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

	// A pod no node fits gets upstream's PodScheduled=False condition
	// (reason Unschedulable, the fit error's message) through the status
	// subresource and a FailedScheduling event, then waits in the
	// unschedulable pool: the addition of a node it fits on moves it
	// back (NodeResourcesFit's queueing hint) and it is bound, long
	// before the 5-minute flush would have moved it.
	t.Run("unschedulable: condition, event, requeued by a new node", func(t *testing.T) {
		r := startReplica(t, ctx, sa, "r4")
		eventually(t, ctx, "r4 leads", r.sc.Leading)
		wide, err := admin.CoreV1().Pods(namespace).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "wide", Namespace: namespace},
			Spec: v1.PodSpec{SchedulerName: app.DefaultSchedulerName, Containers: []v1.Container{{Name: "c", Image: "pause",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		var cond *v1.PodCondition
		eventually(t, ctx, "wide has PodScheduled=False", func() bool {
			cond = scheduledCondition(t, ctx, admin, "wide")
			return cond != nil && cond.Status == v1.ConditionFalse
		})
		require.Equal(t, v1.PodReasonUnschedulable, cond.Reason)
		require.True(t, strings.HasPrefix(cond.Message, "0/2 nodes are available: 2 Insufficient cpu."), cond.Message)
		eventually(t, ctx, "a FailedScheduling event for wide", func() bool {
			evs, err := admin.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			for _, e := range evs.Items {
				if e.Regarding.UID == wide.UID && e.Reason == "FailedScheduling" && strings.HasPrefix(e.Note, "0/2 nodes are available") {
					return true
				}
			}
			return false
		})
		eventually(t, ctx, "wide parked", func() bool { return metric(t, r, "schedcache_scheduler_unschedulable_pods") == 1 })
		require.Zero(t, metricPrefix(t, r, `schedcache_scheduler_unschedulable_moves_total{event="Node`))
		require.Empty(t, nodeOf(t, ctx, admin, "wide"))

		addNode(t, ctx, admin, "n3", "4")
		eventually(t, ctx, "wide bound on n3", func() bool { return nodeOf(t, ctx, admin, "wide") == "n3" })
		require.Positive(t, metricPrefix(t, r, `schedcache_scheduler_unschedulable_moves_total{event="Node`),
			"a node event moved wide back to the queue")
		require.Zero(t, metric(t, r, `schedcache_scheduler_unschedulable_moves_total{event="UnschedulableTimeout"}`),
			"not the periodic flush")
		require.NoError(t, r.stop())
	})

	// A full pool of nodes: a high-priority pod of this scheduler
	// preempts. Of two candidate nodes, each with one low-priority pod,
	// DefaultPreemption picks the one whose victim no PodDisruptionBudget
	// protects; the victim gets the DisruptionTarget condition and is
	// deleted through the API (a finalizer holds it here, so that the
	// test sees it terminating), the pod is nominated to that node, and
	// once the victim is gone the pod is bound there.
	t.Run("preemption: PDB respected, victim evicted, preemptor bound", func(t *testing.T) {
		for name, value := range map[string]int32{"low": 10, "high": 1000} {
			_, err := admin.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		addNode(t, ctx, admin, "p1", "2", "pool", "preempt")
		addNode(t, ctx, admin, "p2", "2", "pool", "preempt")
		zero, grace := intstr.FromInt32(0), int64(0)
		_, err := admin.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "protected", Namespace: namespace},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "protected"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		onNode := func(name, node string, labels map[string]string, finalizers ...string) {
			_, err := admin.CoreV1().Pods(namespace).Create(ctx, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Finalizers: finalizers},
				Spec: v1.PodSpec{NodeName: node, PriorityClassName: "low", TerminationGracePeriodSeconds: &grace,
					Containers: []v1.Container{{Name: "c", Image: "pause",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}}}}},
				metav1.CreateOptions{})
			require.NoError(t, err)
		}
		onNode("keep", "p1", map[string]string{"app": "protected"})
		onNode("evict", "p2", nil, "schedcache.test/hold")

		r := startReplica(t, ctx, sa, "r5")
		eventually(t, ctx, "r5 leads", r.sc.Leading)
		_, err = admin.CoreV1().Pods(namespace).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "urgent", Namespace: namespace},
			Spec: v1.PodSpec{SchedulerName: app.DefaultSchedulerName, PriorityClassName: "high",
				NodeSelector: map[string]string{"pool": "preempt"},
				Containers: []v1.Container{{Name: "c", Image: "pause",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)

		var victim *v1.Pod
		eventually(t, ctx, "evict terminating", func() bool {
			victim, err = admin.CoreV1().Pods(namespace).Get(ctx, "evict", metav1.GetOptions{})
			require.NoError(t, err)
			return victim.DeletionTimestamp != nil
		})
		var disruption *v1.PodCondition
		for i := range victim.Status.Conditions {
			if victim.Status.Conditions[i].Type == v1.DisruptionTarget {
				disruption = &victim.Status.Conditions[i]
			}
		}
		require.NotNil(t, disruption, "the victim's conditions: %+v", victim.Status.Conditions)
		require.Equal(t, v1.ConditionTrue, disruption.Status)
		require.Equal(t, v1.PodReasonPreemptionByScheduler, disruption.Reason)
		eventually(t, ctx, "urgent nominated to p2", func() bool {
			p, err := admin.CoreV1().Pods(namespace).Get(ctx, "urgent", metav1.GetOptions{})
			require.NoError(t, err)
			return p.Status.NominatedNodeName == "p2"
		})
		cond := scheduledCondition(t, ctx, admin, "urgent")
		require.NotNil(t, cond)
		require.Equal(t, v1.PodReasonUnschedulable, cond.Reason)
		require.Empty(t, nodeOf(t, ctx, admin, "urgent"), "bound while its victim still holds the node")
		keep, err := admin.CoreV1().Pods(namespace).Get(ctx, "keep", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, keep.DeletionTimestamp, "the PDB-protected pod is spared")

		// The victim goes; its deletion moves urgent back, and it binds
		// on its nominated node.
		_, err = admin.CoreV1().Pods(namespace).Patch(ctx, "evict", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, ctx, "urgent bound on p2", func() bool { return nodeOf(t, ctx, admin, "urgent") == "p2" })
		require.Positive(t, metric(t, r, `schedcache_scheduler_unschedulable_moves_total{event="AssignedPodDelete"}`))
		require.Equal(t, float64(1), metric(t, r, "schedcache_scheduler_preemptions_total"))
		require.Equal(t, "p1", nodeOf(t, ctx, admin, "keep"))
		require.NoError(t, r.stop())
	})

}

// scheduledCondition is the pod's PodScheduled condition on the server,
// or nil.
func scheduledCondition(t *testing.T, ctx context.Context, admin kubernetes.Interface, name string) *v1.PodCondition {
	t.Helper()
	p, err := admin.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// scrape returns the replica's /metrics text.
func scrape(t *testing.T, r *replica) string {
	t.Helper()
	resp, err := http.Get("http://" + r.sc.Addr().String() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// metricPrefix sums the samples of the replica's /metrics whose name and
// labels begin with prefix (0 when there is none).
func metricPrefix(t *testing.T, r *replica, prefix string) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(scrape(t, r), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		sum += v
	}
	return sum
}

// metric is the sample named exactly series (name and labels), 0 when
// absent.
func metric(t *testing.T, r *replica, series string) float64 {
	t.Helper()
	return metricPrefix(t, r, series+" ")
}
