/**
 * Issue #22: the saturated-wait test runs on the shared launcher (`npm start` as its own process, on a cluster
 * saturated from the start), before the round trip and the SIGTERM test use the same launcher once it is ready:
 * it started an API and a deriver of its own in the test process (two Node processes, ~4 s of CPU). Same four
 * tests, same assertions (the waiting lines are now read from the launcher's output).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { ApiClient } from "@resilience/api-client"
import { Cluster, Orphans, Saturation } from "@resilience/local-postgres"
import { ClosedPort, Eventually } from "@resilience/test-db"
import { Context, Effect, Layer, Option } from "effect"
import { FetchHttpClient } from "effect/http"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Stack from "../src/Stack.ts"

/** Reads a peer's representation until the deriver has counted `messages` of theirs (client-side polling). */
const awaitRepresentation = (client: ApiClient.ApiClient, token: string, peer: string, messages: number) =>
  Eventually.defined(
    `a representation of ${peer} with ${messages} messages`,
    Effect.map(
      client.representation({ token, workspace: "acme", peer }),
      (derived) => Option.isSome(derived) && derived.value.messageCount === messages ? derived.value : undefined
    ),
    { every: "250 millis" }
  )

/**
 * `npm start`'s launcher as its own process with `env`, until its output has the children's pids and matches
 * `until`; `stop(signal)` then signals it and yields its exit code. Data directory and process go with the scope
 * (a launcher still running then is stopped with SIGTERM).
 */
const launchUntil = (env: Record<string, string>, until: RegExp) =>
  Effect.gen(function*() {
    const dataDirectory = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "launcher-test-"))),
      (directory) => Effect.sync(() => rmSync(directory, { recursive: true, force: true }))
    )
    const launcher = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [
          "--conditions=@resilience/source",
          join(Stack.repositoryRoot, "packages/launcher/src/bin/start.ts")
        ], { env: { ...process.env, ...env, RESILIENCE_DATA_DIR: dataDirectory }, stdio: ["ignore", "pipe", "pipe"] })
      ),
      (launcher) =>
        launcher.exitCode !== null || launcher.signalCode !== null
          ? Effect.void
          : Effect.callback<void>((resume) => {
            launcher.once("exit", () => resume(Effect.void))
            launcher.kill("SIGTERM")
          })
    )
    let output = ""
    const pids = yield* Effect.callback<ReadonlyArray<number>>((resume) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString("utf8")
        const match = /api pid (\d+), deriver pid (\d+)/.exec(output)
        if (match !== null && until.test(output)) resume(Effect.succeed([Number(match[1]), Number(match[2])]))
      }
      launcher.stdout.on("data", onData)
      launcher.stderr.on("data", onData)
      launcher.once("exit", (code) => resume(Effect.die(new Error(`launcher exited ${code}: ${output}`))))
    })
    const stop = (signal: NodeJS.Signals) =>
      Effect.callback<number | null>((resume) => {
        launcher.kill(signal)
        if (launcher.exitCode !== null) resume(Effect.succeed(launcher.exitCode))
        else launcher.once("exit", (exitCode) => resume(Effect.succeed(exitCode)))
      })
    /** Waits (bounded: 60 s) until the output matches `pattern`; dies naming it, with the output, if it never did. */
    const awaitOutput = (pattern: RegExp) =>
      Eventually.until(
        () => `output matching ${pattern}; the output: ${output}`,
        Effect.sync(() => pattern.test(output)),
        {
          within: "60 seconds",
          every: "100 millis"
        }
      )
    const running = () => launcher.exitCode === null && launcher.signalCode === null
    return { pids, output: () => output, awaitOutput, running, stop }
  })

/**
 * `npm start`'s launcher on a cluster of 6 slots saturated from the start (every slot held), once it has started
 * the API and the deriver: the saturated-wait test sees it wait and releases the slots, then the round trip and the
 * SIGTERM test use it, ready (issue #22: each of the three tests ran an API and a deriver of its own); the API's and
 * the deriver's metrics URLs.
 */
const launched = Effect.gen(function*() {
  const { cluster, saturation } = yield* Effect.orDie(Saturation.startSaturated(6))
  const apiPort = yield* Cluster.freePort
  const metricsPort = yield* Cluster.freePort
  const launcher = yield* launchUntil({
    DATABASE_URL: cluster.url,
    DB_SCHEMA: "tenant_sigterm",
    API_PORT: String(apiPort),
    API_ADMIN_TOKEN: "test-admin-token",
    // at Warn the API never logs an "ready" line: readiness comes from /readyz, not from the log
    API_LOG_LEVEL: "Warn",
    DERIVER_METRICS_PORT: String(metricsPort),
    DERIVER_MIGRATE: "true",
    DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0",
    // the production schedule (cap 30 s): the round trip's message is picked up by the API's wake, not a poll
    DERIVER_POLLING_INITIAL_INTERVAL: "max"
  }, /api pid \d+/)
  return {
    launcher,
    saturation,
    apiUrl: `http://127.0.0.1:${apiPort}`,
    deriverMetricsUrl: `http://127.0.0.1:${metricsPort}/metrics`
  }
})

