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
scripts/build.sh run-claude.sh
exec bin/office-server serve --office examples/claude-office.yaml "$@"
