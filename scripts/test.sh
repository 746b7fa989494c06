#!/usr/bin/env bash
# test.sh sets up what the tests need (scripts/setup.sh) and runs every test
# with the race detector. Real parts only: PostgreSQL, the Claude Code binary,
# the Supabase CLI and Chromium must be present; with OFFICE_REQUIRE_ALL=1 (CI) a test whose
# real part is missing fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export DATABASE_URL_TEST="${DATABASE_URL_TEST:-postgres://office:office@127.0.0.1:5432/office_test?sslmode=disable}"
export OFFICE_CLAUDE_BIN="${OFFICE_CLAUDE_BIN:-$PWD/node_modules/.bin/claude}"
export OFFICE_SUPABASE_BIN="${OFFICE_SUPABASE_BIN:-$PWD/node_modules/.bin/supabase}"
export OFFICE_CHROMIUM_BIN="${OFFICE_CHROMIUM_BIN:-$(command -v chromium || true)}"
go test -race -count=1 -timeout 60m "$@" ./...