class Launched extends Context.Service<Launched, Effect.Success<typeof launched>>()("test/Launched") {
  static readonly layer = Layer.effect(Launched, launched)
}

/** The messages of the launcher's own log lines (`[12:00:00.000] INFO (#1): message`), not its children's. */
const logMessages = (output: string): ReadonlyArray<string> =>
  output.split("\n").flatMap((line) => {
    const match = /^\[[^\]]+\] [A-Z]+ \(#\d+\): (.*)$/.exec(line)
    return match === null ? [] : [match[1]!]
  })

describe("the production entry points", () => {
  it.live(
    "Ctrl-C while npm start waits for an unreachable database: exit code 0, no orphans",
    () =>
      Effect.gen(function*() {
        const closed = yield* ClosedPort.find
        const launcher = yield* launchUntil({
          DATABASE_URL: closed.url,
          API_PORT: String(yield* Cluster.freePort),
          DERIVER_METRICS_PORT: String(yield* Cluster.freePort)
        }, /waiting for api: .+; retrying in/)
        for (const pid of launcher.pids) assert.isTrue(Orphans.isAlive(pid))
        assert.strictEqual(yield* launcher.stop("SIGINT"), 0, launcher.output())
        for (const pid of launcher.pids) assert.isFalse(Orphans.isAlive(pid), `pid ${pid} outlived the launcher`)
      }).pipe(Effect.scoped),
    120_000
  )

  layer(Launched.layer, { excludeTestServices: true })((it) => {
    it.effect(
      "npm start waits for a saturated database instead of dying, says what it waits for, is ready when it answers",
      () =>
        Effect.gen(function*() {
          const { apiUrl, launcher, saturation } = yield* Launched
          // under load the processes take seconds to start: wait (bounded) until both sides have said it
          const said503 = () =>
            logMessages(launcher.output()).some((line) =>
              /^waiting for api: \/readyz 503 .+; retrying in \d+\.\d s$/.test(line)
            )
          const apiSaid = () =>
            launcher.output().split("\n").some((line) =>
              line.startsWith("[api] ") && line.includes("database unavailable (Saturated); retrying in")
            )
          yield* Eventually.until(
            () => `the launcher's wait on the API's 503 and the API's retry; the output: ${launcher.output()}`,
            Effect.sync(() => said503() && apiSaid()),
            { within: "60 seconds", every: "100 millis" }
          )
          assert.isTrue(said503(), launcher.output())
          assert.isTrue(apiSaid(), launcher.output())
          assert.isTrue(launcher.running() && !/\nready\n/.test(launcher.output()), "still waiting, not dead")
          yield* Effect.orDie(saturation.release)
          yield* launcher.awaitOutput(/\nready\n/)
          const client = yield* ApiClient.make({ baseUrl: apiUrl }).pipe(Effect.orDie)
          yield* client.readyz
          const { token } = yield* client.createWorkspace({ adminToken: "test-admin-token", name: "after" })
          assert.isString(token)
        }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)),
      120_000
    )

    it.effect("serve a round trip: API stores and enqueues, the deriver derives, the API reads it back", () =>
      Effect.gen(function*() {
        const stack = yield* Launched
        const client = yield* ApiClient.make({ baseUrl: stack.apiUrl }).pipe(Effect.orDie)
        const { token } = yield* client.createWorkspace({ adminToken: "test-admin-token", name: "acme" })
        yield* client.appendMessages({
          token,
          workspace: "acme",
          session: "s1",
          messages: [{ peer: "alice", content: "hello pooled world" }, { peer: "alice", content: "again" }]
        })
        const representation = yield* awaitRepresentation(client, token, "alice", 2)
        assert.deepInclude(representation, { peer: "alice", messageCount: 2 })
        const metrics = yield* Effect.promise(() => fetch(stack.deriverMetricsUrl).then((r) => r.text()))
        assert.match(metrics, /deriver_polls_total/)
        // npm start wires the API's wake to the deriver: the write woke it (a poll of its own, not the schedule)
        assert.match(metrics, /deriver_wakes_received_total\S* [1-9]/)
        assert.match(metrics, /deriver_polls_woken_total\S* [1-9]/)
      }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)))

    it.effect("npm start's launcher stops the deriver, the API and itself on SIGTERM, exit code 0, no orphans", () =>
      Effect.gen(function*() {
        const { launcher } = yield* Launched
        assert.match(
          launcher.output(),
          /curl -sS -X POST http:\/\/127\.0\.0\.1:\d+\/v1\/workspaces\/demo-tenant_sigterm\/sessions/
        )
        for (const pid of launcher.pids) assert.isTrue(Orphans.isAlive(pid))
        assert.strictEqual(yield* launcher.stop("SIGTERM"), 0, launcher.output())
        for (const pid of launcher.pids) assert.isFalse(Orphans.isAlive(pid), `pid ${pid} outlived the launcher`)
      }))
  })
})
