/**
 * The gate in front of real PostgreSQL, every connection attempt counted at a TCP proxy: a shed request makes
 * none, the half-open probe exactly one, a readiness flood one, and the limit falls while the server refuses
 * connections and climbs back after. The gate's clock is a `TestClock` (open windows end when the test says);
 * the database, its refusals and the proxy are real.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { CountingProxy } from "@resilience/test-db"
import { Context, type Duration, Effect, Exit, Layer, Random, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as Gate from "../src/Gate.ts"
import * as ReadinessProbe from "../src/ReadinessProbe.ts"
import * as Settings from "../src/Settings.ts"
import * as Shed from "../src/Shed.ts"

/** Holds every slot of the cluster (straight to it, not through the proxy, so the proxy counts only the gate's
 * attempts) until the scope closes; the release waits until the backends have exited. */
const saturate = (url: string) => Effect.orDie(TestClock.withLive(Saturation.hold(url)))

/**
 * The cluster of 8 connections that the tests share unless they need another size (issue #22: each test started
 * its own); each test still has its own proxy, session and gate. Started before the first test, stopped after the
 * last.
 */
const shared = { scope: Effect.runSync(Scope.make()), cluster: undefined as Cluster.Cluster | undefined }
const sharedConnections = 8
beforeAll(async () => {
  shared.cluster = await Effect.runPromise(
    Scope.provide(Cluster.start({ maxConnections: sharedConnections }), shared.scope)
  )
}, 120_000)
afterAll(() => Effect.runPromise(Scope.close(shared.scope, Exit.void)))

/** A cluster behind a counting proxy, a session through the proxy, and a gate with `options`. */
const setup = (
  options: Settings.Options,
  maxConnections = sharedConnections,
  pool: { readonly poolClass: "null" | "queue"; readonly poolSize: number; readonly connectTimeout: Duration.Input } = {
    poolClass: "null",
    poolSize: 1,
    connectTimeout: "2 seconds"
  }
) =>
  Effect.gen(function*() {
    const cluster = maxConnections === sharedConnections && shared.cluster !== undefined
      ? shared.cluster
      : yield* TestClock.withLive(Cluster.start({ maxConnections }))
    const proxy = yield* CountingProxy.start({ host: cluster.host, port: cluster.port })
    const context = yield* Layer.build(DbSession.layer({
      url: proxy.url(cluster.url),
      ...pool,
      driver: "pg",
      applicationName: "admission-test"
    }))
    const db = Context.get(context, DbSession)
    const gate = yield* Effect.flatMap(Effect.orDie(Settings.make(options)), Gate.make)
    const select = gate.run(db.query("SELECT 1 AS one"))
    return { cluster, proxy, db, gate, select }
  })

type Kind = "ok" | "unavailable" | Shed.Reason | "other"

const kindOf = (exit: Exit.Exit<unknown, unknown>): Kind => {
  if (Exit.isSuccess(exit)) return "ok"
  const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")?.error
  if (Shed.isShed(error)) return error.reason
  if ((error as { _tag?: string } | undefined)?._tag === "DatabaseUnavailable") return "unavailable"
  return "other"
}

/** Runs `n` copies of `effect` at once; counts the outcomes and the connection attempts they made. */
const flood = <A, E>(
  proxy: CountingProxy.CountingProxy,
  n: number,
  effect: Effect.Effect<A, E, Scope.Scope>
) =>
  Effect.gen(function*() {
    const before = yield* proxy.attempts
    const exits = yield* Effect.all(Array.from({ length: n }, () => Effect.exit(effect)), { concurrency: "unbounded" })
    const counts: Partial<Record<Kind, number>> = {}
    for (const exit of exits) counts[kindOf(exit)] = (counts[kindOf(exit)] ?? 0) + 1
    return { counts, attempts: (yield* proxy.attempts) - before }
  })

