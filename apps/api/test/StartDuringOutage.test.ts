/**
 * The production entry points started while the database refuses every connection: nobody exits, the APIs
 * answer `/readyz` 503 with `Retry-After` (and `/healthz` 200) for as long as it lasts, and after the release
 * they become ready by themselves, one of them having migrated the schema, and accept a write, which the
 * consistency checker then finds stored and derived exactly once.
 */
import { assert, describe, it } from "@effect/vitest"
import { History } from "@resilience/checker"
import { Saturation } from "@resilience/local-postgres"
import { EntryPoint, Eventually } from "@resilience/test-db"
import { Effect } from "effect"
import { deriveAndCheck, post } from "./Checked.ts"
import { adminToken, request } from "./TestServer.ts"

interface Running extends EntryPoint.Running {
  readonly name: string
}

/** Spawns an app's entry point (with the run's compile cache); killed when the scope closes. */
const launch = (name: string, entry: string, env: Record<string, string>) =>
  Effect.map(
    EntryPoint.start(entry, { ...EntryPoint.compileCache, ...env }),
    (running): Running => ({ ...running, name })
  )

/** How many times a process said the database refused it and it will retry (its schema migration's log line). */
const refusals = (running: Running) =>
  running.output().split("\n").filter((line) => /database unavailable \(Saturated\); retrying in/.test(line)).length

/** The API's address, from its `api listening` log line. */
const apiAddress = (running: Running) =>
  Eventually.defined(
    () => `${running.name} listening; its output: ${running.output()}`,
    Effect.sync(() => {
      const line = running.output().split("\n").find((text) => text.includes("api listening"))
      // a process that exited will never listen: no use waiting out the deadline
      assert.strictEqual(running.exitCode(), "running", `${running.name} exited; its output: ${running.output()}`)
      if (line === undefined) return undefined
      const port = (JSON.parse(line) as { annotations?: { port?: number } }).annotations?.port
      return port === undefined ? undefined : { baseUrl: `http://127.0.0.1:${port}` }
    }),
    { within: "60 seconds", every: "100 millis" }
  )

describe("processes started during an outage", () => {
  it.live(
    "stay up, answer 503 with Retry-After meanwhile, migrate once and serve after the release",
    () =>
      Effect.gen(function*() {
        const { cluster, saturation } = yield* Effect.orDie(Saturation.startSaturated(6))
        assert.isAbove(saturation.held, 0)
        const common = { DATABASE_URL: cluster.url, DB_SCHEMA: "outage", DB_CONNECT_TIMEOUT_SECONDS: "1" }
        const api = "apps/api/src/main.ts"
        const apis = [
          yield* launch("api-1", api, { ...common, API_PORT: "0", API_HOST: "127.0.0.1", API_ADMIN_TOKEN: adminToken }),
          yield* launch("api-2", api, { ...common, API_PORT: "0", API_HOST: "127.0.0.1", API_ADMIN_TOKEN: adminToken })
        ]
        const deriver = yield* launch("deriver", "apps/deriver/src/main.ts", {
          ...common,
          DERIVER_METRICS_PORT: "0",
          DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0"
        })
        const servers = [yield* apiAddress(apis[0]!), yield* apiAddress(apis[1]!)]

        // saturated: liveness yes, readiness no, and the refusal is a 503 with Retry-After, round after round until
        // every process has been refused and retried at least twice (so it stayed up through a retry), and at least
        // 12 rounds of requests were refused: a count of events, not a window of wall-clock time
        let refused = 0
        const probed = Effect.gen(function*() {
          for (const server of servers) {
            const ready = yield* request(server, "GET", "/readyz")
            assert.strictEqual(ready.status, 503, ready.text)
            assert.match(ready.headers.get("retry-after") ?? "", /^\d+$/)
            const write = yield* request(server, "POST", "/v1/workspaces", { token: adminToken, body: { name: "w" } })
            assert.strictEqual(write.status, 503, write.text)
            assert.strictEqual((yield* request(server, "GET", "/healthz")).status, 200)
            refused++
          }
          return refused >= 12 && [...apis, deriver].every((running) => refusals(running) >= 2)
        })
        yield* Eventually.until(
          () =>
            `12 refused rounds (${refused}) and two refusals logged by each process (${
              [...apis, deriver].map(refusals).join(", ")
            })`,
          probed,
          { within: "90 seconds", every: "250 millis" }
        )
        for (const running of [...apis, deriver]) assert.strictEqual(running.exitCode(), "running", running.output())

        yield* Effect.orDie(saturation.release)
        for (const server of servers) {
          yield* Eventually.until(
            `${server.baseUrl} ready`,
            Effect.map(request(server, "GET", "/readyz"), (reply) => reply.status === 200),
            { within: "60 seconds", every: "100 millis" }
          )
        }
        const created = yield* request(servers[1]!, "POST", "/v1/workspaces", {
          token: adminToken,
          body: { name: "after-outage" }
        })
        assert.strictEqual(created.status, 201, created.text)
        const token = (created.json as { token: string }).token
        const history = History.make()
        const posted = yield* post(servers[0]!, history, token, {
          client: "c",
          workspace: "after-outage",
          session: "s",
          peer: "alice",
          content: "we survived the outage"
        })
        assert.strictEqual(posted.status, 201, posted.text)
        yield* Eventually.until(
          () => `deriver started; its output: ${deriver.output()}`,
          Effect.sync(() => deriver.output().includes("deriver started")),
          { within: "60 seconds", every: "100 millis" }
        )
        const migrations = [...apis, deriver].map((running) =>
          running.output().split("\n").filter((line) => line.includes("migrations applied")).length
        )
        assert.deepStrictEqual(migrations.reduce((a, b) => a + b, 0), 1, JSON.stringify(migrations))
        for (const running of [...apis, deriver]) assert.strictEqual(running.exitCode(), "running", running.output())
        // The deriver process and one in this process share the work; the message is folded in exactly once.
        const verdict = yield* deriveAndCheck(cluster.url, "outage", history, "processes started during an outage")
        assert.isTrue(verdict.valid)
      }).pipe(Effect.scoped),
    180_000
  )
})
