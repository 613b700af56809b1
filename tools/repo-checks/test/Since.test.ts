import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { repositoryRoot } from "../src/DocReferences.ts"
import * as Since from "../src/Since.ts"

const changesets = readdirSync(join(repositoryRoot, ".changeset"))
  .filter((name) => name.endsWith(".md") && name !== "README.md")
  .map((name) => Since.bumpsOf(readFileSync(join(repositoryRoot, ".changeset", name), "utf8")))

/** Every `.ts` file under `folder`. */
const sources = (folder: string): ReadonlyArray<string> =>
  readdirSync(folder, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => join(entry.parentPath, entry.name))

const publishable = ["packages", "apps"].flatMap((parent) =>
  readdirSync(join(repositoryRoot, parent)).flatMap((name) => {
    const folder = join(repositoryRoot, parent, name)
    try {
      const manifest = JSON.parse(readFileSync(join(folder, "package.json"), "utf8"))
      return manifest.private === true
        ? []
        : [{ folder, name: manifest.name as string, version: manifest.version as string }]
    } catch {
      return []
    }
  })
)

describe("@since tags (publishable packages)", () => {
  it("no tag names a version later than the one the package's pending changesets make", () => {
    const found = publishable.flatMap(({ folder, name, version }) => {
      const limit = Since.next(version, Since.highest(changesets.flatMap((bumps) => bumps.get(name) ?? [])))
      return sources(join(folder, "src")).flatMap((file) =>
        Since.later(readFileSync(file, "utf8"), limit).map(({ line, since }) =>
          `${file.slice(repositoryRoot.length + 1)}:${line} @since ${since} (next ${name} release: ${limit})`
        )
      )
    })
    expect(publishable.length).toBeGreaterThan(5)
    expect(found).toEqual([])
  })

  it("reads bumps and versions as Changesets does, and finds a planted tag", () => {
    const bumps = Since.bumpsOf(
      "---\n\"@resilience/deriver\": minor\n'@resilience/jitter': patch\n---\n\ntext: major\n"
    )
    expect([...bumps]).toEqual([["@resilience/deriver", "minor"], ["@resilience/jitter", "patch"]])
    expect(Since.next("0.1.0", Since.highest(["patch", "minor", "patch"]))).toBe("0.2.0")
    expect(Since.next("0.1.3", "patch")).toBe("0.1.4")
    expect(Since.next("0.1.0", "major")).toBe("1.0.0")
    expect(Since.next("0.1.0", undefined)).toBe("0.1.0")
    expect(Since.later("/**\n * @since 0.2.0\n */\n/** @since 0.3.0 */", "0.2.0")).toEqual([{
      line: 4,
      since: "0.3.0"
    }])
    expect(Since.compare("0.10.0", "0.9.9")).toBeGreaterThan(0)
  })
})
