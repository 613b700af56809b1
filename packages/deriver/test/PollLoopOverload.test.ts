/**
 * Overload-aware polling in the loop, under `TestClock` and a seeded `Random`: polls that take longer than the
 * slow-poll threshold (on the test clock) raise the interval past the idle cap, up to the overload cap; once
 * polls are fast the floor is gone within the recovery time (wall clock, not a count of polls); an outage
 * (unavailable polls) keeps the spec's schedule; under the floor, found work drains at once; without overload
 * signals the loop sleeps exactly as without the settings.
 */
import { assert, describe, it } from "@effect/vitest"
import type { PollBackoff } from "@resilience/jitter"
import { Eventually } from "@resilience/test-db"
import { Clock, Effect, Random, Ref } from "effect"
import type * as Overload from "../src/Overload.ts"
import * as PollLoop from "../src/PollLoop.ts"

/** A decision, when it was made (test clock), and how many times the loop had read the lag by then. */
type Polled = Extract<PollLoop.Event, { _tag: "Polled" }> & { readonly at: number; readonly lagReads: number }

const backoff: PollBackoff.Settings = { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0.5 }
const overload: Overload.Settings = {
  slowPollMillis: 2000,
  maxMillis: 300_000,
  multiplier: 2,
  recoveryMillis: 30_000
}

/** What poll number i does: how long it takes on the test clock, and what it returns. */
interface Step {
  readonly millis: number
  readonly result: "empty" | "unavailable" | ReadonlyArray<string>
  /** How much of `millis` the process itself was stalled (what the loop's lag reader adds up; default 0). */
  readonly lagMillis?: number
}

/** A loop over a scripted source whose poll number i does `step(i)`. */
const scriptedSource = Effect.fnUntraced(function*(
  step: (index: number) => Step,
  settings: Overload.Settings | undefined,
  options: { readonly workers?: number; readonly backoff?: PollBackoff.Settings; readonly unitMillis?: number } = {}
) {
  const events = yield* Ref.make<ReadonlyArray<Polled>>([])
  const polls = yield* Ref.make(0)
  const stalled = yield* Ref.make(0)
  const lagReads = yield* Ref.make(0)
  yield* PollLoop.start({
    key: (unit: string) => unit,
    poll: () =>
      Effect.gen(function*() {
        const index = yield* Ref.getAndUpdate(polls, (n) => n + 1)
        const { lagMillis, millis, result } = step(index)
        if (millis > 0) yield* Effect.sleep(millis)
        yield* Ref.update(stalled, (n) => n + (lagMillis ?? 0))
        if (result === "unavailable") return yield* Effect.fail("unavailable")
        return result === "empty" ? [] : result
      }),
    process: () => Effect.sleep(options.unitMillis ?? 0),
    releaseAll: Effect.void,
    classify: () => "unavailable"
  }, {
    workers: options.workers ?? 1,
    backoff: options.backoff ?? backoff,
    startupJitterMillis: 0,
    cleanupIntervalMillis: 60_000,
    shutdownGraceMillis: 1000,
    overload: settings,
    lag: Effect.andThen(Ref.update(lagReads, (n) => n + 1), Ref.get(stalled)),
    observer: (event) =>
      event._tag === "Polled"
        ? Effect.flatMap(
          Effect.all([Clock.currentTimeMillis, Ref.get(lagReads)]),
          ([at, reads]) => Ref.update(events, (all) => [...all, { ...event, at, lagReads: reads }])
        )
        : Effect.void
  })
  return Ref.get(events)
})

/** A loop over an always-empty source whose poll number i takes `pollMillis(i)` on the test clock. */
const slowSource = (pollMillis: (index: number) => number, settings: Overload.Settings | undefined) =>
  scriptedSource((index) => ({ millis: pollMillis(index), result: "empty" }), settings)

/**
 * Moves the test clock in 500 ms steps until `n` polls have been decided (`Eventually.advancing`, no real pause: the
 * scripted source does no I/O), at most 100,000 s of test time; the first `n`.
 */
const advanceUntil = (events: Effect.Effect<ReadonlyArray<Polled>>, n: number) =>
  Effect.andThen(
    Eventually.advancing(`${n} polls decided`, Effect.map(events, (all) => all.length >= n), {
      step: "500 millis",
      every: 0,
      testTime: "100000 seconds"
    }),
    Effect.map(events, (all) => all.slice(0, n))
  )

