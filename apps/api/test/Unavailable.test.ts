/**
 * The API when its database cannot serve: what it answers (503 with the body and `Retry-After`, or an opaque 500)
 * and how many connection attempts it makes. How fast it answers (sub-second 503s, the time to ready after a
 * release) is a speed figure, printed by `npm run bench:unavailable -w @resilience/api-app` for the same
 * scenarios (issue #22: no wall-clock bound in a test).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { History } from "@resilience/checker"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { ClosedPort, CountingProxy, Eventually, SilentListener, TestDatabase } from "@resilience/test-db"
import { Context, Effect, Layer, Random } from "effect"
import { TestClock } from "effect/testing"
import { deriveAndCheck, post } from "./Checked.ts"
import { adminToken, createWorkspace, type Reply, request, start, type TestServer } from "./TestServer.ts"

const unavailable = { detail: "database temporarily unavailable" }
const unexpected = { detail: "An unexpected error occurred" }

/** One request to every endpoint that needs the database; the post recorded in `history`. */
const databaseCalls = (api: TestServer, token: string, round: number, history = History.make()) => [
  request(api, "POST", "/v1/workspaces", { token: adminToken, body: { name: `new-${round}` } }),
  post(api, history, token, {
    client: "c",
    workspace: "acme",
    session: "s1",
    peer: "alice",
    content: `message ${round}`
  }),
  request(api, "GET", "/v1/workspaces/acme/queue", { token }),
  request(api, "GET", "/v1/workspaces/acme/peers/alice/representation", { token }),
  request(api, "GET", "/readyz")
]

/** A 503 with the body and `Retry-After` (1 s, or up to `maxRetryAfter` s: the rest of an open circuit's window). */
const assertUnavailable = (reply: Reply, maxRetryAfter = 1) => {
  assert.strictEqual(reply.status, 503, reply.text)
  const retryAfter = Number(reply.headers.get("retry-after"))
  assert.isTrue(
    Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= maxRetryAfter,
    `Retry-After ${retryAfter}`
  )
  assert.strictEqual(reply.headers.get("content-type"), "application/json")
  assert.deepStrictEqual(reply.json, unavailable)
}

/** Calls every database endpoint at once; each answers a 503. Yields the replies. */
const allUnavailable = (
  api: TestServer,
  token: string,
  round: number,
  maxRetryAfter = 1,
  history?: History.History
) =>
  Effect.tap(
    Effect.all(databaseCalls(api, token, round, history), { concurrency: "unbounded" }),
    (replies) => Effect.sync(() => replies.forEach((reply) => assertUnavailable(reply, maxRetryAfter)))
  )

/** How many attempts the schema's migration made so far (`schema_migration_attempts_total`, every outcome). */
const readinessChecks = (api: TestServer) =>
  Effect.map(request(api, "GET", "/metrics"), (reply) =>
    reply.text.split("\n")
      .filter((line) => line.startsWith("schema_migration_attempts_total"))
      .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0))

/** Polls `GET /readyz` until it answers 200 (a deadline for a hung server, not a speed bound). */
const untilReady = (api: TestServer) =>
  Eventually.until(
    `${api.baseUrl} ready`,
    Effect.map(request(api, "GET", "/readyz"), (reply) => reply.status === 200),
    {
      every: "100 millis"
    }
  )

/** A cluster of 6 connections, small enough to saturate. */
class SmallCluster extends Context.Service<SmallCluster, Cluster.Cluster>()("test/SmallCluster") {
  static readonly layer = Layer.effect(SmallCluster, Cluster.start({ maxConnections: 6 }))
}

/** The small cluster and a counting proxy in front of it, for this test alone. */
const proxied = Effect.gen(function*() {
  const cluster = yield* SmallCluster
  const proxy = yield* CountingProxy.start({ host: cluster.host, port: cluster.port })
  return { cluster, proxy }
})

