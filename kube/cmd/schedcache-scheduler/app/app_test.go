package app_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache/kube/cmd/schedcache-scheduler/app"
	"github.com/schedcache/schedcache/kube/internal/fakeapi"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// klog's flush daemon, started by klog's init.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}

// fakeCluster is a fake API server whose bindings set the pod's node and
// whose SelfSubjectAccessReviews allow everything but deny.
func fakeCluster(t *testing.T, deny ...string) *fake.Clientset {
	t.Helper()
	cs := fake.NewClientset()
	fakeapi.InstallBindingReactor(cs)
	fakeapi.InstallCopyingWatch(cs) // the scheduler's informers transform in place
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		r := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		a := r.Spec.ResourceAttributes
		what := a.Verb + " " + a.Resource
		if a.Subresource != "" {
			what += "/" + a.Subresource
		}
		r.Status.Allowed = true
		for _, d := range deny {
			if d == what {
				r.Status.Allowed = false
			}
		}
		return true, r, nil
	})
	return cs
}

func node(name, cpu string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
}

func pod(name, scheduler, cpu string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)},
		Spec: v1.PodSpec{SchedulerName: scheduler, Containers: []v1.Container{{Name: "c", Image: "pause",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

func create(t *testing.T, cs *fake.Clientset, objs ...runtime.Object) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Node:
			_, err = cs.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *v1.Pod:
			_, err = cs.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		require.NoError(t, err)
	}
}

func nodeOf(t *testing.T, cs *fake.Clientset, name string) string {
	t.Helper()
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p.Spec.NodeName
}

// started is a scheduler running on its own goroutine.
type started struct {
	sc     *app.Scheduler
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error // set by once
}

// stop cancels Run and waits for it (once; the test's cleanup calls it too).
func (s *started) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, s.wait())
}

func (s *started) wait() error {
	s.once.Do(func() {
		s.cancel()
		s.err = <-s.done
	})
	return s.err
}

func start(t *testing.T, opts app.Options) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = "127.0.0.1:0"
	}
	if opts.PodInitialBackoff == 0 {
		opts.PodInitialBackoff, opts.PodMaxBackoff = 10*time.Millisecond, 100*time.Millisecond
	}
	opts.Logger = klog.Background().V(5) // quiet unless -v
	sc, err := app.New(ctx, opts)
	require.NoError(t, err)
	s := &started{sc: sc, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- sc.Run(ctx) }() // owned by the test: stop waits for it
	t.Cleanup(func() { _ = s.wait() })
	return s
}

const eventually = 30 * time.Second

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Pods naming the scheduler are bound, on nodes they fit; pods of other
// schedulers are left alone; /healthz, /readyz and /metrics answer.
func TestSchedulesItsPodsOnly(t *testing.T) {
	cs := fakeCluster(t)
	create(t, cs, node("n1", "2"), node("n2", "2"),
		pod("a", app.DefaultSchedulerName, "1"), pod("b", app.DefaultSchedulerName, "1"), pod("c", app.DefaultSchedulerName, "1"),
		pod("theirs", v1.DefaultSchedulerName, "100m"), pod("other", "other-scheduler", "100m"))
	s := start(t, app.Options{Client: cs, NoLeaderElect: true})
	require.Eventually(t, func() bool {
		return nodeOf(t, cs, "a") != "" && nodeOf(t, cs, "b") != "" && nodeOf(t, cs, "c") != ""
	}, eventually, 10*time.Millisecond)
	perNode := map[string]int{}
	for _, p := range []string{"a", "b", "c"} {
		perNode[nodeOf(t, cs, p)]++
	}
	require.Len(t, perNode, 2, "three 1-CPU pods on two 2-CPU nodes: both used") // no node holds 3 CPUs
	require.Empty(t, nodeOf(t, cs, "theirs"))
	require.Empty(t, nodeOf(t, cs, "other"))

	base := "http://" + s.sc.Addr().String()
	code, body := get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code, body)
	code, body = get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool {
		_, body = get(t, base+"/metrics")
		return strings.Contains(body, `schedcache_scheduler_attempts_total{result="scheduled"} 3`)
	}, eventually, 10*time.Millisecond, "metrics:\n%s", body)
	require.Contains(t, body, `scheduler_cache_size{type="nodes"} 2`)
	require.Contains(t, body, "schedcache_dispatcher_calls_succeeded_total 3")
	require.Contains(t, body, "schedcache_scheduler_leader 1")
	s.stop(t)
}

