/**
 * A production entry point of this repository run as its own process, from the TypeScript sources
 * (`node --conditions=@resilience/source <entry>`, from the repository root), with only the environment a test
 * gives it: the tests that start the apps the way an operator does.
 */
import { Cluster } from "@resilience/local-postgres"
import { Effect, type Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

/** The repository root, the working directory of every entry point. */
export const root = fileURLToPath(new URL("../../../", import.meta.url))

/**
 * `NODE_COMPILE_CACHE` when this run has one (`npm test` sets it), for a test to pass to the processes it starts:
 * they skip compiling the modules an earlier process compiled (docs/results/test-suite.md) and do nothing else
 * differently.
 */
export const compileCache: Readonly<Record<string, string>> = process.env.NODE_COMPILE_CACHE === undefined
  ? {}
  : { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE }

/** How a process ended, and when (`Date.now()`). */
export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly at: number
}

/** A running entry point. */
export interface Running {
  readonly child: ChildProcess
  /** Everything it wrote to stdout and stderr so far. */
  readonly output: () => string
  /** Its exit code so far: `"running"` while it runs. */
  readonly exitCode: () => number | null | "running"
  /** Resolves when it exits. */
  readonly exited: Promise<Exit>
}

/** How to run it. */
export interface Options {
  /** `collect` (default): keep stdout and stderr for {@link Running.output}; `inherit`: show them (benchmarks). */
  readonly output?: "collect" | "inherit"
  /** The signal that stops it when the scope closes (default SIGKILL); SIGKILL follows after ten seconds. */
  readonly stopWith?: NodeJS.Signals
}

/**
 * Starts `entry` (a path from the repository root) with `PATH`, `HOME` and `env` as its whole environment.
 * Stopped when the scope closes, if it is still running then.
 */
export const start = (
  entry: string,
  env: Record<string, string>,
  options: Options = {}
): Effect.Effect<Running, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): Running => {
      const inherit = options.output === "inherit"
      const child = spawn(process.execPath, ["--conditions=@resilience/source", entry], {
        cwd: root,
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
        stdio: ["ignore", inherit ? "inherit" : "pipe", inherit ? "inherit" : "pipe"]
      })
      let output = ""
      child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()))
      let code: number | null | "running" = "running"
      const exited = new Promise<Exit>((resolve) =>
        child.on("exit", (exitCode, signal) => {
          code = exitCode
          resolve({ code: exitCode, signal, at: Date.now() })
        })
      )
      return { child, output: () => output, exitCode: () => code, exited }
    }),
    (running) =>
      Effect.promise(async () => {
        if (running.exitCode() !== "running") return
        running.child.kill(options.stopWith ?? "SIGKILL")
        const force = setTimeout(() => running.child.kill("SIGKILL"), 10_000)
        await running.exited
        clearTimeout(force)
      })
  )

/** How to run the API's entry point. */
export interface ApiOptions {
  /** `DATABASE_URL`. */
  readonly url: string
  /** `DB_SCHEMA`. */
  readonly schema: string
  /** `API_ADMIN_TOKEN`. */
  readonly adminToken: string
  /** `API_LOG_LEVEL` (default `Warn`). */
  readonly logLevel?: string
  /** Any other settings (`DB_POOL_CLASS`, `API_RETRY_AFTER_SECONDS`, …). */
  readonly env?: Record<string, string>
}

/**
 * The API's entry point (`apps/api/src/main.ts`) on a free loopback port, its output shown, stopped with SIGTERM
 * when the scope closes; yields its base URL. It listens at once; whether it is ready is for `/readyz` to say.
 */
export const api = (options: ApiOptions): Effect.Effect<string, never, Scope.Scope> =>
  Effect.gen(function*() {
    const port = yield* Cluster.freePort
    yield* start("apps/api/src/main.ts", {
      DATABASE_URL: options.url,
      DB_SCHEMA: options.schema,
      API_PORT: String(port),
      API_HOST: "127.0.0.1",
      API_ADMIN_TOKEN: options.adminToken,
      API_LOG_LEVEL: options.logLevel ?? "Warn",
      ...options.env
    }, { output: "inherit", stopWith: "SIGTERM" })
    return `http://127.0.0.1:${port}`
  })
