/**
 * Wakes under `TestClock` and a seeded `Random`, against an in-memory claim source: a wake ends the sleep at
 * once and resets the schedule to its base; wakes during a poll coalesce into one more poll; a flood makes at
 * most one poll per minimum interval; a woken poll that fails restores the outage schedule and disarms wakes;
 * the overload floor and a blocked checkout gate hold a wake back; a poll refused before the database (the process's
 * own checkouts hold every permit) is busy, and a woken one keeps its wake.
 */
import { assert, describe, it } from "@effect/vitest"
import type { PollBackoff } from "@resilience/jitter"
import type { Coalesce } from "@resilience/wake"
import { Clock, Deferred, Effect, Metric, Random, Ref } from "effect"
import { TestClock } from "effect/testing"
import * as DeriverMetrics from "../src/DeriverMetrics.ts"
import type * as Overload from "../src/Overload.ts"
import * as PollLoop from "../src/PollLoop.ts"

type Polled = Extract<PollLoop.Event, { _tag: "Polled" }>

const backoff: PollBackoff.Settings = { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0 }

/** A loop at its cap (ratio 0) over a source whose polls `poll` decides; records each poll's start time. */
const harness = Effect.fnUntraced(function*(options: {
  readonly poll?: (index: number) => Effect.Effect<ReadonlyArray<string>, string>
  readonly capacity?: () => Effect.Effect<number | "blocked">
  readonly refused?: (error: unknown) => boolean
  readonly wakeMinIntervalMillis?: number
  readonly overload?: Overload.Settings
}) {
  const events = yield* Ref.make<ReadonlyArray<Polled>>([])
  const starts = yield* Ref.make<ReadonlyArray<number>>([])
  const loop = yield* PollLoop.start({
    key: (unit: string) => unit,
    poll: () =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        const index = (yield* Ref.getAndUpdate(starts, (all) => [...all, at])).length
        return yield* (options.poll?.(index) ?? Effect.succeed([]))
      }),
    process: () => Effect.void,
    releaseAll: Effect.void,
    capacity: options.capacity,
    refused: options.refused
  }, {
    workers: 1,
    backoff,
    initialInterval: "max",
    startupJitterMillis: 0,
    cleanupIntervalMillis: 3_600_000,
    shutdownGraceMillis: 1000,
    overload: options.overload,
    wakeMinIntervalMillis: options.wakeMinIntervalMillis,
    observer: (event) => event._tag === "Polled" ? Ref.update(events, (all) => [...all, event]) : Effect.void
  })
  // let the first poll run and its sleep begin
  yield* TestClock.adjust(0)
  return { loop, events: Ref.get(events), starts: Ref.get(starts) }
})

