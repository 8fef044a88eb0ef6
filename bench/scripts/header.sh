# Sourced by the measuring scripts (bench/cmd/anchor/measure.sh,
# bench/cmd/loadgen-fwk/compare.sh): raw_header TITLE ROOT [PATHS...]
# prints the header of a raw output file: the title, the date, the commit
# (marked modified when PATHS, or the whole tree, differ from it), goos,
# goarch, cpu, ncpu, the Go version and GOMAXPROCS.
raw_header() {
	local title=$1 root=$2
	shift 2
	echo "# $title"
	echo "date: $(date -u +%FT%TZ)"
	echo "commit: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet -- "$@" || echo ' (modified)')"
	echo "goos: $(go env GOOS)"
	echo "goarch: $(go env GOARCH)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')"
	echo "ncpu: $(nproc)"
	echo "go: $(go env GOVERSION)"
	echo "GOMAXPROCS=$GOMAXPROCS"
}
