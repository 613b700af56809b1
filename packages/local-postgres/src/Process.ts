/**
 * Starting and stopping a server process so that it dies with the process that started it: on Linux it is
 * spawned through `setpriv --pdeathsig`, so even a SIGKILL of the test worker takes the server down.
 */
import { Data, Effect } from "effect"
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { userInfo } from "node:os"

/** A server process that did not come up: what it was, and its last output. */
export class ServerStartFailed extends Data.TaggedError("ServerStartFailed")<{
  readonly server: string
  readonly output: string
}> {
  override get message(): string {
    return `${this.server} did not start: ${this.output.slice(-2000)}`
  }
}

/** The service account once looked up (or created) in this process; `null` while not yet looked up. */
let lookedUp: { readonly uid: number; readonly gid: number } | undefined | null = null

/**
 * The unprivileged account servers run as when the process runs as root (PostgreSQL and PgBouncer refuse
 * root): `postgres`, created as a system account when the machine has none. Looked up once per process: each
 * lookup spawned three `id` processes, and the test suite's spawns were a measured share of its CPU
 * (docs/results/test-suite.md).
 */
export const serviceAccount = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (lookedUp !== null) return lookedUp
  if (userInfo().uid !== 0) return lookedUp = undefined
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim())
  if (spawnSync("id", ["postgres"]).status !== 0) {
    execFileSync("useradd", [
      "--system",
      "--user-group",
      "--no-create-home",
      "--shell",
      "/usr/sbin/nologin",
      "postgres"
    ])
  }
  return lookedUp = { uid: id("-u"), gid: id("-g") }
}

const setpriv = "/usr/bin/setpriv"

/**
 * `command` and `args` so that the process gets `signal` when the process that spawns it dies, even by SIGKILL:
 * on Linux through `setpriv --pdeathsig` (which execs the command: same pid), elsewhere unchanged. What keeps a
 * child started in a process group of its own (`detached`, out of reach of the terminal's Ctrl-C) from
 * outliving its parent.
 */
export const dyingWithParent = (
  command: string,
  args: ReadonlyArray<string>,
  signal: NodeJS.Signals
): readonly [string, ReadonlyArray<string>] =>
  process.platform === "linux" && existsSync(setpriv)
    ? [setpriv, ["--pdeathsig", signal, "--", command, ...args]]
    : [command, args]

/**
 * Spawns `command` and waits until a line of its output contains `readyWhen`. The process is killed when the
 * scope closes (SIGINT, then SIGKILL after ten seconds); one that prints no ready line within a minute is killed.
 * With `ownProcessGroup` it runs in a session and process group of its own, so a signal to its parent's group
 * (a terminal's Ctrl-C) does not reach it: it stops when its parent stops it, or dies with the parent.
 */
export const start = (options: {
  readonly server: string
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly readyWhen: string
  readonly env?: Record<string, string>
  readonly ownProcessGroup?: boolean
}) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess, ServerStartFailed>((resume) => {
      const account = serviceAccount()
      const [command, args] = dyingWithParent(options.command, options.args, "SIGKILL")
      const child = spawn(command, args, {
        ...account,
        detached: options.ownProcessGroup === true,
        env: { ...process.env, LC_ALL: "C", ...options.env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      let ready = false
      const onData = (chunk: Buffer) => {
        output += chunk.toString("utf8")
        if (!ready && output.includes(options.readyWhen)) {
          ready = true
          clearTimeout(deadline)
          resume(Effect.succeed(child))
        }
      }
      const deadline = setTimeout(() => {
        child.kill("SIGKILL")
        resume(
          Effect.fail(new ServerStartFailed({ server: options.server, output: `${output}\nno ready line within 60 s` }))
        )
      }, 60_000)
      child.once("exit", () => clearTimeout(deadline))
      child.stdout?.on("data", onData)
      child.stderr?.on("data", onData)
      child.on("error", (error) =>
        resume(Effect.fail(new ServerStartFailed({ server: options.server, output: String(error) }))))
      child.on("exit", (code, signal) => {
        if (!ready) {
          resume(
            Effect.fail(new ServerStartFailed({ server: options.server, output: `${output}\nexit ${code ?? signal}` }))
          )
        }
      })
    }),
    stop
  )

/** Stops a server process: SIGINT (PostgreSQL's fast shutdown), SIGKILL if it is still there after ten seconds. */
export const stop = (child: ChildProcess): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resume(Effect.void)
      return
    }
    const force = setTimeout(() => child.kill("SIGKILL"), 10_000)
    child.once("exit", () => {
      clearTimeout(force)
      resume(Effect.void)
    })
    child.kill("SIGINT")
  })