describe("PollLoop overload (TestClock, seeded Random)", () => {
  it.effect("slow polls raise the interval past the idle cap and no further than the overload cap", () =>
    Effect.gen(function*() {
      const events = yield* slowSource(() => 3000, overload)
      const polled = yield* advanceUntil(events, 14)
      assert.isTrue(polled.every((e) => e.signal === "slow"))
      assert.isTrue(polled.some((e) => e.floorMillis > 30_000), "the floor passes the idle cap")
      assert.isTrue(polled.every((e) => e.floorMillis <= 300_000), "and stays under the overload cap")
      assert.strictEqual(polled.at(-1)!.floorMillis, 300_000)
      assert.isTrue(polled.some((e) => e.sleepMillis > 1.5 * 30_000), "sleeps longer than any idle sleep")
      assert.isTrue(polled.every((e) => e.sleepMillis <= 1.5 * 300_000))
      // The schedule underneath is the spec's (its cap is still 30 s): only the floor goes past it.
      assert.isTrue(polled.every((e) => e.intervalMillis <= 30_000))
    }).pipe(Random.withSeed("slow")))

  it.effect("once polls are fast, the floor is gone within the recovery time, then the idle schedule is the spec's", () =>
    Effect.gen(function*() {
      const start = yield* Clock.currentTimeMillis
      const events = yield* slowSource((i) => (i < 12 ? 3000 : 5), overload)
      const polled = yield* advanceUntil(events, 30)
      const recovering = polled.slice(12)
      assert.strictEqual(polled[11]!.floorMillis, 300_000)
      assert.isTrue(recovering.every((e) => e.signal === "fast"))
      // The first fast poll's sleep is at most the recovery time (30 s), not the 300 s floor.
      assert.isAtMost(recovering[0]!.sleepMillis, 30_000)
      // The floor falls with time (never rises) and is gone within 30 s of the first fast poll.
      let previous = polled[11]!.floorMillis
      for (const event of recovering) {
        assert.isTrue(event.floorMillis <= previous, "never rises on a fast poll")
        previous = event.floorMillis
      }
      const firstHealthyAt = recovering[0]!.at - start
      const gone = recovering.find((e) => e.floorMillis === 0)!
      assert.isAtMost(gone.at - start - firstHealthyAt, 30_000 + 5, "gone within the recovery time")
      const settled = recovering.filter((e) => e.floorMillis === 0)
      assert.isAbove(settled.length, 0, "the floor is gone in the end")
      for (const event of settled.slice(1)) {
        assert.isTrue(event.sleepMillis >= 15_000 && event.sleepMillis <= 45_000, `idle sleep ${event.sleepMillis}`)
      }
    }).pipe(Random.withSeed("recover")))

  it.effect("an outage (unavailable polls) keeps the spec's schedule: no floor, sleeps within the jittered cap", () =>
    Effect.gen(function*() {
      const events = yield* scriptedSource(() => ({ millis: 3, result: "unavailable" }), overload)
      const polled = yield* advanceUntil(events, 30)
      assert.isTrue(polled.every((e) => e.signal === "unavailable"))
      assert.isTrue(polled.every((e) => e.floorMillis === 0), "an outage is not an overload signal")
      assert.deepStrictEqual(
        polled.slice(0, 8).map((e) => e.intervalMillis),
        Array.from({ length: 8 }, (_, i) => Math.min(2000 * 2 ** i, 30_000))
      )
      assert.isTrue(polled.every((e) => e.sleepMillis <= 1.5 * 30_000), "never past the jittered idle cap")
    }).pipe(Random.withSeed("outage")))

  it.effect("DERIVER_POLLING_BACKOFF_ENABLED=false: an outage polls at the jittered base interval", () =>
    Effect.gen(function*() {
      const events = yield* scriptedSource(() => ({ millis: 3, result: "unavailable" }), overload, {
        backoff: { ...backoff, enabled: false }
      })
      const polled = yield* advanceUntil(events, 30)
      assert.isTrue(polled.every((e) => e.intervalMillis === 1000 && e.floorMillis === 0))
      assert.isTrue(polled.every((e) => e.sleepMillis >= 500 && e.sleepMillis <= 1500), "the jittered base")
    }).pipe(Random.withSeed("disabled")))

  it.effect("under the floor, found work drains at once; only a slow claim waits the floor out", () =>
    Effect.gen(function*() {
      // 10 slow empty polls raise the floor; then fast claims of one unit each (work found), then a slow claim.
      const events = yield* scriptedSource(
        (i) =>
          i < 10
            ? { millis: 3000, result: "empty" }
            : i < 20
            ? { millis: 5, result: [`unit-${i}`] }
            : i === 20
            ? { millis: 3000, result: [`unit-${i}`] }
            : { millis: 5, result: "empty" },
        overload,
        { workers: 2, unitMillis: 10 }
      )
      const polled = yield* advanceUntil(events, 40)
      assert.isAbove(polled[9]!.floorMillis, 30_000, "the floor is past the idle cap")
      const claims = polled.filter((e) => e.outcome === "claimed")
      const fastClaims = claims.filter((e) => e.signal === "fast")
      assert.strictEqual(fastClaims.length, 10)
      assert.isTrue(fastClaims.every((e) => e.sleepMillis === 0), "a fast claim is followed by the next poll at once")
      const slowClaim = claims.find((e) => e.signal === "slow")!
      assert.isAtLeast(slowClaim.sleepMillis, 0.5 * slowClaim.floorMillis, "a slow claim waits the floor out")
      assert.isAbove(slowClaim.sleepMillis, 30_000)
      // Busy loops under the floor wake on a free worker after a jittered base at most, never the floor.
      assert.isTrue(polled.filter((e) => e.outcome === "busy").every((e) => e.sleepMillis <= 1500))
    }).pipe(Random.withSeed("drain")))

  it.effect("without overload signals the loop sleeps exactly as a loop without overload settings", () =>
    Effect.gen(function*() {
      const run = (settings: Overload.Settings | undefined) =>
        Effect.scoped(Effect.gen(function*() {
          const events = yield* slowSource(() => 1500, settings)
          return (yield* advanceUntil(events, 12)).map((e) => e.sleepMillis)
        })).pipe(Random.withSeed("same"))
      const withSettings = yield* run(overload)
      const without = yield* run(undefined)
      assert.deepStrictEqual(withSettings, without)
      assert.strictEqual(Math.max(...withSettings) <= 45_000, true)
    }))
})