describe("Gate against real PostgreSQL (attempts counted at a proxy)", () => {
  it.effect(
    "saturated: after the trip, shed requests make zero attempts; the half-open probe makes exactly one; then it recovers",
    () =>
      Effect.gen(function*() {
        const { cluster, gate, proxy, select } = yield* setup({ tripFailures: 2, openMillis: 1000 })
        yield* Effect.scoped(Effect.gen(function*() {
          const { held } = yield* saturate(cluster.url)
          assert.isAbove(held, 0)

          const tripping = yield* flood(proxy, 1, select)
          assert.deepStrictEqual(tripping, { counts: { unavailable: 1 }, attempts: 1 })
          const second = yield* flood(proxy, 1, select)
          assert.deepStrictEqual(second, { counts: { unavailable: 1 }, attempts: 1 })
          assert.strictEqual((yield* gate.snapshot).circuit, "Open")

          const shed = yield* flood(proxy, 100, select)
          assert.deepStrictEqual(shed, { counts: { CircuitOpen: 100 }, attempts: 0 }, "shed: zero attempts")

          yield* TestClock.adjust(1_500)
          const halfOpen = yield* flood(proxy, 50, select)
          assert.strictEqual(halfOpen.attempts, 1, "the probe: exactly one attempt")
          assert.strictEqual(halfOpen.counts.unavailable, 1, JSON.stringify(halfOpen.counts))
          assert.strictEqual(
            (halfOpen.counts.ProbeInFlight ?? 0) + (halfOpen.counts.CircuitOpen ?? 0),
            49,
            JSON.stringify(halfOpen.counts)
          )
          assert.strictEqual((yield* gate.snapshot).circuit, "Open", "the failed probe reopened it")
          assert.deepStrictEqual(yield* flood(proxy, 20, select), { counts: { CircuitOpen: 20 }, attempts: 0 })
        }))

        // Released: the next window (twice the first after one failed probe: 2 s × [0.5, 1.5]) ends, and its probe
        // answers and closes the circuit; one attempt per admitted request.
        yield* TestClock.adjust(3_000)
        const probe = yield* flood(proxy, 20, select)
        assert.strictEqual(probe.attempts, 1, JSON.stringify(probe))
        assert.strictEqual(probe.counts.ok, 1)
        assert.strictEqual((yield* gate.snapshot).circuit, "Closed")
        const after = yield* flood(proxy, 5, select)
        assert.deepStrictEqual(after, { counts: { ok: 5 }, attempts: 5 })
      }).pipe(Effect.scoped, Random.withSeed("probe")),
    120_000
  )

  it.effect(
    "readiness: a flood of probes makes one attempt, saturated or healthy; the cache expires",
    () =>
      Effect.gen(function*() {
        const { cluster, db, gate, proxy } = yield* setup({ tripFailures: 3 })
        const ready = yield* ReadinessProbe.make(db.query("SELECT 1"), { cacheMillis: 1_000 }).pipe(
          Effect.provideService(Gate.Gate, gate)
        )
        yield* Effect.scoped(Effect.gen(function*() {
          yield* saturate(cluster.url)
          const saturated = yield* flood(proxy, 300, ready)
          assert.deepStrictEqual(saturated, { counts: { unavailable: 300 }, attempts: 1 })
          const cached = yield* flood(proxy, 300, ready)
          assert.deepStrictEqual(cached, { counts: { unavailable: 300 }, attempts: 0 }, "within the cache window")
        }))
        yield* TestClock.adjust(1_001)
        const healthy = yield* flood(proxy, 300, ready)
        assert.deepStrictEqual(healthy, { counts: { ok: 300 }, attempts: 1 })
        yield* TestClock.adjust(500)
        assert.deepStrictEqual(yield* flood(proxy, 300, ready), { counts: { ok: 300 }, attempts: 0 })
        yield* TestClock.adjust(501)
        assert.deepStrictEqual(yield* flood(proxy, 300, ready), { counts: { ok: 300 }, attempts: 1 })
      }).pipe(Effect.scoped),
    120_000
  )

  it.effect(
    "the limit falls while the server refuses connections and climbs back after; attempts = admitted requests",
    () =>
      Effect.gen(function*() {
        // No queueing and a circuit that does not open, to watch the limit alone.
        const { cluster, gate, proxy, select } = yield* setup({
          maxConcurrency: 16,
          queueTimeoutMillis: 0,
          tripFailures: 1_000
        }, 40) // room for the whole limit once released (with 8 slots the limit settles where the server refuses)
        assert.strictEqual((yield* gate.snapshot).limit, 16)
        yield* Effect.scoped(Effect.gen(function*() {
          yield* saturate(cluster.url)
          const first = yield* flood(proxy, 16, select)
          assert.deepStrictEqual(first, { counts: { unavailable: 16 }, attempts: 16 })
          const lowered = (yield* gate.snapshot).limit
          assert.isAtMost(lowered, 2, "16 unavailable outcomes cut 16 by 10 % each, down to the minimum")
          const bounded = yield* flood(proxy, 40, select)
          assert.strictEqual(bounded.counts.QueueTimeout! + bounded.counts.unavailable!, 40)
          assert.isAtMost(bounded.attempts, lowered)
          assert.strictEqual(bounded.attempts, bounded.counts.unavailable, "shed requests made no attempt")
        }))
        const limits: Array<number> = []
        for (let round = 0; round < 20 && (yield* gate.snapshot).limit < 16; round++) {
          const result = yield* flood(proxy, 24, select)
          // Backends of the released connections may still be exiting: an admitted request can still be refused.
          const admitted = (result.counts.ok ?? 0) + (result.counts.unavailable ?? 0)
          assert.strictEqual(result.attempts, admitted, "one attempt per admitted request, none when shed")
          assert.strictEqual(admitted + (result.counts.QueueTimeout ?? 0), 24, JSON.stringify(result.counts))
          limits.push((yield* gate.snapshot).limit)
        }
        assert.strictEqual(limits[limits.length - 1], 16, `limit after each round: ${limits.join(", ")}`)
      }).pipe(Effect.scoped),
    120_000
  )

  it.effect(
    "a full in-process pool (POOL_EXHAUSTED) is local overload: the limit comes down, the circuit stays closed",
    () =>
      Effect.gen(function*() {
        // DB_POOL_CLASS=queue with one connection and a 1 s wait: ten requests that each hold the connection
        // for 3 s make nine wait in vain for the pool. The database is healthy throughout.
        const { db, gate } = yield* setup({ tripFailures: 2, queueTimeoutMillis: 5_000 }, 8, {
          poolClass: "queue",
          poolSize: 1,
          connectTimeout: "1 second"
        })
        const slow = gate.run(db.query("SELECT pg_sleep(3)"))
        // The pool's wait is real time; its one connection is opened first (kept by the pool).
        const exits = yield* TestClock.withLive(Effect.gen(function*() {
          yield* db.query("SELECT 1")
          return yield* Effect.all(Array.from({ length: 10 }, () => Effect.exit(slow)), { concurrency: 10 })
        }))
        const kinds = exits.map(kindOf)
        const codes = exits.map((exit) =>
          Exit.isFailure(exit) ? String((exit.cause.reasons[0] as { error?: { code?: string } }).error?.code) : "ok"
        )
        assert.strictEqual(kinds.filter((kind) => kind === "ok").length, 1, codes.join(", "))
        assert.strictEqual(kinds.filter((kind) => kind === "unavailable").length, 9, kinds.join(", "))
        const exhausted = exits.flatMap((exit) =>
          Exit.isFailure(exit) ? exit.cause.reasons.filter((reason) => reason._tag === "Fail") : []
        ).map((reason) => (reason.error as { code?: string }).code)
        assert.deepStrictEqual(new Set(exhausted), new Set(["POOL_EXHAUSTED"]))
        const snapshot = yield* gate.snapshot
        assert.strictEqual(snapshot.circuit, "Closed", "nine POOL_EXHAUSTED did not open the circuit")
        assert.isBelow(snapshot.limit, Settings.defaults.maxConcurrency, "but they lowered the limit")
        assert.isTrue(Exit.isSuccess(yield* Effect.exit(gate.run(db.query("SELECT 1")))), "the next request runs")
      }).pipe(Effect.scoped),
    120_000
  )
})
