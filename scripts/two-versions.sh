#!/usr/bin/env bash
# Two versions live (issue #36): the previous release's API and deriver beside this tree's, on one schema, in a
# rollout's order, reconciled by the checker (packages/release-check/src/TwoVersions.ts says the phases).
#
#   bash scripts/two-versions.sh [RELEASE]        RELEASE: a name under releases/ (default: the latest record)
#
# The previous release is rebuilt from its commit (the record's; tags may be absent from a clone): `git archive`
# of that commit into a scratch folder, its dependencies linked from this workspace's node_modules when the
# two lockfiles pin the same external packages (else `npm ci` there), `tsc -b` of its two apps, then its own
# scripts/pack-install.ts packs and installs them with production dependencies only, as its image would. No
# artifact store survives CI's clean clone, and this takes seconds. Prints each step's time.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD
export PATH="$root_dir/node_modules/.bin:$PATH"
started=$(date +%s)
work=$(mktemp -d /tmp/resilience-two-versions.XXXXXX)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
fail() {
  echo "two-versions: FAIL: $*" >&2
  exit 1
}

release=${1:-$(node -e 'const r=require("fs").readdirSync("releases").filter(f=>f.endsWith(".json")).map(f=>JSON.parse(require("fs").readFileSync("releases/"+f,"utf8"))).sort((a,b)=>Date.parse(a.date)-Date.parse(b.date)).at(-1);console.log(r?r.name:"")')}
[ -n "$release" ] || {
  echo "two-versions: no release recorded (releases/*.json): nothing to run against"
  exit 0
}
[ -f "releases/$release.json" ] || fail "no record releases/$release.json"
commit=$(node -p "JSON.parse(require('fs').readFileSync('releases/$release.json','utf8')).commit")
git cat-file -e "$commit^{commit}" 2>/dev/null \
  || fail "release $release's commit $commit is not in this clone (a shallow clone? fetch its history)"

# The previous release's tree and dependencies.
step=$(date +%s)
previous=$work/previous
mkdir -p "$previous"
git archive "$commit" packages apps scripts package.json package-lock.json tsconfig.base.json | tar -x -C "$previous"
externals() {
  node -e '
    const lock = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).packages
    const out = Object.entries(lock).filter(([k, v]) => k.includes("node_modules/") && !v.link)
      .map(([k, v]) => `${k}@${v.version}`).sort()
    console.log(out.join("\n"))' "$1"
}
if [ "$(externals package-lock.json)" = "$(externals "$previous/package-lock.json")" ]; then
  mkdir "$previous/node_modules"
  for entry in node_modules/* node_modules/.bin; do
    [ "$(basename "$entry")" = @resilience ] || ln -s "$root_dir/$entry" "$previous/node_modules/"
  done
  # the workspace links (../../packages/x) resolve inside the previous tree
  cp -a node_modules/@resilience "$previous/node_modules/"
  for link in "$previous"/node_modules/@resilience/*; do
    [ -e "$link" ] || rm "$link" # a workspace added since the release
  done
  how="linked this workspace's node_modules (the same external packages)"
else
  (cd "$previous" && npm ci --no-audit --no-fund --ignore-scripts >"$work/npm-ci.log" 2>&1) \
    || { tail -20 "$work/npm-ci.log" >&2; fail "npm ci in release $release's tree"; }
  how="npm ci (its lockfile pins other external packages)"
fi
echo "two-versions: release $release's tree (commit ${commit:0:7}), dependencies: $how, in $(($(date +%s) - step)) s"

# Its apps built and installed from tarballs, as its image would.
step=$(date +%s)
(cd "$previous" && tsc -b apps/api/tsconfig.build.json apps/deriver/tsconfig.build.json) >"$work/build.log" 2>&1 \
  || { tail -20 "$work/build.log" >&2; fail "building release $release's apps"; }
(cd "$previous" && node scripts/pack-install.ts --out "$work/apps" --for @resilience/api-app,@resilience/deriver-app \
  --strip-sources) >"$work/pack.log" 2>&1 || { tail -20 "$work/pack.log" >&2; fail "packing release $release's apps"; }
echo "two-versions: release $release's API and deriver built and installed from tarballs in $(($(date +%s) - step)) s"

node --conditions=@resilience/source packages/release-check/src/bin/two-versions.ts --previous "$work/apps" \
  --release "$release" --logs "$work/logs" || fail "two versions live (the phase and the app's last lines above)"
echo "two-versions: OK in $(($(date +%s) - started)) s"
