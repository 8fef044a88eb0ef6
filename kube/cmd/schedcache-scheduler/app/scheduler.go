package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"

	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/bind"
	"github.com/schedcache/schedcache/kube/fwkadapter"
	"github.com/schedcache/schedcache/kube/informer"
)

// Errors of Run, besides *ConfigError; each is wrapped with its cause.
var (
	// ErrUnreachable: the API server did not answer within the startup
	// timeout.
	ErrUnreachable = errors.New("API server unreachable")
	// ErrUnauthorized: the API server refused the credentials.
	ErrUnauthorized = errors.New("API server refused the credentials")
	// ErrNotSynced: the informers did not list everything within the
	// startup timeout.
	ErrNotSynced = errors.New("informers did not sync")
	// ErrHTTP: the HTTP endpoint could not listen or failed.
	ErrHTTP = errors.New("HTTP endpoint failed")
	// ErrStopped: Run was called on a Scheduler already run or closed.
	ErrStopped = errors.New("scheduler already run or closed")
)

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

var registerMetrics sync.Once

// Scheduler is a secondary scheduler: informers feeding a schedcache
// cache, upstream's plugins run over its snapshots through fwkadapter, a
// client-go dispatcher binding the pods, leader election on a Lease, and
// an HTTP endpoint.
//
// Contract: New builds everything and starts nothing but the HTTP
// listener's socket; Run runs it once, until ctx ends, and returns only
// when every goroutine it started has stopped; Close releases what New
// built when Run is never called. Addr may be called at any time.
type Scheduler struct {
	s       *settings                       // immutable
	client  clientset.Interface             // immutable
	factory informers.SharedInformerFactory // immutable; started by Run
	cache   *schedcache.Cache               // immutable; closed when Run or Close ends
	disp    *bind.ClientDispatcher          // immutable; run by Run
	adapter *informer.Adapter               // immutable
	profs   map[string]*profile             // immutable map: schedulerName -> framework
	queue   workqueue.TypedRateLimitingInterface[string]
	// queue: immutable pointer; the workqueue is safe for concurrent use.
	backoff     workqueue.TypedRateLimiter[string]     // immutable; the queue's per-pod backoff, safe for concurrent use
	pool        *pool                                  // immutable pointer: the unschedulable pool, safe for concurrent use
	podReg      cache.ResourceEventHandlerRegistration // immutable after New: the pod handlers' registration
	nodeReg     cache.ResourceEventHandlerRegistration // immutable after New: the node handlers' registration
	nom         *fwkadapter.Nominator                  // immutable pointer: the nominated pods, safe for concurrent use
	broadcaster events.EventBroadcaster                // immutable
	recorder    events.EventRecorderLogger             // immutable
	listener    net.Listener                           // immutable; nil when HTTP is off
	registry    *prometheus.Registry                   // immutable
	health      *leaderelection.HealthzAdaptor
	// health: immutable pointer; nil without leader election.
	attempts    *prometheus.CounterVec         // immutable pointer; safe for concurrent use
	moves       *prometheus.CounterVec         // immutable pointer: pool moves by event; safe for concurrent use
	preemptions prometheus.Counter             // immutable; safe for concurrent use
	draStop     func()                         // immutable; stops the DRA slice tracker (nil without DRA)
	recStop     chan struct{}                  // immutable; closed to stop the metrics recorder
	recorders   []*metrics.MetricAsyncRecorder // immutable after New: one per profile, stopped by recStop

	mu       sync.Mutex // guards started, closed, synced, leading
	started  bool       // guarded by mu
	closed   bool       // guarded by mu
	synced   bool       // guarded by mu: informers synced (readyz)
	leading  bool       // guarded by mu
	bindings sync.WaitGroup
	// bindings: the binding goroutines of the scheduling loop.
}

// profile is one KubeSchedulerProfile's framework and the snapshot it
// reads. Used by the scheduling loop's goroutine only (one loop at a
// time), except fw's read-only accessors.
type profile struct {
	name   string              // immutable
	fw     framework.Framework // immutable
	snap   *schedcache.Snapshot
	lister *fwkadapter.Lister // immutable; reads snap
	// mutable: the framework's MutableSnapshotSharedLister, reset to
	// snap before PostFilter; owned by the scheduling loop's goroutine.
	mutable *fwkadapter.Mutable
	pct     int32 // immutable: the profile's percentageOfNodesToScore, else the configuration's (0: adaptive)
	next    int   // owned by the scheduling loop's goroutine: upstream's nextStartNodeIndex
	// snap: owned by the scheduling loop's goroutine.
}

