#!/usr/bin/env bash
# run.sh builds the server and runs it on the embedded SQLite store (./data)
# with the example office of built-in scripted agents: no database, no API
# key, no npm. The first build downloads the Go modules the server imports
# (go prints each one). Extra arguments go to `office-server serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
# The first build downloads the Go modules (about 19 MB, go names each) and
# compiles them, naming each package (-v): minutes on a small machine.
verbose=()
if [ ! -x bin/office-server ]; then
  echo "run.sh: first build of bin/office-server: Go modules, then each package as it compiles" >&2
  verbose=(-v)
fi
go build ${verbose[@]+"${verbose[@]}"} -o bin/office-server ./cmd/office-server
exec bin/office-server serve --office examples/demo-office.yaml "$@"
