package app_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/schedcache/schedcache/kube/cmd/schedcache-scheduler/app"
)

// deployDir is the repository's deploy/ directory.
const deployDir = "../../../../deploy"

// manifests decodes every object of a deploy/ file.
func manifests(t *testing.T, name string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, name))
	require.NoError(t, err)
	objs, err := app.DecodeManifests(data)
	require.NoError(t, err, name)
	return objs
}

// grants expands RBAC rules into permissions (no wildcards allowed).
func grants(t *testing.T, rules []rbacv1.PolicyRule, namespace string) []app.Permission {
	t.Helper()
	var out []app.Permission
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						require.NotContains(t, []string{g, res, v}, "*", "no wildcard in the shipped rules")
						p := app.Permission{Verb: v, Group: g, Resource: res, Namespace: namespace, Name: n}
						if i := bytes.IndexByte([]byte(res), '/'); i >= 0 {
							p.Resource, p.Subresource = res[:i], res[i+1:]
						}
						out = append(out, p)
					}
				}
			}
		}
	}
	return out
}

func sortPerms(ps []app.Permission) []app.Permission {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b app.Permission) int {
		for _, c := range [][2]string{{a.Namespace, b.Namespace}, {a.Group, b.Group}, {a.Resource, b.Resource},
			{a.Subresource, b.Subresource}, {a.Verb, b.Verb}, {a.Name, b.Name}} {
			if c[0] != c[1] {
				if c[0] < c[1] {
					return -1
				}
				return 1
			}
		}
		return 0
	})
	return out
}

// deploy/rbac.yaml grants exactly what the scheduler checks for at start
// (app.RequiredPermissions with the Deployment's leader election), to the
// ServiceAccount the Deployment runs as: nothing missing, nothing more.
func TestShippedRBAC(t *testing.T) {
	var granted []app.Permission
	var sa *v1.ServiceAccount
	roles := map[string]bool{}
	var bound []string
	for _, obj := range manifests(t, "rbac.yaml") {
		switch o := obj.(type) {
		case *v1.ServiceAccount:
			sa = o
		case *rbacv1.ClusterRole:
			granted = append(granted, grants(t, o.Rules, "")...)
			roles["ClusterRole/"+o.Name] = true
		case *rbacv1.Role:
			granted = append(granted, grants(t, o.Rules, o.Namespace)...)
			roles["Role/"+o.Namespace+"/"+o.Name] = true
		case *rbacv1.ClusterRoleBinding:
			require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}, o.Subjects)
			bound = append(bound, "ClusterRole/"+o.RoleRef.Name)
		case *rbacv1.RoleBinding:
			require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}, o.Subjects)
			bound = append(bound, "Role/"+o.Namespace+"/"+o.RoleRef.Name)
		default:
			t.Fatalf("unexpected object %T in rbac.yaml", obj)
		}
	}
	require.NotNil(t, sa)
	for _, b := range bound {
		require.True(t, roles[b], "binding of %s, not in rbac.yaml", b)
	}
	require.Len(t, bound, len(roles))
	want := app.RequiredPermissions(app.DefaultLeaseNamespace, app.DefaultLeaseName, true)
	require.Equal(t, sortPerms(want), sortPerms(granted))

	var deploy *appsv1.Deployment
	for _, obj := range manifests(t, "deployment.yaml") {
		deploy = obj.(*appsv1.Deployment)
	}
	require.Equal(t, sa.Name, deploy.Spec.Template.Spec.ServiceAccountName)
	require.Equal(t, sa.Namespace, deploy.Namespace)

	// The shipped configuration is valid, names the default profile and
	// turns leader election on.
	cm := manifests(t, "config.yaml")[0].(*v1.ConfigMap)
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600))
	cfg, err := app.LoadConfig(app.Options{ConfigFile: path})
	require.NoError(t, err)
	require.Len(t, cfg.Profiles, 1)
	require.Equal(t, app.DefaultSchedulerName, cfg.Profiles[0].SchedulerName)
	require.True(t, cfg.LeaderElection.LeaderElect)
}

// DecodeManifests skips empty and null documents and names the document
// it cannot decode.
func TestDecodeManifests(t *testing.T) {
	objs, err := app.DecodeManifests([]byte("---\nnull\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	_, err = app.DecodeManifests([]byte("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\napiVersion: v1\nkind: NoSuchKind\n"))
	require.ErrorContains(t, err, "manifest document 2")
}