// A pod no node fits gets upstream's PodScheduled=False condition
// (reason Unschedulable, the fit error's message), waits in the
// unschedulable pool (its own condition patch does not move it), and
// is bound once a node it fits on is added: the node's addition moves
// it, as NodeResourcesFit's queueing hint says.
func TestUnschedulableThenScheduled(t *testing.T) {
	cs := fakeCluster(t)
	create(t, cs, node("small", "1"), pod("big", app.DefaultSchedulerName, "4"))
	s := start(t, app.Options{Client: cs, NoLeaderElect: true})
	base := "http://" + s.sc.Addr().String()
	var body string
	require.Eventually(t, func() bool {
		_, body = get(t, base+"/metrics")
		return strings.Contains(body, `schedcache_scheduler_attempts_total{result="unschedulable"} 1`) &&
			strings.Contains(body, "schedcache_scheduler_unschedulable_pods 1")
	}, eventually, 10*time.Millisecond, "metrics:\n%s", body)
	require.Eventually(t, func() bool {
		c := scheduledCondition(t, cs, "big")
		return c != nil && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable &&
			c.Message == "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
	}, eventually, 10*time.Millisecond, "condition %+v", scheduledCondition(t, cs, "big"))
	require.Empty(t, nodeOf(t, cs, "big"))
	// Parked: no further attempt without a cluster event (backoff is
	// 10ms here; a retry on backoff alone would show in the counter).
	time.Sleep(300 * time.Millisecond)
	_, body = get(t, base+"/metrics")
	require.Contains(t, body, `schedcache_scheduler_attempts_total{result="unschedulable"} 1`)

	create(t, cs, node("large", "8"))
	require.Eventually(t, func() bool { return nodeOf(t, cs, "big") == "large" }, eventually, 10*time.Millisecond)
	_, body = get(t, base+"/metrics")
	require.Contains(t, body, `schedcache_scheduler_unschedulable_moves_total{event="NodeAdd"} 1`)
	s.stop(t)
}

// A high-priority pod that fits nowhere preempts: DefaultPreemption
// picks the node whose victim no PodDisruptionBudget protects, deletes
// that victim (after its DisruptionTarget condition), the pod is
// nominated to that node, and it is bound there once the victim is gone.
func TestPreemption(t *testing.T) {
	cs := fakeCluster(t)
	low, high := int32(10), int32(1000)
	protected := pod("protected", "other-scheduler", "1500m")
	protected.Spec.NodeName, protected.Spec.Priority, protected.Labels = "n1", &low, map[string]string{"app": "protected"}
	victim := pod("victim", "other-scheduler", "1500m")
	victim.Spec.NodeName, victim.Spec.Priority = "n2", &low
	preemptor := pod("preemptor", app.DefaultSchedulerName, "1500m")
	preemptor.Spec.Priority = &high
	create(t, cs, node("n1", "2"), node("n2", "2"), protected, victim)
	zero := intstr.FromInt32(0)
	_, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(context.Background(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "protected"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	s := start(t, app.Options{Client: cs, NoLeaderElect: true})
	base := "http://" + s.sc.Addr().String()
	require.Eventually(t, func() bool {
		_, body := get(t, base+"/readyz")
		return body == "ok"
	}, eventually, 10*time.Millisecond)

	create(t, cs, preemptor)
	require.Eventually(t, func() bool { return nodeOf(t, cs, "preemptor") == "n2" }, eventually, 10*time.Millisecond)
	_, err = cs.CoreV1().Pods("default").Get(context.Background(), "victim", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the victim is deleted: %v", err)
	require.Equal(t, "n1", nodeOf(t, cs, "protected"), "the PDB-protected pod stays")
	var patched, deleted bool
	for _, a := range cs.Actions() {
		switch {
		case a.GetVerb() == "patch" && a.GetSubresource() == "status" && a.(k8stesting.PatchAction).GetName() == "victim":
			patched = strings.Contains(string(a.(k8stesting.PatchAction).GetPatch()), string(v1.DisruptionTarget))
		case a.GetVerb() == "delete" && a.GetResource().Resource == "pods":
			require.Equal(t, "victim", a.(k8stesting.DeleteAction).GetName())
			deleted = true
		}
	}
	require.True(t, patched, "the victim's DisruptionTarget condition is patched before its deletion")
	require.True(t, deleted)
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), "preemptor", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "n2", p.Status.NominatedNodeName)
	_, body := get(t, base+"/metrics")
	require.Contains(t, body, "schedcache_scheduler_preemptions_total 1")
	s.stop(t)
}

// scheduledCondition is the pod's PodScheduled condition, or nil.
func scheduledCondition(t *testing.T, cs *fake.Clientset, name string) *v1.PodCondition {
	t.Helper()
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Two replicas on one Lease: one leads and binds; when it stops (and
// releases the Lease) the other takes over and binds the next pods.
func TestLeaderElectionTakeover(t *testing.T) {
	cs := fakeCluster(t)
	create(t, cs, node("n1", "8"), pod("p1", app.DefaultSchedulerName, "100m"))
	opts := func(id string) app.Options {
		return app.Options{Client: cs, LeaderElect: true, Identity: id,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond}
	}
	r1, r2 := start(t, opts("r1")), start(t, opts("r2"))
	var leader, standby *started
	require.Eventually(t, func() bool {
		switch {
		case r1.sc.Leading() && !r2.sc.Leading():
			leader, standby = r1, r2
		case r2.sc.Leading() && !r1.sc.Leading():
			leader, standby = r2, r1
		default:
			return false
		}
		return true
	}, eventually, 10*time.Millisecond)
	require.Eventually(t, func() bool { return nodeOf(t, cs, "p1") == "n1" }, eventually, 10*time.Millisecond)
	require.False(t, standby.sc.Leading())

	leader.stop(t)
	require.Eventually(t, standby.sc.Leading, eventually, 10*time.Millisecond)
	create(t, cs, pod("p2", app.DefaultSchedulerName, "100m"))
	require.Eventually(t, func() bool { return nodeOf(t, cs, "p2") == "n1" }, eventually, 10*time.Millisecond)
	lease, err := cs.CoordinationV1().Leases(app.DefaultLeaseNamespace).Get(context.Background(), app.DefaultLeaseName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, standby.sc.Identity(), *lease.Spec.HolderIdentity)
	standby.stop(t)
}

// Bad input ends with a clear error naming its cause and a non-zero
// exit code, never a panic.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	unreachable := write("unreachable.kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)
	// A server that refuses every credential.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
	}))
	defer refusing.Close()
	badToken := write("badtoken.kubeconfig", strings.ReplaceAll(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "URL"}}]
