#!/usr/bin/env bash
# The consumer test: every publishable package built (`npm run build`), packed (`npm pack`) and installed from its
# tarball into a fresh project outside the workspace (no workspace links, no `@resilience/source` condition,
# production dependencies only, plus typescript and @types/node to type-check against the published
# declarations). There, with plain `node`:
#   1. scripts/consumer/deriver.ts: a deriver with the project's own handler against a real PostgreSQL;
#   2. scripts/consumer/http.ts: a node:http handler mapping DatabaseUnavailable to 503 + Retry-After (api-errors);
#   3. scripts/consumer/client.ts: the published client against our API (started from this workspace).
# Before that, what npm would publish from those same tarballs: `npm publish --dry-run` of each, printed, and its
# manifest against its files and the workspace (tools/release-check/src/bin/publish-check.ts: every `exports`,
# `main`, `types` and `bin` target in the tarball, a non-empty dist/, no `workspace:`/`file:` or private
# dependency, every internal range accepting the version). Also checks that no published README links outside
# its tarball (../). Prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD
export PATH="$root_dir/node_modules/.bin:$PATH"
started=$(date +%s)
work=$(mktemp -d /tmp/resilience-consumer.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "consumer-test: FAIL: $*" >&2
  for log in "$work"/*.log; do [ -f "$log" ] && { echo "--- $log" >&2; tail -30 "$log" >&2; }; done
  exit 1
}

[ "${SKIP_BUILD:-}" = 1 ] || npm run build >"$work/build.log" 2>&1 || fail "npm run build"
project=$work/project
node scripts/pack-install.ts --out "$project" --publishable --dep typescript@^7.0.2 --dep @types/node@^24.0.0 \
  >"$work/install.log" 2>&1 || fail "installing the tarballs"
echo "consumer-test: $(tail -1 "$work/install.log")"
node tools/release-check/src/bin/publish-check.ts "$project"/tarballs/*.tgz || fail "a package would publish something broken"
for readme in "$project"/node_modules/@resilience/*/README.md; do
  if grep -nE '\]\((\.\./|\./\.\./)' "$readme"; then fail "$readme links outside its package"; fi
done
[ ! -L "$project/node_modules/@resilience/deriver" ] || fail "a workspace link, not an installed package"
cp scripts/consumer/*.ts scripts/consumer/tsconfig.json "$project/"
(cd "$project" && ./node_modules/.bin/tsc -p tsconfig.json) >"$work/tsc.log" 2>&1 || fail "the consumer's code does not type-check against the published declarations"
echo "consumer-test: the consumer's code type-checks against the published .d.ts"

node --conditions=@resilience/source scripts/local-postgres.ts --url-file "$work/url" >"$work/postgres.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do [ -s "$work/url" ] && break; sleep 0.5; done
[ -s "$work/url" ] || fail "PostgreSQL did not start"
database_url=$(cat "$work/url")

(cd "$project" && DATABASE_URL="$database_url" node deriver.ts) >"$work/deriver.log" 2>&1 || fail "deriver.ts"
grep -o 'deriver: [^"]*' "$work/deriver.log" | head -1 | sed 's/^/consumer-test: /'
(cd "$project" && node http.ts) >"$work/http.log" 2>&1 || fail "http.ts"
sed 's/^/consumer-test: /' "$work/http.log"

# Our API and deriver, from this workspace, for the client.
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
metrics=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
export DATABASE_URL=$database_url DB_SCHEMA=consumer_api API_ADMIN_TOKEN=consumer-test-admin-token
API_PORT=$port API_HOST=127.0.0.1 node --conditions=@resilience/source apps/api/src/main.ts >"$work/api.log" 2>&1 &
pids+=($!)
DERIVER_METRICS_PORT=$metrics DERIVER_MIGRATE=false DERIVER_POLLING_STARTUP_JITTER_SECONDS=0.5 \
  DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS=2 node --conditions=@resilience/source apps/deriver/src/main.ts \
  >"$work/api-deriver.log" 2>&1 &
pids+=($!)
# The API listens once node has loaded it (seconds on a loaded machine); the client's own retries are for 503s.
for _ in $(seq 1 240); do
  node -e 'fetch(process.argv[1]).then(() => process.exit(0), () => process.exit(1))' "http://127.0.0.1:$port/healthz" \
    && break
  sleep 0.5
done
(cd "$project" && API_URL="http://127.0.0.1:$port" node client.ts) >"$work/client.log" 2>&1 || fail "client.ts"
grep -o 'client: [^"]*' "$work/client.log" | head -1 | sed 's/^/consumer-test: /'
echo "consumer-test: OK in $(($(date +%s) - started)) s"