// New resolves opts, connects to the API server, checks the
// permissions, and builds the scheduler without starting it.
func New(ctx context.Context, opts Options) (_ *Scheduler, err error) {
	s, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	logger := s.logger
	client, server := opts.Client, "(given client)"
	if client == nil {
		rc, err := opts.restConfig(s.cfg)
		if err != nil {
			return nil, err
		}
		if client, err = clientset.NewForConfig(rc); err != nil {
			return nil, &ConfigError{Source: "REST configuration", Err: err}
		}
		server = rc.Host
	}
	if err := waitForServer(ctx, client, server, s.startupTimeout); err != nil {
		return nil, err
	}
	if !opts.SkipPermissionCheck {
		if err := CheckPermissions(ctx, client, s.leaseNamespace, s.leaseName, s.leaderElect); err != nil {
			return nil, err
		}
	}

	sc := &Scheduler{s: s, client: client, profs: map[string]*profile{}, recStop: make(chan struct{}), nom: fwkadapter.NewNominator()}
	defer func() {
		if err != nil {
			sc.release()
		}
	}()
	sc.disp, err = bind.NewClientDispatcher(client, bind.ClientOptions{Workers: int(s.cfg.Parallelism), Logger: logger})
	if err != nil {
		return nil, err
	}
	ad, err := bind.NewDispatcher(sc.disp)
	if err != nil {
		return nil, err
	}
	// Assumed pods never expire (upstream's durationToExpireAssumedPod
	// is 0): a binding ends with FinishBinding or ForgetPod, and the
	// informer confirms or removes the pod.
	sc.cache, err = schedcache.New(context.WithoutCancel(ctx), schedcache.WithTTL(0), schedcache.WithDispatcher(ad),
		schedcache.WithAsyncErrorHandler(informer.AsyncErrorHandler(logger, nil)))
	if err != nil {
		return nil, err
	}
	sc.factory = scheduler.NewInformerFactory(client, 0, nil)
	// The adapter's handlers are registered below, each chained with the
	// scheduler's own on the same registration (see chain).
	sc.adapter, err = informer.New(sc.cache, informer.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	sc.broadcaster = events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	sc.recorder = sc.broadcaster.NewRecorder(kscheme.Scheme, DefaultSchedulerName)
	if err := sc.buildProfiles(ctx); err != nil {
		return nil, err
	}
	sc.backoff = workqueue.NewTypedItemExponentialFailureRateLimiter[string](s.initialBackoff, s.maxBackoff)
	// The queue's order is PrioritySort's (prioqueue.go); its backoff the
	// rate limiter's.
	order := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Name:  "schedcache-scheduler",
		Queue: newPrioQueue(podPriority(sc.factory.Core().V1().Pods().Lister())),
	})
	sc.queue = workqueue.NewTypedRateLimitingQueueWithConfig(sc.backoff, workqueue.TypedRateLimitingQueueConfig[string]{
		Name:          "schedcache-scheduler",
		DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "schedcache-scheduler", Queue: order}),
	})
	if err := sc.buildMetrics(); err != nil {
		return nil, err
	}
	sc.pool = &pool{queue: sc.queue, hints: map[string]hintMap{}, moves: sc.moves, logger: logger, now: time.Now,
		sync: sc.cache.Sync, pods: map[string]*parked{}}
	for name, p := range sc.profs {
		if sc.pool.hints[name], err = buildHintMap(ctx, p.fw); err != nil {
			return nil, &ConfigError{Source: "profile " + name, Err: fmt.Errorf("queueing hints: %w", err)}
		}
	}
	if sc.podReg, err = sc.factory.Core().V1().Pods().Informer().AddEventHandler(chain(sc.adapter.PodHandler(), sc.podHandler())); err != nil {
		return nil, err
	}
	if sc.nodeReg, err = sc.factory.Core().V1().Nodes().Informer().AddEventHandler(chain(sc.adapter.NodeHandler(), sc.nodeHandler())); err != nil {
		return nil, err
	}
	if s.leaderElect {
		sc.health = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	if s.httpAddr != "off" {
		if sc.listener, err = net.Listen("tcp", s.httpAddr); err != nil {
			return nil, fmt.Errorf("%w: listen on %s: %w", ErrHTTP, s.httpAddr, err)
		}
	}
	return sc, nil
}

