#!/usr/bin/env bash
# run.sh builds the console assets and runs the server on the embedded SQLite
# store (./data) with the example office of built-in scripted agents: no
# database, no API key, no network needed. Extra arguments go to the server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-system
exec go run ./cmd/office-server serve --office examples/demo-office.yaml "$@"
