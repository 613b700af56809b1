/**
 * Benchmark (not a test): how fast the API answers when its database cannot serve, in the scenarios of
 * test/Unavailable.test.ts, which asserts what it answers and the connection attempts, not the time (issue #22:
 * speed targets live in benchmarks that print figures). Each figure is printed beside its target:
 *
 *  1. Saturated (6 slots, all held; circuit: trip after 3, a 3 s window ± 50 %): three rounds of every database
 *     endpoint at once; the slowest 503 of each round (target < 1 s). Then the release: time until `/readyz`
 *     answers 200 (target < the longest window 4.5 s + the readiness cache 1 s + 1 s).
 *  2. 300 concurrent readiness probes on a saturated server: the slowest 503 (target < 5 s).
 *  3. Started with nothing listening (connect timeout 2 s): the slowest 503 (target < 2 s).
 *  4. Started against a listener that never answers (connect timeout 0.5 s): the slowest 503 of three rounds
 *     (target < 1 s).
 *
 *   npm run bench:unavailable -w @resilience/api-app
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { ClosedPort, SilentListener } from "@resilience/test-db"
import { Effect, Logger, References } from "effect"
import { adminToken, createWorkspace, type Reply, request, start, type TestServer } from "../test/TestServer.ts"

/** One request to every endpoint that needs the database (as the test's `databaseCalls`). */
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

const rows: Array<{ readonly figure: string; readonly millis: number; readonly target: number }> = []

/** Records the slowest reply of `replies` (all must be 503s) against `target`. */
const slowest = (figure: string, replies: ReadonlyArray<Reply>, target: number) =>
  Effect.sync(() => {
    const statuses = [...new Set(replies.map((reply) => reply.status))]
    if (statuses.length !== 1 || statuses[0] !== 503) console.log(`  ${figure}: statuses ${statuses.join(", ")}`)
    rows.push({ figure, millis: Math.max(...replies.map((reply) => reply.millis)), target })
  })

const allAtOnce = (api: TestServer, token: string, round: number) =>
  Effect.all(databaseCalls(api, token, round), { concurrency: "unbounded" })

const saturated = Effect.scoped(Effect.gen(function*() {
  const cluster = yield* Cluster.start({ maxConnections: 6 })
  const api = yield* start({
    url: cluster.url,
    schema: "saturation",
    admission: { tripFailures: 3, openMillis: 3_000 }
  })
  const token = yield* createWorkspace(api, "acme")
  yield* Effect.scoped(Effect.gen(function*() {
    yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
    for (let round = 0; round < 3; round++) {
      yield* slowest(`saturated, round ${round + 1}: slowest 503`, yield* allAtOnce(api, token, round), 1_000)
    }
  }))
  const startedAt = performance.now()
  while ((yield* request(api, "GET", "/readyz")).status !== 200) {
    if (performance.now() - startedAt > 30_000) return yield* Effect.die(new Error("not ready within 30 s"))
    yield* Effect.sleep("100 millis")
  }
  rows.push({ figure: "released: until /readyz 200", millis: performance.now() - startedAt, target: 6_500 })
}))

const probes = Effect.scoped(Effect.gen(function*() {
  const cluster = yield* Cluster.start({ maxConnections: 6 })
  const api = yield* start({ url: cluster.url, schema: "readiness", readinessCacheMillis: 1_000 })
  yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
  const replies = yield* Effect.all(
    Array.from({ length: 300 }, () => request(api, "GET", "/readyz")),
    { concurrency: "unbounded" }
  )
  yield* slowest("300 readiness probes, saturated: slowest 503", replies, 5_000)
}))

const nothingListening = Effect.scoped(Effect.gen(function*() {
  const closed = yield* ClosedPort.find
  const api = yield* start({ url: closed.url, migrate: true, awaitReady: false, connectTimeout: "2 seconds" })
  yield* slowest("nothing listening: slowest 503", yield* allAtOnce(api, "ws_whatever", 0), 2_000)
}))

const silentListener = Effect.scoped(Effect.gen(function*() {
  const silent = yield* SilentListener.start
  const api = yield* start({ url: silent.url, migrate: false, connectTimeout: "500 millis" })
  for (let round = 0; round < 3; round++) {
    yield* slowest(
      `silent listener, round ${round + 1}: slowest 503`,
      yield* allAtOnce(api, "ws_whatever", round),
      1_000
    )
    yield* Effect.sleep("300 millis")
  }
}))

Effect.gen(function*() {
  yield* saturated
  yield* probes
  yield* nothingListening
  yield* silentListener
  const width = Math.max(...rows.map((row) => row.figure.length))
  console.log(`${"figure".padEnd(width)}  ${"ms".padStart(7)}  ${"target".padStart(7)}`)
  for (const row of rows) {
    const verdict = row.millis < row.target ? "ok" : "OVER"
    console.log(
      `${row.figure.padEnd(width)}  ${row.millis.toFixed(0).padStart(7)}  ${`< ${row.target}`.padStart(7)}  ${verdict}`
    )
  }
}).pipe(
  Effect.provideService(References.MinimumLogLevel, "Error"),
  Effect.provide(Logger.layer([Logger.consoleJson])),
  NodeRuntime.runMain
)
