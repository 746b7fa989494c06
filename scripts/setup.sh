#!/usr/bin/env bash
# setup.sh installs what is asked for, at the versions package-lock.json and
# this file pin. Safe to run again: what is there already is kept.
#
# Usage: scripts/setup.sh [--cli NAME]... [--npm] [--no-system]
#
#   --cli NAME   one CLI agent from npm, alone: claude (Claude Code), codex,
#                gemini (Gemini CLI) or qwen (Qwen Code); may be repeated.
#                scripts/run-claude.sh uses --cli claude.
#   --npm        every npm package of package-lock.json: the four CLIs,
#                @supabase/supabase-js and ws (the contract suite, the
#                reference web office), xterm.js (the console's vendor check),
#                the Supabase CLI (supabase: its @supabase/cli-linux-x64
#                ships the binary; the migration tests run its db push).
#   --no-system  --npm and the Go checkers, without Debian packages or
#                PostgreSQL.
#   (none)       everything the tests need (scripts/test.sh, .ci/run): --npm,
#                the pinned Go checkers staticcheck and deadcode into bin/,
#                Debian's chromium, tmux, postgresql-15, wal2json and
#                pgbouncer (the session pooler's stand-in), and a
#                running PostgreSQL 15 with wal_level=logical (the Realtime
#                stand-in reads the WAL as Supabase Realtime does), the test
#                role and database.
#
# The demo (scripts/run.sh) needs none of this: the console's xterm.js is
# committed in server/web/static/vendor/.
set -euo pipefail
cd "$(dirname "$0")/.."

clis=() npm_all=0 go_tools=0 system=0
if [ $# -eq 0 ]; then npm_all=1 go_tools=1 system=1; fi
while [ $# -gt 0 ]; do
  case "$1" in
    --cli) [ $# -ge 2 ] || { echo "setup.sh: --cli needs a name: claude, codex, gemini or qwen" >&2; exit 2; }
           clis+=("$2"); shift ;;
    --cli=*) clis+=("${1#--cli=}") ;;
    --npm) npm_all=1 ;;
    --no-system) npm_all=1 go_tools=1 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option $1 (see scripts/setup.sh --help)" >&2; exit 2 ;;
  esac
  shift
done

# npm_pkg NAME: the npm package and the command of a CLI agent.
npm_pkg() {
  case "$1" in
    claude) echo "@anthropic-ai/claude-code claude" ;;
    codex) echo "@openai/codex codex" ;;
    gemini) echo "@google/gemini-cli gemini" ;;
    qwen) echo "@qwen-code/qwen-code qwen" ;;
    *) echo "setup.sh: unknown CLI \"$1\": claude, codex, gemini or qwen" >&2; return 2 ;;
  esac
}

# locked PACKAGE: the version package-lock.json pins.
locked() { node -e 'const l=require("./package-lock.json").packages["node_modules/"+process.argv[1]]; if(!l){process.exit(1)} console.log(l.version)' "$1"; }
# installed PACKAGE: the version in node_modules, if any.
installed() { node -e 'try{console.log(require("./node_modules/"+process.argv[1]+"/package.json").version)}catch{}' "$1"; }

# all_installed: every dependency of package.json is in node_modules at
# the version package-lock.json pins.
all_installed() {
  node -e '
    const deps = Object.keys(require("./package.json").dependencies);
    const lock = require("./package-lock.json").packages;
    for (const d of deps) {
      let v;
      try { v = require("./node_modules/" + d + "/package.json").version } catch { process.exit(1) }
      if (v !== lock["node_modules/" + d].version) process.exit(1);
    }'
}

need_npm() {
  command -v npm >/dev/null || { echo "setup.sh: npm is needed (Debian: apt-get install npm)" >&2; exit 1; }
}

# Every npm package of the lock file, installed by npm ci from the lock file
# as scripts/npm-pick.mjs writes it out (why: see there).
if [ "$npm_all" = 1 ]; then
  need_npm
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] \
     || ! all_installed; then
    echo "setup.sh: installing the npm packages of package-lock.json (the CLIs, supabase-js, xterm.js: about 470 MB)"
    tmp=$(mktemp -d "$PWD/.setup-npm-XXXXXX") # on the same file system: mv renames
    node scripts/npm-pick.mjs "$tmp"
    (cd "$tmp" && npm ci --no-audit --no-fund)
    rm -rf node_modules
    mv "$tmp/node_modules" node_modules
    rm -rf "$tmp"
  fi
fi

# One CLI: npm ci in a scratch project holding only that package of the
# lock file and what it needs (scripts/npm-pick.mjs), moved into
# node_modules/ where the office files and the tests find it.
for cli in ${clis[@]+"${clis[@]}"}; do
  read -r pkg bin < <(npm_pkg "$cli") || exit 2
  need_npm
  want=$(locked "$pkg")
  if [ "$(installed "$pkg")" = "$want" ] && [ -x "node_modules/.bin/$bin" ]; then
    continue
  fi
  echo "setup.sh: installing $pkg $want from npm (pinned by package-lock.json)"
  tmp=$(mktemp -d "$PWD/.setup-npm-XXXXXX")
  node scripts/npm-pick.mjs "$tmp" "$pkg"
  (cd "$tmp" && npm ci --no-audit --no-fund)
  mkdir -p node_modules/.bin
  for d in "$tmp"/node_modules/*; do
    case "$(basename "$d")" in
      @*) mkdir -p "node_modules/$(basename "$d")"
          for s in "$d"/*; do rm -rf "node_modules/$(basename "$d")/$(basename "$s")"; mv "$s" "node_modules/$(basename "$d")/"; done ;;
      *) rm -rf "node_modules/$(basename "$d")"; mv "$d" node_modules/ ;;
    esac
  done
  # The bins are relative links (../pkg/bin/x): still right once moved.
  for b in "$tmp"/node_modules/.bin/*; do
    [ -e "$b" ] || [ -L "$b" ] || continue
    rm -f "node_modules/.bin/$(basename "$b")"
    cp -P "$b" node_modules/.bin/
  done
  rm -rf "$tmp"
  echo "setup.sh: node_modules/.bin/$bin is $pkg $want"
done

# The Go checkers CI runs (.ci/run), pinned, from the Go module proxy:
# bin/<name>-<version>, and bin/<name> pointing at it.
go_tool() { # name module/path@version
  local name=$1 version=${2##*@}
  if [ ! -x "bin/$name-$version" ]; then
    local tmp
    tmp=$(mktemp -d)
    echo "setup.sh: building $2"
    GOBIN="$tmp" go install "$2"
    mkdir -p bin
    mv "$tmp/$name" "bin/$name-$version"
    rm -rf "$tmp"
  fi
  ln -sfn "$name-$version" "bin/$name"
}
if [ "$go_tools" = 1 ]; then
  go_tool staticcheck honnef.co/go/tools/cmd/staticcheck@v0.8.2
  go_tool deadcode golang.org/x/tools/cmd/deadcode@v0.52.0
fi

[ "$system" = 1 ] || exit 0

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

need=()
command -v chromium >/dev/null || need+=(chromium)
command -v tmux >/dev/null || need+=(tmux) # the console test compares its terminal with tmux
command -v pg_ctlcluster >/dev/null || need+=(postgresql-15)
[ -f /usr/lib/postgresql/15/lib/wal2json.so ] || need+=(postgresql-15-wal2json)
# PgBouncer in session mode stands in for Supabase's session pooler (the
# tests start their own; the package's service stays stopped).
[ -x /usr/sbin/pgbouncer ] || need+=(pgbouncer)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup.sh: installing Debian packages: ${need[*]}"
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
