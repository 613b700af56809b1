import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import * as CheckoutRetry from "../src/CheckoutRetry.ts"
import { repositoryRoot } from "../src/DocReferences.ts"

const dbSession = join(repositoryRoot, "packages", "db-session")

describe("no checkout retry in db-session (docs/errors.md, 'No hidden retry')", () => {
  it("no source file of packages/db-session/src (src/internal/ included) retries, backs off, schedules or repeats", () => {
    const found = readdirSync(join(dbSession, "src"), { recursive: true, encoding: "utf8" })
      .filter((name) => name.endsWith(".ts"))
      .flatMap((name) =>
        CheckoutRetry.findings(readFileSync(join(dbSession, "src", name), "utf8")).map(({ line, text }) =>
          `src/${name}:${line} ${text}`
        )
      )
    expect(found).toEqual([])
  })

  it("db-session depends on no retry library", () => {
    const manifest = JSON.parse(readFileSync(join(dbSession, "package.json"), "utf8"))
    expect(CheckoutRetry.retryDependencies(manifest)).toEqual([])
  })

  it("the scan finds a retry in code and ignores the word in comments", () => {
    const planted = [
      "// a comment may say retry",
      "/** and back-off here */",
      "const a = 1",
      "const checkout = connect.pipe(Effect.retry(Schedule.exponential(\"10 millis\")))",
      "export const loop = Effect.repeat(poll, policy)",
      "const backoffMillis = 5"
    ].join("\n")
    expect(CheckoutRetry.findings(planted)).toEqual([
      { line: 4, text: "retry" },
      { line: 4, text: "Schedule" },
      { line: 5, text: ".repeat" },
      { line: 6, text: "backoffMillis" }
    ])
    expect(CheckoutRetry.retryDependencies({ dependencies: { pg: "^8", "p-retry": "^6" } })).toEqual(["p-retry"])
  })
})
