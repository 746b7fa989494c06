#!/usr/bin/env bash
# run.sh builds the server and runs it on the embedded SQLite store (./data)
# with the example office of built-in scripted agents: no database, no API
# key, no npm. The first build downloads the Go modules the server imports
# (go prints each one). Extra arguments go to `office-server serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "run.sh: building bin/office-server" >&2
go build -o bin/office-server ./cmd/office-server
exec bin/office-server serve --office examples/demo-office.yaml "$@"
