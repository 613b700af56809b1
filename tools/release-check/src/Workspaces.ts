/**
 * The repository's workspaces (`packages/*`, `apps/*`, `labs/*`, `tools/*`) as their manifests say, and which of them a release
 * publishes: not private and not in the `ignore` list of `.changeset/config.json`.
 *
 * @since 0.1.0
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

/**
 * One workspace: its folder relative to the root (`packages/x`), and its manifest as parsed.
 *
 * @since 0.1.0
 * @category models
 */
export interface Workspace {
  readonly dir: string
  readonly manifest: Readonly<Record<string, unknown>> & {
    readonly name: string
    readonly version: string
    readonly private?: boolean
  }
}

/**
 * The changesets configuration's fields these checks read.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChangesetConfig {
  readonly ignore: ReadonlyArray<string>
  readonly changedFilePatterns: ReadonlyArray<string>
}

/**
 * Every workspace under `root`, by name.
 *
 * @since 0.1.0
 * @category reading
 */
export const all = (root: string): ReadonlyMap<string, Workspace> => {
  const found = new Map<string, Workspace>()
  for (const parent of ["packages", "apps", "labs", "tools"]) {
    if (!existsSync(join(root, parent))) continue // a tree from before the labs and tools had folders of their own
    for (const entry of readdirSync(join(root, parent)).sort()) {
      const dir = `${parent}/${entry}`
      if (!existsSync(join(root, dir, "package.json"))) continue // a folder that is not a workspace (yet)
      const manifest = JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8")) as Workspace["manifest"]
      found.set(manifest.name, { dir, manifest })
    }
  }
  return found
}

/**
 * `.changeset/config.json` under `root` (`changedFilePatterns` defaults to everything, as in Changesets).
 *
 * @since 0.1.0
 * @category reading
 */
export const changesetConfig = (root: string): ChangesetConfig => {
  const config = JSON.parse(readFileSync(join(root, ".changeset", "config.json"), "utf8")) as Partial<ChangesetConfig>
  return { ignore: config.ignore ?? [], changedFilePatterns: config.changedFilePatterns ?? ["**"] }
}

/**
 * The workspaces a release publishes.
 *
 * @since 0.1.0
 * @category reading
 */
export const publishable = (root: string): ReadonlyArray<Workspace> => {
  const { ignore } = changesetConfig(root)
  return [...all(root).values()].filter((w) => w.manifest.private !== true && !ignore.includes(w.manifest.name))
}
