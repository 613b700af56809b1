/**
 * `node tools/release-check/src/bin/changes.ts`: `changeset status` against the previous release's commit (from
 * `releases/*.json`: a clean clone of main has the commit but perhaps not the tags, and comparing main with
 * itself would find nothing), printed, then the per-package check of {@link Changes.uncovered}. Exits 1 naming
 * every published package changed without a changeset, or when the release's commit is not in this clone.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { join, resolve } from "node:path"
import * as Changes from "../Changes.ts"
import * as Releases from "../Releases.ts"
import * as Workspaces from "../Workspaces.ts"

const root = resolve(import.meta.dirname, "../../../..")
const git = (...args: ReadonlyArray<string>) => execFileSync("git", args, { cwd: root, encoding: "utf8" })
const fail = (message: string): never => {
  console.error(`changes: FAIL: ${message}`)
  process.exit(1)
}

const release = Releases.latest(root)
if (release === undefined) {
  console.log("changes: no release recorded yet (releases/*.json): nothing to compare")
  process.exit(0)
}
const base = release.commit
if (spawnSync("git", ["cat-file", "-e", `${base}^{commit}`], { cwd: root }).status !== 0) {
  fail(`release ${release.name}'s commit ${base} is not in this clone (a shallow clone? fetch its history)`)
}
console.log(`changes: since release ${release.name} (commit ${base.slice(0, 7)}, releases/${release.name}.json)`)

// Changesets' own bin under this node (its `#!/usr/bin/env node` may find an older one first on the PATH)
const changeset = [join(root, "node_modules", "@changesets", "cli", "bin.js"), "status"]
const shown = spawnSync(process.execPath, [...changeset, `--since=${base}`, "--verbose"], {
  cwd: root,
  stdio: "inherit"
})
// It exits 1 when a package changed and no changeset exists at all; the per-package check below is the verdict.
// The packages named come from every pending changeset's front matter (a release consumes them all, so they are
// the ones written since; `changeset status --since` would skip those not yet committed).
const named = new Set(
  readdirSync(join(root, ".changeset"))
    .filter((file) => file.endsWith(".md") && file !== "README.md")
    .flatMap((file) => Changes.namedBy(readFileSync(join(root, ".changeset", file), "utf8")))
)

const lines = (text: string) => text.split("\n").filter((line) => line !== "")
// Against the working tree (tracked files) plus untracked ones: in CI's clean clone that is HEAD.
const changed = [
  ...lines(git("diff", "--name-only", base)),
  ...lines(git("ls-files", "--others", "--exclude-standard"))
]
const packages = Workspaces.publishable(root)
const manifestChanged = new Set(
  packages.filter((pkg) => {
    const before = spawnSync("git", ["show", `${base}:${pkg.dir}/package.json`], { cwd: root, encoding: "utf8" })
    const old = before.status === 0 ? JSON.parse(before.stdout) as Record<string, unknown> : undefined
    return Changes.publishedManifest(old) !== Changes.publishedManifest(pkg.manifest)
  }).map((pkg) => pkg.manifest.name)
)
const missing = Changes.uncovered({
  packages: packages.map((pkg) => ({ name: pkg.manifest.name, dir: pkg.dir })),
  changed,
  patterns: Workspaces.changesetConfig(root).changedFilePatterns,
  manifestChanged,
  named
})
const touched = packages.filter((pkg) =>
  manifestChanged.has(pkg.manifest.name) ||
  changed.some((path) => path.startsWith(`${pkg.dir}/`))
).map((pkg) => pkg.manifest.name)
console.log(
  `changes: published packages with changed files: ${touched.join(", ") || "none"}; named by changesets: ${
    [...named].sort().join(", ") || "none"
  }`
)
if (missing.length > 0) {
  fail(
    `changed without a changeset (run \`npx changeset\`):\n${
      missing.map((m) =>
        `  ${m.name}: ${m.files.slice(0, 5).join(", ")}${m.files.length > 5 ? `, … (${m.files.length} files)` : ""}`
      ).join("\n")
    }`
  )
}
if (shown.status !== 0) {
  // every package it counts as changed is named by a changeset read above: it missed one not yet committed
  console.log(`changes: (changeset status exited ${shown.status}: it reads committed changesets only)`)
}
console.log("changes: OK, every published package changed since the release is named by a changeset")
