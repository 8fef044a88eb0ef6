#!/usr/bin/env bash
# Regenerates docs/BENCHMARKS.md: runs the workload benchmarks (W1–W6,
# Cycle, Memory) on schedcache and on the upstream kube-scheduler cache,
# saves the raw output to docs/bench/raw-<date>.txt, compares the two with
# benchstat (-col /impl, saved as raw-<date>.txt.benchstat) and draws the
# charts (cmd/plot). BENCHMARKS.md holds the headline tables and charts, then
# docs/bench/scale.md and remaining.md, and links the rest.
#
# Environment:
#   COUNT=6        repetitions (-count) of every benchmark
#   BENCH_50K=1    also run the 50,000-node variants of W1, W2 and W4 (slow,
#                  several GiB of memory)
#   QUICK=1        smoke test: count 1 and tiny iteration counts (the figures
#                  mean nothing)
#   DOCS=dir       where to write BENCHMARKS.md and bench/ (default ../docs)
#   DATE=yyyy-mm-dd  date in the raw file's name (default today, UTC)
#   REPORT_ONLY=1  run nothing: rebuild BENCHMARKS.md and the charts from the
#                  raw file of DATE and the commands saved beside it (after
#                  editing docs/bench/scale.md or remaining.md)
#
# Beside the raw output it saves the commands (.commands), the start, end
# and commit (.time), and what cmd/vmgap measured of the machine just
# before and just after the benchmarks (.vm): the share of each vCPU lost
# to stalls and a goroutine hand-off's round trip. The figures of two runs
# on VMs that stall differently are not comparable; the report shows it.
#
# The full run (COUNT=6, 5k nodes) takes about 8-15 minutes on the 2-core
# reference machine. Close other CPU-heavy work first: the workloads use both
# cores.
#
# Device mode: the many-core runs (W1 with up to 15 readers, W3 with up to 15
# schedulers, the synchronous cycle) for a 16-core machine without Go:
#   bench/run.sh device-build DIR    here: build DIR/bench.test to carry there
#   bench/run.sh device-run DIR OUT  there: run DIR/bench.test, pinned with
#                                    taskset, GOMAXPROCS stated in every
#                                    command; raw output in OUT/raw-cores.txt
#   bench/run.sh device-report RAW   here: benchstat -col /impl of RAW into
#                                    RAW.benchstat (docs/bench/cores.md links it)
# Each group runs at 16 cores (taskset -c 0-15, GOMAXPROCS=16) and the ones
# the 2-core comparison needs at 2 (taskset -c 0,1, GOMAXPROCS=2), in the
# same process order for both implementations.
set -euo pipefail

case "${1:-}" in
device-build)
	dir=${2:?device-build DIR}
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	# Stripped and compressed: what is carried to the device is limited in size.
	(cd "$(dirname "$0")" && go test -c -ldflags='-s -w' -o "$dir/bench.test" .)
	gzip -f "$dir/bench.test"
	echo "built $dir/bench.test.gz; carry $dir and run: bash bench/run.sh device-run $dir \$OUT" >&2
	exit 0
	;;
