import { assert, describe, it } from "@effect/vitest"
import { Config, ConfigProvider, Effect, Schema } from "effect"
import { InvalidParameter, Parameters } from "../src/index.ts"

/** Runs `effect`, expects it to fail with an InvalidParameter, and checks what the error names. */
const expectInvalid = <A>(
  effect: Effect.Effect<A, InvalidParameter.InvalidParameter>,
  expected: { parameter: string; value: unknown; allowed: string }
) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    assert.instanceOf(error, InvalidParameter.InvalidParameter)
    assert.strictEqual(error._tag, "InvalidParameter")
    assert.strictEqual(error.parameter, expected.parameter)
    if (Number.isNaN(expected.value)) assert.isNaN(error.value)
    else assert.strictEqual(error.value, expected.value)
    assert.strictEqual(error.allowed, expected.allowed)
    // the message names the parameter and the allowed range
    assert.include(error.message, expected.parameter)
    assert.include(error.message, expected.allowed)
    return error
  })

const RATIO = "a number in [0, 1]"
const MULTIPLIER = "a finite number >= 1"
const NON_NEGATIVE = "a finite duration >= 0"

describe("Parameters", () => {
  it.effect("ratio, multiplier and durations in isolation, with custom parameter names", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* Parameters.ratio(0.25), 0.25)
      yield* expectInvalid(Parameters.ratio(-1, "DERIVER_POLLING_JITTER_RATIO"), {
        parameter: "DERIVER_POLLING_JITTER_RATIO",
        value: -1,
        allowed: RATIO
      })
      assert.strictEqual(yield* Parameters.multiplier(1), 1)
      yield* expectInvalid(Parameters.multiplier(0.99), { parameter: "multiplier", value: 0.99, allowed: MULTIPLIER })
      assert.strictEqual(yield* Parameters.positiveDuration("2 seconds", "base"), 2000)
      assert.strictEqual(yield* Parameters.nonNegativeDuration(0, "startup"), 0)
      yield* expectInvalid(Parameters.nonNegativeDuration(-1, "startup"), {
        parameter: "startup",
        value: -1,
        allowed: NON_NEGATIVE
      })
      assert.strictEqual(yield* Parameters.durationAtLeast("30 seconds", "max", 1000, "base"), 30_000)
    }))
})

describe("Parameters.check and InvalidParameter.validateConfig: the one validation pattern", () => {
  const positiveInteger = Parameters.check(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)), "an integer >= 1")

  it.effect("check passes a valid value as it is and names the parameter of an invalid one", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* positiveInteger(3, "DERIVER_WORKERS"), 3)
      yield* expectInvalid(positiveInteger(0.5, "DERIVER_WORKERS"), {
        parameter: "DERIVER_WORKERS",
        value: 0.5,
        allowed: "an integer >= 1"
      })
    }))

  it.effect("validateConfig turns an InvalidParameter into a ConfigError with the same message", () =>
    Effect.gen(function*() {
      const workers = Config.Number("WORKERS").pipe(
        InvalidParameter.validateConfig((n: number) => positiveInteger(n, "WORKERS"))
      )
      const read = (env: Record<string, string>) =>
        Effect.provideService(
          Effect.gen(function*() {
            return yield* workers
          }),
          ConfigProvider.ConfigProvider,
          ConfigProvider.fromEnv({ env })
        )
      assert.strictEqual(yield* read({ WORKERS: "4" }), 4)
      const error = yield* Effect.flip(read({ WORKERS: "0" }))
      assert.instanceOf(error, Config.ConfigError)
      assert.include(String(error), "WORKERS = 0 is not allowed: expected an integer >= 1")
    }))
})
