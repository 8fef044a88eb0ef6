#!/usr/bin/env bash
# The simulator's real-plugin mode against the anchor (upstream's whole
# kube-scheduler v1.37.2, bench/anchor) on the scheduler_perf workloads at
# 5,000 nodes, in one run on one machine, and writes the raw output: the
# machine (goos, goarch, cpu, GOMAXPROCS), the commit, each exact command,
# uptime before and after each run, each run's summary and JSON, and a
# table at the end (bench/cmd/loadgen-fwk/compare.jq).
#
#   bench/cmd/loadgen-fwk/compare.sh [OUT]   (default docs/bench/fwk-vs-anchor-<date>.txt)
#
# Per workload, up to five runs, their order rotated from one workload to
# the next: the anchor; loadgen-fwk with the memo and the carry (-memo on
# -carry on, the defaults); loadgen-fwk with -memo off; where pods have
# inter-pod terms or spread constraints, loadgen-fwk with -carry off (the
# memo on); and, but for preemption and gang (deterministic mode only),
# loadgen-fwk in real time with PARALLEL (default 2; 0 none) schedulers on
# their own snapshots, committing optimistically through the cache. loadgen-fwk runs the perf-* preset with its measured
# phase's pod count raised so the window lasts at least 10 s where the
# workload holds that many pods (OURS_PODS_<WORKLOAD>,
# OURS_OFF_PODS_<WORKLOAD>, OURS_CARRY_OFF_PODS_<WORKLOAD>, 0 for no
# run); the anchor keeps measure.sh's counts (ANCHOR_PODS_<WORKLOAD>).
# Pod anti-affinity holds one pod per node: 1,000 pods at the start and
# at most 4,000 measured on 5,000 nodes. Both print their window,
# CPU time and GC count; compare pods/s only within one file, and prefer
# pods per CPU second on a shared machine. Environment: GOMAXPROCS
# (default 2), WORKLOADS (a subset of "basic node-affinity
# pod-anti-affinity topology-spread preemption gang", default all). The
# preemption workload (PreemptionBasic at 5,000 nodes: 20,000 low-priority
# pods, then high-priority ones that each preempt a node's four) counts the
# victims deleted beside the pods. Takes 15 to 30 minutes on 2 cores.
#
# gang is scheduler_perf's GangScheduling 5000Nodes_1000Gangs_3000Pods
# with the GenericWorkload gate on both sides (the anchor's gang workload;
# loadgen-fwk's perf-gang preset with -feature-gates GenericWorkload=true).
# Its check, at the end: every run placed each of its gangs whole (on
# this workload every gang fits), none partly, and bound three pods a
# gang. The anchor runs 9,000 pods (scheduler_perf's
# 5000Nodes_3000Gangs_9000Pods), memo off 6,000, memo on 60,000, each for a window of 10 s
# or more; TestGangMatchesAnchor compares the two at one size in CI.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../.." && pwd)
root=$(cd "$bench/.." && pwd)
out=${1:-$root/docs/bench/fwk-vs-anchor-$(date -u +%F).txt}
export GOMAXPROCS=${GOMAXPROCS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$bench" && GOFLAGS=-mod=readonly go build -o "$tmp/anchor" ./cmd/anchor && GOFLAGS=-mod=readonly go build -o "$tmp/loadgen-fwk" ./cmd/loadgen-fwk)

# workload name (anchor), preset, anchor pods, ours pods memo on, memo off,
# carry off (0: no such run), loadgen-fwk's extra flags (comma-separated; -: none)
workloads=(
	"basic perf-scheduling-basic ${ANCHOR_PODS_BASIC:-10000} ${OURS_PODS_BASIC:-120000} ${OURS_OFF_PODS_BASIC:-10000} ${OURS_CARRY_OFF_PODS_BASIC:-0} -"
	"node-affinity perf-node-affinity ${ANCHOR_PODS_NODE_AFFINITY:-10000} ${OURS_PODS_NODE_AFFINITY:-110000} ${OURS_OFF_PODS_NODE_AFFINITY:-10000} ${OURS_CARRY_OFF_PODS_NODE_AFFINITY:-0} -"
	"pod-anti-affinity perf-pod-anti-affinity ${ANCHOR_PODS_ANTI_AFFINITY:-3000} ${OURS_PODS_ANTI_AFFINITY:-4000} ${OURS_OFF_PODS_ANTI_AFFINITY:-2000} ${OURS_CARRY_OFF_PODS_ANTI_AFFINITY:-2000} -"
	"topology-spread perf-topology-spreading ${ANCHOR_PODS_SPREAD:-5000} ${OURS_PODS_SPREAD:-20000} ${OURS_OFF_PODS_SPREAD:-5000} ${OURS_CARRY_OFF_PODS_SPREAD:-7000} -"
	"preemption perf-preemption-basic ${ANCHOR_PODS_PREEMPTION:-300} ${OURS_PODS_PREEMPTION:-400} ${OURS_OFF_PODS_PREEMPTION:-300} ${OURS_CARRY_OFF_PODS_PREEMPTION:-0} -"
	"gang perf-gang ${ANCHOR_PODS_GANG:-9000} ${OURS_PODS_GANG:-60000} ${OURS_OFF_PODS_GANG:-6000} 0 -feature-gates,GenericWorkload=true"
)

. "$bench/scripts/lib.sh"
raw_header "bench/cmd/loadgen-fwk/compare.sh: loadgen-fwk (upstream's plugins on schedcache) against the anchor (upstream's kube-scheduler v1.37.2)" "$root" >"$out"

i=0
for w in "${workloads[@]}"; do
	read -r name preset apods opods offpods carryoff extra <<<"$w"
	flags=()
	[ "$extra" = - ] || IFS=, read -r -a flags <<<"$extra"
	case " ${WORKLOADS:-basic node-affinity pod-anti-affinity topology-spread preemption gang} " in
	*" $name "*) ;;
	*) continue ;;
	esac
	on=$(perf_scenario "$root" "$preset" "$opods" "$tmp")
	off=$(perf_scenario "$root" "$preset" "$offpods" "$tmp")
	if [ "$carryoff" != 0 ]; then
		coff=$(perf_scenario "$root" "$preset" "$carryoff" "$tmp")
	fi
	par=${PARALLEL:-2}
	case $name in preemption | gang) par=0 ;; esac # deterministic mode only
	for k in 0 1 2 3 4; do
		case $(((k + i) % 5)) in
		0) raw_run "$out" "anchor/$name" "$tmp/a.json" run "\"anchor/$name\"" \
			"$tmp/anchor" -workload "$name" -nodes 5000 -pods "$apods" -json "$tmp/a.json" ;;
		1) raw_run "$out" "memo-on/$name" "$tmp/on.json" run "\"memo-on/$name\"" \
			"$tmp/loadgen-fwk" -scenario "$on" ${flags[@]+"${flags[@]}"} -quiet -json "$tmp/on.json" ;;
		2) raw_run "$out" "memo-off/$name" "$tmp/off.json" run "\"memo-off/$name\"" \
			"$tmp/loadgen-fwk" -scenario "$off" ${flags[@]+"${flags[@]}"} -memo off -quiet -json "$tmp/off.json" ;;
		4) if [ "$par" != 0 ]; then
			raw_run "$out" "parallel/$name" "$tmp/par.json" run "\"parallel/$name\"" \
				"$tmp/loadgen-fwk" -scenario "$on" ${flags[@]+"${flags[@]}"} -deterministic=false -schedulers "$par" -quiet -json "$tmp/par.json"
		fi ;;
		3) if [ "$carryoff" != 0 ]; then
			raw_run "$out" "carry-off/$name" "$tmp/coff.json" run "\"carry-off/$name\"" \
				"$tmp/loadgen-fwk" -scenario "$coff" ${flags[@]+"${flags[@]}"} -carry off -quiet -json "$tmp/coff.json"
		fi ;;
		esac
	done
	i=$((i + 1))
done

{
	echo
	echo "## table"
	grep -h '^{"run"' "$out" | jq -rs -f "$here/compare.jq"
	if grep -q '^{"run":"anchor/gang"' "$out"; then
		echo
		echo "## gang check (every run: each gang placed whole, none partly, 3 pods bound a gang)"
		grep -h '^{"run":"[a-z-]*/gang"' "$out" | jq -rs -f "$here/gangcheck.jq"
	fi
} >>"$out"
echo "wrote $out"
