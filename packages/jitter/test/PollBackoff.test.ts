import { assert, describe, it } from "@effect/vitest"
import { Parameters } from "@resilience/parameters"
import { Duration, Effect, Random, Schema } from "effect"
import * as fc from "fast-check"
import { PollBackoff } from "../src/index.ts"

const SCHEDULE_SECONDS = [1, 2, 4, 8, 16, 30, 30, 30, 30, 30]
const ms = Duration.toMillis

describe("PollBackoff (Effect)", () => {
  it.effect("advance stays within [1 − r, 1 + r] × schedule while the schedule progresses 1, 2, 4, 8, 16, 30, 30", () =>
    Effect.gen(function*() {
      const ratio = 0.5
      const low = SCHEDULE_SECONDS.map(() => Infinity)
      const high = SCHEDULE_SECONDS.map(() => -Infinity)
      for (let run = 0; run < 1_000; run++) {
        const backoff = yield* PollBackoff.make({ ratio })
        for (const [i, seconds] of SCHEDULE_SECONDS.entries()) {
          assert.strictEqual(ms(yield* backoff.current), seconds * 1000)
          const sleep = ms(yield* backoff.advance)
          assert.isTrue(sleep >= (1 - ratio) * seconds * 1000 && sleep <= (1 + ratio) * seconds * 1000)
          low[i] = Math.min(low[i] ?? Infinity, sleep / (seconds * 1000))
          high[i] = Math.max(high[i] ?? -Infinity, sleep / (seconds * 1000))
        }
      }
      // the draws actually cover the band, not just a sliver of it
      for (const l of low) assert.isBelow(l, 0.51)
      for (const h of high) assert.isAbove(h, 1.49)
    }).pipe(Random.withSeed("bounds")))

  it.effect("uses the defaults: 1 s base, ×2, 30 s cap, enabled, ratio 0.5", () =>
    Effect.gen(function*() {
      const backoff = yield* PollBackoff.make()
      assert.deepStrictEqual(backoff.settings, {
        baseMillis: 1000,
        multiplier: 2,
        maxMillis: 30_000,
        enabled: true,
        ratio: 0.5
      })
    }))

  it.effect("ratio 0 is the identity: advance returns exactly 1, 2, 4, 8, 16, 30, 30 s", () =>
    Effect.gen(function*() {
      const backoff = yield* PollBackoff.make({ ratio: 0 })
      const sleeps: Array<number> = []
      for (let i = 0; i < SCHEDULE_SECONDS.length; i++) sleeps.push(ms(yield* backoff.advance))
      assert.deepStrictEqual(sleeps, SCHEDULE_SECONDS.map((s) => s * 1000))
      assert.strictEqual(ms(yield* backoff.base), 1000)
    }))

  it.effect("reset returns the schedule to the base", () =>
    Effect.gen(function*() {
      const backoff = yield* PollBackoff.make({ ratio: 0 })
      for (let i = 0; i < 7; i++) yield* backoff.advance
      assert.strictEqual(ms(yield* backoff.current), 30_000)
      yield* backoff.reset
      assert.strictEqual(ms(yield* backoff.current), 1000)
      assert.deepStrictEqual([ms(yield* backoff.advance), ms(yield* backoff.advance)], [1000, 2000])
    }))

  it.effect("base returns a jittered base and leaves the schedule alone", () =>
    Effect.gen(function*() {
      const backoff = yield* PollBackoff.make({ ratio: 0.5 })
      yield* backoff.advance
      yield* backoff.advance
      assert.strictEqual(ms(yield* backoff.current), 4000)
      const bases = new Set<number>()
      for (let i = 0; i < 200; i++) {
        const b = ms(yield* backoff.base)
        assert.isTrue(b >= 500 && b <= 1500, `base sleep ${b}`)
        bases.add(b)
      }
      assert.isAbove(bases.size, 190) // jittered, not a constant
      assert.strictEqual(ms(yield* backoff.current), 4000)
    }).pipe(Random.withSeed("base")))

  it.effect("disabled backoff always sleeps a jittered base", () =>
    Effect.gen(function*() {
      const backoff = yield* PollBackoff.make({ enabled: false })
      for (let i = 0; i < 100; i++) {
        const sleep = ms(yield* backoff.advance)
        assert.isTrue(sleep >= 500 && sleep <= 1500, `sleep ${sleep}`)
        assert.strictEqual(ms(yield* backoff.current), 1000)
      }
      const exact = yield* PollBackoff.make({ enabled: false, ratio: 0 })
      for (let i = 0; i < 10; i++) assert.strictEqual(ms(yield* exact.advance), 1000)
    }).pipe(Random.withSeed("disabled")))

  it.effect("other parameters: base 250 ms, ×3, cap 10 s", () =>
    Effect.gen(function*() {
      const backoff = yield* PollBackoff.make({ base: "250 millis", multiplier: 3, max: "10 seconds", ratio: 0 })
      const sleeps: Array<number> = []
      for (let i = 0; i < 7; i++) sleeps.push(ms(yield* backoff.advance))
      assert.deepStrictEqual(sleeps, [250, 750, 2250, 6750, 10_000, 10_000, 10_000])
    }))

  it.effect("same seed, same sequence; another seed, another sequence", () =>
    Effect.gen(function*() {
      const program = Effect.gen(function*() {
        const backoff = yield* PollBackoff.make()
        const out: Array<number> = []
        for (let i = 0; i < 20; i++) out.push(ms(yield* backoff.advance), ms(yield* backoff.base))
        return out
      })
      const a = yield* program.pipe(Random.withSeed("same"))
      const b = yield* program.pipe(Random.withSeed("same"))
      const c = yield* program.pipe(Random.withSeed("other"))
      assert.deepStrictEqual(a, b)
      assert.notDeepEqual(a, c)
    }))

  it.effect("each loop owns its backoff: advancing one leaves another untouched", () =>
    Effect.gen(function*() {
      const a = yield* PollBackoff.make({ ratio: 0 })
      const b = yield* PollBackoff.make({ ratio: 0 })
      yield* a.advance
      yield* a.advance
      assert.strictEqual(ms(yield* a.current), 4000)
      assert.strictEqual(ms(yield* b.current), 1000)
    }))
})

