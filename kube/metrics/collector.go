// Package metrics exposes a schedcache.Cache to Prometheus and to people
// debugging it: a Collector (upstream's scheduler_cache_size plus the
// cache's own counters), a Comparer of the cache against informer listers
// (upstream's cache debugger comparer) and a JSON dump.
//
// Upstream is k8s.io/kubernetes v1.37.2: its cache exports one metric,
// scheduler_cache_size with the types assumed_pods, pods and nodes, as in
// v1.35, and its debugger is unchanged. Its new pod-group metrics
// (scheduler_podgroup_schedule_attempts_total, ..._duration_seconds,
// scheduler_queued_entities) measure scheduling cycles and the queue, not
// the cache; the cache's pod groups are exported here under schedcache's
// own name, schedcache_pod_groups.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/kube/bind"
	"github.com/schedcache/schedcache/kube/informer"
)

// ErrNilCache is returned for a nil cache.
var ErrNilCache = errors.New("metrics: nil cache")

// Option configures NewCollector.
type Option func(*Collector)

// WithNow sets the time source of the snapshot age (default time.Now).
// The age is now minus the cache's injected clock's time at the last
// publication, so both should be the same clock.
func WithNow(now func() time.Time) Option { return func(c *Collector) { c.now = now } }

// WithInformer adds the informer adapter's event counters.
func WithInformer(a *informer.Adapter) Option { return func(c *Collector) { c.informer = a } }

// WithBinder adds the binder loop's outcome counters.
func WithBinder(b *bind.Binder) Option { return func(c *Collector) { c.binder = b } }

// Collector is a prometheus.Collector for a cache.
//
// Contract: Describe and Collect are safe for concurrent use. Collect
// reads Cache.Stats (atomic loads, the mailbox's length and the latest
// snapshot) and Cache.PodGroups (the latest snapshot's table): it never
// waits for the coordinator and takes no lock the cache's writers take,
// so scraping does not stall the cache; what it
// costs the writers is measured by BenchmarkCycleWithScraper.
type Collector struct {
	cache    *schedcache.Cache // immutable
	now      func() time.Time  // immutable
	informer *informer.Adapter // immutable; may be nil
	binder   *bind.Binder      // immutable; may be nil

	cacheSize, podGroups, mailboxDepth, mailboxCap, epoch, age, backlog, failed *prometheus.Desc // immutable
	batches, batchSize, publications, ops, errs, expired, asyncErrs             *prometheus.Desc // immutable
	events, badEvents, bindings                                                 *prometheus.Desc // immutable
}

// NewCollector returns a collector for c; register it with a
// prometheus.Registerer.
func NewCollector(c *schedcache.Cache, opts ...Option) (*Collector, error) {
	if c == nil {
		return nil, ErrNilCache
	}
	col := &Collector{
		cache: c,
		now:   time.Now,
		// Upstream's metric: pkg/scheduler/metrics CacheSize.
		cacheSize:    prometheus.NewDesc("scheduler_cache_size", "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.", []string{"type"}, nil),
		podGroups:    prometheus.NewDesc("schedcache_pod_groups", "Pod groups ('podgroup') and composite pod groups ('compositepodgroup') in the cache, placeholders kept for members or children included; 0 while the GenericWorkload and CompositePodGroup gates are off.", []string{"type"}, nil),
		mailboxDepth: prometheus.NewDesc("schedcache_mailbox_depth", "Operations queued in the coordinator's mailbox.", nil, nil),
		mailboxCap:   prometheus.NewDesc("schedcache_mailbox_capacity", "Capacity of the coordinator's mailbox.", nil, nil),
		batches:      prometheus.NewDesc("schedcache_batches_total", "Batches applied by the coordinator (a synchronous call run inline counts as a batch of one).", nil, nil),
		batchSize:    prometheus.NewDesc("schedcache_batch_size", "Operations per batch (1 for a synchronous call run inline).", nil, nil),
		publications: prometheus.NewDesc("schedcache_publications_total", "Snapshots published.", nil, nil),
		epoch:        prometheus.NewDesc("schedcache_snapshot_epoch", "Epoch of the latest published snapshot.", nil, nil),
		age:          prometheus.NewDesc("schedcache_snapshot_age_seconds", "Time since the latest snapshot was published (0 before the first).", nil, nil),
		ops:          prometheus.NewDesc("schedcache_operations_total", "Operations finished, by kind.", []string{"op"}, nil),
		errs:         prometheus.NewDesc("schedcache_operation_errors_total", "Operations finished with an error, by kind.", []string{"op"}, nil),
		expired:      prometheus.NewDesc("schedcache_expired_pods_total", "Assumed pods removed by TTL expiry.", nil, nil),
		asyncErrs:    prometheus.NewDesc("schedcache_async_errors_total", "Failures of asynchronous (informer) operations.", nil, nil),
		backlog:      prometheus.NewDesc("schedcache_async_error_backlog", "Asynchronous failures not yet delivered to the handler.", nil, nil),
		failed:       prometheus.NewDesc("schedcache_failed", "1 once the cache has failed and refuses writes.", nil, nil),
		events:       prometheus.NewDesc("schedcache_informer_events_total", "Informer events submitted to the cache, by resource ('pod' for assigned pods, 'podgroup_member' for unassigned pod-group members, 'assumed_pod' for assumed pods deleted, 'node', 'podgroup', 'compositepodgroup', 'any' for tombstones) and event.", []string{"resource", "event"}, nil),
		badEvents:    prometheus.NewDesc("schedcache_informer_rejected_events_total", "Informer callbacks not applied, by reason: 'unassigned' (an unassigned pod needing no cache call), 'unchanged' (an update with an unchanged resource version), 'wrong_type', 'submit_error' (refused by the cache).", []string{"reason"}, nil),
		bindings:     prometheus.NewDesc("schedcache_bindings_total", "Binder outcomes.", []string{"result"}, nil),
	}
	for _, o := range opts {
		o(col)
	}
	return col, nil
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cacheSize, c.podGroups, c.mailboxDepth, c.mailboxCap, c.batches, c.batchSize, c.publications,
		c.epoch, c.age, c.ops, c.errs, c.expired, c.asyncErrs, c.backlog, c.failed} {
		ch <- d
	}
	if c.informer != nil {
		ch <- c.events
		ch <- c.badEvents
	}
	if c.binder != nil {
		ch <- c.bindings
	}
}

