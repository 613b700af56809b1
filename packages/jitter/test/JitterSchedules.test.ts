import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Random, Schedule } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { JitterSchedules, RetryJitter } from "../src/index.ts"

const ms = Duration.toMillis
const NS = 1e-6 // a Duration has nanosecond resolution

/** Steps a schedule `n` times by hand (no sleeping), returning outputs and delays in milliseconds. */
const steps = <E>(schedule: Schedule.Schedule<Duration.Duration, unknown, E>, n: number) =>
  Effect.gen(function*() {
    const step = yield* Schedule.toStep(schedule)
    const outputs: Array<number> = []
    const delays: Array<number> = []
    for (let i = 0; i < n; i++) {
      const [output, delay] = yield* step(0, undefined)
      outputs.push(ms(output))
      delays.push(ms(delay))
    }
    return { outputs, delays }
  })

describe("JitterSchedules.pollBackoff", () => {
  it.effect("outputs the schedule 1, 2, 4, 8, 16, 30, 30 s and delays by the jittered interval", () =>
    Effect.gen(function*() {
      for (let run = 0; run < 200; run++) {
        const { delays, outputs } = yield* steps(JitterSchedules.pollBackoff(), 8)
        assert.deepStrictEqual(outputs, [1, 2, 4, 8, 16, 30, 30, 30].map((s) => s * 1000))
        delays.forEach((d, i) => {
          const c = outputs[i] ?? 0
          assert.isTrue(d >= 0.5 * c - NS && d <= 1.5 * c + NS, `delay ${d} for interval ${c}`)
        })
      }
    }).pipe(Random.withSeed("schedule")))

  it.effect("drives Effect.repeat under the TestClock (ratio 0: polls at 0, 1, 3, 7, 15, 31, 61 s)", () =>
    Effect.gen(function*() {
      const times: Array<number> = []
      const poll = Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => times.push(t)))
      const fiber = yield* Effect.forkChild(
        poll.pipe(Effect.repeat(JitterSchedules.pollBackoff({ ratio: 0 }).pipe(Schedule.upTo({ times: 6 }))))
      )
      yield* TestClock.adjust("2 minutes")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(times, [0, 1, 3, 7, 15, 31, 61].map((s) => s * 1000))
    }))

  it.effect("every repeat starts again at the base", () =>
    Effect.gen(function*() {
      const schedule = JitterSchedules.pollBackoff({ ratio: 0 })
      const first = yield* steps(schedule, 4)
      const second = yield* steps(schedule, 4)
      assert.deepStrictEqual(first.outputs, [1000, 2000, 4000, 8000])
      assert.deepStrictEqual(second.outputs, first.outputs)
    }))
})

describe("Brooker's jitters", () => {
  const options = { base: "100 millis", cap: "10 seconds" } as const
  const settings: RetryJitter.Settings = { baseMillis: 100, capMillis: 10_000 }
  const envelope = (n: number) => Math.min(10_000, 100 * 2 ** n)

  it.effect("full jitter: retry n sleeps in [0, min(cap, base·2^n)]", () =>
    Effect.gen(function*() {
      const highs = Array.from({ length: 12 }, () => 0)
      for (let run = 0; run < 500; run++) {
        const { delays } = yield* steps(JitterSchedules.fullJitter(options), 12)
        delays.forEach((d, n) => {
          assert.isTrue(d >= 0 && d <= envelope(n) + NS, `retry ${n}: ${d}`)
          highs[n] = Math.max(highs[n] ?? 0, d / envelope(n))
        })
      }
      for (const h of highs) assert.isAbove(h, 0.98) // the whole envelope is used
    }).pipe(Random.withSeed("full")))

  it.effect("equal jitter: retry n sleeps in [envelope/2, envelope]", () =>
    Effect.gen(function*() {
      for (let run = 0; run < 500; run++) {
        const { delays } = yield* steps(JitterSchedules.equalJitter(options), 12)
        delays.forEach((d, n) => assert.isTrue(d >= envelope(n) / 2 - NS && d <= envelope(n) + NS, `retry ${n}: ${d}`))
      }
    }).pipe(Random.withSeed("equal")))

  it.effect("decorrelated jitter: each sleep in [base, min(cap, 3 × previous)]", () =>
    Effect.gen(function*() {
      let reachedCap = false
      for (let run = 0; run < 500; run++) {
        const { delays } = yield* steps(JitterSchedules.decorrelatedJitter(options), 20)
        let previous = 100
        for (const d of delays) {
          assert.isTrue(d >= 100 - NS && d <= Math.min(10_000, 3 * previous) + NS, `sleep ${d} after ${previous}`)
          if (d >= 10_000 - NS) reachedCap = true
          previous = d
        }
      }
      assert.isTrue(reachedCap)
    }).pipe(Random.withSeed("decorrelated")))

  it.effect("retry with full jitter under the TestClock: 1 + 3 attempts, then the last error", () =>
    Effect.gen(function*() {
      let attempts = 0
      const failing = Effect.suspend(() => {
        attempts++
        return Effect.fail(`attempt ${attempts}` as const)
      })
      const fiber = yield* Effect.forkChild(
        Effect.flip(failing.pipe(Effect.retry(JitterSchedules.fullJitter(options).pipe(Schedule.upTo({ times: 3 })))))
      )
      yield* TestClock.adjust("1 minute")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(attempts, 4)
      assert.strictEqual(error, "attempt 4")
    }).pipe(Random.withSeed("retry")))

  it.effect("same seed, same delays", () =>
    Effect.gen(function*() {
      const run = Effect.all([
        steps(JitterSchedules.fullJitter(options), 10),
        steps(JitterSchedules.equalJitter(options), 10),
        steps(JitterSchedules.decorrelatedJitter(options), 10),
        steps(JitterSchedules.pollBackoff(), 10)
      ])
      assert.deepStrictEqual(yield* run.pipe(Random.withSeed(1)), yield* run.pipe(Random.withSeed(1)))
      assert.notDeepEqual(yield* run.pipe(Random.withSeed(1)), yield* run.pipe(Random.withSeed(2)))
    }))

  it("pure core: bounds hold for any attempt, previous sleep and draw (property)", () => {
    const u = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })
    fc.assert(
      fc.property(fc.nat({ max: 2_000 }), fc.double({ min: 100, max: 10_000, noNaN: true }), u, (n, previous, x) => {
        const e = RetryJitter.envelope(n, settings)
        const full = RetryJitter.fullFrom(n, settings, x)
        const equal = RetryJitter.equalFrom(n, settings, x)
        const decorrelated = RetryJitter.decorrelatedFrom(previous, settings, x)
        return e <= 10_000 && full >= 0 && full <= e && equal >= e / 2 && equal <= e &&
          decorrelated >= 100 && decorrelated <= Math.min(10_000, 3 * previous)
      }),
      { numRuns: 5_000 }
    )
  })
})