// buildProfiles makes one framework per profile, over the in-tree
// plugins, with the DRA and CSI managers upstream gives them.
func (sc *Scheduler) buildProfiles(ctx context.Context) error {
	logger := sc.s.logger
	fwkadapter.Enable()
	registerMetrics.Do(metrics.Register) // the framework records into upstream's metrics
	var dra fwk.SharedDRAManager
	if utilfeature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		claims := assumecache.NewAssumeCache(logger, sc.factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		topts := tracker.Options{
			EnableDeviceTaintRules:   utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules),
			EnableConsumableCapacity: utilfeature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
			SliceInformer:            sc.factory.Resource().V1().ResourceSlices(),
			KubeClient:               sc.client,
		}
		if topts.EnableDeviceTaintRules {
			topts.TaintInformer = sc.factory.Resource().V1().DeviceTaintRules()
		}
		tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		t, err := tracker.StartTracker(tctx, topts)
		if err != nil {
			cancel()
			return fmt.Errorf("DRA resource slice tracker: %w", err)
		}
		sc.draStop = func() { t.Stop(); cancel() }
		dra = dynamicresources.NewDRAManager(tctx, claims, t, sc.factory)
	}
	csi := nodevolumelimits.NewCSIManager(sc.factory.Storage().V1().CSINodes().Lister())
	registry := plugins.NewInTreeRegistry()
	registry[names.DefaultPreemption] = preemptionFactory
	// A context already done: NewFramework's context only stops the
	// metrics recorder it would start, which WithMetricsRecorder
	// replaces.
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cancel()
	for i := range sc.s.cfg.Profiles {
		p := &sc.s.cfg.Profiles[i]
		snap := schedcache.NewEmptySnapshot()
		lister, err := fwkadapter.NewLister(snap)
		if err != nil {
			return err
		}
		mutable, err := fwkadapter.NewMutable(snap)
		if err != nil {
			return err
		}
		rec := metrics.NewMetricsAsyncRecorder(1000, time.Second, sc.recStop)
		sc.recorders = append(sc.recorders, rec)
		f, err := frameworkruntime.NewFramework(fctx, registry, p,
			frameworkruntime.WithComponentConfigVersion(sc.s.cfg.TypeMeta.APIVersion),
			frameworkruntime.WithClientSet(sc.client),
			frameworkruntime.WithInformerFactory(sc.factory),
			frameworkruntime.WithSharedDRAManager(dra),
			frameworkruntime.WithSharedCSIManager(csi),
			frameworkruntime.WithSnapshotSharedLister(lister),
			frameworkruntime.WithMutableSnapshotLister(mutable),
			frameworkruntime.WithEventRecorder(sc.recorder),
			frameworkruntime.WithPodNominator(sc.nom),
			frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
			frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
			frameworkruntime.WithMetricsRecorder(rec),
			frameworkruntime.WithParallelism(int(sc.s.cfg.Parallelism)),
			frameworkruntime.WithLogger(logger),
		)
		if err != nil {
			return &ConfigError{Source: "profile " + p.SchedulerName, Err: err}
		}
		var pct int32
		switch {
		case p.PercentageOfNodesToScore != nil:
			pct = *p.PercentageOfNodesToScore
		case sc.s.cfg.PercentageOfNodesToScore != nil:
			pct = *sc.s.cfg.PercentageOfNodesToScore
		}
		sc.profs[p.SchedulerName] = &profile{name: p.SchedulerName, fw: f, snap: snap, lister: lister, mutable: mutable, pct: pct}
	}
	return nil
}