// Collect reads the cache's counters and sends them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.cache.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(c.cacheSize, float64(st.AssumedPods), "assumed_pods")
	gauge(c.cacheSize, float64(st.Pods), "pods")
	gauge(c.cacheSize, float64(st.Nodes), "nodes")
	groups := c.cache.PodGroups() // one atomic load; Len and CompositeLen are O(1)
	gauge(c.podGroups, float64(groups.Len()), "podgroup")
	gauge(c.podGroups, float64(groups.CompositeLen()), "compositepodgroup")
	gauge(c.mailboxDepth, float64(st.MailboxDepth))
	gauge(c.mailboxCap, float64(st.MailboxCap))
	counter(c.batches, float64(st.Batches))
	buckets := make(map[float64]uint64, len(schedcache.BatchBuckets)-1)
	var cum uint64
	for i, b := range schedcache.BatchBuckets[:len(schedcache.BatchBuckets)-1] { // the last bucket is +Inf
		cum += st.BatchSizes[i]
		buckets[float64(b)] = cum
	}
	ch <- prometheus.MustNewConstHistogram(c.batchSize, st.Batches, float64(st.BatchedOps), buckets)
	counter(c.publications, float64(st.Publications))
	gauge(c.epoch, float64(st.Epoch))
	age := 0.0
	if !st.PublishedAt.IsZero() {
		age = max(0, c.now().Sub(st.PublishedAt).Seconds())
	}
	gauge(c.age, age)
	for k := 1; k < schedcache.NumOpKinds; k++ {
		name := schedcache.OpKind(k).String()
		counter(c.ops, float64(st.Ops[k]), name)
		counter(c.errs, float64(st.Errors[k]), name)
	}
	counter(c.expired, float64(st.Expired))
	counter(c.asyncErrs, float64(st.AsyncErrors))
	gauge(c.backlog, float64(st.AsyncBacklog))
	failed := 0.0
	if st.Failed {
		failed = 1
	}
	gauge(c.failed, failed)
	if c.informer != nil {
		n := c.informer.Counts()
		counter(c.events, float64(n.PodAdds), "pod", "add")
		counter(c.events, float64(n.PodUpdates), "pod", "update")
		counter(c.events, float64(n.PodDeletes), "pod", "delete")
		counter(c.events, float64(n.NodeAdds), "node", "add")
		counter(c.events, float64(n.NodeUpdates), "node", "update")
		counter(c.events, float64(n.NodeDeletes), "node", "delete")
		counter(c.events, float64(n.MemberAdds), "podgroup_member", "add")
		counter(c.events, float64(n.MemberUpdates), "podgroup_member", "update")
		counter(c.events, float64(n.MemberDeletes), "podgroup_member", "delete")
		counter(c.events, float64(n.AssumedPodDeletes), "assumed_pod", "delete")
		counter(c.events, float64(n.PodGroupAdds), "podgroup", "add")
		counter(c.events, float64(n.PodGroupUpdates), "podgroup", "update")
		counter(c.events, float64(n.PodGroupDeletes), "podgroup", "delete")
		counter(c.events, float64(n.CompositePodGroupAdds), "compositepodgroup", "add")
		counter(c.events, float64(n.CompositePodGroupUpdates), "compositepodgroup", "update")
		counter(c.events, float64(n.CompositePodGroupDeletes), "compositepodgroup", "delete")
		counter(c.events, float64(n.Tombstones), "any", "tombstone")
		counter(c.badEvents, float64(n.Unassigned), "unassigned")
		counter(c.badEvents, float64(n.Unchanged), "unchanged")
		counter(c.badEvents, float64(n.WrongType), "wrong_type")
		counter(c.badEvents, float64(n.SubmitErrors), "submit_error")
	}
	if c.binder != nil {
		n := c.binder.Counts()
		counter(c.bindings, float64(n.Bound), "bound")
		counter(c.bindings, float64(n.Forgotten), "forgotten")
		counter(c.bindings, float64(n.Refused), "refused")
	}
}
