#!/usr/bin/env bash
# loadgen-fwk (upstream's plugins, memo on, deterministic) on the perf-*
# presets at 50,000 nodes (-scale 10: nodes and every phase's pods ten
# times the 5,000-node preset), and writes the raw output: the machine,
# the commit, each exact command with /usr/bin/time -v (peak RSS), uptime
# before and after, each report's JSON, and a table at the end (pods/s,
# pods per CPU second, window, GCs, peak RSS).
#
#   bench/cmd/loadgen-fwk/scale.sh [OUT]   (default docs/bench/fwk-50k-<date>.txt)
#
# The measured phase's pods are set per preset (before -scale's factor)
# so that its window lasts at least 10 s without the run taking an hour
# on 2 cores: MEASURE_<PRESET> with the preset's name upper-cased and
# dashes as underscores (MEASURE_PERF_POD_ANTI_AFFINITY=100 measures
# 1,000 pods at 50,000 nodes). The initial phases keep -scale's counts.
# Environment: GOMAXPROCS (default 2), PRESETS (default the five below),
# BIN (a prebuilt loadgen-fwk). Takes 30 to 90 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../.." && pwd)
root=$(cd "$bench/.." && pwd)
. "$bench/scripts/lib.sh"
out=${1:-$root/docs/bench/fwk-50k-$(date -u +%F).txt}
export GOMAXPROCS=${GOMAXPROCS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${BIN:-}
if [ -z "$bin" ]; then
	bin=$tmp/loadgen-fwk
	(cd "$bench" && GOFLAGS=-mod=readonly go build -o "$bin" ./cmd/loadgen-fwk)
fi
: "${MEASURE_PERF_SCHEDULING_BASIC:=5000}"   # 50,000 measured
: "${MEASURE_PERF_NODE_AFFINITY:=3000}"      # 30,000
: "${MEASURE_PERF_POD_ANTI_AFFINITY:=500}"   # 5,000
: "${MEASURE_PERF_TOPOLOGY_SPREADING:=600}"  # 6,000
: "${MEASURE_PERF_PREEMPTION_BASIC:=20}"     # 200
raw_header "bench/cmd/loadgen-fwk/scale.sh: loadgen-fwk at 50,000 nodes (-scale 10)" "$root" >"$out"
for p in ${PRESETS:-perf-scheduling-basic perf-node-affinity perf-pod-anti-affinity perf-topology-spreading perf-preemption-basic}; do
	var=MEASURE_$(echo "$p" | tr 'a-z-' 'A-Z_')
	n=${!var:-}
	if [ -z "$n" ]; then
		echo "scale.sh: no $var for preset $p" >&2
		exit 2
	fi
	f=$(perf_scenario "$root" "$p" "$n" "$tmp")
	raw_run "$out" "$p at 50,000 nodes" "$tmp/r.json" preset "\"$p\"" \
		/usr/bin/time -v "$bin" -scenario "$f" -scale 10 -quiet -json "$tmp/r.json"
done
{
	echo
	echo "## table"
	echo "preset	measured_pods	pods_per_s	pods_per_cpu_s	window_s	gcs	peak_rss_mib"
	# Peak RSS from /usr/bin/time's lines, in the order of the runs.
	paste <(grep -h '^{"preset"' "$out" | jq -r '.preset as $p | .result | (.phases[] | select(.measured)) as $m
		| [$p, $m.scheduled, ($m.throughput.wall_pods_per_second | round), ($m.pods_per_cpu_second | round),
		   (($m.wall_seconds * 10 | round) / 10), $m.gcs] | @tsv') \
		<(grep -h 'Maximum resident set size' "$out" | awk '{printf "%d\n", $NF / 1024}')
} >>"$out"
echo "wrote $out"
