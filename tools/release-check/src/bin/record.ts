/**
 * `node tools/release-check/src/bin/record.ts [--name NAME]`: writes `releases/<NAME>.json` for the release
 * commit at HEAD (its versions, as `changeset version` left them) and prints its path. NAME defaults to the
 * published packages' version when they share one, else the UTC date; an existing record is never overwritten.
 */
import { Schema } from "effect"
import { execFileSync } from "node:child_process"
import { existsSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import * as Releases from "../Releases.ts"
import * as Workspaces from "../Workspaces.ts"

const root = resolve(import.meta.dirname, "../../../..")
const { values } = parseArgs({ options: { name: { type: "string" } } })
const commit = execFileSync("git", ["rev-parse", "HEAD"], { cwd: root, encoding: "utf8" }).trim()
const published = Workspaces.publishable(root)
const { ignore } = Workspaces.changesetConfig(root)
const versions = [...new Set(published.map((w) => w.manifest.version))]
const name = values.name ?? (versions.length === 1 ? versions[0]! : new Date().toISOString().slice(0, 10))
const path = join(root, Releases.folder, `${name}.json`)
if (existsSync(path)) {
  console.error(`record: ${Releases.folder}/${name}.json exists already; pass --name`)
  process.exit(1)
}
const release = Schema.decodeUnknownSync(Releases.Release)({
  name,
  commit,
  date: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
  packages: Object.fromEntries(published.map((w) => [w.manifest.name, w.manifest.version])),
  apps: Object.fromEntries(
    [...Workspaces.all(root).values()].filter((w) => ignore.includes(w.manifest.name))
      .map((w) => [w.manifest.name, w.manifest.version])
  )
})
writeFileSync(path, `${JSON.stringify(release, null, 2)}\n`)
console.log(`${Releases.folder}/${name}.json`)
