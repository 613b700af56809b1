/**
 * Retries, dead letters and items that run later, on real PostgreSQL with the deriver's clock under
 * `TestClock`: the claim's "due" is the deriver's `Clock`, so the test moves time and the database follows.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { RetryJitter } from "@resilience/jitter"
import { SchemaName } from "@resilience/schema"
import { Eventually } from "@resilience/test-db"
import { Clock, Effect, Exit, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as DeadLetters from "../src/DeadLetters.ts"
import * as Deriver from "../src/Deriver.ts"
import type * as DeriverConfig from "../src/DeriverConfig.ts"
import * as Handlers from "../src/Handlers.ts"
import * as Queue from "../src/Queue.ts"
import * as Retries from "../src/Retries.ts"
import { Database, freshSchema, testConfig } from "./support.ts"

/** The deriver's database calls in flight (through {@link counting}). */
const calls = { inFlight: 0 }

/** The session the deriver is given: the suite's own, counting the calls in flight. */
const counting = Effect.gen(function*() {
  const db = yield* DbSession
  const track = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(
      Effect.sync(() => calls.inFlight++),
      () => effect,
      () => Effect.sync(() => calls.inFlight--)
    )
  return DbSession.of({
    withConnection: (f) => track(db.withConnection(f)),
    transaction: (f) => track(db.transaction(f)),
    query: (sql, params) => track(db.query(sql, params)),
    oneCheckout: (effect) => track(db.oneCheckout(effect))
  })
})

/** Starts the deriver in `scope` on the counting session. */
const startIn = <R>(
  schema: SchemaName.SchemaName,
  handlers: Handlers.Handlers<R>,
  config: DeriverConfig.DeriverConfig,
  scope: Scope.Scope
) =>
  Effect.flatMap(
    counting,
    (db) => Scope.provide(Effect.provideService(Deriver.start({ schema, handlers, config }), DbSession, db), scope)
  )

/**
 * Real time for the database's work while the Effect clock stands still: returns once none of the deriver's
 * database calls is in flight, seen twice with the event loop turned in between (so an answer has been acted
 * on, up to the deriver's next sleep on the clock). An event, not a guess of how long the database takes: on a
 * loaded machine the test clock waits for the answers instead of moving past them.
 */
const answered = Effect.suspend(() => {
  let quietBefore = false
  return Eventually.until(
    () => `the deriver's database calls answered (${calls.inFlight} in flight)`,
    Effect.sync(() => {
      const quiet = calls.inFlight === 0
      const settled = quiet && quietBefore
      quietBefore = quiet
      return settled
    }),
    { every: "0 millis" }
  )
})

/**
 * Moves the test clock in 10 ms steps, each once the database has answered, until `done` holds; dies past `testMillis`
 * of test time (what a test asserts is due by then), or past 100 s of real time (below the tests' 120 s timeout).
 */
const advanceUntil = <E, R>(what: string, done: Effect.Effect<boolean, E, R>, testMillis: number) =>
  Eventually.advancing(what, done, {
    step: 10,
    settle: answered,
    every: "0 millis",
    testTime: testMillis,
    within: "100 seconds"
  })

/** Moves the test clock by `millis` in steps, the database answering in between. */
const advanceFor = (millis: number, stepMillis: number) =>
  Effect.gen(function*() {
    for (let moved = 0; moved < millis; moved += stepMillis) {
      yield* TestClock.adjust(stepMillis)
      yield* answered
    }
  })

const started = <R>(schema: SchemaName.SchemaName, handlers: Handlers.Handlers<R>, scope: Scope.Scope) =>
  Effect.gen(function*() {
    const config = yield* testConfig({ workers: 2 })
    return yield* startIn(schema, handlers, config, scope)
  })

/**
 * Starts the deriver on `schema` in a scope of its own (`config`, or the suite's with two workers), moves the test
 * clock until every item is processed (at most `maxMillis` of test time), and closes the scope.
 */
const processAll = <R>(
  schema: SchemaName.SchemaName,
  handlers: Handlers.Handlers<R>,
  options: { readonly config?: DeriverConfig.DeriverConfig; readonly maxMillis?: number } = {}
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    if (options.config === undefined) yield* started(schema, handlers, scope)
    else yield* startIn(schema, handlers, options.config, scope)
    yield* advanceUntil("every item processed", allProcessed(schema), options.maxMillis ?? 60_000)
    yield* Scope.close(scope, Exit.void)
  })

