#!/usr/bin/env bash
# measure-setup.sh measures what a new user's first scripts/run.sh costs
# (docs/performance.md#setting-up): a fresh clone of this repository's HEAD
# runs scripts/run.sh with an empty Go module cache, Go build cache and npm
# cache, and the script prints, for each run, the seconds from the start until
# the console URL answers, the CPU seconds spent meanwhile (the build and the
# server's start), what was downloaded (the module proxy's zip, .mod and .info
# files, and the npm cache), and the load average before and after.
# Usage: scripts/measure-setup.sh [RUNS]   (default 1; needs git and curl)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rev=$(git -C "$repo" rev-parse HEAD)
runs=${1:-1}
for i in $(seq "$runs"); do
  tmp=$(mktemp -d)
  git clone -q --no-checkout "$repo" "$tmp/clone"
  git -C "$tmp/clone" checkout -q "$rev"
  export GOMODCACHE=$tmp/gomod GOCACHE=$tmp/gobuild GOFLAGS=-modcacherw npm_config_cache=$tmp/npm
  port=$((20000 + RANDOM % 20000))
  load0=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  (
    cd "$tmp/clone"
    scripts/run.sh --addr "127.0.0.1:$port" >"$tmp/out" 2>&1 &
    echo $! >"$tmp/pid"
    wait $! || true
    times >"$tmp/times"
  ) &
  sub=$!
  url=
  while :; do
    if [ -z "$url" ]; then
      url=$(sed -n 's/^office console: \(http[^ ?]*?token=[0-9a-f]*\)$/\1/p' "$tmp/out" 2>/dev/null | head -1)
    fi
    if [ -n "$url" ] && curl -fsS -o /dev/null "$url"; then break; fi
    if ! kill -0 "$sub" 2>/dev/null; then
      echo "run $i: scripts/run.sh ended before the console answered:" >&2
      cat "$tmp/out" >&2
      exit 1
    fi
    sleep 0.1
  done
  t1=$(date +%s.%N)
  load1=$(cut -d' ' -f1 /proc/loadavg)
  kill "$(cat "$tmp/pid")"
  wait "$sub" || true
  # times: the subshell's own line, then its children's (run.sh, go, the compiler, the server).
  cpu=$(sed -n 2p "$tmp/times" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.0f", u[1]*60 + u[2] + s[1]*60 + s[2] }')
  mb=$(find "$GOMODCACHE/cache/download" -type f \( -name '*.zip' -o -name '*.mod' -o -name '*.info' \) -printf '%s\n' | awk '{ s += $1 } END { printf "%.1f", s / 1e6 }')
  npm=$(du -sk "$npm_config_cache" 2>/dev/null | cut -f1 || echo 0)
  printf 'run %d: console URL answered after %.1f s; CPU %s s (user+sys); Go modules %s MB; npm cache %s KB; load average %s -> %s; %d cores\n' \
    "$i" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$cpu" "$mb" "${npm:-0}" "$load0" "$load1" "$(nproc)"
  rm -rf "$tmp"
done
