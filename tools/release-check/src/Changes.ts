/**
 * Every change to what a published package publishes, since the previous release, is named by a pending
 * changeset. `changeset status` alone fails only when packages changed and no changeset exists at all; this
 * asks it per package: a package whose published files changed (its `changedFilePatterns` of
 * `.changeset/config.json`) or whose manifest changed outside `devDependencies` and `scripts` must appear in a
 * changeset's releases. Pure: the caller lists the changed files and reads the changesets.
 *
 * @since 0.1.0
 */

/**
 * A published package: its name and its folder relative to the repository's root (`/`-separated).
 *
 * @since 0.1.0
 * @category models
 */
export interface Package {
  readonly name: string
  readonly dir: string
}

/**
 * A package changed with no changeset naming it, and the changed paths that count.
 *
 * @since 0.1.0
 * @category models
 */
export interface Uncovered {
  readonly name: string
  readonly files: ReadonlyArray<string>
}

/**
 * Whether `path` (relative to its package) matches `pattern`: `dir/**` matches everything under `dir/`, `**`
 * everything, any other pattern only that path (the forms `.changeset/config.json` uses).
 *
 * @since 0.1.0
 * @category checks
 */
export const matches = (pattern: string, path: string): boolean =>
  pattern === "**" || (pattern.endsWith("/**") ? path.startsWith(pattern.slice(0, -2)) : path === pattern)

/**
 * The manifest's fields that reach a consumer: all but `devDependencies` and `scripts`, as canonical JSON
 * (`undefined` for a package that did not exist).
 *
 * @since 0.1.0
 * @category checks
 */
export const publishedManifest = (manifest: Readonly<Record<string, unknown>> | undefined): string | undefined => {
  if (manifest === undefined) return undefined
  const { devDependencies: _dev, scripts: _scripts, ...rest } = manifest
  const sorted = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(sorted)
      : value !== null && typeof value === "object"
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, sorted(v)]))
      : value
  return JSON.stringify(sorted(rest))
}

/**
 * The packages changed since the release (by `changed`, the repository-relative paths that differ, and by
 * `manifestChanged`, the names whose {@link publishedManifest} differs) that no changeset names in `named`.
 *
 * @since 0.1.0
 * @category checks
 */
export const uncovered = (options: {
  readonly packages: ReadonlyArray<Package>
  readonly changed: ReadonlyArray<string>
  readonly patterns: ReadonlyArray<string>
  readonly manifestChanged: ReadonlySet<string>
  readonly named: ReadonlySet<string>
}): ReadonlyArray<Uncovered> =>
  options.packages.flatMap((pkg) => {
    const prefix = `${pkg.dir}/`
    const files = options.changed
      .filter((path) => path.startsWith(prefix))
      .filter((path) => options.patterns.some((pattern) => matches(pattern, path.slice(prefix.length))))
    const all = options.manifestChanged.has(pkg.name) ? [`${pkg.dir}/package.json`, ...files] : files
    return all.length > 0 && !options.named.has(pkg.name) ? [{ name: pkg.name, files: all }] : []
  })

/**
 * The packages a changeset file names: the keys of its front matter (`"@resilience/x": minor`), whatever the
 * bump (`none` included: the author said the package needs no release).
 *
 * @since 0.1.0
 * @category checks
 */
export const namedBy = (changeset: string): ReadonlyArray<string> => {
  const front = /^---\r?\n([\s\S]*?)\r?\n---/.exec(changeset)
  if (front === null) return []
  return front[1]!.split(/\r?\n/).flatMap((line) => {
    const found = /^\s*(["']?)(@?[^"':\s]+)\1\s*:\s*(major|minor|patch|none)\s*$/.exec(line)
    return found === null ? [] : [found[2]!]
  })
}
