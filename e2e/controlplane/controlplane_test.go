package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/schedcache/schedcache/e2e/controlplane"
	"github.com/schedcache/schedcache/e2e/internal/leak"
)

func TestMain(m *testing.M) { leak.VerifyTestMain(m) }

// TestControlPlane starts one control plane and checks each thing the
// package promises: the admin identity, RBAC for a ServiceAccount, the
// proxy's cut and restore, and a compaction that makes a watch from an
// older revision fail with 410 Gone.
func TestControlPlane(t *testing.T) {
	cp := controlplane.MustStart(t, controlplane.Options{DisableWatchCache: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := cp.Client()

	t.Run("admin", func(t *testing.T) {
		_, err := admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		require.NoError(t, err)
	})

	t.Run("rbac", func(t *testing.T) {
		cfg, err := cp.ServiceAccountConfig(ctx, "e2e-rbac", "reader")
		require.NoError(t, err)
		sa, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "a ServiceAccount with no binding lists nodes: %v", err)

		require.NoError(t, cp.GrantClusterRole(ctx, "e2e-rbac", "reader", "system:kube-scheduler"))
		require.NoError(t, controlplane.WaitAllowed(ctx, cfg, authorizationv1.ResourceAttributes{Verb: "list", Resource: "nodes"}))
		_, err = sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		// system:kube-scheduler may not delete nodes: RBAC still applies.
		err = sa.CoreV1().Nodes().Delete(ctx, "none", metav1.DeleteOptions{})
		require.True(t, apierrors.IsForbidden(err), "delete node: %v", err)
	})

	t.Run("proxy", func(t *testing.T) {
		p := cp.MustNewProxy(t)
		c, err := kubernetes.NewForConfig(p.Config(cp.AdminConfig()))
		require.NoError(t, err)
		_, err = c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		require.NoError(t, err)
		w, err := c.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		defer w.Stop()

		require.NoError(t, p.Cut())
		// The watch's connection is gone: its channel closes.
		for range w.ResultChan() {
		}
		short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
		_, err = c.CoreV1().Namespaces().Get(short, "default", metav1.GetOptions{})
		cancelShort()
		require.Error(t, err, "a request through a cut proxy succeeded")
		require.Positive(t, p.Stats().Severed)

		require.NoError(t, p.Restore())
		require.Eventually(t, func() bool {
			_, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
			return err == nil
		}, time.Minute, 100*time.Millisecond)
		require.NoError(t, p.Close())
		require.ErrorIs(t, p.Cut(), controlplane.ErrProxyClosed)
	})

	t.Run("compaction", func(t *testing.T) {
		require.NoError(t, cp.EnsureNamespace(ctx, "e2e-compact"))
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "e2e-compact"}}
		cm, err := admin.CoreV1().ConfigMaps("e2e-compact").Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
		old := cm.ResourceVersion
		for i := range 3 {
			cm.Data = map[string]string{"i": string(rune('a' + i))}
			cm, err = admin.CoreV1().ConfigMaps("e2e-compact").Update(ctx, cm, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		rev, err := cp.CompactEtcd(ctx)
		require.NoError(t, err)
		require.Positive(t, rev)

		w, err := admin.CoreV1().ConfigMaps("e2e-compact").Watch(ctx, metav1.ListOptions{ResourceVersion: old})
		if err == nil {
			// etcd reports the compaction as the watch's first event.
			ev, ok := <-w.ResultChan()
			w.Stop()
			require.True(t, ok, "the watch closed without an event")
			require.Equal(t, watch.Error, ev.Type)
			err = apierrors.FromObject(ev.Object)
		}
		require.True(t, apierrors.IsResourceExpired(err) || apierrors.IsGone(err), "watch from a compacted revision: %v", err)
	})
}

func TestStartNil(t *testing.T) {
	_, err := controlplane.Start(nil, controlplane.Options{})
	require.ErrorIs(t, err, controlplane.ErrNilTest)
}
