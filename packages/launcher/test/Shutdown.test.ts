/**
 * Issue #36: Ctrl-C in a terminal signals the whole foreground process group. `npm start`'s launcher runs here
 * in a process group of its own (as a shell runs a foreground job) and the test signals that group, as the
 * terminal does: the embedded PostgreSQL, the API and the deriver must not be stopped by that signal but by the
 * launcher, in order (deriver, which releases its units, then API, then database), leaving nothing running.
 */
import { assert, describe, it } from "@effect/vitest"
import { ApiClient } from "@resilience/api-client"
import { Cluster } from "@resilience/local-postgres"
import { Eventually } from "@resilience/test-db"
import { Effect, Option } from "effect"
import { FetchHttpClient } from "effect/http"
import { spawn } from "node:child_process"
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Stack from "../src/Stack.ts"

/** Whether `process.kill(target, 0)` finds a process (a pid) or a process group (a negative pid). */
const exists = (target: number): boolean => {
  try {
    process.kill(target, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH"
  }
}

/** The index of the first line of `output` that contains `text`; -1 when none does. */
const lineOf = (output: string, text: string): number => output.split("\n").findIndex((line) => line.includes(text))

/**
 * `npm start`'s launcher on a fresh embedded cluster, in a process group of its own (as a shell runs a foreground
 * job, so the group's signals are not the test's), until its ready banner: the demo workspace and its token, the
 * pids of the API, the deriver and the postmaster, its output so far and its exit code when it exits. Whatever is
 * still running when the scope closes is killed, and the data directory deleted.
 */
const launch = Effect.gen(function*() {
  const dataDirectory = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const directory = mkdtempSync(join(tmpdir(), "launcher-ctrl-c-"))
      // as root PostgreSQL runs as the service account, which must enter the folder (mkdtemp makes it 700)
      chmodSync(directory, 0o755)
      return directory
    }),
    (directory) => Effect.sync(() => rmSync(directory, { recursive: true, force: true }))
  )
  const env = {
    RESILIENCE_DATA_DIR: dataDirectory,
    EMBEDDED_POSTGRES_PORT: String(yield* Cluster.freePort),
    API_PORT: String(yield* Cluster.freePort),
    DERIVER_METRICS_PORT: String(yield* Cluster.freePort),
    API_ADMIN_TOKEN: "test-admin-token",
    DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0",
    DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS: "1"
  }
  const pids: Array<number> = []
  const launcher = yield* Effect.acquireRelease(
    Effect.sync(() =>
      spawn(process.execPath, [
        "--conditions=@resilience/source",
        join(Stack.repositoryRoot, "packages/launcher/src/bin/start.ts")
      ], {
        // its own process group, the way a shell runs a foreground job: the group's signal is not the test's
        detached: true,
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
    ),
    // a failed test leaves nothing running either
    (launcher) =>
      Effect.sync(() => {
        for (const target of [-launcher.pid!, ...pids]) if (exists(target)) process.kill(target, "SIGKILL")
      })
  )
  let output = ""
  const exited = Effect.callback<number | null>((resume) => {
    if (launcher.exitCode !== null || launcher.signalCode !== null) resume(Effect.succeed(launcher.exitCode))
    else launcher.once("exit", (code) => resume(Effect.succeed(code)))
  })
  const banner = yield* Effect.callback<{ readonly workspace: string; readonly token: string }>((resume) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const ready = /\nready\n[\s\S]*workspace\s+(\S+), token (\S+)/.exec(output)
      if (ready !== null) resume(Effect.succeed({ workspace: ready[1]!, token: ready[2]! }))
    }
    launcher.stdout.on("data", onData)
    launcher.stderr.on("data", onData)
    launcher.once("exit", (code) => resume(Effect.die(new Error(`launcher exited ${code}: ${output}`))))
  })
  const children = /api pid (\d+), deriver pid (\d+)/.exec(output)
  assert.isNotNull(children, output)
  // the postmaster's pid, from its own pid file
  const postgres = Number(
    readFileSync(join(dataDirectory, "postgres", "data", "postmaster.pid"), "utf8").split("\n")[0]
  )
  const [api, deriver] = [Number(children![1]), Number(children![2])]
  pids.push(api, deriver, postgres)
  for (const pid of pids) assert.isTrue(exists(pid), `pid ${pid} not running`)

  return {
    launcher,
    apiUrl: `http://127.0.0.1:${env.API_PORT}`,
    banner,
    pids: { api, deriver, postgres } as const,
    output: () => output,
    exited
  }
})

