import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { repositoryRoot } from "../src/DocReferences.ts"
import * as SqlStates from "../src/SqlStates.ts"

/** Every `.ts` file under a directory, recursively. */
const sources = (directory: string): ReadonlyArray<string> =>
  readdirSync(directory, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(join(directory, entry.name))
      : entry.name.endsWith(".ts")
      ? [join(directory, entry.name)]
      : []
  )

const sourceDirectories = ["packages", "apps", "labs", "tools"].flatMap((group) =>
  readdirSync(join(repositoryRoot, group)).map((name) => join(repositoryRoot, group, name, "src"))
    .filter((directory) => {
      try {
        return readdirSync(directory).length >= 0
      } catch {
        return false
      }
    })
)

describe("one failure table (issue #34): a SQLSTATE is spelled only in db-session's Classify", () => {
  it("no source file outside the table spells a SQLSTATE", () => {
    const files = sourceDirectories.flatMap(sources)
    expect(files.length).toBeGreaterThan(50)
    const found = files
      .map((file) => relative(repositoryRoot, file))
      .filter((file) => !SqlStates.owners.includes(file))
      .flatMap((file) =>
        SqlStates.findings(readFileSync(join(repositoryRoot, file), "utf8")).map(({ code, line }) =>
          `${file}:${line} ${code}`
        )
      )
    expect(found).toEqual([])
  })

  it("the table itself is found by the scan (the scan reads what it is meant to)", () => {
    const table = SqlStates.findings(
      readFileSync(join(repositoryRoot, "packages/db-session/src/Classify.ts"), "utf8")
    ).map(({ code }) => code)
    expect(table).toEqual(expect.arrayContaining(["53300", "57014", "25P04", "3D000"]))
  })

  it("the scan finds a planted SQLSTATE in code and ignores comments, ports and words", () => {
    const planted = [
      "// 57014 in a comment is prose",
      "/** so is \"53300\"",
      " * here */",
      "const cancelled = new Set([\"57014\", 'STATEMENT_TIMEOUT'])",
      "const port = \"65535\"",
      "const word = \"ERROR\"",
      "if (error.code === `25P04`) return"
    ].join("\n")
    expect(SqlStates.findings(planted)).toEqual([
      { line: 4, code: "57014" },
      { line: 7, code: "25P04" }
    ])
  })
})