describe("PollBackoff (pure core)", () => {
  const settingsArb = fc.record({
    baseMillis: fc.double({ min: 1, max: 10_000, noNaN: true }),
    multiplier: fc.double({ min: 1, max: 10, noNaN: true }),
    capFactor: fc.double({ min: 1, max: 1_000, noNaN: true }),
    enabled: fc.boolean(),
    ratio: fc.double({ min: 0, max: 1, noNaN: true })
  }).map(({ capFactor, ...s }): PollBackoff.Settings => ({ ...s, maxMillis: s.baseMillis * capFactor }))
  const uArb = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })

  it("initial / step / sleepFrom reproduce 1, 2, 4, 8, 16, 30, 30 with the defaults", () => {
    const settings = Effect.runSync(PollBackoff.settings())
    let state = PollBackoff.initial(settings)
    const schedule: Array<number> = []
    for (let i = 0; i < 8; i++) {
      schedule.push(state.currentMillis)
      assert.strictEqual(PollBackoff.sleepFrom(state, settings, 0), state.currentMillis / 2)
      assert.strictEqual(PollBackoff.sleepFrom(state, settings, 0.5), state.currentMillis)
      state = PollBackoff.step(state, settings)
    }
    assert.deepStrictEqual(schedule, [1, 2, 4, 8, 16, 30, 30, 30].map((s) => s * 1000))
    assert.strictEqual(PollBackoff.baseSleepFrom(settings, 0.5), 1000)
  })

  it("property: every sleep lies in [1 − r, 1 + r] × the current interval", () => {
    fc.assert(
      fc.property(settingsArb, fc.nat({ max: 60 }), uArb, (settings, steps, u) => {
        let state = PollBackoff.initial(settings)
        for (let i = 0; i < steps; i++) state = PollBackoff.step(state, settings)
        const sleep = PollBackoff.sleepFrom(state, settings, u)
        const c = state.currentMillis
        return sleep >= (1 - settings.ratio) * c && sleep <= (1 + settings.ratio) * c &&
          PollBackoff.baseSleepFrom(settings, u) <= (1 + settings.ratio) * settings.baseMillis
      }),
      { numRuns: 2_000 }
    )
  })

  it("property: the schedule is min(base × multiplier^n, max) when enabled and the base when disabled", () => {
    fc.assert(
      fc.property(settingsArb, fc.nat({ max: 60 }), (settings, steps) => {
        let state = PollBackoff.initial(settings)
        for (let i = 0; i < steps; i++) {
          const next = PollBackoff.step(state, settings)
          // monotone, capped, never below the base
          if (next.currentMillis < state.currentMillis || next.currentMillis > settings.maxMillis) return false
          state = next
        }
        const expected = settings.enabled
          ? Math.min(settings.baseMillis * settings.multiplier ** steps, settings.maxMillis)
          : settings.baseMillis
        return Math.abs(state.currentMillis - expected) <= 1e-9 * expected
      }),
      { numRuns: 2_000 }
    )
  })
})

describe("PollBackoff (property, Effect)", () => {
  it.effect.prop(
    "for any seed and ratio, advance stays within [1 − r, 1 + r] × schedule",
    { seed: Schema.String, ratio: Parameters.Ratio },
    ({ ratio, seed }) =>
      Effect.gen(function*() {
        const backoff = yield* PollBackoff.make({ ratio })
        for (const seconds of SCHEDULE_SECONDS) {
          const sleep = ms(yield* backoff.advance)
          // a Duration has nanosecond resolution: allow rounding to the nearest nanosecond
          if (sleep < (1 - ratio) * seconds * 1000 - 1e-6 || sleep > (1 + ratio) * seconds * 1000 + 1e-6) return false
        }
        return true
      }).pipe(Random.withSeed(seed))
  )
})
