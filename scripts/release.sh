#!/usr/bin/env bash
# Cuts and publishes a release with Changesets (docs/releasing.md). From a clean tree on main:
#
#   npm run release [-- cut [--name NAME]]   checks that every change to a published package since the previous
#                                            release has a changeset (`release:changes`), runs `changeset version`
#                                            (versions, CHANGELOG.md per package, internal ranges, the lockfile),
#                                            builds, runs the publish check and the consumer test (scripts/
#                                            consumer-test.sh) and the two-version run (scripts/two-versions.sh),
#                                            commits the release, tags it (`changeset tag`: @resilience/x@1.2.3)
#                                            and records it (releases/NAME.json, a second commit). Publishes
#                                            nothing; push the commits and the tags.
#   npm run release -- publish               on a recorded release: builds, runs the publish check and the
#                                            consumer test again, then `changeset publish` to the registry of
#                                            .npmrc (`@resilience:registry=…`); versions already there are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
mode=${1:-cut}
[ $# -gt 0 ] && shift
say() { echo "release: $*"; }
fail() {
  echo "release: FAIL: $*" >&2
  exit 1
}
[ -z "$(git status --porcelain)" ] || fail "the working tree is not clean (commit or stash first)"

case "$mode" in
  cut)
    node tools/release-check/src/bin/changes.ts
    pending=$(find .changeset -maxdepth 1 -name '*.md' ! -name README.md | wc -l)
    [ "$pending" -gt 0 ] || fail "no pending changeset: nothing to release"
    say "$pending pending changesets"
    changeset version
    npm install --package-lock-only --no-audit --no-fund >/dev/null
    npm run build >/dev/null
    SKIP_BUILD=1 bash scripts/consumer-test.sh
    bash scripts/two-versions.sh
    git add -A
    git commit -q -m "release: version the published packages (changeset version)"
    changeset tag
    record=$(node tools/release-check/src/bin/record.ts "$@")
    git add "$record"
    git commit -q -m "release: record $(basename "$record" .json) ($record)"
    say "cut: $(git log -2 --format='%h %s' | tr '\n' ';') tags at the release commit: $(git tag --points-at HEAD~1 | tr '\n' ' ')"
    say "next: git push --follow-tags, then npm run release -- publish"
    ;;
  publish)
    node -e '
      const fs = require("fs")
      const records = fs.readdirSync("releases").filter((f) => f.endsWith(".json"))
        .map((f) => JSON.parse(fs.readFileSync(`releases/${f}`, "utf8"))).sort((a, b) => Date.parse(a.date) - Date.parse(b.date))
      const latest = records.at(-1)
      if (latest === undefined) { console.error("release: FAIL: no release recorded: cut one first"); process.exit(1) }
      for (const [name, version] of Object.entries(latest.packages)) {
        const dir = ["packages", "apps"].flatMap((p) => fs.readdirSync(p).map((e) => `${p}/${e}`))
          .find((d) => JSON.parse(fs.readFileSync(`${d}/package.json`, "utf8")).name === name)
        const have = dir && JSON.parse(fs.readFileSync(`${dir}/package.json`, "utf8")).version
        if (have !== version) {
          console.error(`release: FAIL: ${name} is at ${have} here, ${version} in releases/${latest.name}.json: cut a release first`)
          process.exit(1)
        }
      }
      console.log(`release: publishing release ${latest.name} (commit ${latest.commit.slice(0, 7)})`)'
    # the internal registry only: without a scope registry npm would publish to the public one
    registry=$(npm config get @resilience:registry)
    case "$registry" in
      "" | undefined | null | https://registry.npmjs.org*)
        fail "no internal registry for @resilience (set @resilience:registry in .npmrc, docs/releasing.md)"
        ;;
    esac
    say "registry: $registry"
    npm run build >/dev/null
    SKIP_BUILD=1 bash scripts/consumer-test.sh
    changeset publish
    ;;
  *) fail "unknown mode $mode (cut | publish)" ;;
esac
