package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/bind"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	schedmetrics "github.com/schedcache/schedcache/kube/metrics"
)

// Results of a scheduling attempt, the label of
// schedcache_scheduler_attempts_total.
const (
	resultScheduled     = "scheduled"
	resultUnschedulable = "unschedulable"
	resultError         = "error"
	resultBindingFailed = "binding_failed"
)

// onPod queues an unassigned pod of one of the profiles (the pod
// informer's handler; also called for every pending pod when leading
// begins).
func (sc *Scheduler) onPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || !sc.responsible(pod) {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		return // a pod always has a key
	}
	sc.queue.Add(key)
}

// responsible: an unassigned pod, not being deleted, that one of the
// profiles schedules.
func (sc *Scheduler) responsible(pod *v1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && sc.s.schedulerNames[pod.Spec.SchedulerName]
}

// scheduleLoop takes pods off the queue until ctx ends, then waits for
// the bindings it started.
func (sc *Scheduler) scheduleLoop(ctx context.Context) {
	defer sc.bindings.Wait()
	// Pods that arrived while another replica led are queued already;
	// queue them all again in case that replica failed to bind them.
	pods, err := sc.factory.Core().V1().Pods().Lister().List(labels.Everything())
	if err == nil {
		for _, p := range pods {
			sc.onPod(p)
		}
	}
	// The queue's Get waits without a context: an empty key wakes it
	// when ctx ends (the queue outlives one term of leadership).
	stop := context.AfterFunc(ctx, func() { sc.queue.Add("") })
	defer stop()
	for {
		key, shutdown := sc.queue.Get()
		if shutdown {
			return
		}
		if key == "" || ctx.Err() != nil {
			sc.queue.Forget(key)
			sc.queue.Done(key)
			if key != "" {
				sc.queue.Add(key) // for the next term
			}
			if ctx.Err() != nil {
				return
			}
			continue
		}
		sc.scheduleOne(ctx, key)
	}
}

// scheduleOne is one scheduling cycle (upstream's scheduleOne without
// preemption): place, assume, reserve, permit; then the binding cycle on
// its own goroutine.
func (sc *Scheduler) scheduleOne(ctx context.Context, key string) {
	defer sc.queue.Done(key)
	logger := sc.s.logger
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		sc.queue.Forget(key)
		return
	}
	pod, err := sc.factory.Core().V1().Pods().Lister().Pods(ns).Get(name)
	if err != nil || !sc.responsible(pod) || len(pod.Spec.SchedulingGates) > 0 {
		sc.queue.Forget(key) // gone, bound, or gated: an update queues it again
		return
	}
	if _, err := sc.cache.GetPod(pod); err == nil {
		sc.queue.Forget(key) // assumed already: its binding is in flight
		return
	}
	sc.pool.remove(key) // queued by another path (its own update, a new term)
	sc.pool.begin()     // records the cluster events while the attempt runs
	defer sc.pool.end()
	prof := sc.profs[pod.Spec.SchedulerName]
	state := framework.NewCycleState()
	node, err := sc.place(ctx, prof, state, pod)
	if err != nil {
		sc.placeFailed(ctx, prof, state, key, pod, err)
		return
	}
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = node
	if err := sc.cache.AssumePod(logger, assumed); err != nil {
		sc.attempts.WithLabelValues(resultError).Inc()
		logger.Error(err, "AssumePod refused", "pod", klog.KObj(pod), "node", node)
		sc.failed(ctx, key, pod, fmt.Errorf("assume: %w", err), false, nil, clearNominated)
		return
	}
	// As upstream's assume: an assumed pod is no longer nominated.
	sc.nom.DeleteNominatedPodIfExists(assumed)
	if st := prof.fw.RunReservePluginsReserve(ctx, state, assumed, node); !st.IsSuccess() {
		sc.undo(ctx, prof, state, assumed, key, fmt.Errorf("reserve: %w", st.AsError()), true)
		return
	}
	if _, st := prof.fw.RunPermitPlugins(ctx, state, assumed, node); !st.IsSuccess() {
		err := st.AsError()
		if st.IsWait() {
			err = errors.New("a Permit plugin asked to wait, which this scheduler does not support")
		}
		sc.undo(ctx, prof, state, assumed, key, fmt.Errorf("permit: %w", err), true)
		return
	}
	sc.bindings.Add(1)
	go sc.bindingCycle(ctx, prof, state, assumed, key) // owned by scheduleLoop, which waits for bindings
}

