#!/usr/bin/env bash
# Two versions live (issue #36): the previous release's API and deriver beside this tree's, on one schema, in a
# rollout's order, reconciled by the checker (tools/release-check/src/TwoVersions.ts says the phases).
#
#   bash scripts/two-versions.sh [RELEASE]        RELEASE: a name under releases/ (default: the latest record)
#
# The previous release is rebuilt from its commit (the record's; tags may be absent from a clone): `git archive`
# of that commit into a scratch folder, its dependencies linked from this workspace's node_modules when the two
# lockfiles pin the same external packages (else `npm ci` there), `tsc -b` of its two apps and the packages they
# import; its apps then run from that dist/. Why not tarballs kept as an artifact: no artifact store survives
# CI's clean clone; why not its own pack-install.ts: packing and installing took 30-37 s of the step under this
# machine's load for the same dist/ (the tarballs of the current tree are checked by the consumer test and the
# image check). This way: a few seconds. Prints each step's time.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD
export PATH="$root_dir/node_modules/.bin:$PATH"
started=$(date +%s)
work=$(mktemp -d /tmp/resilience-two-versions.XXXXXX)
cleanup() { [ "${KEEP_WORK:-}" = 1 ] || rm -rf "$work"; }
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

# Its apps built (their dist/, run as the image runs them, with node and no source condition). The projects are given to `tsc -b` in the order
# of their package.json dependencies, as Turbo's `^build` orders them: a project's tsconfig `references` may
# miss one (0.2.0's deriver does not name admission), and then `tsc -b` of the apps alone can build a package
# before one it imports.
step=$(date +%s)
projects=$(cd "$previous" && node -e '
  const fs = require("fs")
  const manifests = new Map()
  for (const parent of ["packages", "apps"]) for (const entry of fs.readdirSync(parent)) {
    const dir = `${parent}/${entry}`
    if (fs.existsSync(`${dir}/tsconfig.build.json`)) manifests.set(JSON.parse(fs.readFileSync(`${dir}/package.json`, "utf8")).name, dir)
  }
  const order = []
  const visit = (name) => {
    if (!manifests.has(name) || order.includes(name)) return
    const manifest = JSON.parse(fs.readFileSync(`${manifests.get(name)}/package.json`, "utf8"))
    Object.keys(manifest.dependencies ?? {}).forEach(visit)
    order.push(name)
  }
  ["@resilience/api-app", "@resilience/deriver-app"].forEach(visit)
  console.log(order.map((name) => `${manifests.get(name)}/tsconfig.build.json`).join(" "))')
# shellcheck disable=SC2086 # one argument per project
(cd "$previous" && tsc -b --singleThreaded $projects) >"$work/build.log" 2>&1 \
  || { tail -20 "$work/build.log" >&2; fail "building release $release's apps"; }
echo "two-versions: release $release's API and deriver built in $(($(date +%s) - step)) s"

node --conditions=@resilience/source tools/release-check/src/bin/two-versions.ts --previous "$previous" \
  --release "$release" --logs "$work/logs" || fail "two versions live (the phase and the app's last lines above)"
echo "two-versions: OK in $(($(date +%s) - started)) s"