users: [{name: u, user: {token: wrong}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, "URL", refusing.URL))
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown flag", []string{"-bogus"}, app.ExitUsage, []string{"bogus"}},
		{"stray argument", []string{"extra"}, app.ExitUsage, []string{"unexpected arguments"}},
		{"help", []string{"-h"}, app.ExitOK, nil},
		{"missing kubeconfig", []string{"-kubeconfig", filepath.Join(dir, "nope")}, app.ExitUsage, []string{"-kubeconfig", "no such file"}},
		{"malformed kubeconfig", []string{"-kubeconfig", write("bad.kubeconfig", "clusters: [")}, app.ExitUsage, []string{"-kubeconfig", "bad.kubeconfig"}},
		{"missing config", []string{"-config", filepath.Join(dir, "none.yaml")}, app.ExitUsage, []string{"-config", "no such file"}},
		{"malformed config", []string{"-config", write("bad.yaml", "apiVersion: [")}, app.ExitUsage, []string{"bad.yaml", "not a KubeSchedulerConfiguration"}},
		{"invalid config", []string{"-config", write("invalid.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: -1\n")},
			app.ExitUsage, []string{"invalid.yaml", "parallelism"}},
		{"default-scheduler profile", []string{"-config", write("default.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")},
			app.ExitUsage, []string{"default.yaml", `"default-scheduler"`}},
		{"unreachable server", []string{"-kubeconfig", unreachable, "-startup-timeout", "300ms", "-http-addr", "off"}, app.ExitFailure,
			[]string{"API server unreachable", "127.0.0.1:1"}},
		{"credentials refused", []string{"-kubeconfig", badToken, "-http-addr", "off"}, app.ExitFailure,
			[]string{"API server refused the credentials", refusing.URL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := app.Main(context.Background(), tc.args, &stderr)
			require.Equal(t, tc.code, code, stderr.String())
			for _, w := range tc.want {
				require.Contains(t, stderr.String(), w)
			}
			if tc.code != app.ExitOK {
				require.Equal(t, 1, strings.Count(stderr.String(), "schedcache-scheduler: "), "one line naming the cause:\n%s", stderr.String())
			}
		})
	}
}

// A missing permission is found at start, named, and stops the
// scheduler before it does anything.
func TestForbidden(t *testing.T) {
	cs := fakeCluster(t, "create pods/binding", "watch nodes")
	_, err := app.New(context.Background(), app.Options{Client: cs, HTTPAddr: "off", LeaderElect: true})
	var pe *app.PermissionError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, app.ErrForbidden)
	require.Contains(t, err.Error(), "create pods/binding cluster-wide")
	require.Contains(t, err.Error(), "watch nodes cluster-wide")
	require.Len(t, pe.Missing, 2)
}

// A profile naming an unknown plugin is a configuration error.
func TestUnknownPlugin(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(p, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: mine
  plugins:
    filter:
      enabled: [{name: NoSuchPlugin}]
`), 0o600))
	_, err := app.New(context.Background(), app.Options{Client: fakeCluster(t), ConfigFile: p, HTTPAddr: "off"})
	require.ErrorIs(t, err, app.ErrInvalidConfig)
	require.Contains(t, err.Error(), "NoSuchPlugin")
	require.Contains(t, err.Error(), "profile mine")
}

func TestParseFlags(t *testing.T) {
	o, err := app.ParseFlags([]string{"-config", "c.yaml", "-leader-elect", "-lease-name", "x", "-identity", "me"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "c.yaml", o.ConfigFile)
	require.True(t, o.LeaderElect)
	require.Equal(t, "x", o.LeaseName)
	require.Equal(t, "me", o.Identity)
	_, err = app.ParseFlags([]string{"-leader-elect", "-no-leader-elect"}, io.Discard)
	require.ErrorIs(t, err, app.ErrUsage)
}
