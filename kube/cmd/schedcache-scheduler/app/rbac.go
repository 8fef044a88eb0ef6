package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
)

// Permission is one verb on one resource the scheduler needs. Plain
// value. Namespace and Name are empty for cluster-wide permissions.
type Permission struct {
	Verb, Group, Resource, Subresource string
	Namespace, Name                    string
}

func (p Permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	if p.Group != "" {
		r += "." + p.Group
	}
	where := "cluster-wide"
	if p.Namespace != "" {
		where = "in namespace " + p.Namespace
	}
	if p.Name != "" {
		r += " " + p.Name
	}
	return fmt.Sprintf("%s %s %s", p.Verb, r, where)
}

// clusterPermissions is what the scheduler does cluster-wide: the
// informers of the cache and of upstream's default plugins (list,
// watch; DefaultPreemption's PodDisruptionBudgets), bindings, the
// status patches (PodScheduled condition, nominated node, the victims'
// DisruptionTarget condition), the deletion of preemption's victims, the plugins' writes (volume binding, dynamic
// resource allocation: the same rules as upstream's
// system:kube-scheduler and system:volume-scheduler roles for the
// features on by default in v1.37), and events. deploy/rbac.yaml's
// ClusterRole grants exactly these; TestShippedRBAC checks it.
var clusterPermissions = func() []Permission {
	var ps []Permission
	add := func(group string, resources []string, verbs ...string) {
		for _, r := range resources {
			res, sub, _ := strings.Cut(r, "/")
			for _, v := range verbs {
				ps = append(ps, Permission{Verb: v, Group: group, Resource: res, Subresource: sub})
			}
		}
	}
	add("", []string{"pods"}, "get", "list", "watch", "delete")
	add("", []string{"pods/status"}, "patch")
	add("", []string{"pods/binding"}, "create")
	add("", []string{"pods/finalizers"}, "update")
	add("", []string{"nodes", "namespaces", "services", "replicationcontrollers"}, "list", "watch")
	add("", []string{"persistentvolumeclaims", "persistentvolumes"}, "get", "list", "watch", "update", "patch")
	add("apps", []string{"replicasets", "statefulsets"}, "list", "watch")
	add("policy", []string{"poddisruptionbudgets"}, "list", "watch")
	add("storage.k8s.io", []string{"storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments"}, "list", "watch")
	add("resource.k8s.io", []string{"deviceclasses", "resourceslices", "devicetaintrules"}, "list", "watch")
	add("resource.k8s.io", []string{"resourceclaims"}, "get", "list", "watch", "create", "update", "patch", "delete")
	add("resource.k8s.io", []string{"resourceclaims/status", "resourceclaims/binding"}, "update", "patch")
	add("events.k8s.io", []string{"events"}, "create", "patch", "update")
	return ps
}()

// RequiredPermissions lists what the scheduler needs: the cluster-wide
// permissions, and with leader election the Lease's (create in its
// namespace; get and update of the one Lease).
func RequiredPermissions(leaseNamespace, leaseName string, leaderElect bool) []Permission {
	ps := append([]Permission(nil), clusterPermissions...)
	if leaderElect {
		ps = append(ps,
			Permission{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: leaseNamespace},
			Permission{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: leaseNamespace, Name: leaseName},
			Permission{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: leaseNamespace, Name: leaseName})
	}
	return ps
}

// ErrForbidden is wrapped by *PermissionError.
var ErrForbidden = errors.New("forbidden")

// PermissionError lists the permissions the API server denies the
// scheduler's identity. Immutable.
type PermissionError struct {
	Missing []Permission
}

func (e *PermissionError) Error() string {
	ms := make([]string, len(e.Missing))
	for i, m := range e.Missing {
		ms[i] = m.String()
	}
	return fmt.Sprintf("%v: the scheduler's identity may not %s (apply deploy/rbac.yaml, or bind its ClusterRole to this identity)",
		ErrForbidden, strings.Join(ms, "; "))
}

func (e *PermissionError) Unwrap() error { return ErrForbidden }

// CheckPermissions asks the API server (SelfSubjectAccessReview, which
// every authenticated identity may create) whether the client's identity
// has every required permission; a *PermissionError lists those it
// lacks.
func CheckPermissions(ctx context.Context, client clientset.Interface, leaseNamespace, leaseName string, leaderElect bool) error {
	var missing []Permission
	for _, p := range RequiredPermissions(leaseNamespace, leaseName, leaderElect) {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Namespace: p.Namespace, Name: p.Name,
			}}}
		got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("checking the permission to %s: %w", p, err)
		}
		if !got.Status.Allowed {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return &PermissionError{Missing: missing}
	}
	return nil
}
