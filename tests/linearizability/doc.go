// Package linearizability checks that schedcache.Cache is linearizable with
// respect to a sequential model of the upstream pod state machine
// (docs/upstream-semantics.md section 1): concurrent
// histories of pod operations, point reads (GetPod, IsAssumedPod, PodCount,
// NodeCount) and whole-snapshot reads are recorded with monotonic call and
// return timestamps and checked with porcupine.
//
// The package holds tests only; see lin_test.go. Run it long with
//
//	go test -race ./tests/linearizability/ -run TestLinearizable -lin.histories=50000
package linearizability
