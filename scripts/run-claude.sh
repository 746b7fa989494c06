#!/usr/bin/env bash
# run-claude.sh installs Claude Code alone (scripts/setup.sh --cli claude, the
# version package-lock.json pins) and runs the server with the example office
# of Claude Code agents (examples/claude-office.yaml) on the embedded SQLite
# store (./data). It needs ANTHROPIC_API_KEY in the environment or a
# logged-in `claude`; the server prepares each agent's Claude Code
# configuration itself (docs/guide.md). Extra arguments go to
# `office-server serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --cli claude
# The first build downloads the Go modules (about 19 MB, go names each) and
# compiles them, naming each package (-v): minutes on a small machine.
verbose=()
if [ ! -x bin/office-server ]; then
  echo "run-claude.sh: first build of bin/office-server: Go modules, then each package as it compiles" >&2
  verbose=(-v)
fi
go build ${verbose[@]+"${verbose[@]}"} -o bin/office-server ./cmd/office-server
exec bin/office-server serve --office examples/claude-office.yaml "$@"
