/**
 * A supervised child process: one of the system's own entry points (the API, the deriver), its output
 * prefixed with its name, stopped with SIGTERM when the scope closes and waited for.
 *
 * Each runs in a session and process group of its own (`detached`): a terminal's Ctrl-C signals the whole
 * foreground process group, and a child that got it too would stop at the same moment as the others (the
 * deriver racing the database it releases its units in), in no order. Out of that group, only the launcher gets
 * the signal and stops them one after the other. So that a launcher killed outright (SIGKILL) leaves no child
 * behind, each is spawned through `setpriv --pdeathsig SIGTERM` on Linux: it gets a SIGTERM (its graceful stop)
 * when the launcher dies.
 */
import { Process } from "@resilience/local-postgres"
import { Data, Deferred, Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { createInterface } from "node:readline"

/** A child process that ended while it was supposed to be running. */
export class ChildExited extends Data.TaggedError("ChildExited")<{
  readonly name: string
  readonly code: number | null
  readonly signal: string | null
}> {
  override get message(): string {
    return `${this.name} exited unexpectedly (${this.signal ?? `code ${this.code}`})`
  }
}

/** How to start one entry point. */
export interface Options {
  readonly name: string
  /** The entry's TypeScript source, run by Node with the workspace's source condition. */
  readonly entry: string
  readonly env: Record<string, string>
  /** Called with every line of the child's output. */
  readonly onLine: (name: string, line: string) => void
}

/** A running child; `exited` completes (with ChildExited) if it stops before it is asked to. Whether it is ready
 * is for its readiness endpoint to say (see AwaitReady.ts). */
export interface Child {
  readonly name: string
  readonly process: ChildProcess
  readonly exited: Deferred.Deferred<never, ChildExited>
}

/** Milliseconds a child gets to stop after SIGTERM before it is killed. */
export const stopGraceMillis = 30_000

/** Starts the child; on scope close: SIGTERM, wait, SIGKILL after the grace. */
export const start = (options: Options) =>
  Effect.gen(function*() {
    const exited = yield* Deferred.make<never, ChildExited>()
    const child = yield* Effect.acquireRelease(
      Effect.callback<ChildProcess, ChildExited>((resume) => {
        const [command, args] = Process.dyingWithParent(
          process.execPath,
          ["--conditions=@resilience/source", options.entry],
          "SIGTERM"
        )
        const process_ = spawn(command, args, {
          env: { ...process.env, ...options.env },
          detached: true,
          stdio: ["ignore", "pipe", "pipe"]
        })
        let spawned = false
        const onLine = (line: string) => options.onLine(options.name, line)
        createInterface({ input: process_.stdout }).on("line", onLine)
        createInterface({ input: process_.stderr }).on("line", onLine)
        process_.once("spawn", () => {
          spawned = true
          resume(Effect.succeed(process_))
        })
        process_.once("exit", (code, signal) => {
          const error = new ChildExited({ name: options.name, code, signal })
          if (!spawned) resume(Effect.fail(error))
          Deferred.doneUnsafe(exited, Effect.fail(error))
        })
        return Effect.sync(() => process_.kill("SIGKILL"))
      }),
      (process_) => stopLogged(options.name, process_)
    )
    return { name: options.name, process: child, exited } satisfies Child
  })

/** {@link stop}, saying so before and after (`stopping deriver`, `deriver stopped (code 0)`). */
const stopLogged = (name: string, child: ChildProcess): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (child.exitCode !== null || child.signalCode !== null) return
    yield* Effect.log(`stopping ${name}`)
    yield* stop(child)
    yield* Effect.log(`${name} stopped (${child.signalCode ?? `code ${child.exitCode}`})`)
  })

/** Asks a child to stop (SIGTERM) and waits for it, killing it after the grace period. */
export const stop = (child: ChildProcess): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resume(Effect.void)
      return
    }
    const force = setTimeout(() => child.kill("SIGKILL"), stopGraceMillis)
    child.once("exit", () => {
      clearTimeout(force)
      resume(Effect.void)
    })
    child.kill("SIGTERM")
  })