device-run)
	bin=$(cd "${2:?device-run DIR OUT}" && pwd)/bench.test
	if [ -f "$bin.gz" ] && [ ! -x "$bin" ]; then
		gunzip -c "$bin.gz" >"$bin" && chmod +x "$bin"
	fi
	out=${3:?device-run DIR OUT}
	mkdir -p "$out"
	raw=$out/raw-cores.txt
	: >"$raw"
	cnt=${COUNT:-3}
	big=${BIG_CPUS:-0-15}   # the many-core set; BIG_CPUS=0,1 to try the mode on 2 cores
	bigp=${BIG_PROCS:-16}
	bt=2000x cbt=20000x
	if [ "${QUICK:-0}" = 1 ]; then
		bt=20x cbt=200x cnt=1
	fi
	run() { # cpus procs pattern benchtime [flags...]
		local cpus=$1 procs=$2 pat=$3 bt=$4
		shift 4
		echo "taskset -c $cpus env GOMAXPROCS=$procs bench.test -test.run '^\$' -test.bench '$pat' -test.benchtime $bt -test.count $cnt $*" | tee -a "$out/raw-cores.txt.commands" >&2
		taskset -c "$cpus" env GOMAXPROCS="$procs" "$bin" -test.run '^$' -test.bench "$pat" \
			-test.benchtime "$bt" -test.count "$cnt" -test.timeout 60m "$@" | tee -a "$raw"
	}
	nproc >"$out/nproc.txt"
	run "$big" "$bigp" '^BenchmarkW3$' $bt -bench.schedulers 1,2,4,8,15
	run 0,1 2 '^BenchmarkW3$' $bt -bench.schedulers 1
	run "$big" "$bigp" '^BenchmarkW1$/impl=/nodes=5k/' $bt -bench.readers 0,1,2,4,8,15
	run 0,1 2 '^BenchmarkW1$/impl=/nodes=5k/' $bt -bench.readers 0,4
	# The cycle in rounds of one repetition per process, both
	# implementations in each, so that both sample the same minutes.
	reps=$cnt
	for ((i = 0; i < reps; i++)); do
		cnt=1 run 0,1 2 '^BenchmarkCycle$' $cbt
		cnt=1 run "$big" "$bigp" '^BenchmarkCycle$' $cbt
	done
	exit 0
	;;
device-report)
	raw=${2:?device-report RAW}
	command -v benchstat >/dev/null 2>&1 || PATH=$PATH:$(go env GOPATH)/bin
	benchstat -col /impl "$raw" >"$raw.benchstat"
	echo "wrote $raw.benchstat" >&2
	exit 0
	;;
esac

cd "$(dirname "$0")"
BENCH_DIR=$(pwd)
DOCS=${DOCS:-$BENCH_DIR/../docs}
COUNT=${COUNT:-6}
DATE=${DATE:-$(date -u +%Y-%m-%d)}
export GOMAXPROCS=2

mkdir -p "$DOCS/bench"
DOCS=$(cd "$DOCS" && pwd)
RAW=$DOCS/bench/raw-$DATE.txt

if ! command -v benchstat >/dev/null 2>&1; then
	if [ -x "$(go env GOPATH)/bin/benchstat" ]; then
		PATH=$PATH:$(go env GOPATH)/bin
	else
		echo "installing benchstat" >&2
		go install golang.org/x/perf/cmd/benchstat@latest
		PATH=$PATH:$(go env GOPATH)/bin
	fi
fi

# pattern|benchtime[|flag][|half]: fixed iteration counts, tuned so that
# every workload runs long enough to be stable. W1 with 4 and 16 readers gets
# fewer writer events: upstream's writer is nearly starved there (each
# reader's UpdateSnapshot takes the write lock). W5 runs one 2s storm window
# per repetition (1x). A group marked half runs ceil(COUNT/2) repetitions,
# one marked once a single repetition.
#
# The cycle bar (four synchronous calls, at most 1.2x upstream's time) was
# read 1.10x, 0.80x and 1.27x in three full runs of one day on one VM when
# each implementation's repetitions ran as one block: the VM's drift between
# the blocks moved the ratio by more than the bar's margin. The cycle runs
# in COUNT rounds of one repetition, each round in its own process with
# both implementations, so that both sample the same minutes.
#
# The scale bar compares W1's writer (no readers) and W2 at 5,000 and 50,000
# nodes. On this shared VM the same binary's per-event cost drifts by tens
# of percent between runs minutes apart, so with BENCH_50K=1 these runs do
# not sit in the 5k set and the 50k set, 15 minutes apart: the 50k section
# runs them, and the floor (a map-based cache doing the least per event), in
# two rounds of 5k then 50k per workload, half the repetitions each, every size
# in its own process (one process holding both sizes slows the 5k side:
# git show 1e1314e:docs/bench/baseline/raw-2026-11-23-c6fb61a.txt). The 50k writer runs the
# same 20,000 events as at 5k, so the ratio compares the same work.
if [ "${QUICK:-0}" = 1 ]; then
	COUNT=1
	W1=500x W1R=100x W2=2000x FLOOR=1000x CYCLE=500x