const rowsOf = (schema: SchemaName.SchemaName) =>
  DbSession.use((db) =>
    db.query<
      {
        id: string
        processed: boolean
        attempts: number
        last_error: string | null
        dead: boolean
        run_at: number | null
      }
    >(
      `SELECT id::text, processed, attempts, last_error, dead_at IS NOT NULL AS dead,
              (extract(epoch FROM run_at) * 1000)::float8 AS run_at
       FROM ${SchemaName.qualify(schema, "queue")} ORDER BY id`
    )
  )

/** The time an item's run was scheduled for (its `run_at`, epoch ms; null: never retried or delayed). */
const scheduledFor = (schema: SchemaName.SchemaName, id: string) =>
  DbSession.use((db) =>
    db.query<{ run_at: number | null }>(
      `SELECT (extract(epoch FROM run_at) * 1000)::float8 AS run_at FROM ${
        SchemaName.qualify(schema, "queue")
      } WHERE id = $1`,
      [id]
    )
  ).pipe(Effect.map((rows) => rows[0]?.run_at ?? null), Effect.orDie)

const allProcessed = (schema: SchemaName.SchemaName) =>
  Effect.map(rowsOf(schema), (rows) => rows.every((row) => row.processed))

const enqueue = (schema: SchemaName.SchemaName, items: ReadonlyArray<Queue.NewItem>) =>
  DbSession.use((db) => db.withConnection((c) => Queue.enqueue(c, schema, items)))

/**
 * How late a due item may start: the longest poll sleep of the test configuration (its 0.2 s cap, jittered by
 * ±0.5), plus 100 ms of test time for the claim's round trips (the clock moves 10 ms per few real ones).
 */
const lateBound = 200 * 1.5 + 100

