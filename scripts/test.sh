#!/usr/bin/env bash
# The project's test command: every package of the five modules (root,
# kube, kube/cmd/schedcache-scheduler, bench, e2e) under the race detector,
# in the short form CI runs. Pass -long for the long forms. e2e starts a
# real etcd and kube-apiserver inside its test processes
# (docs/kube-integration.md, "End-to-end").
set -euo pipefail
cd "$(dirname "$0")/.."
short=-short
if [ "${1:-}" = "-long" ]; then short=; fi
go test -race $short -count=1 -timeout 20m ./...
(cd kube && go test -race $short -count=1 -timeout 20m ./...)
(cd kube/cmd/schedcache-scheduler && go test -race $short -count=1 -timeout 20m ./...)
(cd bench && go test -race $short -count=1 -timeout 20m ./...)
(cd e2e && go test -race $short -count=1 -timeout 30m ./...)
