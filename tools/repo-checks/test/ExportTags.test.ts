import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { repositoryRoot } from "../src/DocReferences.ts"
import * as ExportTags from "../src/ExportTags.ts"

/** The modules a package's index re-exports (`export * as X from "./X.ts"`): its public API. */
const publicModules = (folder: string): ReadonlyArray<string> =>
  [...readFileSync(join(folder, "src", "index.ts"), "utf8").matchAll(/from\s+"\.\/([^"]+\.ts)"/g)]
    .map((match) => join(folder, "src", match[1]!))

const publishable = readdirSync(join(repositoryRoot, "packages")).flatMap((name) => {
  const folder = join(repositoryRoot, "packages", name)
  try {
    const manifest = JSON.parse(readFileSync(join(folder, "package.json"), "utf8"))
    return manifest.private === true ? [] : [{ folder, name: manifest.name as string }]
  } catch {
    return []
  }
})

describe("export tags (publishable packages: @since and @category on every export, as Effect's modules)", () => {
  it("every exported declaration of a publishable package's public modules (those its index re-exports) carries both", () => {
    const found = publishable.flatMap(({ folder }) =>
      publicModules(folder).flatMap((file) =>
        ExportTags.missing(readFileSync(file, "utf8")).map(({ line, missing, name }) =>
          `${file.slice(repositoryRoot.length + 1)}:${line} ${name} lacks ${missing.join(", ")}`
        )
      )
    )
    expect(publishable.length).toBeGreaterThan(5)
    expect(publishable.flatMap(({ folder }) => publicModules(folder)).length).toBeGreaterThan(40)
    expect(found).toEqual([])
  })

  it("finds a planted export without its tags and passes a tagged one", () => {
    const planted = [
      "/**",
      " * Tagged.",
      " *",
      " * @since 0.3.0",
      " * @category models",
      " */",
      "export interface Tagged {}",
      "/** @since 0.3.0 */",
      "export const onlySince = 1",
      "export const bare = 2",
      "export * as Again from \"./Again.ts\""
    ].join("\n")
    expect(ExportTags.missing(planted)).toEqual([
      { line: 9, name: "onlySince", missing: ["@category"] },
      { line: 10, name: "bare", missing: ["@since", "@category"] }
    ])
  })
})
