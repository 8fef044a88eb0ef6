# Sourced by the measuring scripts (bench/cmd/anchor/measure.sh,
# bench/cmd/loadgen-fwk/compare.sh and schedulers.sh).
#
# raw_header TITLE ROOT [PATHS...] prints the header of a raw output file:
# the title, the date, the commit (marked modified when PATHS, or the
# whole tree, differ from it), goos, goarch, cpu, ncpu, the Go version
# (none where Go is missing) and GOMAXPROCS.
raw_header() {
	local title=$1 root=$2
	shift 2
	echo "# $title"
	echo "date: $(date -u +%FT%TZ)"
	echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet -- "$@" 2>/dev/null || echo ' (modified)')"
	echo "goos: $(uname -s | tr A-Z a-z)"
	echo "goarch: $(go env GOARCH 2>/dev/null || uname -m)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')"
	echo "ncpu: $(nproc)"
	echo "go: $(go env GOVERSION 2>/dev/null || echo none)"
	echo "GOMAXPROCS=$GOMAXPROCS"
}

# perf_scenario ROOT PRESET PODS DIR writes sim/scenarios/PRESET.yaml with
# its measured phase's pod count set to PODS into DIR and prints the path.
perf_scenario() {
	local root=$1 preset=$2 pods=$3 dir=$4 f="$4/$2-$3.yaml"
	awk -v pods="$pods" '
		/^- name: measure/ { m = 1 }
		m && /^    count: / { sub(/count: [0-9]+/, "count: " pods); m = 0 }
		{ print }' "$root/sim/scenarios/$preset.yaml" >"$f"
	grep -q "count: $pods" "$f" || { echo "perf_scenario: could not set $preset's measured count" >&2; return 1; }
	echo "$f"
}
