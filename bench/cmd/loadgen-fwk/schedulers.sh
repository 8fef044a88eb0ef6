#!/usr/bin/env bash
# Parallel schedulers in the simulator's real-plugin mode (issue 29, item
# 5): loadgen-fwk in real time (-deterministic=false) on perf-scheduling-basic
# (5,000 nodes; its measured phase raised to PODS pods so the window lasts
# at least 10 s at one scheduler) with 1, 2, 4, 8 and 15 schedulers, each
# on its own snapshot with its own framework and memo, committing through
# the cache (a pick the cache refuses is a conflict, counted and retried).
# Writes the raw output: the machine, the commit, each exact command,
# uptime before and after, each run's report and JSON, and a table of
# pods/s, pods per CPU second, conflicts and their rate per binding.
#
#   bench/cmd/loadgen-fwk/schedulers.sh [OUT]   (default docs/bench/fwk-schedulers-<date>.txt)
#
# Environment: GOMAXPROCS (default 2; state it), SCHEDULERS ("1 2 4 8 15"),
# PODS (90000), CORES (a taskset CPU list, e.g. 0-15 on a 16-core machine;
# default none), BIN (a loadgen-fwk binary built elsewhere, for a machine
# without Go: `go build -o DIR/loadgen-fwk ./cmd/loadgen-fwk` in bench/,
# carry DIR and the repository's sim/scenarios). bench/run.sh schedulers
# runs it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../.." && pwd)
root=$(cd "$bench/.." && pwd)
. "$bench/scripts/lib.sh"
out=${1:-$root/docs/bench/fwk-schedulers-$(date -u +%F).txt}
export GOMAXPROCS=${GOMAXPROCS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${BIN:-}
if [ -z "$bin" ]; then
	bin=$tmp/loadgen-fwk
	(cd "$bench" && GOFLAGS=-mod=readonly go build -o "$bin" ./cmd/loadgen-fwk)
fi
pin=()
if [ -n "${CORES:-}" ]; then pin=(taskset -c "$CORES"); fi
scen=$(perf_scenario "$root" perf-scheduling-basic "${PODS:-90000}" "$tmp")

raw_header "bench/cmd/loadgen-fwk/schedulers.sh: loadgen-fwk real time, parallel schedulers${CORES:+, cores $CORES}" "$root" >"$out"
for s in ${SCHEDULERS:-1 2 4 8 15}; do
	raw_run "$out" "schedulers $s" "$tmp/r.json" schedulers "$s" "${pin[@]}" "$bin" -scenario "$scen" -deterministic=false -schedulers "$s" -json "$tmp/r.json"
done
{
	echo
	echo "## table"
	grep -h '^{"schedulers"' "$out" | jq -rs '
		(["schedulers", "pods", "window_s", "pods_per_s", "pods_per_cpu_s", "conflicts", "conflicts_per_binding", "gcs"] | @tsv),
		(.[] | .schedulers as $s | .result as $r | ($r.phases[] | select(.measured)) as $m
		 | [$s, $m.scheduled, (($m.wall_seconds * 10 | round) / 10), ($m.throughput.wall_pods_per_second | round),
		    ($m.pods_per_cpu_second | round), $r.counts.conflicts,
		    (if $r.counts.scheduled > 0 then (($r.counts.conflicts / $r.counts.scheduled * 10000 | round) / 10000) else 0 end), $m.gcs] | @tsv)'
} >>"$out"
echo "wrote $out"
