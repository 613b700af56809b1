import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Random } from "effect"
import * as fc from "fast-check"
import { Jitter } from "../src/index.ts"

const ms = Duration.toMillis
const uArb = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })

describe("Jitter.startupDelay", () => {
  it.effect("is uniform in [0, max]: bounds, coverage and mean", () =>
    Effect.gen(function*() {
      const draws: Array<number> = []
      for (let i = 0; i < 10_000; i++) draws.push(ms(yield* Jitter.startupDelay("30 seconds")))
      for (const d of draws) assert.isTrue(d >= 0 && d <= 30_000, `delay ${d}`)
      assert.isBelow(Math.min(...draws), 30)
      assert.isAbove(Math.max(...draws), 29_970)
      const mean = draws.reduce((a, b) => a + b, 0) / draws.length
      // standard error of the mean: 30 000 / sqrt(12 · 10 000) ≈ 87 ms; allow 5 of them
      assert.isBelow(Math.abs(mean - 15_000), 5 * 87)
    }).pipe(Random.withSeed("startup")))

  it.effect("max 0 means no delay", () =>
    Effect.gen(function*() {
      assert.strictEqual(ms(yield* Jitter.startupDelay(0)), 0)
    }))

  it("pure core: startupDelayFrom stays in [0, max] (property)", () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1e9, noNaN: true }), uArb, (max, u) => {
        const d = Jitter.startupDelayFrom(max, u)
        return d >= 0 && d <= max
      }),
      { numRuns: 5_000 }
    )
  })
})

describe("Jitter.jitter", () => {
  it.effect("is uniform in [(1 − r)d, (1 + r)d]", () =>
    Effect.gen(function*() {
      const draws: Array<number> = []
      for (let i = 0; i < 10_000; i++) draws.push(ms(yield* Jitter.jitter("10 seconds", 0.5)))
      for (const d of draws) assert.isTrue(d >= 5_000 && d <= 15_000, `sleep ${d}`)
      assert.isBelow(Math.min(...draws), 5_010)
      assert.isAbove(Math.max(...draws), 14_990)
      const mean = draws.reduce((a, b) => a + b, 0) / draws.length
      assert.isBelow(Math.abs(mean - 10_000), 5 * 10_000 / Math.sqrt(12 * 10_000))
    }).pipe(Random.withSeed("jitter")))

  it.effect("ratio 0 is the identity", () =>
    Effect.gen(function*() {
      for (const d of [0, 1, 999.5, 30_000]) assert.strictEqual(ms(yield* Jitter.jitter(d, 0)), d)
      assert.strictEqual(Jitter.jitterFrom(1234, 0, 0.99), 1234)
    }))

  it.effect("ratio 1 spans [0, 2d]", () =>
    Effect.gen(function*() {
      const draws: Array<number> = []
      for (let i = 0; i < 2_000; i++) draws.push(ms(yield* Jitter.jitter(1000, 1)))
      for (const d of draws) assert.isTrue(d >= 0 && d <= 2000)
      assert.isBelow(Math.min(...draws), 10)
      assert.isAbove(Math.max(...draws), 1990)
    }).pipe(Random.withSeed("ratio-1")))

  it("pure core: jitterFrom stays in [(1 − r)·ms, (1 + r)·ms] and is monotone in u (property)", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        uArb,
        uArb,
        (millis, ratio, u, v) => {
          const a = Jitter.jitterFrom(millis, ratio, u)
          const b = Jitter.jitterFrom(millis, ratio, v)
          const inBand = a >= (1 - ratio) * millis && a <= (1 + ratio) * millis
          return inBand && (u <= v ? a <= b : a >= b)
        }
      ),
      { numRuns: 5_000 }
    )
  })

  it("pure core: the endpoints of u map to the ends of the band", () => {
    assert.strictEqual(Jitter.jitterFrom(1000, 0.5, 0), 500)
    assert.strictEqual(Jitter.jitterFrom(1000, 0.5, 0.5), 1000)
    assert.isTrue(Jitter.jitterFrom(1000, 0.5, 1 - Number.EPSILON) <= 1500)
    assert.strictEqual(Jitter.startupDelayFrom(30_000, 0), 0)
    assert.strictEqual(Jitter.startupDelayFrom(30_000, 0.5), 15_000)
  })
})

describe("determinism", () => {
  it.effect("same seed, same sequence; another seed, another sequence", () =>
    Effect.gen(function*() {
      const program = Effect.gen(function*() {
        const out: Array<number> = [ms(yield* Jitter.startupDelay("30 seconds"))]
        for (let i = 0; i < 50; i++) out.push(ms(yield* Jitter.jitter("1 second", 0.5)))
        return out
      })
      const a = yield* program.pipe(Random.withSeed(7))
      const b = yield* program.pipe(Random.withSeed(7))
      const c = yield* program.pipe(Random.withSeed(8))
      assert.deepStrictEqual(a, b)
      assert.notDeepEqual(a, c)
    }))
})
