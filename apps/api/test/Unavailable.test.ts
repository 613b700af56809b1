import { assert, describe, it } from "@effect/vitest"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { ClosedPort, CountingProxy, SilentListener, TestDatabase } from "@resilience/test-db"
import { Effect } from "effect"
import { adminToken, createWorkspace, type Reply, request, start, type TestServer } from "./TestServer.ts"

const unavailable = { detail: "database temporarily unavailable" }
const unexpected = { detail: "An unexpected error occurred" }

/** One request to every endpoint that needs the database. */
const databaseCalls = (api: TestServer, token: string, round: number) => [
  request(api, "POST", "/v1/workspaces", { token: adminToken, body: { name: `new-${round}` } }),
  request(api, "POST", "/v1/workspaces/acme/sessions/s1/messages", {
    token,
    body: { messages: [{ peer: "alice", content: `message ${round}` }] }
  }),
  request(api, "GET", "/v1/workspaces/acme/queue", { token }),
  request(api, "GET", "/v1/workspaces/acme/peers/alice/representation", { token }),
  request(api, "GET", "/readyz")
]

const assertUnavailable = (reply: Reply, withinMillis: number) => {
  assert.strictEqual(reply.status, 503, reply.text)
  assert.strictEqual(reply.headers.get("retry-after"), "1")
  assert.strictEqual(reply.headers.get("content-type"), "application/json")
  assert.deepStrictEqual(reply.json, unavailable)
  assert.isBelow(reply.millis, withinMillis)
}

/** Calls every database endpoint at once; each answers a 503 within `withinMillis`. Yields the replies. */
const allUnavailable = (api: TestServer, token: string, round: number, withinMillis: number) =>
  Effect.tap(
    Effect.all(databaseCalls(api, token, round), { concurrency: "unbounded" }),
    (replies) => Effect.sync(() => replies.forEach((reply) => assertUnavailable(reply, withinMillis)))
  )

/** How many readiness checks the server made so far (`schema_readiness_checks_total`, every outcome). */
const readinessChecks = (api: TestServer) =>
  Effect.map(request(api, "GET", "/metrics"), (reply) =>
    reply.text.split("\n")
      .filter((line) => line.startsWith("schema_readiness_checks_total"))
      .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0))

describe("apps/api when the database cannot serve", () => {
  it.live(
    "saturated: every database endpoint is a sub-second 503, one connection attempt each; then it recovers",
    () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster.start({ maxConnections: 6 })
        const proxy = yield* CountingProxy.start({ host: cluster.host, port: cluster.port })
        const api = yield* start({ url: proxy.url(cluster.url), schema: "saturation" })
        const token = yield* createWorkspace(api, "acme")

        const released = yield* Effect.scoped(Effect.gen(function*() {
          // Straight to the cluster, not through the proxy, so the proxy counts only the API's attempts.
          const { held } = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
          assert.isAbove(held, 0)
          for (let round = 0; round < 3; round++) {
            const before = yield* proxy.attempts
            const replies = yield* allUnavailable(api, token, round, 1_000)
            assert.strictEqual(
              (yield* proxy.attempts) - before,
              replies.length,
              "exactly one connection attempt per request"
            )
          }
          const healthz = yield* request(api, "GET", "/healthz")
          assert.strictEqual(healthz.status, 200, "liveness does not need the database")
          const metrics = yield* request(api, "GET", "/metrics")
          assert.include(metrics.text, "api_error_responses_total")
          return held
        }))
        assert.isAbove(released, 0)

        const before = yield* proxy.attempts
        const replies = yield* Effect.all(databaseCalls(api, token, 99), { concurrency: 1 })
        assert.deepStrictEqual(replies.map((reply) => reply.status), [201, 201, 200, 404, 200], "recovered, no restart")
        assert.strictEqual((yield* proxy.attempts) - before, replies.length)
      }),
    180_000
  )

  it.live(
    "started with the database down (nothing listening): 503 at once, no connection attempt per request",
    () =>
      Effect.gen(function*() {
        const closed = yield* ClosedPort.find
        const api = yield* start({ url: closed.url, migrate: true, awaitReady: false, connectTimeout: "2 seconds" })
        yield* allUnavailable(api, "ws_whatever", 0, 2_000)
        assert.strictEqual((yield* request(api, "GET", "/healthz")).status, 200)
      }),
    60_000
  )

  it.live(
    "started against a listener that never answers: 503 at once; only the readiness check connects",
    () =>
      Effect.gen(function*() {
        const silent = yield* SilentListener.start
        const api = yield* start({ url: silent.url, migrate: false, connectTimeout: "500 millis" })
        for (let round = 0; round < 3; round++) {
          yield* allUnavailable(api, "ws_whatever", round, 1_000)
          yield* Effect.sleep("300 millis")
        }
        const checks = yield* readinessChecks(api)
        const accepted = yield* silent.accepted
        assert.isAtLeast(accepted, 1, "the readiness check tried")
        assert.isAtMost(accepted, checks + 1, "15 requests made no connection attempt of their own")
      }),
    60_000
  )

  it.live("misconfigured (wrong password): opaque 500, the real cause in the log", () =>
    Effect.gen(function*() {
      const db = yield* TestDatabase
      const url = new URL(db.url)
      url.password = "wrong-password"
      const api = yield* start({ url: url.toString(), migrate: false })
      const stopped = yield* Effect.flip(api.readiness.await)
      assert.include(stopped.message, "password authentication failed")
      const replies = yield* Effect.all(databaseCalls(api, "ws_whatever", 0), { concurrency: 1 })
      for (const reply of replies) {
        assert.strictEqual(reply.status, 500, reply.text)
        assert.deepStrictEqual(reply.json, unexpected)
        assert.isNull(reply.headers.get("retry-after"))
        assert.notInclude(reply.text, "password")
      }
      const logged = api.logs.filter((line) => line.level === "Error")
      assert.isTrue(
        logged.some((line) =>
          line.cause.includes("DatabaseMisconfigured") && line.cause.includes("password authentication failed")
        ),
        JSON.stringify(api.logs.slice(0, 3))
      )
    }).pipe(Effect.provide(TestDatabase.layer)), 60_000)
})
