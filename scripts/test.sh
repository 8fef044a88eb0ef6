#!/usr/bin/env bash
# The project's test command: every package of the four modules (root,
# kube, kube/cmd/schedcache-scheduler, bench) under the race detector, in
# the short form CI runs. Pass -long for the long forms.
set -euo pipefail
cd "$(dirname "$0")/.."
short=-short
if [ "${1:-}" = "-long" ]; then short=; fi
go test -race $short -count=1 -timeout 20m ./...
(cd kube && go test -race $short -count=1 -timeout 20m ./...)
(cd kube/cmd/schedcache-scheduler && go test -race $short -count=1 -timeout 20m ./...)
(cd bench && go test -race $short -count=1 -timeout 20m ./...)
