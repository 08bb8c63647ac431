#!/usr/bin/env bash
# The suite under load (README, Tests): `npm test` N times in a row (default 3) while one busy loop keeps one of the
# machine's cores busy, as another process would; stops at the first failing run. Each run's jest JSON and log land in
# a folder of their own (default .test-under-load/<time>), and `summary` says how each ended, how long it took and
# the load average at its end.
set -u
runs=${1:-3}
out=${2:-.test-under-load/$(date +%Y%m%dT%H%M%S)}
mkdir -p "$out"
node -e 'for (;;) {}' &
busy=$!
trap 'kill "$busy" 2>/dev/null' EXIT
echo "busy loop pid $busy, $runs runs of npm test" > "$out/summary"
for i in $(seq 1 "$runs"); do
  started=$(date +%s)
  npm test -- --json --outputFile="$out/run$i.json" > "$out/run$i.log" 2>&1
  rc=$?
  echo "run $i: exit $rc, $(( $(date +%s) - started )) s, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/summary"
  [ "$rc" -ne 0 ] && exit "$rc"
done
exit 0
