import { assert, describe, it } from "@effect/vitest"
import { TestDatabase } from "@resilience/test-db"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

const main = fileURLToPath(new URL("../src/main.ts", import.meta.url))

interface Run {
  readonly code: number | null
  readonly output: string
}

/** Runs the real entry point with `env`; stops it after `untilMillis` (SIGTERM) if it is still running. */
const run = (env: Record<string, string>, options: { readonly untilOutput?: string } = {}) =>
  Effect.callback<Run>((resume) => {
    const child = spawn(process.execPath, ["--conditions=@resilience/source", main], {
      env: { PATH: process.env.PATH ?? "", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      if (options.untilOutput !== undefined && output.includes(options.untilOutput)) child.kill("SIGTERM")
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resume(Effect.succeed({ code, output }))
    })
  })

describe("the entry point", () => {
  it.live("an invalid variable stops the process at start, naming the variable", () =>
    Effect.gen(function*() {
      const base = { API_ADMIN_TOKEN: "0123456789abcdef-admin", DATABASE_URL: "postgres://u:p@127.0.0.1:1/db" }
      const cases = [
        [{ ...base, API_PORT: "eighty" }, "API_PORT"],
        [{ ...base, API_RETRY_AFTER_SECONDS: "-3" }, "API_RETRY_AFTER_SECONDS"],
        [{ ...base, DB_SCHEMA: "Robert'); DROP" }, "DB_SCHEMA"],
        [{ DATABASE_URL: base.DATABASE_URL }, "API_ADMIN_TOKEN"],
        [{ ...base, API_ADMIN_TOKEN: "short" }, "API_ADMIN_TOKEN"],
        [{ ...base, DB_CONNECT_TIMEOUT_SECONDS: "0" }, "DB_CONNECT_TIMEOUT_SECONDS"]
      ] as const
      // each process is independent (it stops before it listens or connects): two at a time
      const results = yield* Effect.forEach(cases, ([env]) => run(env), { concurrency: 2 })
      results.forEach((result, index) => {
        const variable = cases[index]![1]
        assert.notStrictEqual(result.code, 0, variable)
        assert.include(result.output, variable)
      })
    }), 120_000)

  it.live("starts, migrates, serves JSON logs, and stops on SIGTERM", () =>
    Effect.gen(function*() {
      const db = yield* TestDatabase
      const result = yield* run({
        API_ADMIN_TOKEN: "0123456789abcdef-admin",
        DATABASE_URL: db.url,
        DB_SCHEMA: "entry",
        API_PORT: "0"
      }, { untilOutput: "schema ready" })
      const lines = result.output.trim().split("\n")
      assert.isTrue(lines.length >= 2, result.output)
      for (const line of lines) {
        const parsed = JSON.parse(line) as { message: unknown; level: string }
        assert.isDefined(parsed.level)
      }
      assert.include(result.output, "migrations applied")
      // a graceful stop on SIGTERM is a success (ProcessExit.teardown), not the shell's 130
      assert.strictEqual(result.code, 0, result.output)
    }).pipe(Effect.provide(TestDatabase.layer)), 120_000)
})
