/**
 * What a Markdown page of this repository cites, and whether it exists: file paths (in backticks or as link
 * targets) and exported names (`Module.name`, where `Module.ts` is a module of this repository).
 *
 * @since 0.1.0
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative } from "node:path"

/**
 * The repository's root (this file is `tools/repo-checks/src/DocReferences.ts`).
 *
 * @since 0.1.0
 */
export const repositoryRoot: string = join(import.meta.dirname, "..", "..", "..")

/**
 * One citation that does not resolve: the page, its line, what it cites and why it is missing.
 *
 * @since 0.1.0
 */
export interface Broken {
  readonly page: string
  readonly line: number
  readonly cited: string
  readonly problem: string
}

// The folders whose subfolders are workspaces: the product (`packages`, `apps`), the labs and the tools.
const workspaceFolders = ["packages", "apps", "labs", "tools"]

/**
 * The pages checked: the root README, `docs/*.md`, `docs/results/*.md` and every workspace's README.
 *
 * @since 0.1.0
 */
export const pages = (root: string = repositoryRoot): ReadonlyArray<string> => [
  "README.md",
  ...markdownIn(root, "docs"),
  ...markdownIn(root, "docs/results"),
  ...workspaceFolders.flatMap((folder) =>
    readdirSync(join(root, folder))
      .map((name) => `${folder}/${name}/README.md`)
      .filter((page) => existsSync(join(root, page)))
  )
]

const markdownIn = (root: string, folder: string): ReadonlyArray<string> =>
  readdirSync(join(root, folder))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `${folder}/${name}`)

// A path is checked when it starts in a folder of the repository or names a source or doc file; anything else in
// backticks (URLs, package names, HTTP routes, globs, placeholders) is not a path of this repository.
const rootFolders = /^(packages|apps|labs|tools|docs|scripts|\.ci|\.changeset|src|test|bench)\//
const fileLike = /^[\w.-]+\.(ts|md|json|sh|svg|sql)$/
const notAPath = /[*<>$@\s]|^\/|^https?:/

// Files that exist only after a release (`changeset version` writes them).
const generated = new Set(["CHANGELOG.md"])

/**
 * Whether a backticked token is a path this checker resolves.
 *
 * @since 0.1.0
 */
export const isCitedPath = (token: string): boolean =>
  !notAPath.test(token) && !generated.has(token) && (rootFolders.test(token) || fileLike.test(token))

const exportedName = /^([A-Z][A-Za-z0-9]*)\.([A-Za-z_$][\w$]*)(\(.*\))?$/

/** Files of the repository by base name (`Jitter.ts` → its paths), sources of workspaces only. */
const moduleIndex = (root: string): ReadonlyMap<string, ReadonlyArray<string>> => {
  const index = new Map<string, Array<string>>()
  for (const folder of workspaceFolders) {
    for (const workspace of readdirSync(join(root, folder))) {
      const source = join(root, folder, workspace, "src")
      if (!existsSync(source)) continue
      for (const file of walk(source)) {
        const base = file.slice(file.lastIndexOf("/") + 1)
        index.set(base, [...(index.get(base) ?? []), relative(root, file)])
      }
    }
  }
  return index
}

const walk = (folder: string): ReadonlyArray<string> =>
  readdirSync(folder).flatMap((name) => {
    const path = join(folder, name)
    return statSync(path).isDirectory() ? walk(path) : [path]
  })

/** Files under `folder` (relative to the root) whose base name is `base`. */
const filesNamed = (root: string, folder: string, base: string): ReadonlyArray<string> =>
  existsSync(join(root, folder))
    ? walk(join(root, folder))
      .filter((file) => !file.includes("/node_modules/") && file.endsWith(`/${base}`))
      .map((file) => relative(root, file))
    : []

/**
 * Whether `source` declares `name` as an export (a `const`, function, class, type, interface, namespace or
 * re-export) or as a static member of an exported class.
 *
 * @since 0.1.0
 */
