/**
 * What a tarball would publish, checked before anything is published: every file its manifest points at
 * (`exports` under every condition, `main`, `types`, `bin`) is in the tarball, its `dist/` is not empty, and
 * every dependency is one a registry install can resolve (no `workspace:`, `file:`, `link:`, git or URL
 * specifier; a `@resilience/*` dependency is a published package whose current version the range accepts).
 * The checks are a pure function of the manifest, the tarball's file list and the workspace's packages.
 *
 * @since 0.1.0
 */

/**
 * The fields of a `package.json` the checks read.
 *
 * @since 0.1.0
 * @category models
 */
export interface Manifest {
  readonly name: string
  readonly version: string
  readonly private?: boolean | undefined
  readonly main?: string | undefined
  readonly types?: string | undefined
  readonly bin?: string | Readonly<Record<string, string>> | undefined
  readonly exports?: unknown
  readonly dependencies?: Readonly<Record<string, string>> | undefined
  readonly peerDependencies?: Readonly<Record<string, string>> | undefined
  readonly optionalDependencies?: Readonly<Record<string, string>> | undefined
}

/**
 * A workspace package as the checks see it: its version and whether it is published.
 *
 * @since 0.1.0
 * @category models
 */
export interface Workspace {
  readonly version: string
  readonly private: boolean
}

/** Every file path an `exports` value names, under any condition (`null` targets exclude a path). */
const exportTargets = (value: unknown): ReadonlyArray<string> => {
  if (typeof value === "string") return [value]
  if (Array.isArray(value)) return value.flatMap(exportTargets)
  if (value !== null && typeof value === "object") return Object.values(value).flatMap(exportTargets)
  return []
}

const normal = (path: string) => path.replace(/^\.\//, "")

/** `*` in an export target matches any run of characters, `/` included (Node's subpath patterns). */
const matches = (target: string, files: ReadonlySet<string>) => {
  const path = normal(target)
  if (!path.includes("*")) return files.has(path)
  const [head, ...rest] = path.split("*")
  const pattern = new RegExp(
    `^${[head!, ...rest].map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".+")}$`
  )
  return [...files].some((file) => pattern.test(file))
}

const parse = (version: string): readonly [number, number, number] | undefined => {
  const found = /^(\d+)\.(\d+)\.(\d+)$/.exec(version)
  return found === null ? undefined : [Number(found[1]), Number(found[2]), Number(found[3])]
}

const compare = (a: readonly [number, number, number], b: readonly [number, number, number]) =>
  a[0] - b[0] || a[1] - b[1] || a[2] - b[2]

/**
 * Whether `version` (x.y.z) satisfies `range`, for the forms the workspace writes: an exact version, `^x.y.z`
 * (0.x: the same minor; 0.0.x: the same patch) and `~x.y.z`; `undefined` for any other form.
 *
 * @since 0.1.0
 * @category ranges
 */
export const satisfies = (version: string, range: string): boolean | undefined => {
  const have = parse(version)
  const operator = range.startsWith("^") ? "^" : range.startsWith("~") ? "~" : ""
  const want = parse(range.slice(operator.length))
  if (have === undefined || want === undefined) return undefined
  if (compare(have, want) < 0) return false
  if (operator === "") return compare(have, want) === 0
  if (operator === "~") return have[0] === want[0] && have[1] === want[1]
  if (want[0] > 0) return have[0] === want[0]
  if (want[1] > 0) return have[0] === 0 && have[1] === want[1]
  return have[0] === 0 && have[1] === 0 && have[2] === want[2]
}

const local = /^(workspace:|file:|link:|portal:|git(\+[a-z]+)?:|https?:|github:|[^@/\s]+\/[^/\s]+$)/

/**
 * What is wrong with publishing `manifest` with `files` (the tarball's paths, relative to its root), given the
 * workspace's packages by name; empty when nothing is.
 *
 * @since 0.1.0
 * @category checks
 */
export const problems = (
  manifest: Manifest,
  files: ReadonlyArray<string>,
  workspaces: ReadonlyMap<string, Workspace>
): ReadonlyArray<string> => {
  const found: Array<string> = []
  const inTarball = new Set(files.map(normal))
  if (manifest.private === true) found.push(`${manifest.name} is private: it must not be published`)
  if (![...inTarball].some((file) => file.startsWith("dist/") && !file.endsWith(".tsbuildinfo"))) {
    found.push("no dist/ in the tarball (run the build first)")
  }
  const pointed: Array<readonly [string, string]> = [
    ...exportTargets(manifest.exports).map((target) => ["exports", target] as const),
    ...(manifest.main === undefined ? [] : [["main", manifest.main] as const]),
    ...(manifest.types === undefined ? [] : [["types", manifest.types] as const]),
    ...(typeof manifest.bin === "string"
      ? [["bin", manifest.bin] as const]
      : Object.values(manifest.bin ?? {}).map((path) => ["bin", path] as const))
  ]
  for (const [field, target] of pointed) {
    if (!matches(target, inTarball)) found.push(`${field} points at ${target}, which is not in the tarball`)
  }
  const dependencies = [
    ...Object.entries(manifest.dependencies ?? {}),
    ...Object.entries(manifest.peerDependencies ?? {}),
    ...Object.entries(manifest.optionalDependencies ?? {})
  ]
  for (const [name, range] of dependencies) {
    if (local.test(range)) {
      found.push(`dependency ${name}@${range} cannot be installed from a registry`)
      continue
    }
    const workspace = workspaces.get(name)
    if (workspace === undefined) continue
    if (workspace.private) {
      found.push(`dependency ${name} is a private workspace: it is never published`)
      continue
    }
    const ok = satisfies(workspace.version, range)
    if (ok === undefined) found.push(`dependency ${name}@${range}: write an exact, ^ or ~ range`)
    else if (!ok) found.push(`dependency ${name}@${range} does not accept its version ${workspace.version}`)
  }
  return found
}