describe("npm start and Ctrl-C", () => {
  it.live(
    "a SIGINT to the launcher's whole process group stops the deriver (units released), the API, then the database; exit 0, nothing left",
    () =>
      Effect.gen(function*() {
        const { apiUrl, banner, exited, launcher, output: read, pids: started } = yield* launch
        const pids = [started.api, started.deriver, started.postgres]
        const client = yield* ApiClient.make({ baseUrl: apiUrl }).pipe(Effect.orDie)
        for (const content of ["one", "two", "three"]) {
          yield* client.appendMessages({
            token: banner.token,
            workspace: banner.workspace,
            session: "welcome",
            messages: [{ peer: "alice", content }]
          })
        }
        const derived = yield* Eventually.satisfying(
          () => `alice's representation counting 3 messages; the output: ${read()}`,
          Effect.map(
            client.representation({ token: banner.token, workspace: banner.workspace, peer: "alice" }),
            (representation) => Option.isSome(representation) ? representation.value.messageCount : 0
          ),
          (n) => n >= 3,
          { within: "60 seconds", every: "250 millis" }
        )
        assert.strictEqual(derived, 3, read())

        // Ctrl-C: the terminal signals the whole foreground process group
        process.kill(-launcher.pid!, "SIGINT")
        const code = yield* exited
        const output = read()
        assert.notInclude(output, "could not release held work units", output)
        assert.strictEqual(code, 0, output)
        const order = [
          "stopping deriver",
          "deriver stopped (code 0)",
          "stopping api",
          "api stopped (code 0)",
          "stopping database",
          "database stopped"
        ].map((text) => lineOf(output, text))
        for (const index of order) assert.isAtLeast(index, 0, output)
        assert.deepStrictEqual(order, [...order].sort((a, b) => a - b), output)
        // what the deriver released (if it still held any) is logged as such, between its stop and its exit
        const released = lineOf(output, "released held work units")
        if (released >= 0) assert.isTrue(released > order[0]! && released < order[1]!, output)
        // nothing of the launcher's group, nor the children's own groups (postgres's backends with the postmaster)
        for (const target of [launcher.pid!, -launcher.pid!, ...pids, ...pids.map((pid) => -pid)]) {
          assert.isFalse(exists(target), `${target < 0 ? "process group" : "pid"} ${Math.abs(target)} left running`)
        }
      }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)),
    180_000
  )

  // The children run out of the launcher's process group: a launcher killed outright must still take them down
  // (setpriv --pdeathsig: SIGTERM to the API and the deriver, SIGKILL to the postmaster).
  it.live.skipIf(process.platform !== "linux")(
    "a launcher killed outright (SIGKILL) leaves no API, deriver or PostgreSQL running",
    () =>
      Effect.gen(function*() {
        const { exited, launcher, output, pids: started } = yield* launch
        const pids = [started.api, started.deriver, started.postgres]
        process.kill(launcher.pid!, "SIGKILL")
        yield* exited
        const left = () => [...pids, ...pids.map((pid) => -pid)].filter(exists)
        yield* Eventually.until(
          () => `the children gone (left: ${left().join(", ")}); the output: ${output()}`,
          Effect.sync(() => left().length === 0),
          { every: "100 millis" }
        )
        assert.deepStrictEqual(left(), [], output())
      }).pipe(Effect.scoped),
    180_000
  )
})
