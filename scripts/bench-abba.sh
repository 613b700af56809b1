#!/usr/bin/env bash
# The deriver's throughput bench in two trees, in ABBA order (A, B, B, A per cycle), against one PostgreSQL
# server started once for all runs, so that a machine whose speed drifts within minutes favours neither tree.
# Each run is one `npm run bench -w @resilience/deriver` process in its tree with BENCH_PARTS=throughput and one
# setting (the environment's BENCH_* for the rest: pools, workers, unit sizes, items, seconds); the figures go
# to a TSV (tree, cycle, position, setting, items/s, the bench process's CPU seconds, the server's) and a summary
# per setting: each tree's runs, their mean, in how many cycles B was the lower, and CPU milliseconds per item
# (BENCH_ITEMS; the process's figure includes its start, migrations and enqueue; a run its time bound cut short
# overstates it).
#
#   bash scripts/bench-abba.sh [--cycles N] [--out FILE] TREE_A TREE_B
#
# TREE_A, TREE_B: checkouts with their own `npm ci` (a `git worktree add` of a release, say). Production defaults
# unless BENCH_LABELS says otherwise. The load average is printed after every run: quote figures only from a
# quiet machine (nothing else running).
set -euo pipefail
cycles=2
out=""
while [ $# -gt 2 ]; do
  case "$1" in
    --cycles) cycles="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "bench-abba: unknown option $1 (allowed: --cycles N, --out FILE)" >&2; exit 2 ;;
  esac
done
if [ $# -ne 2 ]; then
  echo "usage: bash scripts/bench-abba.sh [--cycles N] [--out FILE] TREE_A TREE_B" >&2
  exit 2
fi
tree_a="$(cd "$1" && pwd)"
tree_b="$(cd "$2" && pwd)"
for tree in "$tree_a" "$tree_b"; do
  [ -f "$tree/packages/deriver/bench/claim.ts" ] || { echo "bench-abba: $tree has no packages/deriver/bench/claim.ts" >&2; exit 2; }
  [ -d "$tree/node_modules" ] || { echo "bench-abba: $tree has no node_modules (run npm ci there)" >&2; exit 2; }
done
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
out="${out:-$work/abba.tsv}"

# one server for every run (started from this tree's embedded binaries)
"$here/node_modules/.bin/node" --conditions=@resilience/source "$here/scripts/local-postgres.ts" --url-file "$work/url" >"$work/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; [ "$out" = "$work/abba.tsv" ] || rm -rf "$work"' EXIT
for _ in $(seq 1 300); do [ -s "$work/url" ] && break; sleep 0.2; done
[ -s "$work/url" ] || { echo "bench-abba: the server did not start" >&2; cat "$work/server.log" >&2; exit 1; }
url="$(cat "$work/url")"
pg_pid="$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$work/server.log" | head -1)"
# CPU seconds of the server's exited backends (every run's connections end with its process)
server_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ print ($16 + $17) / hz }' "/proc/$pg_pid/stat"; }

settings=()
for pool in $(echo "${BENCH_POOLS:-queue}" | tr "," " "); do
  for unit in $(echo "${BENCH_UNIT_SIZES:-1}" | tr ',' ' '); do
    for workers in $(echo "${BENCH_WORKERS:-1,8}" | tr ',' ' '); do
      settings+=("$pool/$unit/$workers")
    done
  done
done

printf 'tree\tcycle\tposition\tpool\titems_per_unit\tworkers\titems_per_s\tclient_cpu_s\tserver_cpu_s\n' >"$out"
run() { # tree-label tree cycle position setting
  local pool unit workers rate client before after
  IFS=/ read -r pool unit workers <<<"$5"
  before="$(server_cpu)"
  # the bench process's CPU (user + system, its children included), setup and teardown included
  client="$( { TIMEFORMAT='%U %S'; time (cd "$2" && DATABASE_URL="$url" BENCH_PARTS=throughput \
    BENCH_LABELS="${BENCH_LABELS:-defaults}" BENCH_POOLS="$pool" BENCH_UNIT_SIZES="$unit" BENCH_WORKERS="$workers" \
    npm run --silent bench -w @resilience/deriver >"$work/stdout" 2>"$work/stderr"); } 2>&1 | awk '{ print $1 + $2 }')"
  sleep 0.5
  after="$(server_cpu)"
  rate="$(sed -n 's/^  \([0-9]*\) items\/s$/\1/p' "$work/stdout" | head -1)"
  [ -n "$rate" ] || { echo "bench-abba: no figure from $2 ($5)" >&2; cat "$work/stderr" >&2; exit 1; }
  local server; server="$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.2f", a - b }')"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$3" "$4" "$pool" "$unit" "$workers" "$rate" "$client" "$server" >>"$out"
  echo "cycle $3 $4 ${1} $5: $rate items/s; CPU s: client $client, server $server (load $(cut -d' ' -f1 /proc/loadavg))"
  sed -n 's/^  \(polls: .*\)/    \1/p' "$work/stdout"
  # the table row's checkouts per unit, when the tree's bench prints them
  awk -F'|' '/^\| (defaults|tuned) / && NF >= 12 { printf "    checkouts per unit:%s\n", $11 }' "$work/stdout"
}
for cycle in $(seq 1 "$cycles"); do
  for setting in "${settings[@]}"; do
    run A "$tree_a" "$cycle" 1 "$setting"
    run B "$tree_b" "$cycle" 2 "$setting"
    run B "$tree_b" "$cycle" 3 "$setting"
    run A "$tree_a" "$cycle" 4 "$setting"
  done
done

echo
echo "A = $tree_a ($(git -C "$tree_a" rev-parse --short HEAD)), B = $tree_b ($(git -C "$tree_b" rev-parse --short HEAD)); figures in $out"
awk -F'\t' -v items="${BENCH_ITEMS:-1000}" 'NR > 1 {
  key = $4 "/" $5 "/" $6; keys[key] = 1
  runs[key, $1] = runs[key, $1] (runs[key, $1] == "" ? "" : ", ") $7; sum[key, $1] += $7; n[key, $1]++
  client[key, $1] += $8; server[key, $1] += $9
  pair[key, $2, $1] += $7
} END {
  printf "| pool/items per unit/workers | A (items/s) | B (items/s) | mean A | mean B | B / A | pairs where B < A |"
  printf " CPU ms per item A (client + server) | B |\n|---|---|---|---|---|---|---|---|---|\n"
  for (key in keys) {
    lower = 0; pairs = 0
    for (c = 1; c <= 1000; c++) if ((key, c, "A") in pair) { pairs++; if (pair[key, c, "B"] < pair[key, c, "A"]) lower++ }
    ma = sum[key, "A"] / n[key, "A"]; mb = sum[key, "B"] / n[key, "B"]
    ca = 1000 * client[key, "A"] / n[key, "A"] / items; sa = 1000 * server[key, "A"] / n[key, "A"] / items
    cb = 1000 * client[key, "B"] / n[key, "B"] / items; sb = 1000 * server[key, "B"] / n[key, "B"] / items
    printf "| %s | %s | %s | %.0f | %.0f | %.2f | %d of %d | %.2f + %.2f | %.2f + %.2f |\n", key, runs[key, "A"], runs[key, "B"], ma, mb, mb / ma, lower, pairs, ca, sa, cb, sb
  }
}' "$out"
