/**
 * Packs workspaces with `npm pack` and installs the tarballs into a fresh directory with their production
 * dependencies only: what a registry install would give, without a registry for our own packages and without
 * workspace links or the `@resilience/source` condition. Used by the container image (deploy/Dockerfile), by
 * the image's shell-step check (scripts/image-check.sh) and by the consumer test (scripts/consumer-test.sh).
 *
 *   node scripts/pack-install.ts --out DIR [--for NAME,NAME | --publishable] [--strip-sources] [--dep NAME@RANGE]…
 *
 * `--for` takes workspace names and packs them with every `@resilience/*` workspace they depend on (transitively);
 * `--publishable` packs every workspace that is not private. Run `npm run build` first: tarballs carry `dist/`.
 * `--strip-sources` deletes the TypeScript sources the tarballs carry (`src/`), so only `dist/` runs.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"

interface Manifest {
  readonly name: string
  readonly version: string
  readonly private?: boolean
  readonly dependencies?: Record<string, string>
}

const root = resolve(import.meta.dirname, "..")
const { values } = parseArgs({
  options: {
    out: { type: "string" },
    for: { type: "string" },
    publishable: { type: "boolean", default: false },
    "strip-sources": { type: "boolean", default: false },
    dep: { type: "string", multiple: true, default: [] }
  }
})
if (values.out === undefined) throw new Error("--out DIR is required")
const out = resolve(values.out)

const workspaces = new Map<string, { readonly dir: string; readonly manifest: Manifest }>()
for (const parent of ["packages", "apps", "labs", "tools"]) {
  for (const entry of readdirSync(join(root, parent))) {
    const dir = join(root, parent, entry)
    if (!existsSync(join(dir, "package.json"))) continue // not a workspace (yet)
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as Manifest
    workspaces.set(manifest.name, { dir, manifest })
  }
}

const closure = (names: ReadonlyArray<string>): ReadonlyArray<string> => {
  const seen = new Set<string>()
  const visit = (name: string): void => {
    const workspace = workspaces.get(name)
    if (workspace === undefined) throw new Error(`no workspace named ${name}`)
    if (seen.has(name)) return
    seen.add(name)
    for (const dependency of Object.keys(workspace.manifest.dependencies ?? {})) {
      if (workspaces.has(dependency)) visit(dependency)
    }
  }
  names.forEach(visit)
  return [...seen].sort()
}

const selected = values.publishable
  ? [...workspaces.values()].filter((w) => w.manifest.private !== true).map((w) => w.manifest.name).sort()
  : closure((values.for ?? "").split(",").filter((name) => name !== ""))
if (selected.length === 0) throw new Error("nothing to pack: pass --for NAME,… or --publishable")

rmSync(out, { recursive: true, force: true })
const tarballs = join(out, "tarballs")
mkdirSync(tarballs, { recursive: true })
const dependencies: Record<string, string> = {}
for (const name of selected) {
  const { dir } = workspaces.get(name)!
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--pack-destination", tarballs], { cwd: dir, encoding: "utf8" })
  ) as ReadonlyArray<{ readonly filename: string }>
  dependencies[name] = `file:tarballs/${packed[0]!.filename}`
}
for (const spec of values.dep) {
  const at = spec.lastIndexOf("@")
  dependencies[spec.slice(0, at)] = spec.slice(at + 1)
}
writeFileSync(
  join(out, "package.json"),
  `${JSON.stringify({ name: "resilience-installed", private: true, type: "module", dependencies }, null, 2)}\n`
)
execFileSync("npm", ["install", "--omit=dev", "--no-audit", "--no-fund", "--no-package-lock"], {
  cwd: out,
  stdio: ["ignore", "inherit", "inherit"]
})
if (values["strip-sources"]) {
  for (const name of selected) rmSync(join(out, "node_modules", name, "src"), { recursive: true, force: true })
}
process.stdout.write(`installed ${selected.length} packages into ${out}: ${selected.join(", ")}\n`)
