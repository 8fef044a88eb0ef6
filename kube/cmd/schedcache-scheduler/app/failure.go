package app

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util"
)

// errNoNodes is upstream's ErrNoNodesAvailable: the cluster has no node.
var errNoNodes = errors.New("no nodes available to schedule pods")

// clearNominated is upstream's clearNominatedNode: the nominating info
// of a failed attempt that did not preempt.
var clearNominated = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: ""}

// preemptionFactory is the registry factory of DefaultPreemption this
// scheduler runs: upstream's plugin with the features of the gates,
// except that preemption is synchronous (SchedulerAsyncPreemption off:
// the victims are deleted within PostFilter, on the scheduling loop's
// goroutine and its context, so that no goroutine outlives Run) and
// pod-group preemption is off (this scheduler schedules pods one by
// one).
func preemptionFactory(ctx context.Context, args runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
	fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	fts.EnableAsyncPreemption = false
	fts.EnableGenericWorkload, fts.EnableCompositePodGroup = false, false
	return defaultpreemption.New(ctx, args, fh, fts)
}

var _ frameworkruntime.PluginFactory = preemptionFactory

// postFilter runs the profile's PostFilter plugins (DefaultPreemption)
// for a pod that found no node, as upstream's schedulingCycle: over the
// profile's Mutable reset to the failed cycle's snapshot, with the
// cycle's state and node statuses. DefaultPreemption deletes the victims
// through the API (after setting their DisruptionTarget condition) and
// clears the nominations of lower-priority pods on the chosen node. It
// returns the nominating info for the pod and records PostFilter's
// message in the fit error.
func (sc *Scheduler) postFilter(ctx context.Context, prof *profile, state fwk.CycleState, pod *v1.Pod, fe *framework.FitError) *fwk.NominatingInfo {
	if !prof.fw.HasPostFilterPlugins() {
		return clearNominated
	}
	logger := sc.s.logger
	if _, err := prof.mutable.Reset(logger, prof.snap); err != nil {
		logger.Error(err, "PostFilter not run", "pod", klog.KObj(pod))
		return nil
	}
	result, st := prof.fw.RunPostFilterPlugins(ctx, state, pod, fe.Diagnosis.NodeToStatus)
	fe.Diagnosis.PostFilterMsg = st.Message()
	if st.Code() == fwk.Error {
		logger.Error(st.AsError(), "PostFilter failed", "pod", klog.KObj(pod))
	} else {
		logger.V(5).Info("Status after running PostFilter plugins for pod", "pod", klog.KObj(pod), "status", st.Message())
	}
	if result == nil {
		return nil
	}
	if result.NominatingInfo != nil && result.Mode() == fwk.ModeOverride && result.NominatedNodeName != "" {
		sc.preemptions.Inc()
	}
	return result.NominatingInfo
}

// failed is upstream's handleSchedulingFailure for one pod: a pod still
// pending (the informer's copy, same UID) waits in the unschedulable
// pool when no node fit (fit is its diagnosis; nil when the cluster has
// no node) or after its backoff on an error; its nomination is recorded;
// a FailedScheduling event is recorded; and its PodScheduled condition
// (False, reason Unschedulable or SchedulerError, the error's message)
// and nominated node are patched through the status subresource.
func (sc *Scheduler) failed(ctx context.Context, key string, pod *v1.Pod, cause error, unschedulable bool, fit *framework.Diagnosis, nominating *fwk.NominatingInfo) {
	logger := sc.s.logger
	reason := v1.PodReasonSchedulerError
	if unschedulable {
		reason = v1.PodReasonUnschedulable
	}
	current, err := sc.factory.Core().V1().Pods().Lister().Pods(pod.Namespace).Get(pod.Name)
	switch {
	case err != nil:
		logger.V(2).Info("Pod doesn't exist in informer cache", "pod", klog.KObj(pod), "err", err)
		sc.queue.Forget(key)
		return
	case current.UID != pod.UID:
		logger.V(2).Info("Pod was recreated while handling scheduling failure; its new version is queued on its own", "pod", klog.KObj(pod))
		return
	case current.Spec.NodeName != "":
		logger.V(2).Info("Pod has been assigned to node. Abort adding it back to queue.", "pod", klog.KObj(pod), "node", current.Spec.NodeName)
		sc.queue.Forget(key)
		return
	}
	pod = current
	if unschedulable {
		sc.pool.park(key, pod, fit, sc.backoff.When(key))
	} else {
		sc.queue.AddRateLimited(key)
	}
	if pi, err := framework.NewPodInfo(pod); err == nil {
		sc.nom.AddNominatedPod(logger, pi, nominating)
	}
	msg := cause.Error()
	sc.recorder.Eventf(pod, nil, v1.EventTypeWarning, "FailedScheduling", "Scheduling", truncate(msg))
	cond := &v1.PodCondition{
		Type:               v1.PodScheduled,
		ObservedGeneration: podutil.CalculatePodConditionObservedGeneration(&pod.Status, pod.Generation, v1.PodScheduled),
		Status:             v1.ConditionFalse,
		Reason:             reason,
		Message:            msg,
	}
	if err := updatePod(ctx, sc.client, pod, cond, nominating); err != nil {
		logger.Error(err, "Error updating pod", "pod", klog.KObj(pod))
	}
}

// updatePod is upstream's updatePod without an API cacher: the condition
// and the nominated node (in ModeOverride) patched through the status
// subresource, only if either changes.
func updatePod(ctx context.Context, client clientset.Interface, pod *v1.Pod, condition *v1.PodCondition, nominating *fwk.NominatingInfo) error {
	status := pod.Status.DeepCopy()
	nnn := nominating.Mode() == fwk.ModeOverride && pod.Status.NominatedNodeName != nominating.NominatedNodeName
	cond := condition != nil && podutil.UpdatePodCondition(status, condition)
	if !cond && !nnn {
		return nil
	}
	if nnn {
		status.NominatedNodeName = nominating.NominatedNodeName
	}
	return util.PatchPodStatus(ctx, client, pod.Name, pod.Namespace, &pod.Status, status)
}

// truncate is upstream's truncateMessage: an event's note within the
// API's limit.
func truncate(msg string) string {
	const suffix = " ..."
	if len(msg) <= validation.NoteLengthLimit {
		return msg
	}
	return msg[:validation.NoteLengthLimit-len(suffix)] + suffix
}