export const declares = (source: string, name: string): boolean => {
  const escaped = name.replace(/\$/g, "\\$")
  return new RegExp(
    `export\\s+(declare\\s+)?(const|let|function\\*?|async\\s+function|class|type|interface|namespace|enum)\\s+${escaped}\\b`
  ).test(source) ||
    new RegExp(`export\\s*\\{[^}]*\\b${escaped}\\b[^}]*\\}`).test(source) ||
    new RegExp(`export\\s+\\*\\s+as\\s+${escaped}\\b`).test(source) ||
    new RegExp(`static\\s+(readonly\\s+)?${escaped}\\b`).test(source) ||
    // a member of an exported service or client interface (`readonly query: …`)
    new RegExp(`^\\s+readonly\\s+${escaped}\\??:`, "m").test(source)
}

const backticked = /`([^`\n]+)`/g
const linkTarget = /\]\(([^)\s]+)\)/g

/**
 * The citations of one page that do not resolve. Paths resolve against the page's folder, then the repository's
 * root; a bare file name resolves when a file of that name exists in the page's workspace (or anywhere, for a
 * page outside one). `Module.name` is checked when `Module.ts` is a source module of this repository: one of
 * the files of that name (preferring the page's own workspace) must export `name`.
 *
 * @since 0.1.0
 */
export const check = (page: string, text: string, root: string = repositoryRoot): ReadonlyArray<Broken> => {
  const modules = moduleIndex(root)
  const folder = dirname(page)
  const workspace = /^(packages|apps|labs|tools)\/[^/]+/.exec(page)?.[0]
  const broken: Array<Broken> = []
  const lines = text.split("\n")
  let fenced = false
  lines.forEach((content, index) => {
    if (content.trimStart().startsWith("```")) fenced = !fenced
    if (fenced) return
    const line = index + 1
    // A folder cited earlier on the line is a base for the paths after it (a table row: `packages/jitter` … `src/Jitter.ts`).
    const bases = [folder]
    for (const [, token] of content.matchAll(backticked)) {
      if (token === undefined) continue
      if (isCitedPath(token)) {
        if (!bases.some((base) => pathExists(root, base, workspace, token))) {
          broken.push({ page, line, cited: token, problem: "no such file or folder" })
        } else if (existsSync(join(root, token)) && statSync(join(root, token)).isDirectory()) {
          bases.push(token)
        }
        continue
      }
      const name = exportedName.exec(token)
      if (name?.[1] !== undefined && name[2] !== undefined) {
        const problem = nameProblem(root, modules, workspace, name[1], name[2])
        if (problem !== undefined) broken.push({ page, line, cited: token, problem })
      }
    }
    for (const [, target] of content.matchAll(linkTarget)) {
      if (target === undefined || /^(https?:|mailto:|#)/.test(target)) continue
      const path = target.replace(/#.*$/, "")
      if (!existsSync(join(root, folder, path))) {
        broken.push({ page, line, cited: target, problem: "link to a missing file" })
      }
    }
  })
  return broken
}

const pathExists = (root: string, folder: string, workspace: string | undefined, token: string): boolean => {
  const path = token.replace(/\/$/, "").replace(/:\d+(-\d+)?$/, "")
  if (existsSync(join(root, folder, path)) || existsSync(join(root, path))) return true
  if (path.includes("/")) return workspace !== undefined && existsSync(join(root, workspace, path))
  return filesNamed(root, workspace ?? ".", path).length > 0
}

const nameProblem = (
  root: string,
  modules: ReadonlyMap<string, ReadonlyArray<string>>,
  workspace: string | undefined,
  module: string,
  name: string
): string | undefined => {
  const files = modules.get(`${module}.ts`)
  if (files === undefined) return undefined
  const own = workspace === undefined ? [] : files.filter((file) => file.startsWith(`${workspace}/`))
  const candidates = own.length > 0 ? own : files
  return candidates.some((file) => declares(readFileSync(join(root, file), "utf8"), name))
    ? undefined
    : `${candidates.join(", ")} does not export ${name}`
}

/**
 * Every broken citation of every page.
 *
 * @since 0.1.0
 */
export const checkAll = (root: string = repositoryRoot): ReadonlyArray<Broken> =>
  pages(root).flatMap((page) => check(page, readFileSync(join(root, page), "utf8"), root))
