#!/usr/bin/env bash
# setup.sh installs and starts what the server and its tests need on a fresh
# Debian machine: Node packages (xterm.js, Claude Code, supabase-js and ws,
# the Supabase CLI), Chromium, PgBouncer and a running PostgreSQL 15 with the
# test database, wal2json and wal_level=logical (the Realtime stand-in reads
# the WAL as Supabase Realtime does). Safe to run again.
#
# Usage: scripts/setup.sh [--no-system]   (--no-system: only the Node packages)
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

# Node packages, pinned by package-lock.json: the CLI agents the tests drive
# (Claude Code, Codex, Qwen Code, Gemini CLI) among them, and the Supabase CLI
# (npm supabase: its @supabase/cli-linux-x64 ships the binary, no download).
if [ ! -x node_modules/.bin/claude ] || [ ! -f node_modules/@supabase/supabase-js/package.json ] \
   || [ ! -x node_modules/.bin/codex ] || [ ! -x node_modules/.bin/qwen ] || [ ! -x node_modules/.bin/gemini ] \
   || [ ! -x node_modules/.bin/supabase ] \
   || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # npm ci refuses a lock file without the other platforms' builds of an
  # optional dependency (Qwen Code's @teddyzhu/clipboard-darwin-*, -win32-*
  # are not in the registry this machine reaches, so npm cannot record
  # them); npm install then installs exactly the lock file's versions.
  npm ci --no-audit --no-fund --loglevel=error 2>/dev/null \
    || npm install --no-audit --no-fund --loglevel=error
fi
# The console's third-party assets: copied, never committed, embedded by go:embed.
mkdir -p server/web/static/vendor
cp node_modules/@xterm/xterm/lib/xterm.js node_modules/@xterm/xterm/css/xterm.css \
   node_modules/@xterm/addon-fit/lib/addon-fit.js server/web/static/vendor/

# The Go checkers CI runs (.ci/run), pinned, from the Go module proxy:
# bin/<name>-<version>, and bin/<name> pointing at it.
go_tool() { # name module/path@version
  local name=$1 version=${2##*@}
  if [ ! -x "bin/$name-$version" ]; then
    local tmp
    tmp=$(mktemp -d)
    GOBIN="$tmp" go install "$2"
    mkdir -p bin
    mv "$tmp/$name" "bin/$name-$version"
    rm -rf "$tmp"
  fi
  ln -sfn "$name-$version" "bin/$name"
}
go_tool staticcheck honnef.co/go/tools/cmd/staticcheck@v0.8.2
go_tool deadcode golang.org/x/tools/cmd/deadcode@v0.52.0

[ "${1:-}" = "--no-system" ] && exit 0

need=()
command -v chromium >/dev/null || need+=(chromium)
command -v tmux >/dev/null || need+=(tmux) # the console test compares its terminal with tmux
command -v pg_ctlcluster >/dev/null || need+=(postgresql-15)
[ -f /usr/lib/postgresql/15/lib/wal2json.so ] || need+=(postgresql-15-wal2json)
# PgBouncer in session mode stands in for Supabase's session pooler (the
# tests start their own; the package's service stays stopped).
[ -x /usr/sbin/pgbouncer ] || need+=(pgbouncer)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# PostgreSQL 15: start the cluster and create the test role and database.
if command -v pg_ctlcluster >/dev/null; then
  if ! pg_lsclusters -h | awk '$1==15 && $2=="main" {print $4}' | grep -q online; then
    $SUDO pg_ctlcluster 15 main start
  fi
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done
  psql_su() { $SUDO -u postgres psql -v ON_ERROR_STOP=1 -qAt "$@" 2>/dev/null || su postgres -c "psql -v ON_ERROR_STOP=1 -qAt $(printf '%q ' "$@")"; }
  # Logical decoding for the Realtime stand-in's wal2json slots (one
  # temporary slot per test project; parallel test packages need many).
  if [ "$(psql_su -c "show wal_level")" != logical ]; then
    psql_su -c "alter system set wal_level = logical"
    psql_su -c "alter system set max_replication_slots = 64"
    $SUDO pg_ctlcluster 15 main restart
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done
  fi
  if [ "$(psql_su -c "select 1 from pg_roles where rolname='office'")" != 1 ]; then
    psql_su -c "create role office login superuser password 'office'"
  fi
  if [ "$(psql_su -c "select 1 from pg_database where datname='office_test'")" != 1 ]; then
    psql_su -c "create database office_test owner office"
  fi
fi
