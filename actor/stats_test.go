package actor

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// AssumedCount equals the number of assumed records after every step of
// a random sequence of assumes, finishes, forgets, adds (confirmations),
// updates, removes and expiries.
func TestAssumedCountMatchesRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := newCore(2, time.Second)
	c.AddNode(testNode("n0", "A"))
	c.AddNode(testNode("n1", "B"))
	now := time.Unix(0, 0)
	steps := 3000
	if testing.Short() {
		steps = 500
	}
	for i := 0; i < steps; i++ {
		uid := fmt.Sprint("p", rng.IntN(20))
		node := fmt.Sprint("n", rng.IntN(2))
		info := testPod(t, uid, node, 100)
		switch rng.IntN(7) {
		case 0, 1:
			_ = c.AssumePod(info)
		case 2:
			_ = c.FinishBinding(uid, now)
		case 3:
			if r, ok := c.pods[uid]; ok {
				_ = c.ForgetPod(uid, r.info.Pod())
			}
		case 4:
			_ = c.AddPod(info)
		case 5:
			if r, ok := c.pods[uid]; ok {
				_ = c.UpdatePod(r.info.Pod(), testPod(t, uid, r.info.NodeName(), 200))
			}
		case 6:
			if r, ok := c.pods[uid]; ok {
				_ = c.RemovePod(uid, r.info.Pod())
			}
		}
		if rng.IntN(10) == 0 {
			now = now.Add(2 * time.Second)
			c.Expire(now, 5)
		}
		require.Equal(t, len(c.AssumedKeys()), c.AssumedCount(), "step %d", i)
	}
}