describe("PollLoop overload: the process's own delay (TestClock, seeded Random)", () => {
  /** Every poll takes 3 s on the clock, `lagMillis` of it the process's own stall. */
  const starved = (lagMillis: number, settings: Overload.Settings) =>
    scriptedSource(() => ({ millis: 3000, result: "empty", lagMillis }), settings)

  it.effect("a poll slow only by the process's lag is fast: no floor, the spec's schedule up to its cap", () =>
    Effect.gen(function*() {
      const polled = yield* advanceUntil(yield* starved(2500, overload), 12)
      assert.isTrue(polled.every((e) => e.signal === "fast"))
      assert.isTrue(polled.every((e) => e.floorMillis === 0))
      assert.deepStrictEqual(
        polled.map((e) => e.intervalMillis),
        Array.from({ length: 12 }, (_, i) => Math.min(2000 * 2 ** i, 30_000))
      )
    }).pipe(Random.withSeed("starved")))

  it.effect("the database's share past the threshold is still a signal: the floor rises past the idle cap", () =>
    Effect.gen(function*() {
      // 3 s elapsed, 0.5 s of it the process's: 2.5 s is the database's, over the 2 s threshold
      const polled = yield* advanceUntil(yield* starved(500, overload), 14)
      assert.isTrue(polled.every((e) => e.signal === "slow"))
      assert.strictEqual(polled.at(-1)!.floorMillis, 300_000)
    }).pipe(Random.withSeed("thrash")))

  it.effect("the lag is read once around a fast poll, twice around one slow by its elapsed time alone", () =>
    Effect.gen(function*() {
      // fast (5 ms), then slow by its elapsed time (3 s, 2.5 s of it the process's own), twice
      const events = yield* scriptedSource(
        (i) => i % 2 === 0 ? { millis: 5, result: "empty" } : { millis: 3000, result: "empty", lagMillis: 2500 },
        overload
      )
      const polled = yield* advanceUntil(events, 4)
      assert.deepStrictEqual(polled.map((e) => e.lagReads), [1, 3, 4, 6])
      // the second read counts: 0.5 s of the slow polls' 3 s is the database's, under the 2 s threshold
      assert.deepStrictEqual(polled.map((e) => e.signal), ["fast", "fast", "fast", "fast"])
    }).pipe(Random.withSeed("reads")))

  it.effect("subtractLag false: the elapsed time as it is (the behaviour before 0.3.0), the floor rises", () =>
    Effect.gen(function*() {
      const polled = yield* advanceUntil(yield* starved(2500, { ...overload, subtractLag: false }), 14)
      assert.isTrue(polled.every((e) => e.signal === "slow"))
      assert.strictEqual(polled.at(-1)!.floorMillis, 300_000)
    }).pipe(Random.withSeed("unaware")))
})
