package actor

import (
	"container/heap"
	"time"
)

type expiryItem struct {
	deadline time.Time
	key      string
	rec      *podRecord
	armed    uint64
}

type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = expiryItem{}
	*h = old[:len(old)-1]
	return it
}

// FinishBinding arms the expiry deadline of an assumed pod; it is a no-op
// for other pods.
func (c *core) FinishBinding(key string, now time.Time) error {
	c.seq++
	r, ok := c.pods[key]
	if !ok || !r.assumed {
		return nil
	}
	if c.ttl == 0 {
		return nil // upstream finishes the binding but never expires it
	}
	c.armSeq++
	r.armed = c.armSeq
	heap.Push(&c.expiry, expiryItem{deadline: now.Add(c.ttl), key: key, rec: r, armed: r.armed})
	return nil
}

// Expire removes up to limit assumed pods whose binding finished and whose
// deadline is strictly before now, as upstream's expiry pass does. It
// returns how many it removed and whether more are due now.
func (c *core) Expire(now time.Time, limit int) (expired int, more bool) {
	for c.expiry.Len() > 0 {
		it := c.expiry[0]
		if !now.After(it.deadline) {
			return expired, false
		}
		if expired >= limit {
			return expired, true
		}
		heap.Pop(&c.expiry)
		r := it.rec
		// it.armed >= 1, so a match means the binding finished and this
		// item holds the pod's current deadline.
		if c.pods[it.key] != r || !r.assumed || r.armed != it.armed {
			continue // stale: re-armed, confirmed, forgotten or removed since
		}
		c.seq++
		c.subtract(r, r.info.HasAffinity(), r.info.HasRequiredAntiAffinity(), r.info.HasRequiredNonHostScopedAntiAffinity())
		c.group(memberRemove, r.info.Pod()) // v1.35's removePod of the cached pod
		expired++
	}
	return expired, false
}
