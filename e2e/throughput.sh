#!/usr/bin/env bash
# Measures, on a real kube-apiserver and embedded etcd in process, the pods
# bound per second by schedcache-scheduler and by upstream's
# kube-scheduler v1.37.2 (pkg/scheduler.New and Run) on fake nodes, in
# the same run (package e2e/throughput, TestThroughput), and writes the
# raw output: the machine header, the command, uptime before and after,
# one summary line and one JSON line per scheduler, mode and round
# (stream: pods created while the scheduler runs; backlog: all created
# before it starts).
#
#   e2e/throughput.sh [OUT]    (default docs/bench/realserver-throughput-<date>.txt)
#
# Environment: GOMAXPROCS (default 2), NODES (5000), PODS (2000), ROUNDS
# (2: each round runs both, the order alternating), CREATORS (8). The
# full log (the apiserver's included) is left in $TMPDIR/realserver-throughput.log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${1:-$root/docs/bench/realserver-throughput-$(date -u +%F).txt}
export GOMAXPROCS=${GOMAXPROCS:-2}
nodes=${NODES:-5000} pods=${PODS:-2000} rounds=${ROUNDS:-2} creators=${CREATORS:-8}
tmp=$(mktemp -d)
log=${TMPDIR:-/tmp}/realserver-throughput.log
trap 'rm -rf "$tmp"' EXIT
(cd "$here" && GOFLAGS=-mod=readonly go test -c -o "$tmp/throughput.test" ./throughput)

. "$root/bench/scripts/lib.sh"
raw_header "e2e/throughput.sh: pods bound per second on a real kube-apiserver, schedcache-scheduler beside kube-scheduler v1.37.2" \
	"$root" e2e/throughput e2e/controlplane kube >"$out"
{
	echo "command: THROUGHPUT=1 THROUGHPUT_NODES=$nodes THROUGHPUT_PODS=$pods THROUGHPUT_ROUNDS=$rounds THROUGHPUT_CREATORS=$creators GOMAXPROCS=$GOMAXPROCS go test -run TestThroughput -v -timeout 60m ./throughput"
	echo "uptime before: $(uptime)"
} >>"$out"
rc=0
(cd "$here/throughput" && THROUGHPUT=1 THROUGHPUT_NODES=$nodes THROUGHPUT_PODS=$pods THROUGHPUT_ROUNDS=$rounds \
	THROUGHPUT_CREATORS=$creators "$tmp/throughput.test" -test.run TestThroughput -test.v -test.timeout 60m) >"$log" 2>&1 || rc=$?
{
	grep -E '^throughput|created [0-9]+ nodes|^(--- |ok|FAIL|PASS)' "$log" || true
	echo "uptime after: $(uptime)"
	echo "exit: $rc"
} >>"$out"
cat "$out"
exit "$rc"