describe("apps/api when the database cannot serve", () => {
  // One small cluster for both saturation tests, each on its own schema (issue #22: one cluster each).
  layer(SmallCluster.layer, { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect(
      "saturated: a 503 everywhere; at most one attempt per request, none once the gate is open; then it recovers",
      () =>
        Effect.gen(function*() {
          const { cluster, proxy } = yield* proxied
          // A window of at least 1.5 s (3 s ± 50 %): the rounds below end well inside it.
          const api = yield* start({
            url: proxy.url(cluster.url),
            schema: "saturation",
            admission: { tripFailures: 3, openMillis: 3_000 }
          })
          const token = yield* createWorkspace(api, "acme")
          const history = History.make()

          const released = yield* Effect.scoped(Effect.gen(function*() {
            // Straight to the cluster, not through the proxy, so the proxy counts only the API's attempts.
            const { held } = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
            assert.isAbove(held, 0)
            const attempts: Array<number> = []
            for (let round = 0; round < 3; round++) {
              const before = yield* proxy.attempts
              // Shed by the open circuit: Retry-After covers the rest of its window (at most 4.5 s).
              yield* allUnavailable(api, token, round, 5, history)
              attempts.push((yield* proxy.attempts) - before)
            }
            // The first round trips the circuit (3 unavailable checkouts; requests already admitted make theirs);
            // the next rounds are shed by the open circuit and make none.
            assert.isAtLeast(attempts[0]!, 3, `attempts per round: ${attempts.join(", ")}`)
            assert.isAtMost(attempts[0]!, 5, "at most one connection attempt per request")
            assert.deepStrictEqual(attempts.slice(1), [0, 0], "shed requests make no connection attempt")
            const healthz = yield* request(api, "GET", "/healthz")
            assert.strictEqual(healthz.status, 200, "liveness does not need the database")
            const metrics = yield* request(api, "GET", "/metrics")
            assert.include(metrics.text, "api_error_responses_total")
            assert.match(metrics.text, /admission_shed_total\{[^}]*reason="CircuitOpen"[^}]*\} [1-9]/)
            assert.match(metrics.text, /admission_circuit_state(\{[^}]*\})? 2/)
            return held
          }))
          assert.isAbove(released, 0)

          // Released: after the window (≤ 4.5 s) the next request is the probe; it answers and closes the circuit
          // (how long that takes is the bench's figure).
          yield* untilReady(api)
          const before = yield* proxy.attempts
          const replies = yield* Effect.all(databaseCalls(api, token, 99, history), { concurrency: 1 })
          assert.deepStrictEqual(
            replies.map((reply) => reply.status),
            [201, 201, 200, 404, 200],
            "recovered, no restart"
          )
          const attempts = (yield* proxy.attempts) - before
          assert.isAtMost(attempts, replies.length, "at most one connection attempt per request")
          assert.isAtLeast(attempts, replies.length - 1, "/readyz may answer from its cache")
          // The writes refused with a 503 during the saturation are stored nowhere; the one after, once.
          const verdict = yield* deriveAndCheck(cluster.url, "saturation", history, "API saturated, then released")
          assert.isTrue(verdict.valid)
          assert.deepStrictEqual([verdict.totals.acknowledged, verdict.totals.unknown, verdict.totals.stored], [
            1,
            3,
            1
          ])
        }),
      180_000
    )

    it.effect(
      "300 concurrent readiness probes on a saturated server: one attempt per cache window",
      () =>
        Effect.gen(function*() {
          const { cluster, proxy } = yield* proxied
          // The server runs on the TestClock (and a seeded Random for its jittered timers): the cache window is
          // the clock's, so the count of attempts is exact, however long 300 requests take on a loaded machine.
          const api = yield* start({ url: proxy.url(cluster.url), schema: "readiness", readinessCacheMillis: 1_000 })
          // the saturation's own waits (for freed slots on release) are real time
          const saturation = yield* TestClock.withLive(Saturation.hold(cluster.url)).pipe(Effect.orDie)
          const probes = Effect.gen(function*() {
            const before = yield* proxy.attempts
            const replies = yield* Effect.all(
              Array.from({ length: 300 }, () => request(api, "GET", "/readyz")),
              { concurrency: "unbounded" }
            )
            for (const reply of replies) assertUnavailable(reply)
            return (yield* proxy.attempts) - before
          })
          assert.strictEqual(yield* probes, 1, "300 probes in one window: one attempt")
          yield* TestClock.adjust("999 millis")
          assert.strictEqual(yield* probes, 0, "300 more in the same window: none")
          yield* TestClock.adjust("1 millis")
          assert.strictEqual(yield* probes, 1, "300 in the next window: one")
          yield* TestClock.withLive(saturation.release).pipe(Effect.orDie)
        }).pipe(Effect.scoped, Effect.provide(TestClock.layer()), Random.withSeed("readiness")),
      120_000
    )
  })

  it.live(
    "started with the database down (nothing listening): 503, no connection attempt per request",
    () =>
      Effect.gen(function*() {
        const closed = yield* ClosedPort.find
        const api = yield* start({ url: closed.url, migrate: true, awaitReady: false, connectTimeout: "2 seconds" })
        yield* allUnavailable(api, "ws_whatever", 0)
        assert.strictEqual((yield* request(api, "GET", "/healthz")).status, 200)
      }),
    60_000
  )

  it.live(
    "started against a listener that never answers: 503; only the readiness check connects",
    () =>
      Effect.gen(function*() {
        const silent = yield* SilentListener.start
        const api = yield* start({ url: silent.url, migrate: false, connectTimeout: "500 millis" })
        // three rounds with a check of the schema's readiness between two (its attempts counter grows): requests
        // answered while the background check is connecting and between two of its checks
        for (let round = 0; round < 3; round++) {
          yield* allUnavailable(api, "ws_whatever", round)
          if (round === 2) break
          const checked = yield* readinessChecks(api)
          yield* Eventually.until(
            `readiness check ${checked + 1}`,
            Effect.map(readinessChecks(api), (checks) => checks > checked)
          )
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
