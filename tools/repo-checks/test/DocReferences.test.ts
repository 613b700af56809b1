import { describe, expect, it } from "@effect/vitest"
import * as DocReferences from "../src/DocReferences.ts"

const render = (broken: ReadonlyArray<DocReferences.Broken>) =>
  broken.map(({ cited, line, page, problem }) => `${page}:${line} ${cited}: ${problem}`)

describe("DocReferences", () => {
  it("every path and exported name cited by README.md, docs/*.md and the package READMEs exists", () => {
    expect(DocReferences.pages()).toContain("docs/changes.md")
    expect(DocReferences.pages()).toContain("packages/deriver/README.md")
    expect(render(DocReferences.checkAll())).toEqual([])
  })

  it("reports a missing path, a missing export and a broken link, each with its line", () => {
    const page = [
      "See `packages/jitter/src/Jitter.ts` (`Jitter.startupDelayFrom`) and `packages/jitter/src/Gone.ts`.",
      "The loop calls `Scheduling.startupDelay` but not `Scheduling.noSuchThing`.",
      "```sh",
      "`packages/inside/a/fence.ts` is not checked",
      "```",
      "[the errors](errors.md), [nowhere](missing.md#top), [out](https://example.com)"
    ].join("\n")
    expect(render(DocReferences.check("docs/planted.md", page))).toEqual([
      "docs/planted.md:1 packages/jitter/src/Gone.ts: no such file or folder",
      "docs/planted.md:2 Scheduling.noSuchThing: packages/deriver/src/Scheduling.ts does not export noSuchThing",
      "docs/planted.md:6 missing.md#top: link to a missing file"
    ])
  })

  it("resolves a package README's paths in its package, and a table row's paths under the row's folder", () => {
    expect(DocReferences.check("packages/deriver/README.md", "`src/PollLoop.ts`, `test/Nope.test.ts`")).toEqual([
      { page: "packages/deriver/README.md", line: 1, cited: "test/Nope.test.ts", problem: "no such file or folder" }
    ])
    expect(DocReferences.check("README.md", "| `packages/jitter` | `src/Jitter.ts` | `src/Queue.ts` |")).toEqual([
      { page: "README.md", line: 1, cited: "src/Queue.ts", problem: "no such file or folder" }
    ])
  })

  it("names a module's members (a service interface's fields, a class's statics) as exported", () => {
    expect(DocReferences.declares("export interface S {\n  readonly query: number\n}", "query")).toBe(true)
    expect(DocReferences.declares("export class A {\n  static readonly layer = 1\n}", "layer")).toBe(true)
    expect(DocReferences.declares("const hidden = 1", "hidden")).toBe(false)
  })
})