// placeFailed handles a cycle that found no node (the cluster has none,
// or a *framework.FitError: DefaultPreemption runs then, as upstream's
// PostFilter) or failed with an error.
func (sc *Scheduler) placeFailed(ctx context.Context, prof *profile, state fwk.CycleState, key string, pod *v1.Pod, err error) {
	logger := sc.s.logger
	var fe *framework.FitError
	switch {
	case errors.Is(err, errNoNodes):
		sc.attempts.WithLabelValues(resultUnschedulable).Inc()
		logger.V(2).Info("Unable to schedule pod; no nodes are registered to the cluster; waiting", "pod", klog.KObj(pod))
		sc.failed(ctx, key, pod, err, true, nil, clearNominated)
	case errors.As(err, &fe):
		nominating := sc.postFilter(ctx, prof, state, pod, fe)
		sc.attempts.WithLabelValues(resultUnschedulable).Inc()
		logger.V(2).Info("Unable to schedule pod; no fit; waiting", "pod", klog.KObj(pod), "err", fe.Error())
		sc.failed(ctx, key, pod, fe, true, &fe.Diagnosis, nominating)
	default:
		sc.attempts.WithLabelValues(resultError).Inc()
		logger.Error(err, "Error scheduling pod; retrying", "pod", klog.KObj(pod))
		sc.failed(ctx, key, pod, err, false, nil, clearNominated)
	}
}

// bindingCycle is upstream's binding cycle without waiting Permits:
// PreBind, the binding through the cache's dispatcher, FinishBinding and
// PostBind; a failure undoes the reservation and forgets the pod.
func (sc *Scheduler) bindingCycle(ctx context.Context, prof *profile, state fwk.CycleState, assumed *v1.Pod, key string) {
	defer sc.bindings.Done()
	logger := sc.s.logger
	node := assumed.Spec.NodeName
	if st := prof.fw.RunPreBindPlugins(ctx, state, assumed, node); !st.IsSuccess() {
		sc.undo(ctx, prof, state, assumed, key, fmt.Errorf("prebind: %w", st.AsError()), true)
		return
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: assumed.Namespace, Name: assumed.Name, UID: assumed.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}
	onFinish, err := sc.cache.BindPod(binding)
	if err == nil {
		err = bind.WaitOnFinish(ctx, onFinish)
	}
	if err != nil {
		// A pod deleted, replaced or bound by someone else is not ours
		// to retry; any other failure is.
		retry := !errors.Is(err, bind.ErrPodGone) && !errors.Is(err, bind.ErrBoundElsewhere) && !apierrors.IsNotFound(err)
		sc.undo(ctx, prof, state, assumed, key, fmt.Errorf("binding rejected: %w", err), retry)
		return
	}
	if err := sc.cache.FinishBinding(logger, assumed); err != nil {
		logger.Error(err, "FinishBinding", "pod", klog.KObj(assumed))
	}
	sc.queue.Forget(key)
	prof.fw.RunPostBindPlugins(ctx, state, assumed, node)
	sc.attempts.WithLabelValues(resultScheduled).Inc()
	logger.V(2).Info("Bound pod", "pod", klog.KObj(assumed), "node", node)
	sc.recorder.Eventf(assumed, nil, v1.EventTypeNormal, "Scheduled", "Binding",
		"Successfully assigned %s/%s to %s", assumed.Namespace, assumed.Name, node)
}

