/**
 * A production entry point of this repository run as its own process, from the TypeScript sources
 * (`node --conditions=@resilience/source <entry>`, from the repository root), with only the environment a test
 * gives it: the tests that start the apps the way an operator does.
 */
import { Effect, type Scope } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

/** The repository root, the working directory of every entry point. */
export const root = fileURLToPath(new URL("../../../", import.meta.url))

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
