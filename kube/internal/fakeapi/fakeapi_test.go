package fakeapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A watch started after a pod exists delivers it (the tracker's existing
// objects); with InstallCopyingWatch what it delivers is a copy: writing
// it, as an informer's in-place transform does, leaves the stored pod
// alone. Without the reactor the event carries the stored object itself.
func TestCopyingWatchDeliversCopies(t *testing.T) {
	for _, copying := range []bool{true, false} {
		cs := fake.NewClientset()
		if copying {
			InstallCopyingWatch(cs)
		}
		ctx := context.Background()
		_, err := cs.CoreV1().Pods("ns").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		w, err := cs.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		ev := <-w.ResultChan()
		ev.Object.(*v1.Pod).SetLabels(map[string]string{"written": "by the watcher"}) // an in-place transform
		w.Stop()
		got, err := cs.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), "ns", "p")
		require.NoError(t, err)
		if copying {
			require.Nil(t, got.(*v1.Pod).Labels, "the stored pod is untouched")
		} else {
			require.NotNil(t, got.(*v1.Pod).Labels, "client-go's tracker hands its stored object to a new watch; if it copies now, InstallCopyingWatch can go")
		}
	}
}
