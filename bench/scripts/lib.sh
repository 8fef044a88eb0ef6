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

# raw_run OUT HEADING JSON KEY VALUE CMD... appends one run to the raw
# file OUT: "## HEADING", the command (with GOMAXPROCS), uptime before,
# CMD's output, its exit status, uptime after, and the JSON report CMD
# wrote to the file JSON on one line as {KEY: VALUE, "result": report}
# (VALUE is JSON: '"basic"', 4); {} when there is none. A failing CMD
# does not stop the script: its exit status is in the file.
raw_run() {
	local out=$1 heading=$2 json=$3 key=$4 value=$5
	shift 5
	rm -f "$json"
	{
		echo
		echo "## $heading"
		echo "command: GOMAXPROCS=$GOMAXPROCS $*"
		echo "uptime before: $(uptime)"
	} >>"$out"
	local rc=0
	"$@" >>"$out" 2>&1 || rc=$?
	{
		echo "exit: $rc"
		echo "uptime after: $(uptime)"
		echo "json:"
		jq -c --arg k "$key" --argjson v "$value" '{($k): $v, result: .}' "$json" 2>/dev/null || echo '{}'
	} >>"$out"
}