layer(Database)("retries (PostgreSQL, TestClock)", (it) => {
  /** A test on a fresh schema, with two minutes for its real database work. */
  const onFreshSchema = <E>(name: string, body: (schema: SchemaName.SchemaName) => Effect.Effect<void, E, DbSession>) =>
    it.effect(name, () => Effect.flatMap(freshSchema, body), 120_000)

  onFreshSchema(
    "a retry runs at its time, not at the schedule's next poll: the deriver wakes itself when the retry is due (DueWake)",
    (schema) =>
      Effect.gen(function*() {
        const runs: Array<{ readonly at: number; readonly runAt: number | null }> = []
        const base = Handlers.make({
          work: (item) =>
            Effect.gen(function*() {
              const runAt = yield* scheduledFor(schema, item.id)
              runs.push({ at: yield* Clock.currentTimeMillis, runAt })
              if ((item.attempts ?? 0) === 0) return yield* new Handlers.Retry({ reason: "provider answered 503" })
            })
        })
        const handlers = yield* Handlers.withRetries(base, "work", { maxAttempts: 3, base: 200, cap: 200 })
        yield* enqueue(schema, [{ workUnitKey: "u", taskType: "work", payload: {} }])
        // The schedule alone would poll again 10 s after the claim (no jitter); the retry is due within 200 ms.
        const config = yield* testConfig({
          workers: 1,
          pollingSleepIntervalSeconds: 10,
          pollingSleepMaxIntervalSeconds: 30,
          pollingJitterRatio: 0
        })
        yield* processAll(schema, handlers, { config, maxMillis: 5_000 })
        assert.strictEqual(runs.length, 2)
        const retry = runs[1]!
        // no earlier than its time; after it, within the wake's floor and spread (50 + 50 ms) and a claim's round trip
        assert.isAtLeast(retry.at, retry.runAt!)
        assert.isAtMost(retry.at, retry.runAt! + 100 + 100, `ran ${retry.at - retry.runAt!} ms after its time`)
      })
  )

  onFreshSchema(
    "a transient failure three times, then success: processed once after three retries spaced by the backoff, its unit's later items after it",
    (schema) =>
      Effect.gen(function*() {
        const policy = { maxAttempts: 5, base: 1000, cap: 8000 }
        const runs: Array<{ readonly kind: string; readonly at: number; readonly runAt: number | null }> = []
        const base = Handlers.make({
          work: (item) =>
            Effect.gen(function*() {
              const kind = (item.payload as { kind: string }).kind
              const runAt = yield* scheduledFor(schema, item.id)
              runs.push({ kind, at: yield* Clock.currentTimeMillis, runAt })
              if (kind === "flaky" && (item.attempts ?? 0) < 3) {
                return yield* new Handlers.Retry({
                  reason: `provider answered 503 (attempt ${(item.attempts ?? 0) + 1})`
                })
              }
            })
        })
        const handlers = yield* Handlers.withRetries(base, "work", policy)
        yield* enqueue(
          schema,
          ["flaky", "after-1", "after-2"].map((kind) => ({ workUnitKey: "u", taskType: "work", payload: { kind } }))
        )
        yield* processAll(schema, handlers)

        assert.deepStrictEqual(runs.map((r) => r.kind), ["flaky", "flaky", "flaky", "flaky", "after-1", "after-2"])
        const settings = yield* Retries.settings(policy)
        for (let retry = 0; retry < 3; retry++) {
          const failedAt = runs[retry]!.at
          const next = runs[retry + 1]!
          // The time the failure set: within the retry's envelope after the failure (full jitter) …
          const delay = next.runAt! - failedAt
          assert.isAtLeast(delay, 0)
          assert.isBelow(delay, RetryJitter.envelope(retry, settings.backoff) + 50, `retry ${retry}: ${delay} ms`)
          // … and the run no earlier than that time, and within a poll interval after it.
          assert.isAtLeast(next.at, next.runAt!)
          assert.isAtMost(next.at, next.runAt! + lateBound)
        }
        const [flaky, ...rest] = yield* rowsOf(schema)
        assert.deepStrictEqual(
          { processed: flaky!.processed, attempts: flaky!.attempts, dead: flaky!.dead },
          { processed: true, attempts: 4, dead: false }
        )
        assert.include(flaky!.last_error!, "attempt 3")
        assert.deepStrictEqual(rest.map((r) => [r.processed, r.attempts]), [[true, 1], [true, 1]])
      })
  )

  onFreshSchema(
    "a poison item is a dead letter after its last attempt, its unit goes on; a replay by the command processes it once",
    (schema) =>
      Effect.gen(function*() {
        let fixed = false
        const runs: Array<string> = []
        const handlers = yield* Handlers.withRetries(
          Handlers.make({
            work: (item) =>
              Effect.gen(function*() {
                const kind = (item.payload as { kind: string }).kind
                runs.push(kind)
                // an error the handler did not state: the policy says such errors are transient
                if (kind === "poison" && !fixed) return yield* Effect.fail(new Error("downstream rejected it"))
              })
          }),
          "work",
          { maxAttempts: 3, base: 500, cap: 2000, unknownErrors: "retry" }
        )
        yield* enqueue(
          schema,
          ["poison", "next-1", "next-2"].map((kind) => ({ workUnitKey: "p", taskType: "work", payload: { kind } }))
        )
        const scope = yield* Scope.make()
        yield* started(schema, handlers, scope)
        const settled = Effect.map(
          rowsOf(schema),
          ([poison, ...rest]) => poison!.dead && rest.every((r) => r.processed)
        )
        yield* advanceUntil("the poison item a dead letter, the rest processed", settled, 60_000)
        assert.deepStrictEqual(runs, ["poison", "poison", "poison", "next-1", "next-2"])
        const [poison] = yield* rowsOf(schema)
        assert.deepStrictEqual({ processed: poison!.processed, attempts: poison!.attempts }, {
          processed: false,
          attempts: 3
        })
        assert.include(poison!.last_error!, "downstream rejected it")
        const listed = yield* DeadLetters.run(schema, yield* DeadLetters.parse(["list", "--unit", "p"]))
        assert.strictEqual(listed.length, 1)
        assert.strictEqual((JSON.parse(listed[0]!) as DeadLetters.DeadLetter).id, poison!.id)

        // Fixed downstream; the operator replays the unit's dead letters.
        fixed = true
        assert.deepStrictEqual(yield* DeadLetters.run(schema, yield* DeadLetters.parse(["replay", "--unit", "p"])), [
          "replayed 1 dead letter"
        ])
        yield* advanceUntil("every item processed after the replay", allProcessed(schema), 10_000)
        // more polls after it: nothing runs twice
        yield* advanceFor(1_000, 10)
        yield* Scope.close(scope, Exit.void)
        assert.deepStrictEqual(runs, ["poison", "poison", "poison", "next-1", "next-2", "poison"])
        const [replayed] = yield* rowsOf(schema)
        assert.deepStrictEqual(
          { processed: replayed!.processed, attempts: replayed!.attempts, dead: replayed!.dead },
          { processed: true, attempts: 1, dead: false }
        )
        assert.deepStrictEqual(yield* DeadLetters.list(schema, { _tag: "All" }, 10), [])
      })
  )

  onFreshSchema(
    "stated results: retry at a provider's time (no earlier, within one base after it), then done; failed for good",
    (schema) =>
      Effect.gen(function*() {
        const start = yield* Clock.currentTimeMillis
        const retryAfter = start + 2_000
        const runs: Array<{ readonly kind: string; readonly at: number }> = []
        const handlers = yield* Handlers.withRetries(
          Handlers.make({
            work: (item) =>
              Effect.map(Clock.currentTimeMillis, (at) => {
                const kind = (item.payload as { kind: string }).kind
                runs.push({ kind, at })
                if (kind === "bad") return Handlers.failed("bad input")
                return (item.attempts ?? 0) === 0 ? Handlers.retry("429 Too Many Requests", retryAfter) : Handlers.done
              })
          }),
          "work",
          { base: 500 }
        )
        yield* enqueue(schema, [
          { workUnitKey: "limited", taskType: "work", payload: { kind: "limited" } },
          { workUnitKey: "bad", taskType: "work", payload: { kind: "bad" } }
        ])
        yield* processAll(schema, handlers)
        const limited = runs.filter((r) => r.kind === "limited")
        assert.strictEqual(limited.length, 2)
        assert.isAtLeast(limited[1]!.at, retryAfter)
        assert.isAtMost(limited[1]!.at, retryAfter + 500 + lateBound)
        assert.strictEqual(runs.filter((r) => r.kind === "bad").length, 1)
        const rows = yield* DbSession.use((db) =>
          db.query<{ kind: string; attempts: number; error: string | null; last_error: string | null }>(
            `SELECT payload ->> 'kind' AS kind, attempts, error, last_error FROM ${SchemaName.qualify(schema, "queue")}
           ORDER BY id`
          )
        )
        assert.deepStrictEqual(rows, [
          { kind: "limited", attempts: 2, error: null, last_error: "429 Too Many Requests" },
          { kind: "bad", attempts: 1, error: "bad input", last_error: "bad input" }
        ])
      })
  )

  onFreshSchema(
    "an item enqueued to run later runs no earlier than its time and within a poll interval after it, its unit's later items after it",
    (schema) =>
      Effect.gen(function*() {
        const runs: Array<{ readonly kind: string; readonly at: number }> = []
        const handlers = Handlers.make({
          work: (item) =>
            Effect.map(Clock.currentTimeMillis, (at) => {
              runs.push({ kind: (item.payload as { kind: string }).kind, at })
            })
        })
        const now = yield* Clock.currentTimeMillis
        const runAt = now + 5_000
        yield* enqueue(schema, [
          { workUnitKey: "later", taskType: "work", payload: { kind: "reminder" }, runAt },
          { workUnitKey: "later", taskType: "work", payload: { kind: "after" } },
          { workUnitKey: "other", taskType: "work", payload: { kind: "now" } }
        ])
        yield* processAll(schema, handlers)
        assert.deepStrictEqual(runs.map((r) => r.kind), ["now", "reminder", "after"])
        assert.isBelow(runs[0]!.at, runAt)
        assert.isAtLeast(runs[1]!.at, runAt)
        assert.isAtMost(runs[1]!.at, runAt + lateBound)
      })
  )

  onFreshSchema(
    "an idle deriver on a 30 s schedule wakes for an item enqueued to run later: at its time, not at the next poll",
    (schema) =>
      Effect.gen(function*() {
        const runs: Array<number> = []
        const handlers = Handlers.make({ work: () => Effect.map(Clock.currentTimeMillis, (at) => void runs.push(at)) })
        // the schedule of an idle deriver at its cap: polls 15–45 s apart (30 s, jitter 0.5)
        const config = yield* testConfig({
          workers: 2,
          pollingSleepIntervalSeconds: 30,
          pollingSleepMaxIntervalSeconds: 30
        })
        const scope = yield* Scope.make()
        const polls: Array<number> = []
        const deriver = yield* Effect.flatMap(counting, (db) =>
          Scope.provide(
            Effect.provideService(
              Deriver.start({
                schema,
                handlers,
                config,
                observer: (event) =>
                  event._tag === "Polled"
                    ? Effect.map(Clock.currentTimeMillis, (at) => void polls.push(at))
                    : Effect.void
              }),
              DbSession,
              db
            ),
            scope
          ))
        // the first poll (empty queue) has run; the next is 15–45 s away
        yield* advanceUntil("the first poll", Effect.sync(() => polls.length >= 1), 1_000)
        const runAt = (yield* Clock.currentTimeMillis) + 5_000
        yield* enqueue(schema, [{ workUnitKey: "later", taskType: "work", payload: {}, runAt }])
        // the writer's wake (the API sends one after every committed enqueue): the woken poll claims nothing, the item
        // not due yet, and learns its time; without that the schedule's next poll (15–45 s after the first) takes it
        yield* deriver.wake
        yield* advanceUntil("the item run at its time", allProcessed(schema), 60_000)
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual(runs.length, 1)
        assert.isAtLeast(runs[0]!, runAt)
        assert.isAtMost(runs[0]!, runAt + lateBound, `ran ${runs[0]! - runAt} ms after its time`)
      })
  )

  onFreshSchema(
    "a due retry takes the next free handler slot, ahead of the units claimed beyond the workers that have not started",
    (schema) =>
      Effect.gen(function*() {
        // one worker, eight units claimed ahead: r fails first, and its retry (due 10 ms later) is claimed along
        // while up to eight units wait for the one slot, 100 ms each
        const runs: Array<string> = []
        const base = Handlers.make({
          work: (item) =>
            Effect.gen(function*() {
              runs.push(`${item.workUnitKey}#${item.attempts ?? 0}`)
              if (item.workUnitKey === "r" && (item.attempts ?? 0) === 0) {
                return yield* new Handlers.Retry({ reason: "provider answered 503" })
              }
              yield* Effect.sleep(100)
            })
        })
        const handlers = yield* Handlers.withRetries(base, "work", { maxAttempts: 3, base: 10, cap: 10 })
        yield* enqueue(schema, [
          { workUnitKey: "r", taskType: "work", payload: {} },
          ...Array.from({ length: 12 }, (_, i) => ({ workUnitKey: `u${i}`, taskType: "work", payload: {} }))
        ])
        const config = yield* testConfig({ workers: 1, prefetch: 8 })
        yield* processAll(schema, handlers, { config, maxMillis: 10_000 })
        assert.strictEqual(runs.length, 14, runs.join(" "))
        assert.strictEqual(runs[0], "r#0")
        // the retry runs as soon as the slot is free after it was claimed: behind at most the unit running then
        // and one more that got the slot first, not behind the eight waiting (index 9 or later)
        const retry = runs.indexOf("r#1")
        assert.isAtLeast(retry, 2, runs.join(" "))
        assert.isAtMost(retry, 3, `the retry ran ${retry}th: ${runs.join(" ")}`)
      })
  )
})

