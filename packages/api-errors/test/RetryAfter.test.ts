import { assert, describe, it } from "@effect/vitest"
import { RetryAfter } from "@resilience/api-errors"
import { ConfigProvider, Effect, Random, Schema } from "effect"

const fromEnv = (env: Record<string, string>) =>
  Effect.provideService(
    Effect.gen(function*() {
      return yield* RetryAfter.config({ seconds: "API_RETRY_AFTER_SECONDS", maxSeconds: "API_RETRY_AFTER_MAX_SECONDS" })
    }),
    ConfigProvider.ConfigProvider,
    ConfigProvider.fromEnv({ env })
  )

describe("RetryAfter", () => {
  it.effect("make validates integer seconds and an ordered range", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* RetryAfter.make({ seconds: 2 }), { minSeconds: 2, maxSeconds: 2 })
      assert.deepStrictEqual(yield* RetryAfter.make({ seconds: 1, maxSeconds: 5 }), { minSeconds: 1, maxSeconds: 5 })
      const notInteger = yield* Effect.flip(RetryAfter.make({ seconds: 1.5 }))
      assert.strictEqual(notInteger.parameter, "seconds")
      const negative = yield* Effect.flip(RetryAfter.make({ seconds: -1 }))
      assert.strictEqual(negative.parameter, "seconds")
      const inverted = yield* Effect.flip(RetryAfter.make({ seconds: 5, maxSeconds: 2 }))
      assert.strictEqual(inverted.parameter, "maxSeconds")
      assert.include(inverted.message, "expected an integer in [5, 86400]")
    }))

  it.effect.prop(
    "fromUniform stays within [min, max] and is an integer",
    [
      Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 100 })),
      Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 100 })),
      Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 0.999999 }))
    ],
    ([a, b, u]) =>
      Effect.gen(function*() {
        const policy = { minSeconds: Math.min(a, b), maxSeconds: Math.max(a, b) }
        const seconds = RetryAfter.fromUniform(policy, u)
        assert.isTrue(Number.isInteger(seconds))
        assert.isTrue(seconds >= policy.minSeconds && seconds <= policy.maxSeconds)
      })
  )

  it.effect("draw spreads a range over every value, reproducibly with a seed", () =>
    Effect.gen(function*() {
      const policy = yield* RetryAfter.make({ seconds: 1, maxSeconds: 4 })
      const draws = yield* Effect.forEach(Array.from({ length: 400 }), () => RetryAfter.draw(policy))
      assert.deepStrictEqual([...new Set(draws)].sort(), [1, 2, 3, 4])
      const again = yield* Effect.forEach(Array.from({ length: 400 }), () => RetryAfter.draw(policy)).pipe(
        Random.withSeed("retry-after")
      )
      const again2 = yield* Effect.forEach(Array.from({ length: 400 }), () => RetryAfter.draw(policy)).pipe(
        Random.withSeed("retry-after")
      )
      assert.deepStrictEqual(again, again2)
    }))

  it.effect("draw of a fixed policy is that value", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* RetryAfter.draw(RetryAfter.fixed(7)), 7)
    }))

  it.effect("config: default 1, a fixed value, or a range", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* fromEnv({}), { minSeconds: 1, maxSeconds: 1 })
      assert.deepStrictEqual(yield* fromEnv({ API_RETRY_AFTER_SECONDS: "3" }), { minSeconds: 3, maxSeconds: 3 })
      assert.deepStrictEqual(
        yield* fromEnv({ API_RETRY_AFTER_SECONDS: "1", API_RETRY_AFTER_MAX_SECONDS: "5" }),
        { minSeconds: 1, maxSeconds: 5 }
      )
    }))

  it.effect("config: an invalid value is an error that names the variable", () =>
    Effect.gen(function*() {
      const notANumber = yield* Effect.flip(fromEnv({ API_RETRY_AFTER_SECONDS: "soon" }))
      assert.include(notANumber.message, "API_RETRY_AFTER_SECONDS")
      const negative = yield* Effect.flip(fromEnv({ API_RETRY_AFTER_SECONDS: "-1" }))
      assert.include(negative.message, "API_RETRY_AFTER_SECONDS")
      const fraction = yield* Effect.flip(fromEnv({ API_RETRY_AFTER_SECONDS: "1.5" }))
      assert.include(fraction.message, "API_RETRY_AFTER_SECONDS")
      const inverted = yield* Effect.flip(fromEnv({ API_RETRY_AFTER_SECONDS: "5", API_RETRY_AFTER_MAX_SECONDS: "2" }))
      assert.include(inverted.message, "API_RETRY_AFTER_MAX_SECONDS")
    }))
})