else
	W1=20000x W1R=2000x W2=100000x FLOOR=100000x CYCLE=20000x
fi
W1READERS='(0|1)'
if [ "${BENCH_50K:-0}" = 1 ]; then
	W1READERS=1 # W1 with no readers and W2 run in the 50k section's rounds
fi
RUNS=(
	"^BenchmarkW1\$/impl=/nodes=5k/readers=$W1READERS\$|$W1"
	"^BenchmarkW1\$/impl=/nodes=/readers=(4|16)\$|$W1R"
	"^BenchmarkW1CPUShare\$|$W1"
	"^BenchmarkW1ReadFloor\$|$W1"
)
if [ "${BENCH_50K:-0}" != 1 ]; then
	RUNS+=("^BenchmarkW2\$|$W2")
fi
if [ "${QUICK:-0}" = 1 ]; then
	RUNS+=(
		'^BenchmarkW3$|200x'
		'^BenchmarkW4$|3000x'
		'^BenchmarkW5$|1x'
		'^BenchmarkW6$/impl=upstream|3x'
		'^BenchmarkW6$/impl=schedcache|100x'
		'^BenchmarkCycleVisible$|50x'
		'^BenchmarkMemory$|1x'
	)
else
	RUNS+=(
		'^BenchmarkW3$|2000x'
		'^BenchmarkW4$|100000x'
		'^BenchmarkW5$|1x'
		'^BenchmarkW6$/impl=upstream|20x'
		'^BenchmarkW6$/impl=schedcache|2000x'
		'^BenchmarkCycleVisible$|2000x'
		'^BenchmarkMemory$|1x'
	)
fi
for ((round = 0; round < COUNT; round++)); do
	RUNS+=("^BenchmarkCycle\$|$CYCLE|once")
done
# The 50,000-node variants (W1, W2, W4) load 1.5 million pods per
# implementation; upstream's W1 readers copy 10x the nodes, so its writer
# gets 10x fewer events through: fewer writer events with readers.
if [ "${BENCH_50K:-0}" = 1 ]; then
	if [ "${QUICK:-0}" = 1 ]; then
		RUNS+=(
			'^BenchmarkW1$/impl=/nodes=50k/readers=(1|4)$|100x|-bench.50k'
			'^BenchmarkW4$/impl=/nodes=50k$|1000x|-bench.50k'
		)
	else
		RUNS+=(
			'^BenchmarkW1$/impl=/nodes=50k/readers=1$|5000x|-bench.50k'
			'^BenchmarkW1$/impl=/nodes=50k/readers=4$|300x|-bench.50k'
			'^BenchmarkW4$/impl=/nodes=50k$|20000x|-bench.50k'
		)
	fi
	for round in 1 2; do
		RUNS+=(
			"^BenchmarkW1\$/impl=/nodes=5k/readers=0\$|$W1|half"
			"^BenchmarkW1\$/impl=/nodes=50k/readers=0\$|$W1|-bench.50k|half"
			"^BenchmarkW2\$/impl=/nodes=5k\$|$W2|half"
			"^BenchmarkW2\$/impl=/nodes=50k\$|$W2|-bench.50k|half"
			"^BenchmarkScaleFloor\$/impl=floor/workload=/nodes=5k\$|$FLOOR|half"
			"^BenchmarkScaleFloor\$/impl=floor/workload=/nodes=50k\$|$FLOOR|-bench.50k|half"
		)
	done
fi

CMDS=$RAW.commands
if [ "${REPORT_ONLY:-0}" = 1 ]; then
	[ -s "$RAW" ] && [ -s "$CMDS" ] || { echo "REPORT_ONLY: $RAW or $CMDS missing" >&2; exit 1; }
	mapfile -t COMMANDS <"$CMDS"
	START=$(sed -n 's/^# start //p' "$RAW.time")
	END=$(sed -n 's/^# end //p' "$RAW.time")
	RUNS=()
