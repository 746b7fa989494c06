#!/usr/bin/env bash
# run.sh builds the server and runs it on the embedded SQLite store (./data)
# with the example office of built-in scripted agents: no database, no API
# key, no npm. scripts/build.sh builds bin/office-server (the first build
# downloads the Go modules and compiles them, with a count of the packages).
# Extra arguments go to `office-server serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh run.sh
exec bin/office-server serve --office examples/demo-office.yaml "$@"
