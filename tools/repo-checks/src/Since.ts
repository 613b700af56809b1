/**
 * `@since` tags against the version a package will publish next: a tag may not name a version later than the
 * one its pending changesets make (an export tagged `0.3.0` in a package whose next release is `0.2.0` tells a
 * reader it does not exist yet).
 *
 * @since 0.1.0
 */

/** A changeset's bump of one package. */
export type Bump = "major" | "minor" | "patch"

const order: Record<Bump, number> = { patch: 0, minor: 1, major: 2 }

/**
 * The bumps a changeset file's front matter names, by package (`"@scope/name": minor`).
 *
 * @since 0.1.0
 */
export const bumpsOf = (changeset: string): ReadonlyMap<string, Bump> => {
  const front = /^---\n([\s\S]*?)\n---/.exec(changeset)?.[1] ?? ""
  const bumps = new Map<string, Bump>()
  for (const line of front.split("\n")) {
    const match = /^\s*["']?([^"':\s]+)["']?\s*:\s*(major|minor|patch)\s*$/.exec(line)
    if (match !== null) bumps.set(match[1]!, match[2] as Bump)
  }
  return bumps
}

/**
 * The highest of the bumps (undefined for none).
 *
 * @since 0.1.0
 */
export const highest = (bumps: ReadonlyArray<Bump>): Bump | undefined =>
  bumps.reduce<Bump | undefined>((top, bump) => top === undefined || order[bump] > order[top] ? bump : top, undefined)

/**
 * The version after `version` with `bump` applied (the version itself for none), as Changesets computes it.
 *
 * @since 0.1.0
 */
export const next = (version: string, bump: Bump | undefined): string => {
  const [major = 0, minor = 0, patch = 0] = version.split(".").map(Number)
  switch (bump) {
    case "major":
      return `${major + 1}.0.0`
    case "minor":
      return `${major}.${minor + 1}.0`
    case "patch":
      return `${major}.${minor}.${patch + 1}`
    case undefined:
      return version
  }
}

/**
 * Compares two `x.y.z` versions: negative, zero or positive.
 *
 * @since 0.1.0
 */
export const compare = (a: string, b: string): number => {
  const pa = a.split(".").map(Number)
  const pb = b.split(".").map(Number)
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0)
  return 0
}

/**
 * The `@since` tags of a source text later than `limit`, with their lines.
 *
 * @since 0.1.0
 */
export const later = (
  source: string,
  limit: string
): ReadonlyArray<{ readonly line: number; readonly since: string }> =>
  source.split("\n").flatMap((text, index) => {
    const since = /@since\s+(\d+\.\d+\.\d+)/.exec(text)?.[1]
    return since !== undefined && compare(since, limit) > 0 ? [{ line: index + 1, since }] : []
  })
