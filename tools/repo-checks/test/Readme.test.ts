import { describe, expect, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { declares, repositoryRoot } from "../src/DocReferences.ts"

const read = (path: string): string => readFileSync(join(repositoryRoot, path), "utf8")
const readme = read("README.md")

/** The text of a `## ` section of a Markdown page, without its heading. */
const section = (page: string, heading: string): string =>
  page.split(/^## /m).find((part) => part.startsWith(`${heading}\n`))?.slice(heading.length + 1) ?? ""

/** `path:line` (`Module.name`) or `path:line` (`name`): a line of code cited for the declaration of `name`. */
const lineCitation = /`([\w./-]+\.ts):(\d+)` \(`(?:[A-Z]\w*\.)?([A-Za-z_$][\w$]*)`\)/g

const declaration = (name: string) =>
  new RegExp(`\\b(const|let|function\\*?|class|interface|type|namespace|enum)\\s+${name.replace(/\$/g, "\\$")}\\b`)

/** Where each cited line really declares its name, or what is wrong with it. */
const lineProblems = (text: string): ReadonlyArray<string> =>
  [...text.matchAll(lineCitation)].flatMap(([, path = "", line = "", name = ""]) => {
    if (!existsSync(join(repositoryRoot, path))) return [`${path}: no such file`]
    const lines = read(path).split("\n")
    if (declaration(name).test(lines[Number(line) - 1] ?? "")) return []
    const at = lines.findIndex((content) => declaration(name).test(content))
    return [`${path}:${line} does not declare ${name}${at < 0 ? " (nowhere in the file)" : `; line ${at + 1} does`}`]
  })

/** The publishable workspaces (not `private`), by package name, with their folder. */
const publishable = new Map(
  ["packages", "apps"].flatMap((parent) =>
    readdirSync(join(repositoryRoot, parent)).flatMap((name) => {
      const folder = `${parent}/${name}`
      if (!existsSync(join(repositoryRoot, folder, "package.json"))) return []
      const manifest = JSON.parse(read(`${folder}/package.json`))
      return manifest.private === true ? [] : [[manifest.name as string, folder] as const]
    })
  )
)

/** The module a package's index exports as `binding` (`export * as X from "./X.ts"`, `export { X } from …`). */
const moduleOf = (folder: string, binding: string): string | undefined => {
  const index = read(`${folder}/src/index.ts`)
  const file = new RegExp(
    `export\\s*(?:\\*\\s*as\\s+${binding}|\\{[^}]*\\b${binding}\\b[^}]*\\})\\s*from\\s*"\\./([^"]+)"`
  )
    .exec(index)?.[1]
  return file === undefined ? undefined : `${folder}/src/${file}`
}

/** Every `Binding.member` a TypeScript block of the README uses, for the bindings it imports from `@resilience/*`. */
const exampleProblems = (page: string): { readonly packages: Set<string>; readonly problems: Array<string> } => {
  const packages = new Set<string>()
  const problems: Array<string> = []
  for (const [, block = ""] of page.matchAll(/^```ts\n([\s\S]*?)^```$/gm)) {
    for (const [, names = "", from = ""] of block.matchAll(/^import \{([^}]+)\} from "(@resilience\/[\w-]+)"$/gm)) {
      packages.add(from)
      const folder = publishable.get(from)
      if (folder === undefined) {
        problems.push(`${from}: not a publishable package`)
        continue
      }
      for (const binding of names.split(",").map((name) => name.trim())) {
        const module = moduleOf(folder, binding)
        if (module === undefined) {
          problems.push(`${from} does not export ${binding}`)
          continue
        }
        const source = read(module)
        for (const [, member = ""] of block.matchAll(new RegExp(`\\b${binding}\\.([A-Za-z_$][\\w$]*)`, "g"))) {
          if (!declares(source, member)) problems.push(`${binding}.${member}: ${module} does not export ${member}`)
        }
      }
    }
  }
  return { packages, problems }
}

describe("the root README", () => {
  it("is the one index of the four changes: each `path:line` declares the name beside it", () => {
    const index = section(readme, "The four changes")
    expect([...index.matchAll(lineCitation)].length).toBeGreaterThanOrEqual(5)
    expect(lineProblems(index)).toEqual([])
    // docs/changes.md is the index's longer version, without an index of its own
    expect(read("docs/changes.md").split("\n").filter((line) => line.startsWith("|"))).toEqual([])
  })

  it("finds a cited line that moved", () => {
    expect(lineProblems("`packages/jitter/src/Jitter.ts:1` (`Jitter.startupDelayFrom`)")).toEqual([
      expect.stringMatching(/^packages\/jitter\/src\/Jitter\.ts:1 does not declare startupDelayFrom; line \d+ does$/)
    ])
  })

  it("has an example of every publishable library, and each name an example uses is exported", () => {
    const { packages, problems } = exampleProblems(readme)
    expect(problems).toEqual([])
    expect([...packages].sort()).toEqual([...publishable.keys()].sort())
  })

  it("finds a name a library does not export", () => {
    const page =
      "```ts\nimport { PollBackoff } from \"@resilience/jitter\"\nPollBackoff.make()\nPollBackoff.gone\n```\n"
    expect(exampleProblems(page).problems).toEqual([
      "PollBackoff.gone: packages/jitter/src/PollBackoff.ts does not export gone"
    ])
  })

  it("reads in five minutes: no line over 120 characters, at most 12,000 bytes (the rest is in docs/)", () => {
    expect(readme.split("\n").filter((line) => [...line].length > 120)).toEqual([])
    expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(12_000)
  })

  it("keeps the test command in its quick start (`.ci/run` runs \"the README's test command\")", () => {
    expect(section(readme, "Quick start")).toContain("npm ci && npm test")
  })
})
