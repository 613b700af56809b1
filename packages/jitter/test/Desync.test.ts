import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Random } from "effect"
import { TestClock } from "effect/testing"
import { Jitter, PollBackoff } from "../src/index.ts"
import { spread } from "./stats.ts"

const LOOPS = 10_000
const MAX = Duration.seconds(30)

/**
 * Starts `LOOPS` poll loops at the same instant (a rollout batch, a database restart). Each sleeps its
 * startup delay, as the deriver does before its first poll, then records the time of its first poll.
 */
const firstPollTimes = (startupJitter: boolean) =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const loop = Effect.gen(function*() {
      if (startupJitter) yield* Effect.sleep(yield* Jitter.startupDelay(MAX))
      return (yield* Clock.currentTimeMillis) - start
    })
    const fibers = yield* Effect.forEach(Array.from({ length: LOOPS }), () => Effect.forkChild(loop))
    yield* TestClock.adjust(MAX)
    return yield* Fiber.joinAll(fibers)
  })

describe("desync: startup jitter", () => {
  it.effect("10,000 loops started together spread their first polls uniformly over [0, max]", () =>
    Effect.gen(function*() {
      const times = yield* firstPollTimes(true).pipe(Random.withSeed("desync"))
      assert.strictEqual(times.length, LOOPS)
      for (const t of times) assert.isTrue(t >= 0 && t <= 30_000, `first poll at ${t} ms`)
      const s = spread(times)
      console.log(
        `desync (startup jitter on): max bucket ${s.maxBucket} vs bound ${s.bound.toFixed(1)}, ` +
          `chi-square ${s.chiSquare.toFixed(2)} (critical 58.30, df 29)`
      )
      assert.strictEqual(s.counts.length, 30)
      assert.isTrue(s.withinBound, `max bucket ${s.maxBucket} > bound ${s.bound}`)
      assert.isTrue(s.uniform, `chi-square ${s.chiSquare} fails uniformity`)
      // every one-second bucket of the window is used
      assert.isTrue(s.counts.every((c) => c > 0))
    }))

  it.effect("holds for other seeds too (not a lucky seed)", () =>
    Effect.gen(function*() {
      for (const seed of ["a", "b", "c", 42]) {
        const s = spread(yield* firstPollTimes(true).pipe(Random.withSeed(seed)))
        assert.isTrue(s.withinBound && s.uniform, `seed ${seed}: max ${s.maxBucket}, chi-square ${s.chiSquare}`)
      }
    }))

  it.effect("control: with startup jitter off all 10,000 first polls land in one bucket, and the checks fail", () =>
    Effect.gen(function*() {
      const times = yield* firstPollTimes(false).pipe(Random.withSeed("desync"))
      const s = spread(times)
      console.log(`desync (startup jitter off): max bucket ${s.maxBucket}, chi-square ${s.chiSquare.toFixed(0)}`)
      assert.strictEqual(s.counts[0], LOOPS)
      assert.strictEqual(s.maxBucket, LOOPS)
      assert.isFalse(s.withinBound)
      assert.isFalse(s.uniform)
    }))
})

describe("desync: per-cycle jitter", () => {
  /** Runs `cycles` empty polls of a loop with the given ratio, returning the time of each poll. */
  const pollTimes = (ratio: number, cycles: number) =>
    Effect.gen(function*() {
      const backoff = yield* PollBackoff.make({ ratio })
      const times: Array<number> = []
      for (let i = 0; i < cycles; i++) {
        times.push(yield* Clock.currentTimeMillis)
        yield* Effect.sleep(yield* backoff.advance)
      }
      return times
    })

  const twoLoops = (ratio: number, cycles: number) =>
    Effect.gen(function*() {
      const a = yield* Effect.forkChild(pollTimes(ratio, cycles))
      const b = yield* Effect.forkChild(pollTimes(ratio, cycles))
      yield* TestClock.adjust(Duration.seconds(45 * cycles))
      return [yield* Fiber.join(a), yield* Fiber.join(b)] as const
    }).pipe(Random.withSeed("per-cycle"))

  it.effect("two loops that start in phase drift apart under jitter", () =>
    Effect.gen(function*() {
      const cycles = 20
      const [a, b] = yield* twoLoops(0.5, cycles)
      assert.strictEqual(a[0], b[0]) // in phase at the start
      const gaps = a.map((t, i) => Math.abs(t - (b[i] ?? 0)))
      console.log(`per-cycle drift (ratio 0.5): gaps in ms ${gaps.map((g) => g.toFixed(0)).join(", ")}`)
      // from the second poll on, no two polls coincide ...
      for (const gap of gaps.slice(1)) assert.isAbove(gap, 0)
      // ... and the loops are soon seconds apart, i.e. in different one-second buckets
      assert.isAbove(Math.max(...gaps), 5_000)
      assert.isAbove(gaps.slice(1).filter((g) => g >= 1_000).length, cycles / 2)
    }))

  it.effect("at ratio 0 they stay in phase", () =>
    Effect.gen(function*() {
      const [a, b] = yield* twoLoops(0, 20)
      assert.deepStrictEqual(a, b)
      assert.deepStrictEqual(a.slice(0, 8), [0, 1, 3, 7, 15, 31, 61, 91].map((s) => s * 1000))
    }))

  it.effect("per-cycle jitter alone breaks up a herd of 10,000 in-phase loops within one cycle (pure core)", () =>
    Effect.gen(function*() {
      // the simulator's way: one seeded generator, the pure core in a plain loop, no Effect per decision
      const random = yield* Random.Random
      const settings = yield* PollBackoff.settings({})
      // every loop at the cap, all polling at t = 0: the herd without startup jitter
      const atCap: PollBackoff.State = { currentMillis: settings.maxMillis }
      const next = Array.from(
        { length: LOOPS },
        () => PollBackoff.sleepFrom(atCap, settings, random.nextDoubleUnsafe())
      )
      // the second poll lands uniformly in [15 s, 45 s): bucket relative to 15 s
      const s = spread(next.map((t) => t - 15_000))
      console.log(
        `per-cycle (ratio 0.5, herd at the cap): max bucket after one cycle ${s.maxBucket} of ${LOOPS}, chi-square ${
          s.chiSquare.toFixed(2)
        }`
      )
      assert.isTrue(s.withinBound, `max bucket ${s.maxBucket} > ${s.bound}`)
      assert.isTrue(s.uniform)
    }).pipe(Random.withSeed("herd")))
})
