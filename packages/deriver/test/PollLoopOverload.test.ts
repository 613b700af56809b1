/**
 * Overload-aware polling in the loop, under `TestClock` and a seeded `Random`: polls that take longer than the
 * slow-poll threshold (on the test clock) raise the interval past the idle cap, up to the overload cap; fast
 * polls bring it back gradually; without overload signals the loop sleeps exactly as without the settings.
 */
import { assert, describe, it } from "@effect/vitest"
import type { PollBackoff } from "@resilience/jitter"
import { Effect, Random, Ref } from "effect"
import { TestClock } from "effect/testing"
import type * as Overload from "../src/Overload.ts"
import * as PollLoop from "../src/PollLoop.ts"

type Polled = Extract<PollLoop.Event, { _tag: "Polled" }>

const backoff: PollBackoff.Settings = { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0.5 }
const overload: Overload.Settings = { slowPollMillis: 2000, maxMillis: 300_000, multiplier: 2, recoveryFactor: 1.5 }

/** A loop over an always-empty source whose poll number i takes `pollMillis(i)` on the test clock. */
const slowSource = Effect.fnUntraced(function*(
  pollMillis: (index: number) => number,
  settings: Overload.Settings | undefined
) {
  const events = yield* Ref.make<ReadonlyArray<Polled>>([])
  const polls = yield* Ref.make(0)
  yield* PollLoop.start({
    poll: () =>
      Effect.gen(function*() {
        const index = yield* Ref.getAndUpdate(polls, (n) => n + 1)
        const millis = pollMillis(index)
        if (millis > 0) yield* Effect.sleep(millis)
        return []
      }),
    process: () => Effect.void,
    releaseAll: Effect.void
  }, {
    workers: 1,
    backoff,
    startupJitterMillis: 0,
    cleanupIntervalMillis: 60_000,
    shutdownGraceMillis: 1000,
    overload: settings,
    observer: (event) => event._tag === "Polled" ? Ref.update(events, (all) => [...all, event]) : Effect.void
  })
  return Ref.get(events)
})

/** Moves the test clock in 500 ms steps until `n` polls have been decided. */
const advanceUntil = Effect.fnUntraced(function*(events: Effect.Effect<ReadonlyArray<Polled>>, n: number) {
  for (let guard = 0; guard < 200_000; guard++) {
    const all = yield* events
    if (all.length >= n) return all.slice(0, n)
    yield* TestClock.adjust(500)
  }
  throw new Error("the loop did not poll often enough")
})

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

  it.effect("fast polls bring the interval back gradually, then the idle schedule is the spec's again", () =>
    Effect.gen(function*() {
      const events = yield* slowSource((i) => (i < 12 ? 3000 : 5), overload)
      const polled = yield* advanceUntil(events, 40)
      const recovering = polled.slice(12)
      assert.strictEqual(polled[11]!.floorMillis, 300_000)
      assert.isTrue(recovering.every((e) => e.signal === "fast"))
      let previous = polled[11]!.floorMillis
      for (const event of recovering) {
        assert.isTrue(event.floorMillis <= previous, "never rises on a fast poll")
        if (event.floorMillis > 0) assert.isAtLeast(event.floorMillis, previous / 1.5 - 1e-6, "one factor per poll")
        previous = event.floorMillis
      }
      // Back under the idle cap only after several fast polls, not in one step.
      assert.isAtLeast(recovering.findIndex((e) => e.floorMillis <= 30_000), 5)
      const settled = recovering.filter((e) => e.floorMillis === 0)
      assert.isAbove(settled.length, 0, "the floor is gone in the end")
      for (const event of settled) {
        assert.isTrue(event.sleepMillis >= 15_000 && event.sleepMillis <= 45_000, `idle sleep ${event.sleepMillis}`)
      }
    }).pipe(Random.withSeed("recover")))

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
