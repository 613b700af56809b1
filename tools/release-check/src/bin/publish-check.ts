/**
 * `node tools/release-check/src/bin/publish-check.ts TARBALL…`: for each tarball of a published package (packed
 * by scripts/pack-install.ts, as the consumer test installs them), `npm publish --dry-run` prints what it would
 * publish (npm's notices, the per-file list left out, then a summary line), and {@link PublishCheck.problems}
 * checks the tarball's own manifest against its files and the workspace. Exits 1 naming every problem.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { basename, delimiter, dirname, resolve } from "node:path"
import * as PublishCheck from "../PublishCheck.ts"
import * as Workspaces from "../Workspaces.ts"

const root = resolve(import.meta.dirname, "../../../..")
const tarballs = process.argv.slice(2)
if (tarballs.length === 0) {
  console.error("usage: publish-check.ts TARBALL…")
  process.exit(2)
}
const workspaces = new Map(
  [...Workspaces.all(root).values()].map((w) => [w.manifest.name, {
    version: w.manifest.version,
    private: w.manifest.private === true
  }])
)

interface DryRun {
  readonly id: string
  readonly size: number
  readonly unpackedSize: number
  readonly shasum: string
  readonly files: ReadonlyArray<{ readonly path: string }>
}

let failed = 0
for (const tarball of tarballs) {
  const run = spawnSync("npm", ["publish", "--dry-run", "--json", tarball], {
    cwd: root,
    encoding: "utf8",
    // npm under this node (its `#!/usr/bin/env node` may find an older one first on the PATH)
    env: { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env["PATH"] ?? ""}` }
  })
  // npm's notices (stderr): the registry, tag and access it would use, and the tarball's details
  const notices = run.stderr.split("\n").filter((line) =>
    line !== "" && !/^npm notice [\d.]+[kMG]?B\s/.test(line) && !/requires you to be logged in/.test(line)
  )
  for (const line of notices) console.log(`publish-check: ${line}`)
  if (run.status !== 0) {
    console.log(`publish-check: FAIL ${basename(tarball)}: npm publish --dry-run exited ${run.status}`)
    failed++
    continue
  }
  const results = Object.values(JSON.parse(run.stdout) as Record<string, DryRun>)
  const result = results[0]!
  const manifest = JSON.parse(
    execFileSync("tar", ["-xzOf", tarball, "package/package.json"], { encoding: "utf8" })
  ) as PublishCheck.Manifest
  const problems = PublishCheck.problems(manifest, result.files.map((f) => f.path), workspaces)
  console.log(
    `publish-check: + ${result.id} (dry run): ${result.files.length} files, ${
      (result.size / 1024).toFixed(1)
    } kB packed, ${(result.unpackedSize / 1024).toFixed(1)} kB unpacked, shasum ${result.shasum}${
      problems.length === 0 ? ", OK" : ""
    }`
  )
  for (const problem of problems) console.log(`publish-check: FAIL ${result.id}: ${problem}`)
  if (problems.length > 0) failed++
}
if (failed > 0) {
  console.error(`publish-check: ${failed} of ${tarballs.length} packages would publish something broken`)
  process.exit(1)
}
console.log(`publish-check: OK, ${tarballs.length} packages`)