describe("PollLoop wakes (TestClock, seeded Random)", () => {
  it.effect("an idle loop at its cap polls at once on a wake, and its schedule starts again from the base", () =>
    Effect.gen(function*() {
      const { events, loop, starts } = yield* harness({})
      assert.deepStrictEqual((yield* events).map((e) => e.sleepMillis), [30_000])
      yield* TestClock.adjust(5000)
      assert.strictEqual(yield* loop.wake, "pollNow")
      yield* TestClock.adjust(0)
      // the woken poll at 5 s, then the schedule from its base: 1 s, 2 s later
      yield* TestClock.adjust(3000)
      assert.deepStrictEqual(yield* starts, [0, 5000, 6000, 8000])
      const polled = yield* events
      assert.deepStrictEqual(polled.map((e) => e.woken), [false, true, false, false])
      assert.deepStrictEqual(polled.map((e) => e.sleepMillis), [30_000, 1000, 2000, 4000])
    }).pipe(Random.withSeed("wake-idle")))

  it.effect("wakes during a poll coalesce into exactly one more poll, made at once after it", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      const { events, loop, starts } = yield* harness({
        poll: (index) => index === 1 ? Effect.as(Deferred.await(release), []) : Effect.succeed([])
      })
      yield* TestClock.adjust(1000)
      assert.strictEqual(yield* loop.wake, "pollNow")
      yield* TestClock.adjust(0)
      // the woken poll (index 1) is in flight now: a thousand wakes ask for one more, and only one
      const decisions: Array<Coalesce.Decision> = []
      for (let i = 0; i < 1000; i++) decisions.push(yield* loop.wake)
      assert.strictEqual(decisions.filter((d) => d === "oneMoreAfter").length, 1)
      assert.strictEqual(decisions.filter((d) => d === "coalesced").length, 999)
      yield* TestClock.adjust(100)
      yield* Deferred.succeed(release, undefined)
      yield* TestClock.adjust(0)
      yield* TestClock.adjust(500)
      assert.deepStrictEqual(yield* starts, [0, 1000, 1100])
      assert.deepStrictEqual((yield* events).map((e) => e.woken), [false, true, true])
    }).pipe(Random.withSeed("wake-coalesce")))

  it.effect("a flood of wakes makes at most one poll per minimum interval", () =>
    Effect.gen(function*() {
      const { loop, starts } = yield* harness({ wakeMinIntervalMillis: 50 })
      // ten wakes per millisecond for one second: 10,000 wakes
      for (let ms = 0; ms < 1000; ms++) {
        for (let i = 0; i < 10; i++) yield* loop.wake
        yield* TestClock.adjust(1)
      }
      const times = yield* starts
      // the first poll at 0, then one every 50 ms at most
      assert.isAtMost(times.length, 1 + 1000 / 50)
      assert.isAtLeast(times.length, 1000 / 50 - 1)
      for (let i = 1; i < times.length; i++) assert.isAtLeast(times[i]! - times[i - 1]!, 50)
    }).pipe(Random.withSeed("wake-flood")))

  it.effect("a woken poll that fails keeps the outage schedule; wakes are ignored for a base interval, then one more woken poll", () =>
    Effect.gen(function*() {
      const up = yield* Ref.make(false)
      const { events, loop, starts } = yield* harness({
        poll: () => Effect.flatMap(Ref.get(up), (ok) => ok ? Effect.succeed([]) : Effect.fail("unavailable"))
      })
      yield* TestClock.adjust(1000)
      assert.strictEqual(yield* loop.wake, "pollNow")
      yield* TestClock.adjust(0)
      const [first, second] = yield* events
      assert.strictEqual(second?.woken, true)
      assert.strictEqual(second?.outcome, "error")
      // not the base's 1 s: the capped schedule goes on as before the wake
      assert.strictEqual(second?.sleepMillis, first?.sleepMillis)
      assert.strictEqual(second?.sleepMillis, 30_000)
      // within a base interval (1 s) of the failed woken poll's start: ignored, no attempt
      yield* TestClock.adjust(999)
      assert.strictEqual(yield* loop.wake, "ignored")
      yield* TestClock.adjust(0)
      assert.deepStrictEqual(yield* starts, [0, 1000])
      // a base interval after it: a write that committed is evidence again, one woken poll (it fails: disarmed again)
      yield* TestClock.adjust(1)
      assert.strictEqual(yield* loop.wake, "pollNow")
      yield* TestClock.adjust(0)
      assert.deepStrictEqual(yield* starts, [0, 1000, 2000])
      assert.strictEqual(yield* loop.wake, "ignored")
      // the database is back: the scheduled poll succeeds, and wakes work again at once
      yield* Ref.set(up, true)
      yield* TestClock.adjust(30_000)
      assert.strictEqual((yield* starts).length, 4)
      assert.strictEqual(yield* loop.wake, "pollNow")
      yield* TestClock.adjust(0)
      assert.strictEqual((yield* starts).length, 5)
    }).pipe(Random.withSeed("wake-outage")))

  it.effect("after an outage, the first write's wake makes the deriver poll at once, not at its capped schedule", () =>
    Effect.gen(function*() {
      const up = yield* Ref.make(false)
      const { events, loop, starts } = yield* harness({
        poll: (index) =>
          Effect.flatMap(
            Ref.get(up),
            (ok) => ok ? Effect.succeed(index === 3 ? ["unit"] : []) : Effect.fail("unavailable")
          )
      })
      // the outage: failed polls at the cap
      yield* TestClock.adjust(60_000)
      assert.deepStrictEqual(yield* starts, [0, 30_000, 60_000])
      // the database answers again; 5 s later a write commits and its wake arrives
      yield* Ref.set(up, true)
      yield* TestClock.adjust(5000)
      assert.strictEqual(yield* loop.wake, "pollNow")
      yield* TestClock.adjust(0)
      assert.deepStrictEqual((yield* starts).slice(0, 4), [0, 30_000, 60_000, 65_000])
      const woken = (yield* events)[3]
      assert.deepStrictEqual([woken?.outcome, woken?.woken], ["claimed", true])
      // and the schedule starts again from its base: at once after the claim, then 1 s
      yield* TestClock.adjust(1000)
      assert.deepStrictEqual((yield* starts).slice(3), [65_000, 65_000, 66_000])
    }).pipe(Random.withSeed("wake-recovery")))

  it.effect("a wake never makes a poll while the checkout gate is blocked (no attempt)", () =>
    Effect.gen(function*() {
      const blocked = yield* Ref.make(true)
      const { events, loop, starts } = yield* harness({
        capacity: () => Effect.map(Ref.get(blocked), (b) => b ? "blocked" as const : 1)
      })
      yield* TestClock.adjust(1000)
      assert.strictEqual(yield* loop.wake, "pollNow")
      yield* TestClock.adjust(0)
      assert.deepStrictEqual(yield* starts, [])
      const polled = yield* events
      assert.deepStrictEqual(polled.map((e) => [e.outcome, e.woken]), [["error", false], ["error", true]])
      assert.strictEqual(yield* loop.wake, "ignored")
    }).pipe(Random.withSeed("wake-gate")))

  it.effect("a wake does not end a sleep the overload floor imposes; the poll after the floor covers it", () =>
    Effect.gen(function*() {
      const { events, loop, starts } = yield* harness({
        // every poll takes 200 ms: slower than the threshold, an overload signal
        poll: () => Effect.as(Effect.sleep(200), []),
        overload: { slowPollMillis: 100, maxMillis: 300_000, multiplier: 2, recoveryMillis: 30_000 }
      })
      yield* TestClock.adjust(200)
      const [first] = yield* events
      assert.isAbove(first!.floorMillis, 0)
      yield* TestClock.adjust(1000)
      assert.strictEqual(yield* loop.wake, "pollNow")
      assert.strictEqual(yield* loop.wake, "coalesced")
      yield* TestClock.adjust(1000)
      assert.deepStrictEqual(yield* starts, [0])
      yield* TestClock.adjust(first!.sleepMillis)
      assert.strictEqual((yield* starts).length, 2)
      assert.strictEqual((yield* events)[1]?.woken, false)
    }).pipe(Random.withSeed("wake-floor")))

  it.effect("a poll refused before the database is busy: the backoff stays where it was, nothing is ignored", () =>
    Effect.gen(function*() {
      // the first poll is refused (every permit taken by the process's own work), the rest reach the database
      const { events, loop, starts } = yield* harness({
        poll: (index) => index === 0 ? Effect.fail("full") : Effect.succeed([]),
        refused: (error) => error === "full"
      })
      // busy: a base sleep (ratio 0), not the capped schedule's 30 s an error at the cap would sleep
      assert.deepStrictEqual((yield* events).map((e) => [e.outcome, e.sleepMillis]), [["busy", 1000]])
      yield* TestClock.adjust(1000)
      assert.deepStrictEqual(yield* starts, [0, 1000])
      assert.deepStrictEqual((yield* events).map((e) => e.outcome), ["busy", "empty"])
      // wakes stay armed
      assert.strictEqual(yield* loop.wake, "pollNow")
    }).pipe(Random.withSeed("wake-refused")))

  it.effect("a woken poll refused before the database keeps its wake: one more poll after the minimum interval", () =>
    Effect.gen(function*() {
      // the woken poll (index 1) and the next are refused; the third woken one reaches the database
      const { events, loop, starts } = yield* harness({
        poll: (index) => index === 1 || index === 2 ? Effect.fail("full") : Effect.succeed([]),
        refused: (error) => error === "full",
        wakeMinIntervalMillis: 50
      })
      const wokenBefore = (yield* Metric.value(DeriverMetrics.pollsWoken)).count
      yield* TestClock.adjust(5000)
      assert.strictEqual(yield* loop.wake, "pollNow")
      yield* TestClock.adjust(0)
      yield* TestClock.adjust(200)
      // one wake, tried three times: one woken poll in the metric
      assert.strictEqual((yield* Metric.value(DeriverMetrics.pollsWoken)).count - wokenBefore, 1)
      // not the busy sleep's second later: 50 ms apart, until a poll made it
      assert.deepStrictEqual(yield* starts, [0, 5000, 5050, 5100])
      const polled = yield* events
      assert.deepStrictEqual(polled.map((e) => [e.outcome, e.woken]), [
        ["empty", false],
        ["busy", true],
        ["busy", true],
        ["empty", true]
      ])
      // the poll that made it ends the debt: the schedule from its base (1 s) goes on
      assert.strictEqual(polled[3]?.sleepMillis, 1000)
      yield* TestClock.adjust(1000)
      assert.deepStrictEqual(yield* starts, [0, 5000, 5050, 5100, 6100])
    }).pipe(Random.withSeed("wake-refused-owed")))
})
