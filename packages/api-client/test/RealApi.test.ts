/**
 * The client against the real API (its entry point as a process, real PostgreSQL), saturated on purpose; every
 * request that reaches the server is counted by a recording proxy in front of it. The tests share one small
 * cluster (6 connections) and two API processes on it, one per `Retry-After` (issue #22: each test started its
 * own cluster and API); each test has its own workspace and its own proxy.
 */
import { assert, layer } from "@effect/vitest"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { Eventually } from "@resilience/test-db"
import { Context, Effect, Fiber, Layer, Option } from "effect"
import { FetchHttpClient } from "effect/http"
import { ApiClient } from "../src/index.ts"
import { adminToken, type Arrival, recordingProxy, startApi } from "./support.ts"

const client = (options: ApiClient.Options) => ApiClient.make(options).pipe(Effect.orDie)

/** The shared cluster, and the base URL of the API that answers 503s with `Retry-After: 0` and of the one with 1. */
class Servers extends Context.Service<Servers, {
  readonly cluster: Cluster.Cluster
  readonly apis: { readonly 0: string; readonly 1: string }
}>()("test/Servers") {
  static readonly layer = Layer.effect(
    Servers,
    Effect.gen(function*() {
      const cluster = yield* Cluster.start({ maxConnections: 6 })
      const [immediate, oneSecond] = yield* Effect.all([
        startApi({ url: cluster.url, retryAfterSeconds: 0, schema: "retry_after_0" }),
        startApi({ url: cluster.url, retryAfterSeconds: 1, schema: "retry_after_1" })
      ], { concurrency: 2 })
      return Servers.of({ cluster, apis: { 0: immediate, 1: oneSecond } })
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
}

/** The shared cluster, the API with `Retry-After: retryAfterSeconds` on it, and a recording proxy of this test's. */
const proxiedApi = (retryAfterSeconds: 0 | 1) =>
  Effect.gen(function*() {
    const { apis, cluster } = yield* Servers
    const proxy = yield* recordingProxy(apis[retryAfterSeconds])
    return { cluster, proxy }
  })

const to = (arrivals: ReadonlyArray<Arrival>, fragment: string) =>
  arrivals.filter((arrival) => arrival.path.includes(fragment))

/** The shared servers and the fetch HTTP client; the servers' start may take two minutes on a loaded machine. */
const shared = layer(Layer.merge(Servers.layer, FetchHttpClient.layer), {
  excludeTestServices: true,
  timeout: "120 seconds"
})

shared("the client against the real API", (it) => {
  it.effect(
    "typed errors: unauthorised, rejected (naming the field), none yet, conflict",
    () =>
      Effect.gen(function*() {
        const { apis } = yield* Servers
        const c = yield* client({ baseUrl: apis[0] })
        const { token } = yield* c.createWorkspace({ adminToken, name: "acme" })
        const conflict = yield* Effect.flip(c.createWorkspace({ adminToken, name: "acme" }))
        assert.deepInclude(conflict, { _tag: "ApiRejected", status: 409 })
        const forbidden = yield* Effect.flip(c.createWorkspace({ adminToken: "not-the-admin-token", name: "x" }))
        assert.deepInclude(forbidden, { _tag: "ApiUnauthorized", status: 403 })
        const invalid = yield* Effect.flip(
          c.appendMessages({ token, workspace: "acme", session: "no spaces", messages: [{ peer: "a", content: "x" }] })
        )
        assert.deepInclude(invalid, { _tag: "ApiRejected", status: 400 })
        assert.include(invalid.message, "session")
        assert.isTrue(Option.isNone(yield* c.representation({ token, workspace: "acme", peer: "nobody" })))
        const appended = yield* c.appendMessages({
          token,
          workspace: "acme",
          session: "s1",
          messages: [{ peer: "alice", content: "hello there" }]
        })
        assert.deepStrictEqual(appended, { stored: 1, enqueued: 1 })
      })
  )

  it.effect(
    "honours Retry-After: no retry reaches the server earlier; gives up after maxAttempts",
    () =>
      Effect.gen(function*() {
        const { cluster, proxy } = yield* proxiedApi(1)
        const c = yield* client({ baseUrl: proxy.url, maxAttempts: 3, baseDelay: "50 millis" })
        const { token } = yield* c.createWorkspace({ adminToken, name: "acme" })
        const saturation = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
        const error = yield* Effect.flip(c.queueStatus({ token, workspace: "acme" }))
        yield* Effect.orDie(saturation.release)
        assert.deepInclude(error, { _tag: "ApiUnavailable", attempts: 3, gaveUp: "AttemptsExhausted", status: 503 })
        const arrivals = to(proxy.arrivals, "/queue")
        assert.deepStrictEqual(arrivals.map((arrival) => arrival.status), [503, 503, 503])
        for (let i = 1; i < arrivals.length; i++) {
          const gap = arrivals[i]!.atMillis - arrivals[i - 1]!.atMillis
          assert.isAtLeast(gap, 1_000, `retry ${i} came ${gap.toFixed(0)} ms after the refusal`)
        }
      })
  )

  it.effect(
    "one write keeps its Idempotency-Key on every retry until accepted; the next write has another",
    () =>
      Effect.gen(function*() {
        const { cluster, proxy } = yield* proxiedApi(0)
        const c = yield* client({
          baseUrl: proxy.url,
          maxAttempts: 100,
          baseDelay: "20 millis",
          maxDelay: "100 millis",
          // the key is under test here, not the budget: retry as long as the saturation lasts
          budget: { maxTokens: 1_000_000, ratio: 1 }
        })
        const { token } = yield* c.createWorkspace({ adminToken, name: "keys" })
        const saturation = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
        const write = (content: string) =>
          c.appendMessages({ token, workspace: "keys", session: "s", messages: [{ peer: "alice", content }] })
        const first = yield* Effect.forkChild(write("during the outage"))
        yield* Eventually.until(
          () => `three attempts of the write (${to(proxy.arrivals, "/messages").length} so far)`,
          Effect.sync(() => to(proxy.arrivals, "/messages").length >= 3)
        )
        yield* Effect.orDie(saturation.release)
        assert.deepStrictEqual(yield* Fiber.join(first), { stored: 1, enqueued: 1 })
        yield* write("after the outage")
        const arrivals = to(proxy.arrivals, "/messages")
        const firstWrite = arrivals.slice(0, -1)
        assert.isAtLeast(firstWrite.length, 3)
        assert.deepStrictEqual(firstWrite.map((arrival) => arrival.status).slice(-1), [201])
        assert.isTrue(firstWrite.slice(0, -1).every((arrival) => arrival.status === 503))
        const keys = new Set(firstWrite.map((arrival) => arrival.idempotencyKey))
        assert.strictEqual(keys.size, 1, `one key for one write: ${[...keys].join(", ")}`)
        assert.isString(firstWrite[0]!.idempotencyKey)
        assert.notStrictEqual(arrivals.at(-1)!.idempotencyKey, firstWrite[0]!.idempotencyKey)
      })
  )

  it.effect(
    "the budget caps retries during a long outage, counted at the server; without it they multiply",
    () =>
      Effect.gen(function*() {
        const { cluster, proxy } = yield* proxiedApi(0)
        const setup = yield* client({ baseUrl: proxy.url })
        const { token } = yield* setup.createWorkspace({ adminToken, name: "budget" })
        const saturation = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
        // 40 requests (issue #22: was 100): the budget's cap (40 + 5 + 4 = 49) and the unbudgeted floor (160) stay
        // far apart
        const requests = 40
        const outage = (budget: ApiClient.Options["budget"]) =>
          Effect.gen(function*() {
            const c = yield* client({
              baseUrl: proxy.url,
              maxAttempts: 5,
              baseDelay: "1 millis",
              maxDelay: "5 millis",
              budget
            })
            const before = to(proxy.arrivals, "/queue").length
            const outcomes = yield* Effect.forEach(
              Array.from({ length: requests }),
              () => Effect.flip(c.queueStatus({ token, workspace: "budget" }))
            )
            const other = outcomes.filter((error) => error._tag !== "ApiUnavailable")
            assert.deepStrictEqual(other.map((error) => error.message), [], "every request refused while saturated")
            return to(proxy.arrivals, "/queue").length - before
          })
        const budgeted = yield* outage({ maxTokens: 5, ratio: 0.1 })
        const unbudgeted = yield* outage({ maxTokens: 1_000_000, ratio: 1 })
        yield* Effect.orDie(saturation.release)
        console.log(
          `${requests} requests during an outage reached the server ${budgeted} times with the default-style budget, ${unbudgeted} times without`
        )
        assert.isAtMost(budgeted, requests + 5 + 0.1 * requests)
        assert.isAtLeast(budgeted, requests)
        // without a budget nearly every request is sent maxAttempts (5) times (a reset connection may go unrecorded)
        assert.isAtLeast(unbudgeted, requests * 4)
      })
  )
})
