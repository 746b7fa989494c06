#!/usr/bin/env bash
# build.sh builds bin/office-server for scripts/run.sh and scripts/run-claude.sh,
# and shows what it does: the Go modules it downloads (go names each), then a
# count of the packages it compiles. A build with nothing to compile is quiet.
# Usage: scripts/build.sh [NAME]   (NAME starts each line it prints)
#
# The flags change no instruction of the program; they make a cold build
# cheaper (docs/performance.md#setting-up has the figures):
#   -d=gcstart=2000  the compiler collects no garbage until its heap reaches
#                    2000 MB (its default is 128 MB); the generated SQLite
#                    package (one 4.6 MB file) then compiles in 19 CPU-s, not 32
#   -dwarf=false, -ldflags='-s -w'
#                    no debugger tables (DWARF, ELF symbols); stack traces and
#                    profiles do not need them
# A plain `go build ./cmd/office-server` gives the same program, with those
# tables.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-build.sh}
flags=(-gcflags='all=-dwarf=false -d=gcstart=2000' -ldflags='-s -w')
# Standard packages at the root of most of what the server takes from the
# standard library: they need no download, so they compile while the modules
# download.
std=(net/http net/http/httputil database/sql encoding/json log/slog os/exec os/signal regexp)

# progress LABEL TOTAL turns go build -v's lines (one package path each) into
# a count every 20 packages; any other line (an error) passes unchanged.
progress() {
  awk -v label="$1" -v total="$2" '
    /^[^ :]+$/ { n++; if (n % 20 == 0) printf "%s [%d/%d] %s\n", label, n, total, $0 > "/dev/stderr"; next }
    { print > "/dev/stderr" }
    END { if (n % 20) printf "%s [%d/%d] %s\n", label, n, total, "done" > "/dev/stderr" }'
}
# stale PACKAGES... counts the packages of the build not in the build cache.
stale() {
  go list -deps "${flags[@]}" -f '{{if .Stale}}{{.ImportPath}}{{end}}' "$@" | grep -c . || true
}

start=$SECONDS
bg=
todo=$(stale "${std[@]}")
if [ "$todo" -gt 0 ]; then
  echo "$name: compiling the standard library ($todo packages) while the Go modules download" >&2
  (go build -v "${flags[@]}" "${std[@]}" 2>&1 | progress "$name: standard library" "$todo") &
  bg=$!
fi
# go list downloads the modules the server needs; go names each.
go list -deps ./cmd/office-server >/dev/null
if [ -n "$bg" ]; then wait "$bg" || true; fi
todo=$(stale ./cmd/office-server)
if [ "$todo" -le 1 ]; then
  go build "${flags[@]}" -o bin/office-server ./cmd/office-server
else
  echo "$name: compiling $todo packages into bin/office-server" >&2
  go build -v "${flags[@]}" -o bin/office-server ./cmd/office-server 2>&1 | progress "$name:" "$todo"
fi
if [ $((SECONDS - start)) -gt 2 ]; then
  echo "$name: built bin/office-server in $((SECONDS - start)) s (later builds reuse the cache)" >&2
fi
