#!/usr/bin/env bash
# build.sh builds bin/office-server for scripts/run.sh and scripts/run-claude.sh,
# and shows what it does: the Go modules it downloads (go names each), then a
# count of the packages it compiles. A build with nothing to compile is quiet.
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
flags=(-gcflags='all=-dwarf=false -d=gcstart=2000' -ldflags='-s -w')
name=${1:-build.sh}
# go list downloads the modules the build needs (go prints each) and counts
# the packages not in the build cache.
todo=$(go list -deps "${flags[@]}" -f '{{if .Stale}}{{.ImportPath}}{{end}}' ./cmd/office-server | grep -c . || true)
if [ "$todo" -le 1 ]; then
  exec go build "${flags[@]}" -o bin/office-server ./cmd/office-server
fi
echo "$name: compiling $todo packages into bin/office-server (about a minute on two idle cores, once; later builds reuse the cache)" >&2
start=$SECONDS
tty=0
if [ -t 2 ]; then tty=1; fi
# go build -v names each package as it compiles; any other line (an error)
# passes through unchanged.
go build -v "${flags[@]}" -o bin/office-server ./cmd/office-server 2>&1 |
  awk -v todo="$todo" -v tty="$tty" -v name="$name" '
    /^[^ :]+$/ {
      n++
      if (tty) { printf "\r\033[K%s: [%d/%d] %s", name, n, todo, $0 > "/dev/stderr" }
      else if (n % 25 == 0 || n == todo) { printf "%s: [%d/%d] %s\n", name, n, todo, $0 > "/dev/stderr" }
      next
    }
    { if (tty && n) printf "\n" > "/dev/stderr"; print > "/dev/stderr" }
    END { if (tty && n) printf "\n" > "/dev/stderr" }'
echo "$name: built bin/office-server in $((SECONDS - start)) s" >&2
