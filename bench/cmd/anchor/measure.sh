#!/usr/bin/env bash
# Measures the anchor (upstream's kube-scheduler v1.37.2, package
# bench/anchor) on the five scheduler_perf workloads at 5,000 nodes and
# writes the raw output: the machine (goos, goarch, cpu, GOMAXPROCS), the
# commit, each exact command, uptime before and after each run, the
# one-line summary and the JSON result.
#
#   bench/cmd/anchor/measure.sh [OUT]    (default docs/bench/anchor-<date>.txt)
#
# Environment: GOMAXPROCS (default 2), NODES (5000), and the measured pods
# per workload: BASIC_PODS (10000), NODE_AFFINITY_PODS (10000),
# ANTI_AFFINITY_PODS (3000: at most one such pod a node, 1,000 initial
# ones), SPREAD_PODS (5000), PREEMPTION_PODS (300: each preempts the
# four low-priority pods of a node, 20,000 initial ones); then
# SchedulingBasic again with RATE_PODS
# (1500) pods created at RATE (100) a second. The figures need a window
# of at least 10 s and several GCs; the command warns when a run is
# shorter. Takes 5 to 10 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../.." && pwd)
root=$(cd "$bench/.." && pwd)
out=${1:-$root/docs/bench/anchor-$(date -u +%F).txt}
export GOMAXPROCS=${GOMAXPROCS:-2}
nodes=${NODES:-5000}
bin=$(mktemp -d)/anchor
trap 'rm -rf "$(dirname "$bin")"' EXIT
(cd "$bench" && GOFLAGS=-mod=readonly go build -o "$bin" ./cmd/anchor)

. "$bench/scripts/lib.sh"
raw_header "bench/cmd/anchor/measure.sh: upstream's kube-scheduler v1.37.2 (pkg/scheduler.New, fake client set)" "$root" bench/anchor bench/cmd/anchor >"$out"

measure() {
	local name=$1 pods=$2 json
	shift 2
	json=$(mktemp)
	local cmd=(anchor -workload "$name" -nodes "$nodes" -pods "$pods" "$@" -json "$json")
	{
		echo
		echo "## $name${*:+ $*}"
		echo "command: GOMAXPROCS=$GOMAXPROCS go run ./cmd/anchor ${cmd[*]:1}"
		echo "uptime before: $(uptime)"
	} >>"$out"
	local rc=0
	"$bin" "${cmd[@]:1}" >>"$out" 2>&1 || rc=$?
	{
		echo "exit: $rc"
		echo "uptime after: $(uptime)"
		echo "json:"
		cat "$json" 2>/dev/null || true
	} >>"$out"
	rm -f "$json"
}

measure basic "${BASIC_PODS:-10000}"
measure node-affinity "${NODE_AFFINITY_PODS:-10000}"
measure pod-anti-affinity "${ANTI_AFFINITY_PODS:-3000}"
measure topology-spread "${SPREAD_PODS:-5000}"
measure preemption "${PREEMPTION_PODS:-300}"
# Latency at an arrival rate the scheduler keeps up with (all at once,
# latency is mostly the wait in the queue).
measure basic "${RATE_PODS:-1500}" -rate "${RATE:-100}"
echo "wrote $out"
