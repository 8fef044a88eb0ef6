package app

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
)

// plural is the resource of a kind, for the kinds the informers hold.
func plural(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(k, "s"):
		return k + "es"
	case strings.HasSuffix(k, "y"):
		return k[:len(k)-1] + "ies"
	}
	return k + "s"
}

// Every informer the cache and the plugins start lists and watches a
// resource the required permissions (so deploy/rbac.yaml) cover.
func TestInformersArePermitted(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		r := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		r.Status.Allowed = true
		return true, r, nil
	})
	sc, err := New(context.Background(), Options{Client: cs, HTTPAddr: "off"})
	require.NoError(t, err)
	stop := make(chan struct{})
	sc.factory.Start(stop)
	synced := sc.factory.WaitForCacheSync(stop)
	close(stop)
	sc.Close()
	have := map[string]bool{}
	for _, p := range clusterPermissions {
		if p.Subresource == "" {
			have[p.Verb+" "+p.Group+"/"+p.Resource] = true
		}
	}
	require.NotEmpty(t, synced)
	var resources []string
	for typ := range synced {
		obj := reflect.New(typ.Elem()).Interface().(runtime.Object)
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		require.NoError(t, err)
		r := gvks[0].Group + "/" + plural(gvks[0].Kind)
		resources = append(resources, r)
		for _, verb := range []string{"list", "watch"} {
			require.True(t, have[verb+" "+r], "informer of %s: %s not in the required permissions", typ, verb)
		}
	}
	t.Logf("informers: %v", resources)
	require.Contains(t, resources, "/pods")
	require.Contains(t, resources, "/nodes")
}