// release frees what New built; idempotent.
func (sc *Scheduler) release() {
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	sc.closed = true
	sc.mu.Unlock()
	if sc.queue != nil {
		sc.queue.ShutDown()
	}
	if sc.factory != nil {
		sc.factory.Shutdown()
	}
	if sc.disp != nil {
		sc.disp.Close()
	}
	if sc.cache != nil {
		_ = sc.cache.Close() // its error is the cache's failure, reported where it happened
	}
	if sc.draStop != nil {
		sc.draStop()
	}
	close(sc.recStop)
	for _, r := range sc.recorders {
		<-r.IsStoppedCh
	}
	if sc.broadcaster != nil {
		sc.broadcaster.Shutdown()
	}
	if sc.listener != nil {
		_ = sc.listener.Close() // already closed by the server when Run served
	}
}

// Close releases a Scheduler that Run never ran; after Run it does
// nothing.
func (sc *Scheduler) Close() {
	sc.mu.Lock()
	started := sc.started
	if !started {
		sc.started = true // Run refuses from now on
	}
	sc.mu.Unlock()
	if !started {
		sc.release()
	}
}

// Addr is the HTTP endpoint's address (nil when it is off).
func (sc *Scheduler) Addr() net.Addr {
	if sc.listener == nil {
		return nil
	}
	return sc.listener.Addr()
}

// Leading reports whether this replica schedules now.
func (sc *Scheduler) Leading() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.leading
}

// Identity is this replica's identity in the Lease.
func (sc *Scheduler) Identity() string { return sc.s.identity }

// Cache is the scheduler's cache (tests and debugging; do not close it).
func (sc *Scheduler) Cache() *schedcache.Cache { return sc.cache }

// Run builds the scheduler with New and runs it until ctx ends.
func Run(ctx context.Context, opts Options) error {
	sc, err := New(ctx, opts)
	if err != nil {
		return err
	}
	return sc.Run(ctx)
}

// Run starts the informers, the dispatcher and the HTTP endpoint, waits
// for the informers to sync, then schedules: at once without leader
// election, else whenever this replica holds the Lease (on losing it,
// the scheduling loop stops, the cache and informers keep running, and
// the replica stands again). It returns nil when ctx ends, or the error
// that stopped it; every goroutine it started has stopped by then.
func (sc *Scheduler) Run(ctx context.Context) (err error) {
	sc.mu.Lock()
	if sc.started {
		sc.mu.Unlock()
		return ErrStopped
	}
	sc.started = true
	sc.mu.Unlock()
	defer sc.release()
	logger := sc.s.logger
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wg sync.WaitGroup // the HTTP goroutines and the pool's flush
	httpErr := make(chan error, 1)
	if sc.listener != nil {
		srv := &http.Server{Handler: sc.mux(), ReadHeaderTimeout: 10 * time.Second}
		wg.Add(2)
		go func() { // owned by Run: ends when the server shuts down
			defer wg.Done()
			if err := srv.Serve(sc.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				httpErr <- fmt.Errorf("%w: %w", ErrHTTP, err)
				cancel()
			}
		}()
		go func() { // owned by Run: shuts the server down when ctx ends
			defer wg.Done()
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx) // a slow client only delays the exit
		}()
	}
	sc.broadcaster.StartRecordingToSink(ctx.Done())
	wg.Add(1)
	go func() { // owned by Run: ends when ctx ends
		defer wg.Done()
		sc.pool.runFlush(ctx)
	}()
	sc.disp.Run(ctx)
	sc.factory.Start(ctx.Done())
	if err := sc.waitForSync(ctx); err != nil {
		cancel()
		wg.Wait()
		return err
	}
	logger.Info("Informers synced", "profiles", sortedKeys(sc.profs))
	if !sc.s.leaderElect {
		sc.setLeading(true)
		sc.scheduleLoop(ctx)
	} else if err := sc.elect(ctx); err != nil {
		cancel()
		wg.Wait()
		return err
	}
	cancel()
	wg.Wait()
	select {
	case err := <-httpErr:
		return err
	default:
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (sc *Scheduler) setLeading(v bool) {
	sc.mu.Lock()
	sc.leading = v
	sc.mu.Unlock()
}

// chain calls the cache adapter's handler, then the scheduler's, for
// each event, on the informer's one handler goroutine: a cluster event
// reaches the unschedulable pool after the adapter has given it to the
// cache (and the pool waits for its publication before moving a pod; see
// pool.event), so that a pod it moves is tried on a snapshot holding the
// event. Two registrations would run on two goroutines in no order. The
// cache's gates are off (no pod groups), so the pod and node informers
// are all that informer.Attach would register.
func chain(first, then cache.ResourceEventHandler) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			first.OnAdd(obj, false)
			then.OnAdd(obj, false)
		},
		UpdateFunc: func(oldObj, newObj any) {
			first.OnUpdate(oldObj, newObj)
			then.OnUpdate(oldObj, newObj)
		},
		DeleteFunc: func(obj any) {
			first.OnDelete(obj)
			then.OnDelete(obj)
		},
	}
}