// undo unreserves and forgets an assumed pod after a failure, reports
// it, and queues the pod again after its backoff when retry is set.
func (sc *Scheduler) undo(ctx context.Context, prof *profile, state fwk.CycleState, assumed *v1.Pod, key string, cause error, retry bool) {
	logger := sc.s.logger
	prof.fw.RunReservePluginsUnreserve(ctx, state, assumed, assumed.Spec.NodeName)
	if err := sc.cache.ForgetPod(logger, assumed); err != nil && !errors.Is(err, schedcache.ErrPodNotFound) {
		logger.Error(err, "ForgetPod", "pod", klog.KObj(assumed))
	}
	sc.attempts.WithLabelValues(resultBindingFailed).Inc()
	logger.Info("Scheduling attempt failed", "pod", klog.KObj(assumed), "node", assumed.Spec.NodeName, "err", cause, "retry", retry)
	if !retry {
		sc.queue.Forget(key)
		return
	}
	sc.failed(ctx, key, assumed, cause, false, nil, clearNominated)
}

// place runs the profile's PreFilter, Filter, PreScore and Score plugins
// over a fresh snapshot of the cache and returns the best node (ties
// broken at random, as upstream); errNoNodes when the cluster has no
// node, a *framework.FitError (with upstream's diagnosis: every node's
// status, the rejecting plugins) when none fits.
// As upstream's findNodesThatFitPod, a pod nominated to a node (by
// preemption) takes it if it passes Filter there; else filtering starts
// where the profile's last cycle stopped and stops once
// fwkadapter.NumFeasibleNodesToFind nodes are feasible (the profile's
// percentageOfNodesToScore); it runs in chunks on the framework's
// parallelizer, each chunk's verdicts taken in order up to the last
// feasible node needed, and only those feasible nodes are scored.
// minChunk is the fewest nodes place filters in one parallel step.
const minChunk = 32

func (sc *Scheduler) place(ctx context.Context, prof *profile, state *framework.CycleState, pod *v1.Pod) (string, error) {
	if err := sc.cache.UpdateSnapshot(sc.s.logger, prof.snap); err != nil {
		return "", err
	}
	all, err := prof.lister.NodeInfos().List()
	if err != nil {
		return "", err
	}
	if len(all) == 0 {
		return "", errNoNodes
	}
	diag := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	fitError := func() error { return &framework.FitError{Pod: pod, NumAllNodes: len(all), Diagnosis: diag} }
	fw := prof.fw
	pre, st, unsched := fw.RunPreFilterPlugins(ctx, state, pod)
	diag.UnschedulablePlugins = unsched
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return "", st.AsError()
		}
		diag.NodeToStatus.SetAbsentNodesStatus(st)
		diag.PreFilterMsg = st.Message()
		diag.AddPluginStatus(st)
		return "", fitError()
	}
	if nnn := pod.Status.NominatedNodeName; nnn != "" {
		// upstream's evaluateNominatedNode
		if ni, err := prof.lister.NodeInfos().Get(nnn); err == nil && ni != nil {
			st := fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
			if st.IsSuccess() {
				return nnn, nil
			}
			if st.Code() == fwk.Error {
				sc.s.logger.Error(st.AsError(), "Evaluation failed on nominated node", "pod", klog.KObj(pod), "node", nnn)
			}
		}
	}
	nodes := all
	if !pre.AllNodes() {
		nodes = nil
		for _, ni := range all {
			if pre.NodeNames.Has(ni.Node().Name) {
				nodes = append(nodes, ni)
			}
		}
		diag.NodeToStatus.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unsched))))
		if len(nodes) == 0 {
			return "", fitError()
		}
	}
	toFind := fwkadapter.NumFeasibleNodesToFind(prof.pct, len(nodes))
	if !fw.HasScorePlugins() {
		toFind = 1
	}
	var feasible []fwk.NodeInfo
	start, processed := prof.next%len(nodes), 0
	for processed < len(nodes) && len(feasible) < toFind {
		n := min(max(toFind-len(feasible), minChunk), len(nodes)-processed)
		statuses, base := make([]*fwk.Status, n), processed
		fw.Parallelizer().Until(ctx, n, func(i int) {
			statuses[i] = fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodes[(start+base+i)%len(nodes)])
		}, metrics.Filter)
		for i := 0; i < n && len(feasible) < toFind; i++ {
			st := statuses[i]
			processed++
			switch {
			case st.IsSuccess():
				feasible = append(feasible, nodes[(start+base+i)%len(nodes)])
			case st.Code() == fwk.Error:
				return "", st.AsError()
			default:
				diag.NodeToStatus.Set(nodes[(start+base+i)%len(nodes)].Node().Name, st)
				diag.AddPluginStatus(st)
			}
		}
	}
	prof.next = (prof.next + processed) % len(all)
	switch len(feasible) {
	case 0:
		return "", fitError()
	case 1:
		return feasible[0].Node().Name, nil
	}
	if st := fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() && !st.IsSkip() {
		return "", st.AsError()
	}
	scores, st := fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return "", st.AsError()
	}
	best, bestScore, ties := "", int64(0), 0
	for _, ns := range scores {
		switch {
		case best == "" || ns.TotalScore > bestScore:
			best, bestScore, ties = ns.Name, ns.TotalScore, 1
		case ns.TotalScore == bestScore:
			ties++
			if rand.IntN(ties) == 0 {
				best = ns.Name
			}
		}
	}
	return best, nil
}

