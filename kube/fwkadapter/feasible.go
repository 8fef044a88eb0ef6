package fwkadapter

// Upstream's constants of numFeasibleNodesToFind (pkg/scheduler/schedule_one.go).
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// NumFeasibleNodesToFind is upstream's numFeasibleNodesToFind: how many
// feasible nodes a scheduling cycle over numAllNodes nodes looks for
// before it stops filtering, for a percentageOfNodesToScore of
// percentage (0: adaptive, 50% minus 1% per 125 nodes, at least 5%;
// never fewer than 100 nodes, nor more than there are). One rule for the
// scheduler of kube/cmd/schedcache-scheduler and the simulator's picker
// (bench/fwkpick).
func NumFeasibleNodesToFind(percentage int32, numAllNodes int) int {
	n := int32(numAllNodes)
	if n < minFeasibleNodesToFind {
		return numAllNodes
	}
	if percentage == 0 {
		percentage = int32(50) - n/125
		if percentage < minFeasibleNodesPercentageToFind {
			percentage = minFeasibleNodesPercentageToFind
		}
	}
	num := n * percentage / 100
	if num < minFeasibleNodesToFind {
		return minFeasibleNodesToFind
	}
	return int(num)
}
