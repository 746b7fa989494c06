#!/usr/bin/env bash
# run-claude.sh runs the server with the example office of Claude Code agents
# (examples/claude-office.yaml) on the embedded SQLite store (./data). It
# needs ANTHROPIC_API_KEY in the environment or a logged-in `claude`; the
# server prepares each agent's Claude Code configuration itself (README).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-system
exec go run ./cmd/office-server serve --office examples/claude-office.yaml "$@"
