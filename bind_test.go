package schedcache_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schedcache/schedcache"
)

// recordingDispatcher records the bindings it is given and answers with
// addErr; when send is set it reports outcome on onFinish.
type recordingDispatcher struct {
	mu      sync.Mutex
	got     []*v1.Binding
	addErr  error
	outcome error
	send    bool
	panics  bool
}

func (d *recordingDispatcher) DispatchBinding(b *v1.Binding, onFinish chan<- error) error {
	if d.panics {
		panic("boom")
	}
	d.mu.Lock()
	d.got = append(d.got, b)
	d.mu.Unlock()
	if d.send {
		onFinish <- d.outcome
	}
	return d.addErr
}

func binding(p *v1.Pod, nodeName string) *v1.Binding {
	return &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
}

// recv returns what ch holds, failing if it holds nothing.
func recv(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	default:
		t.Fatal("the channel holds no outcome")
		return nil
	}
}

func TestBindPodWithoutDispatcher(t *testing.T) {
	c := newCache(t)
	p := pod("p", "n", 100)
	require.NoError(t, c.AssumePod(logger, p))
	ch, err := c.BindPod(binding(p, "n"))
	require.ErrorIs(t, err, schedcache.ErrNoDispatcher)
	require.ErrorIs(t, recv(t, ch), schedcache.ErrNoDispatcher, "a waiter gets the error too")
}

func TestBindPodQueuesAssumedPod(t *testing.T) {
	d := &recordingDispatcher{send: true}
	c := newCache(t, schedcache.WithDispatcher(d))
	p := pod("p", "n", 100)
	require.NoError(t, c.AssumePod(logger, p))
	b := binding(p, "n")
	ch, err := c.BindPod(b)
	require.NoError(t, err)
	require.NoError(t, recv(t, ch))
	require.Equal(t, []*v1.Binding{b}, d.got)
	ok, err := c.IsAssumedPod(p)
	require.NoError(t, err)
	require.True(t, ok, "BindPod stores nothing: the pod stays assumed")

	d.outcome = errors.New("apiserver said no")
	ch, err = c.BindPod(b)
	require.NoError(t, err, "a failed API call is reported on the channel only")
	require.EqualError(t, recv(t, ch), "apiserver said no")
}

func TestBindPodBadInput(t *testing.T) {
	d := &recordingDispatcher{send: true}
	c := newCache(t, schedcache.WithDispatcher(d))
	assumed, added := pod("assumed", "n", 100), pod("added", "n", 100)
	require.NoError(t, c.AssumePod(logger, assumed))
	require.NoError(t, c.AddPod(logger, added))
	noUID := binding(assumed, "n")
	noUID.UID = ""
	for name, tc := range map[string]struct {
		b    *v1.Binding
		want error
	}{
		"nil":         {nil, schedcache.ErrNilBinding},
		"empty UID":   {noUID, schedcache.ErrEmptyUID},
		"no target":   {binding(assumed, ""), schedcache.ErrEmptyNodeName},
		"unknown pod": {binding(pod("ghost", "n", 1), "n"), schedcache.ErrPodNotFound},
		"added pod":   {binding(added, "n"), schedcache.ErrPodNotAssumed},
		"other node":  {binding(assumed, "m"), schedcache.ErrPodNodeMismatch},
	} {
		t.Run(name, func(t *testing.T) {
			ch, err := c.BindPod(tc.b)
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, recv(t, ch), tc.want)
			if tc.b != nil {
				var pe *schedcache.PodError
				require.ErrorAs(t, err, &pe)
			}
		})
	}
	require.Empty(t, d.got, "nothing was dispatched")
}

func TestBindPodDispatcherErrors(t *testing.T) {
	d := &recordingDispatcher{}
	c := newCache(t, schedcache.WithDispatcher(d))
	p := pod("p", "n", 100)
	require.NoError(t, c.AssumePod(logger, p))

	// A skip is expected: upstream returns no error and the dispatcher has
	// sent the skip on the channel.
	d.addErr, d.outcome, d.send = schedcache.ErrCallSkipped, schedcache.ErrCallSkipped, true
	ch, err := c.BindPod(binding(p, "n"))
	require.NoError(t, err)
	require.ErrorIs(t, recv(t, ch), schedcache.ErrCallSkipped)

	// An unexpected refusal is returned and put on the channel when the
	// dispatcher did not report it there.
	refused := errors.New("queue closed")
	d.addErr, d.send = refused, false
	ch, err = c.BindPod(binding(p, "n"))
	require.ErrorIs(t, err, refused)
	require.ErrorIs(t, recv(t, ch), refused)

	d.panics = true
	ch, err = c.BindPod(binding(p, "n"))
	require.ErrorIs(t, err, schedcache.ErrDispatcher)
	require.ErrorIs(t, recv(t, ch), schedcache.ErrDispatcher)
}

func TestBindPodAfterClose(t *testing.T) {
	d := &recordingDispatcher{send: true}
	c := newCache(t, schedcache.WithDispatcher(d))
	p := pod("p", "n", 100)
	require.NoError(t, c.AssumePod(logger, p))
	require.NoError(t, c.Close())
	ch, err := c.BindPod(binding(p, "n"))
	require.ErrorIs(t, err, schedcache.ErrClosed)
	require.ErrorIs(t, recv(t, ch), schedcache.ErrClosed)
	require.Empty(t, d.got)
}

func TestIsUnexpectedCallError(t *testing.T) {
	require.False(t, schedcache.IsUnexpectedCallError(nil))
	require.False(t, schedcache.IsUnexpectedCallError(schedcache.ErrCallSkipped))
	require.False(t, schedcache.IsUnexpectedCallError(schedcache.ErrCallOverwritten))
	require.True(t, schedcache.IsUnexpectedCallError(errors.New("x")))
}