else
	# The commit of the code the binary is built from, read now: commits made
	# while the benchmarks run must not be credited with their figures.
	COMMIT=$(git -C "$BENCH_DIR/.." rev-parse --short HEAD 2>/dev/null || echo unknown)
	if [ -n "$(git -C "$BENCH_DIR/.." status --porcelain -- . ':!docs' 2>/dev/null)" ]; then
		COMMIT="$COMMIT (with uncommitted changes)"
	fi
	go test -c -o "$BENCH_DIR/bench.test" . # build once; every group runs the same binary
	go build -o "$BENCH_DIR/vmgap" ./cmd/vmgap
	trap 'rm -f "$BENCH_DIR/bench.test" "$BENCH_DIR/vmgap"' EXIT
	: >"$RAW"
	: >"$CMDS"
	COMMANDS=()
	echo "## before the benchmarks" >"$RAW.vm"
	GOMAXPROCS=2 "$BENCH_DIR/vmgap" >>"$RAW.vm"
	START=$(date +%s)
fi
for g in "${RUNS[@]}"; do
	last=${g##*|}
	rest=${g%|*}
	count=$COUNT
	case $last in # pattern|benchtime[|flag][|half|once]
	half | once)
		count=1
		if [[ $last == half ]]; then
			count=$(((COUNT + 1) / 2))
		fi
		last=${rest##*|}
		rest=${rest%|*}
		;;
	esac
	flag=
	if [[ $last == -* ]]; then # pattern|benchtime|flag
		flag=$last
		last=${rest##*|}
		rest=${rest%|*}
	fi
	pattern=$rest
	benchtime=$last
	cmd=(./bench.test -test.run '^$' -test.bench "$pattern" -test.benchtime "$benchtime" -test.count "$count" -test.timeout 90m)
	if [ -n "$flag" ]; then
		cmd+=("$flag")
	fi
	COMMANDS+=("GOMAXPROCS=2 ${cmd[*]}")
	echo "GOMAXPROCS=2 ${cmd[*]}" >>"$CMDS"
	echo ">>> ${cmd[*]}" >&2
	"${cmd[@]}" | tee -a "$RAW"
done
if [ "${REPORT_ONLY:-0}" != 1 ]; then
	END=$(date +%s)
	printf '# start %s\n# end %s\n' "$START" "$END" >"$RAW.time"
	echo "## after the benchmarks" >>"$RAW.vm"
	GOMAXPROCS=2 "$BENCH_DIR/vmgap" >>"$RAW.vm"
fi
VM="(not recorded)"
if [ -s "$RAW.vm" ]; then
	VM=$(cat "$RAW.vm")
fi

STAT=$(benchstat -col /impl "$RAW")
go run ./cmd/plot -out "$DOCS/bench" -prefix bench/ -md "$DOCS/bench/charts.md" "$RAW"

CPU=$(grep -m1 '^cpu:' "$RAW" || true)
GOOS=$(grep -m1 '^goos:' "$RAW" || true)
GOARCH=$(grep -m1 '^goarch:' "$RAW" || true)
GOVERSION=$(go version)
if [ "${REPORT_ONLY:-0}" = 1 ]; then
	COMMIT=$(sed -n 's/^# commit //p' "$RAW.time")
else
	printf '# commit %s\n' "$COMMIT" >>"$RAW.time"
fi

{
	cat <<EOF
# Benchmarks: schedcache vs the upstream kube-scheduler cache

Generated by \`bench/run.sh\` on $DATE (UTC) in $(((END - START) / 60)) min. Do not edit by hand: rerun the script.

| | |
|---|---|
| machine | $GOOS, $GOARCH, $CPU, $(nproc) CPUs |
| GOMAXPROCS | 2 |
| Go | $GOVERSION |
| schedcache | commit $COMMIT |
| upstream | k8s.io/kubernetes v1.35.4, \`pkg/scheduler/backend/cache\` |
| repetitions | -count $COUNT; tables show medians and 95% confidence intervals (benchstat), charts show medians |
| raw output | [bench/raw-$DATE.txt](bench/raw-$DATE.txt) |
| machine stalls | [bench/raw-$DATE.txt.vm](bench/raw-$DATE.txt.vm), below |

The workloads are those of [workloads.md](workloads.md) on the standard cluster
(\`workload.Build(workload.Standard())\`: 5,000 nodes in 3 uneven zones, 150,000
bound pods). Every benchmark runs the same code on both implementations through
\`bench/adapter.go\`; only cache operations and the workload's own loop are timed
(cluster generation, loading, event-stream generation and the readers' first full
snapshot are setup). Absolute numbers depend on the machine: compare the two
implementations as ratios within this run.

How each implementation is driven:

- **Informer events** (W2, W4, W5 background, W3 confirmations): schedcache uses its
  Async methods and \`Sync()\` at the end of the timed region (or of each W5 batch);
  upstream has no asynchronous path and applies each event synchronously.
- **Snapshots**: upstream readers own a \`Snapshot\` and call \`UpdateSnapshot\` on it
  (the first, full clone is setup); schedcache readers call \`Snapshot()\`.
- **W1 writer, W3 scheduler calls, W4 node operations, Cycle**: synchronous calls on
  both.
- **W5**: 10,000 storm pods are assumed and binding-finished just before each 2 s
  window (untimed) with TTL 500 ms; schedcache's expiry period is 50 ms, upstream's
  is the constant 1 s (not configurable), so the window contains every storm on
  both. The background W2 stream runs at a fixed 20,000 events/s in 1 ms batches;
  batch latency is measured from the batch's scheduled start.
- Both caches get a discarding logger (upstream logs every expired pod at Info).

Metric names: \`*-p50-ns\`, \`*-p99-ns\`, \`*-p99.9-ns\`, \`*-max-ns\` are latency
percentiles (internal/hist, about 1.6% precision); \`events/s\`, \`pods/s\`,
\`expired/s\`, \`reads/s\` are throughputs; \`B/op\` and \`allocs/op\` count every
allocation of the process during the timed region (cache goroutines included), per
op as defined by each benchmark (W1, W2, W4: per event; W3: per pod; W5: per storm
window; W6: per snapshot; Cycle: per 4-call cycle).

What the VM did to a running thread, just before and just after the run
(\`go run ./cmd/vmgap\`: each of 2 threads spins on the clock for 2 s and
counts the intervals over 10 µs it did not run; then two goroutines hand a
token back and forth for 2 s). A synchronous call of schedcache crosses
goroutines several times, so stalls and slow wake-ups weigh more on it than
on a mutex-based cache:

\`\`\`
$VM
\`\`\`

## Commands

\`\`\`
cd bench
go test -c -o bench.test .
EOF
	for c in "${COMMANDS[@]}"; do
		echo "$c"
	done
	cat <<EOF
benchstat -col /impl docs/bench/raw-$DATE.txt
go run ./cmd/plot -out docs/bench -prefix bench/ -md docs/bench/charts.md docs/bench/raw-$DATE.txt
\`\`\`

## Charts and headline figures (medians)

EOF
	cat "$DOCS/bench/charts.md"
	if [ -f "$DOCS/bench/scale.md" ]; then
		cat "$DOCS/bench/scale.md"
		echo
	fi
	if [ -f "$DOCS/bench/remaining.md" ]; then
		cat "$DOCS/bench/remaining.md"
		echo
	fi
	cat <<EOF
## Full tables and history

- benchstat of the whole run (every metric, confidence intervals, p-values):
  [bench/raw-$DATE.txt.benchstat](bench/raw-$DATE.txt.benchstat)
- raw output: [bench/raw-$DATE.txt](bench/raw-$DATE.txt), its commands
  ([.commands](bench/raw-$DATE.txt.commands)), start, end and commit
  ([.time](bench/raw-$DATE.txt.time))
- every optimisation tried, kept or rejected, with its before and after:
  [bench/optimizations.md](bench/optimizations.md)
EOF
} >"$DOCS/BENCHMARKS.md"
printf '%s\n' "$STAT" >"$RAW.benchstat"
rm -f "$DOCS/bench/charts.md"
echo "wrote $DOCS/BENCHMARKS.md and $RAW" >&2