// buildMetrics registers the cache's collector, the scheduler's and the
// dispatcher's counters, and the Go and process collectors.
func (sc *Scheduler) buildMetrics() error {
	sc.registry = prometheus.NewRegistry()
	col, err := schedmetrics.NewCollector(sc.cache, schedmetrics.WithInformer(sc.adapter))
	if err != nil {
		return err
	}
	sc.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedcache_scheduler_attempts_total",
		Help: "Scheduling attempts by result: scheduled, unschedulable, error, binding_failed.",
	}, []string{"result"})
	sc.moves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "schedcache_scheduler_unschedulable_moves_total",
		Help: "Pods moved from the unschedulable pool back to the queue, by cluster event (a plugin's queueing hint said Queue; UnschedulableTimeout: the periodic flush).",
	}, []string{"event"})
	sc.preemptions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "schedcache_scheduler_preemptions_total",
		Help: "PostFilter runs that nominated a node (DefaultPreemption evicted victims for the pod).",
	})
	cs := []prometheus.Collector{col, sc.attempts, sc.moves, sc.preemptions, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "schedcache_scheduler_leader", Help: "1 while this replica schedules."},
			func() float64 {
				if sc.Leading() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "schedcache_scheduler_queue_length", Help: "Pods waiting in the scheduling queue, backoff excluded."},
			func() float64 { return float64(sc.queue.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "schedcache_scheduler_unschedulable_pods", Help: "Pods in the unschedulable pool, waiting for a cluster event."},
			func() float64 { return float64(sc.pool.len()) }),
	}
	for _, f := range []struct {
		name, help string
		get        func(bind.ClientCounts) int64
	}{
		{"schedcache_dispatcher_calls_succeeded_total", "API calls that succeeded.", func(c bind.ClientCounts) int64 { return c.Succeeded }},
		{"schedcache_dispatcher_calls_failed_total", "API calls that failed after their retries.", func(c bind.ClientCounts) int64 { return c.Failed }},
		{"schedcache_dispatcher_retries_total", "Attempts after the first.", func(c bind.ClientCounts) int64 { return c.Retries }},
		{"schedcache_dispatcher_throttled_total", "Answers 429 Too Many Requests.", func(c bind.ClientCounts) int64 { return c.Throttled }},
		{"schedcache_dispatcher_conflicts_total", "Answers 409 Conflict.", func(c bind.ClientCounts) int64 { return c.Conflicts }},
	} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: f.name, Help: f.help},
			func() float64 { return float64(f.get(sc.disp.Counts())) }))
	}
	for _, c := range cs {
		if err := sc.registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// mux serves /healthz (leader election's watchdog: failing when this
// replica leads on a lease it has not renewed in time), /readyz (the
// informers synced) and /metrics.
func (sc *Scheduler) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if sc.health != nil {
			if err := sc.health.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	m.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		sc.mu.Lock()
		synced := sc.synced
		sc.mu.Unlock()
		if !synced {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	m.Handle("/metrics", promhttp.HandlerFor(sc.registry, promhttp.HandlerOpts{}))
	return m
}
