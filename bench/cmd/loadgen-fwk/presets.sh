#!/usr/bin/env bash
# The perf-* presets with both pickers (docs/loadgen.md, "scheduler_perf's
# workloads as phases"): cmd/loadgen (least-allocated) and loadgen-fwk
# (upstream's plugins, memo on), deterministic, at full size; writes the
# raw output (machine, commit, each command, uptime, each report's JSON)
# and the markdown table docs/loadgen.md quotes, at the end.
#
#   bench/cmd/loadgen-fwk/presets.sh [OUT]   (default docs/bench/perf-presets-<date>.txt)
#
# Environment: GOMAXPROCS (default 2), PRESETS (default the six). One run
# each: wall-clock figures move with the machine's load; the virtual ones
# and the digests do not.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../.." && pwd)
root=$(cd "$bench/.." && pwd)
. "$bench/scripts/lib.sh"
out=${1:-$root/docs/bench/perf-presets-$(date -u +%F).txt}
export GOMAXPROCS=${GOMAXPROCS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && GOFLAGS=-mod=readonly go build -o "$tmp/loadgen" ./cmd/loadgen)
(cd "$bench" && GOFLAGS=-mod=readonly go build -o "$tmp/loadgen-fwk" ./cmd/loadgen-fwk)
raw_header "bench/cmd/loadgen-fwk/presets.sh: the perf-* presets with both pickers" "$root" >"$out"
for p in ${PRESETS:-perf-scheduling-basic perf-pod-anti-affinity perf-node-affinity perf-topology-spreading perf-preemption-basic perf-gang}; do
	for picker in loadgen loadgen-fwk; do
		raw_run "$out" "$p $picker" "$tmp/r.json" preset "\"$p\"" "$tmp/$picker" -preset "$p" -quiet -json "$tmp/r.json"
	done
done
{
	echo
	echo "## table"
	grep -h '^{"preset"' "$out" | jq -rs -f "$here/presets.jq"
} >>"$out"
echo "wrote $out"