// handlersSynced: the pod and node handlers have seen the initial lists
// and the cache has published them (what the adapter's HasSynced says of
// its own registrations).
func (sc *Scheduler) handlersSynced() bool {
	return sc.podReg.HasSynced() && sc.nodeReg.HasSynced() && sc.cache.Sync() == nil
}

// waitForSync waits, at most the startup timeout, for every informer
// the cache and the plugins use; the error names those that did not sync.
func (sc *Scheduler) waitForSync(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, sc.s.startupTimeout)
	defer cancel()
	var missing []string
	for typ, ok := range sc.factory.WaitForCacheSync(sctx.Done()) {
		if !ok {
			missing = append(missing, typ.String())
		}
	}
	if len(missing) == 0 && !cache.WaitForCacheSync(sctx.Done(), sc.handlersSynced) {
		missing = append(missing, "schedcache informer adapter")
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w within %v: %v (is the API server reachable, and may the scheduler list and watch them?)",
			ErrNotSynced, sc.s.startupTimeout, missing)
	}
	sc.mu.Lock()
	sc.synced = true
	sc.mu.Unlock()
	return nil
}

// elect campaigns for the Lease until ctx ends; while leading it runs
// the scheduling loop. A lost lease stops the loop, waits for it, and
// campaigns again.
func (sc *Scheduler) elect(ctx context.Context) error {
	logger := sc.s.logger
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, sc.s.leaseNamespace, sc.s.leaseName,
		sc.client.CoreV1(), sc.client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: sc.s.identity, EventRecorder: nil})
	if err != nil {
		return &ConfigError{Source: "leader election lock", Err: err}
	}
	for ctx.Err() == nil {
		// OnStartedLeading runs on a goroutine of the elector's, which
		// may start just as Run returns: it only hands the leading
		// context over (never blocking: one send per elector into a
		// buffer of one), and this goroutine runs the loop.
		leading := make(chan context.Context, 1)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   sc.s.leaseDuration,
			RenewDeadline:   sc.s.renewDeadline,
			RetryPeriod:     sc.s.retryPeriod,
			ReleaseOnCancel: true,
			Name:            sc.s.leaseName,
			WatchDog:        sc.health,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) { leading <- lctx },
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return &ConfigError{Source: "leader election", Err: err}
		}
		done := make(chan struct{})
		go func() { // owned by elect, which waits for done
			defer close(done)
			le.Run(ctx)
		}()
		select {
		case lctx := <-leading:
			logger.Info("Leading: scheduling", "identity", sc.s.identity, "lease", sc.s.leaseNamespace+"/"+sc.s.leaseName)
			sc.setLeading(true)
			sc.scheduleLoop(lctx) // returns once lctx ends: lease lost or ctx done
			sc.setLeading(false)
			<-done
		case <-done:
		}
		if ctx.Err() == nil {
			logger.Info("Lost the lease; standing again", "identity", sc.s.identity)
		}
	}
	return nil
}

// waitForServer asks the server's version until it answers or the
// timeout passes; a refusal of the credentials is final.
func waitForServer(ctx context.Context, client clientset.Interface, server string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		_, err := client.Discovery().ServerVersion()
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsUnauthorized(err):
			return false, fmt.Errorf("%s: %w: %w", server, ErrUnauthorized, err)
		}
		last = err
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnauthorized):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("%s: %w within %v: %w", server, ErrUnreachable, timeout, last)
}