describe("Retries.decide", () => {
  const settings = { maxAttempts: 4, backoff: { baseMillis: 1000, capMillis: 5000 }, unknownErrors: "fail" as const }
  it("full jitter under the capped envelope, a dead letter after the last attempt", () => {
    assert.deepStrictEqual(Retries.decide(settings, 0, 10_000, undefined, 0.5), { _tag: "Retry", atMillis: 10_500 })
    assert.deepStrictEqual(Retries.decide(settings, 2, 10_000, undefined, 0.99), { _tag: "Retry", atMillis: 13_960 })
    assert.deepStrictEqual(Retries.decide(settings, 3, 10_000, undefined, 0.5), { _tag: "Dead" })
  })
  it("an earliest time: no earlier than it, spread under one base", () => {
    assert.deepStrictEqual(Retries.decide(settings, 0, 10_000, 40_000, 0.25), { _tag: "Retry", atMillis: 40_250 })
    assert.deepStrictEqual(Retries.decide(settings, 0, 10_000, 1_000, 0), { _tag: "Retry", atMillis: 10_000 })
  })
  it("no herd at the defaults: 10,000 items failing at the same instant come back spread over 5 s, then 10 s", () => {
    // a seeded generator (mulberry32), so the draws are the same on every run
    let seed = 38
    const next = () => {
      seed = (seed + 0x6D2B79F5) | 0
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296
    }
    const perSecond = (attempts: number) => {
      const seconds = new Map<number, number>()
      for (let i = 0; i < 10_000; i++) {
        const decision = Retries.decide(Retries.defaults, attempts, 0, undefined, next())
        assert.strictEqual(decision._tag, "Retry")
        const second = Math.floor((decision as { atMillis: number }).atMillis / 1000)
        seconds.set(second, (seconds.get(second) ?? 0) + 1)
      }
      return seconds
    }
    const first = perSecond(0)
    assert.deepStrictEqual([...first.keys()].sort((a, b) => a - b), [0, 1, 2, 3, 4])
    assert.isAtMost(Math.max(...first.values()), 2_200)
    const second = perSecond(1)
    assert.strictEqual(second.size, 10)
    assert.isAtMost(Math.max(...second.values()), 1_150)
  })
  it.effect("invalid policies name their field", () =>
    Effect.gen(function*() {
      const attempts = yield* Effect.flip(Retries.settings({ maxAttempts: 0 }))
      assert.strictEqual(attempts.parameter, "maxAttempts")
      const cap = yield* Effect.flip(Retries.settings({ base: 2000, cap: 1000 }))
      assert.strictEqual(cap.parameter, "cap")
    }))
})
