#!/usr/bin/env bash
# build.sh builds bin/office-server for scripts/run.sh and scripts/run-claude.sh,
# and shows what it does: the Go modules it downloads (go names each), then a
# count of the packages it compiles. A build with nothing to compile is quiet.
# Usage: scripts/build.sh [NAME]   (NAME starts each line it prints)
#
# A first build compiles about 340 packages, 95 CPU-seconds; to keep both
# cores busy until the end (docs/performance.md#setting-up has the figures):
#   1. while the Go modules download, the standard packages that the SQLite
#      translation imports (the runtime first) compile;
#   2. the SQLite translation (one 4.6 MB generated file, a fifth of the
#      build) compiles beside every package that does not import it; in one
#      `go build` it would start only near the end and finish alone;
#   3. the rest: the SQLite driver, the store, the command, the link.
# The flags change no instruction of the program; they make the build cheaper:
#   -d=gcstart=2000  the compiler collects no garbage until its heap reaches
#                    2000 MB (its default is 128 MB): a cold build takes 95
#                    CPU-s instead of 142, the SQLite translation 19 instead of 32
#   -dwarf=false, -ldflags='-s -w'
#                    no debugger tables (DWARF, ELF symbols); stack traces and
#                    profiles do not need them
# A plain `go build ./cmd/office-server` gives the same program, with those
# tables.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-build.sh}
flags=(-gcflags='all=-dwarf=false -d=gcstart=2000' -ldflags='-s -w')
sqlite=github.com/ncruces/go-sqlite3-wasm/v6
sqlite_std=(bytes embed encoding/binary math math/bits runtime strconv time)

# progress LABEL TOTAL turns go build -v's lines (one package path each) into
# a count every 20 packages; any other line (an error) passes unchanged.
progress() {
  awk -v label="$1" -v total="$2" '
    /^[^ :]+$/ { n++; last = $0; if (n % 20 == 0) printf "%s [%d/%d] %s\n", label, n, total, $0 > "/dev/stderr"; next }
    { print > "/dev/stderr" }
    END { if (n % 20) printf "%s [%d/%d] %s\n", label, n, total, last > "/dev/stderr" }'
}
# stale PACKAGES... counts the packages of the build not in the build cache.
stale() {
  local out
  out=$(go list -deps "${flags[@]}" -f '{{if .Stale}}{{.ImportPath}}{{end}}' "$@") || return 1
  grep -c . <<<"$out" || true
}

# Nothing to compile (and every module there): just link, if that.
if todo=$(GOPROXY=off stale ./cmd/office-server 2>/dev/null) && [ "$todo" -le 1 ]; then
  exec go build "${flags[@]}" -o bin/office-server ./cmd/office-server
fi

start=$SECONDS
bg=
todo=$(stale "${sqlite_std[@]}")
if [ "$todo" -gt 0 ]; then
  echo "$name: compiling the Go runtime ($todo packages) while the Go modules download" >&2
  (go build -v "${flags[@]}" "${sqlite_std[@]}" 2>&1 | progress "$name: runtime" "$todo") &
  bg=$!
fi
# go list downloads the modules the server needs; go names each.
deps=$(go list -deps -f '{{.ImportPath}} {{join .Deps " "}}' ./cmd/office-server) || { wait; exit 1; }
if [ -n "$bg" ]; then wait "$bg" || true; fi
todo=$(stale ./cmd/office-server)
# The packages that do not import the SQLite translation (phase 2).
mapfile -t rest < <(awk -v w="$sqlite" '{ for (i = 1; i <= NF; i++) if ($i == w) next; print $1 }' <<<"$deps")
echo "$name: compiling $todo packages into bin/office-server" >&2
{
  if [ "${#rest[@]}" -lt "$(wc -l <<<"$deps")" ]; then
    go build -v "${flags[@]}" "$sqlite" &
    go build -v "${flags[@]}" "${rest[@]}" || { wait; exit 1; }
    wait $! || exit 1
  fi
  go build -v "${flags[@]}" -o bin/office-server ./cmd/office-server
} 2>&1 | progress "$name:" "$todo"
echo "$name: built bin/office-server in $((SECONDS - start)) s (later builds reuse the cache)" >&2
