#!/usr/bin/env bash
# Mutation round: plants the bugs listed in docs/mutation/plants.txt one at
# a time in a scratch git worktree and runs the fast suites against each
# (docs/mutation/README.md). Flags: scripts/mutate.sh -h.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/mutate.py "$@"
