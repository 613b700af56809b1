import { assert, describe, it } from "@effect/vitest"
import { Settings } from "@resilience/api-app"
import { DbSession } from "@resilience/db-session"
import { Variables } from "@resilience/environment"
import { EntryPoint, TestDatabase } from "@resilience/test-db"
import { Cause, ConfigProvider, Effect, Exit, Layer } from "effect"
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
      env: { PATH: process.env.PATH ?? "", ...EntryPoint.compileCache, ...env },
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

const base = { API_ADMIN_TOKEN: "0123456789abcdef-admin", DATABASE_URL: "postgres://u:p@127.0.0.1:1/db" }

/** One invalid variable each (issue #22: each was its own process; one process still proves the stop). */
const cases = [
  [{ ...base, API_PORT: "eighty" }, "API_PORT", "API_PORT=eighty"],
  [{ ...base, API_RETRY_AFTER_SECONDS: "-3" }, "API_RETRY_AFTER_SECONDS", "API_RETRY_AFTER_SECONDS=-3"],
  [{ ...base, DB_SCHEMA: "Robert'); DROP" }, "DB_SCHEMA", "DB_SCHEMA=Robert'); DROP"],
  [{ DATABASE_URL: base.DATABASE_URL }, "API_ADMIN_TOKEN", "API_ADMIN_TOKEN unset"],
  [{ ...base, API_ADMIN_TOKEN: "short" }, "API_ADMIN_TOKEN", "API_ADMIN_TOKEN=short"],
  [{ ...base, DB_CONNECT_TIMEOUT_SECONDS: "0" }, "DB_CONNECT_TIMEOUT_SECONDS", "DB_CONNECT_TIMEOUT_SECONDS=0"]
] as const

/**
 * What src/main.ts builds from the environment before it listens or connects: the API's settings and the
 * database session, under the contract's variable names.
 */
const configured = Layer.mergeAll(Settings.layerConfig, DbSession.layerConfig(Variables.database))

/** Builds {@link configured} from `env` alone, as the process would from its environment; the exit. */
const build = (env: Record<string, string>) =>
  Effect.exit(
    Effect.scoped(Layer.build(configured)).pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))
  )

describe("the entry point", () => {
  describe("an invalid variable fails the configuration the entry point builds, naming the variable", () => {
    it.effect("control: the valid base configuration builds", () =>
      Effect.gen(function*() {
        const exit = yield* build(base)
        assert.isTrue(Exit.isSuccess(exit), Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "")
      }))

    for (const [env, variable, label] of cases) {
      it.effect(label, () =>
        Effect.gen(function*() {
          const exit = yield* build(env)
          assert.isTrue(Exit.isFailure(exit), variable)
          if (Exit.isFailure(exit)) assert.include(Cause.pretty(exit.cause), variable)
        }))
    }
  })

  it.live("an invalid variable stops the process at start, naming the variable", () =>
    Effect.gen(function*() {
      const [env, variable] = cases[5]
      const result = yield* run(env)
      assert.notStrictEqual(result.code, 0, variable)
      assert.include(result.output, variable)
    }), 60_000)

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
