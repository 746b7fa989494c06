#!/bin/bash
# agent-cost.sh BIN N: runs BIN serve (SQLite, a scratch directory) with N
# `cat` agents, waits until N cat processes run below it, then prints what
# every process below the server costs per agent: OS threads (/proc/PID/status)
# and private memory, Pss and RSS (/proc/PID/smaps_rollup). Stops the server
# and says whether any cat was left behind. Issue 17: go build -o bin/
# ./cmd/office-server && scripts/agent-cost.sh bin/office-server 200
set -eu
BIN=$1
N=$2
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
{
	printf 'office:\n  name: Cost\nagents:\n'
	for i in $(seq 1 "$N"); do printf '  - name: a%05d\n    role: R\n    launch: {kind: command, command: cat}\n' "$i"; done
} >"$D/office.yaml"
OFFICE_ADMIN_TOKEN=x "$BIN" serve --addr 127.0.0.1:0 --office "$D/office.yaml" --data-dir "$D/data" --log-level warn 2>"$D/log" &
S=$!
below() { # every process below $1
	local k
	for k in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		echo "$k"
		below "$k"
	done
}
cats=0
for _ in $(seq 1 240); do
	cats=$(below $S | while read -r p; do cat /proc/"$p"/comm 2>/dev/null; done | grep -c '^cat$' || true)
	[ "$cats" -ge "$N" ] && break
	sleep 0.5
done
sleep 5
procs=0 threads=0 priv=0 pss=0 rss=0
for p in $(below $S); do
	t=$(awk '/^Threads:/{print $2}' /proc/"$p"/status 2>/dev/null || true)
	read -r r s v < <(awk '/^Rss:/{r=$2} /^Pss:/{s=$2} /^Private_(Clean|Dirty):/{v+=$2} END{print r+0, s+0, v+0}' /proc/"$p"/smaps_rollup 2>/dev/null || echo 0 0 0)
	procs=$((procs + 1)) threads=$((threads + ${t:-0})) rss=$((rss + r)) pss=$((pss + s)) priv=$((priv + v))
done
echo "agents $N (cat running: $cats): $procs processes below the server, $(echo "scale=2; $threads/$N" | bc) threads, $((priv / N)) kB private, $((pss / N)) kB Pss, $((rss / N)) kB RSS per agent; server: $(awk '/^Threads:/{print $2}' /proc/$S/status) threads"
kill -TERM $S
wait $S || true
sleep 1
echo "cat processes left with init as parent: $(pgrep -c -P 1 -x cat || true)"
