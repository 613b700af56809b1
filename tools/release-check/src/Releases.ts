/**
 * The release records, `releases/*.json` at the repository's root: one file per release cut by
 * `npm run release`, naming the commit that carries the released versions (the tags point at it, but a clean clone
 * need not have the tags), the published packages' versions and the apps' versions built from it. The previous
 * release, for the changeset check and for the two-version run, is the record with the latest date.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

/**
 * One release record.
 *
 * @since 0.1.0
 * @category models
 */
export const Release = Schema.Struct({
  /** The release's name (its file is `releases/<name>.json`). */
  name: Schema.String,
  /** The full id of the commit whose tree was released (versions bumped, CHANGELOGs written). */
  commit: Schema.String.check(Schema.isPattern(/^[0-9a-f]{40}$/)),
  /** When it was cut (ISO 8601). */
  date: Schema.String,
  /** The published packages and their versions, as tagged (`<name>@<version>`). */
  packages: Schema.Record(Schema.String, Schema.String),
  /** The apps (private workspaces) built from that commit, and their versions. */
  apps: Schema.Record(Schema.String, Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export type Release = typeof Release.Type

/**
 * The folder of the records, under the repository's root.
 *
 * @since 0.1.0
 * @category constants
 */
export const folder = "releases"

/**
 * Every record under `root`, oldest first; a file that does not decode stops with its name and the error.
 *
 * @since 0.1.0
 * @category reading
 */
export const all = (root: string): ReadonlyArray<Release> =>
  readdirSync(join(root, folder))
    .filter((file) => file.endsWith(".json"))
    .map((file) => {
      const path = join(folder, file)
      try {
        const release = Schema.decodeUnknownSync(Release)(JSON.parse(readFileSync(join(root, path), "utf8")))
        if (`${release.name}.json` !== file) throw new Error(`its name is ${release.name}`)
        return release
      } catch (error) {
        throw new Error(`${path} is not a release record: ${error instanceof Error ? error.message : String(error)}`, {
          cause: error
        })
      }
    })
    .sort((a, b) => Date.parse(a.date) - Date.parse(b.date))

/**
 * The latest release under `root`, or `undefined` before the first.
 *
 * @since 0.1.0
 * @category reading
 */
export const latest = (root: string): Release | undefined => all(root).at(-1)
