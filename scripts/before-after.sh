#!/usr/bin/env bash
# Before/after comparison of two builds of the bench module's test binary,
# in interleaved rounds (issue 26: behaviour and figures must not change).
#
#   scripts/before-after.sh OLD.test NEW.test OUT ROUNDS
#
# Each round runs every benchmark once with each binary, in alternating
# order (old first in odd rounds, new first in even ones), so both sample
# the same minutes of the machine. GOMAXPROCS=2, schedcache only (the
# upstream side does not change between the builds). Raw output goes to
# OUT.before and OUT.after (goos/goarch/cpu lines included), the commands
# to OUT.commands, and `benchstat OUT.before OUT.after` to OUT.benchstat.
# Build a binary with: (cd bench && go test -c -o /tmp/bench-new.test .)
set -euo pipefail
old=${1:?OLD.test} new=${2:?NEW.test} out=${3:?OUT} rounds=${4:-6}
export GOMAXPROCS=2
: >"$out.before"
: >"$out.after"
: >"$out.commands"
benches=(
	'^BenchmarkCycle$/impl=schedcache|200000x'
	'^BenchmarkW1$/impl=schedcache/nodes=5k/readers=0$|200000x'
	'^BenchmarkW1$/impl=schedcache/nodes=5k/readers=4$|20000x'
	'^BenchmarkW2$/impl=schedcache/nodes=5k$|200000x'
	'^BenchmarkW3$/impl=schedcache|5000x'
	'^BenchmarkW4$/impl=schedcache/nodes=5k$|100000x'
	'^BenchmarkFork$/op=|5000x'
)
run() { # bin file pattern benchtime
	echo "GOMAXPROCS=2 $(basename "$1") -test.run '^\$' -test.bench '$3' -test.benchtime $4 -test.count 1 -test.benchmem" >>"$out.commands"
	"$1" -test.run '^$' -test.bench "$3" -test.benchtime "$4" -test.count 1 -test.benchmem -test.timeout 30m >>"$2"
}
for ((r = 1; r <= rounds; r++)); do
	for b in "${benches[@]}"; do
		pat=${b%|*} bt=${b#*|}
		if ((r % 2)); then
			run "$old" "$out.before" "$pat" "$bt"
			run "$new" "$out.after" "$pat" "$bt"
		else
			run "$new" "$out.after" "$pat" "$bt"
			run "$old" "$out.before" "$pat" "$bt"
		fi
	done
	echo "round $r done" >&2
done
command -v benchstat >/dev/null 2>&1 || PATH=$PATH:$(go env GOPATH)/bin
benchstat "$out.before" "$out.after" >"$out.benchstat"
cat "$out.benchstat"
