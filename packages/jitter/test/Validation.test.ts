import { assert, describe, it } from "@effect/vitest"
import { InvalidParameter } from "@resilience/parameters"
import { Duration, Effect, Schedule } from "effect"
import { Jitter, JitterSchedules, PollBackoff, RetryJitter } from "../src/index.ts"

/** What an InvalidParameter names. */
type Named = { parameter: string; value: unknown; allowed: string }

/**
 * Runs `effect`, expects it to fail with an InvalidParameter, and checks what the error names (the error's own
 * message and tag are tested in `@resilience/parameters`).
 */
const expectInvalid = <A>(effect: Effect.Effect<A, InvalidParameter.InvalidParameter>, expected: Named) =>
  Effect.map(Effect.flip(effect), (error) => {
    assert.instanceOf(error, InvalidParameter.InvalidParameter)
    assert.deepStrictEqual({ parameter: error.parameter, value: error.value, allowed: error.allowed }, expected)
    return error
  })

/** Runs `effect`, expects it to die with an InvalidParameter (a defect), and returns it. */
const expectDefect = <A>(effect: Effect.Effect<A>) =>
  Effect.gen(function*() {
    const defect = yield* effect.pipe(
      Effect.as(undefined),
      Effect.catchDefect((d) => Effect.succeed(d))
    )
    assert.instanceOf(defect, InvalidParameter.InvalidParameter)
    return defect as InvalidParameter.InvalidParameter
  })

const RATIO = "a number in [0, 1]"
const MULTIPLIER = "a finite number >= 1"
const POSITIVE = "a finite duration > 0"
const NON_NEGATIVE = "a finite duration >= 0"

describe("PollBackoff.make validation", () => {
  const cases: ReadonlyArray<[string, PollBackoff.Options, Named]> = [
    ["ratio below 0", { ratio: -0.1 }, { parameter: "ratio", value: -0.1, allowed: RATIO }],
    ["ratio above 1", { ratio: 1.5 }, { parameter: "ratio", value: 1.5, allowed: RATIO }],
    ["ratio NaN", { ratio: NaN }, { parameter: "ratio", value: NaN, allowed: RATIO }],
    ["ratio infinite", { ratio: Infinity }, { parameter: "ratio", value: Infinity, allowed: RATIO }],
    ["base zero", { base: 0 }, { parameter: "base", value: 0, allowed: POSITIVE }],
    ["base negative", { base: -5 }, { parameter: "base", value: -5, allowed: POSITIVE }],
    ["base negative string", { base: "-5 seconds" }, { parameter: "base", value: "-5 seconds", allowed: POSITIVE }],
    ["base NaN", { base: NaN }, { parameter: "base", value: NaN, allowed: POSITIVE }],
    ["base infinite", { base: "Infinity" }, { parameter: "base", value: "Infinity", allowed: POSITIVE }],
    [
      "base not a duration",
      { base: "soon" as Duration.Input },
      { parameter: "base", value: "soon", allowed: POSITIVE }
    ],
    ["multiplier below 1", { multiplier: 0.5 }, { parameter: "multiplier", value: 0.5, allowed: MULTIPLIER }],
    ["multiplier zero", { multiplier: 0 }, { parameter: "multiplier", value: 0, allowed: MULTIPLIER }],
    ["multiplier NaN", { multiplier: NaN }, { parameter: "multiplier", value: NaN, allowed: MULTIPLIER }],
    [
      "multiplier infinite",
      { multiplier: Infinity },
      { parameter: "multiplier", value: Infinity, allowed: MULTIPLIER }
    ],
    [
      "max below base",
      { base: "2 seconds", max: "1 second" },
      { parameter: "max", value: "1 second", allowed: "a finite duration >= base (2000 ms)" }
    ],
    [
      "max below the default base",
      { max: 500 },
      { parameter: "max", value: 500, allowed: "a finite duration >= base (1000 ms)" }
    ],
    [
      "max infinite",
      { max: "Infinity" },
      { parameter: "max", value: "Infinity", allowed: "a finite duration >= base (1000 ms)" }
    ]
  ]
  for (const [name, options, expected] of cases) {
    it.effect(`rejects ${name}`, () => expectInvalid(PollBackoff.make(options), expected))
  }

  it.effect("accepts the edges: ratio 0 and 1, multiplier 1, max = base", () =>
    Effect.gen(function*() {
      yield* PollBackoff.make({ ratio: 0 })
      yield* PollBackoff.make({ ratio: 1 })
      const flat = yield* PollBackoff.make({ multiplier: 1, ratio: 0 })
      assert.deepStrictEqual([Duration.toMillis(yield* flat.advance), Duration.toMillis(yield* flat.advance)], [
        1000,
        1000
      ])
      const capped = yield* PollBackoff.make({ base: "5 seconds", max: "5 seconds", ratio: 0 })
      assert.strictEqual(Duration.toMillis(yield* capped.advance), 5000)
    }))

  it.effect("the message reads well", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(PollBackoff.make({ ratio: 1.5 }))
      assert.strictEqual(error.message, "ratio = 1.5 is not allowed: expected a number in [0, 1]")
      const max = yield* Effect.flip(PollBackoff.make({ max: "500 millis" }))
      assert.strictEqual(
        max.message,
        "max = \"500 millis\" is not allowed: expected a finite duration >= base (1000 ms)"
      )
    }))
})

describe("JitterSchedules validation (in the schedule's error channel)", () => {
  it.effect("pollBackoff", () =>
    expectInvalid(Effect.void.pipe(Effect.repeat(JitterSchedules.pollBackoff({ ratio: 2 }))), {
      parameter: "ratio",
      value: 2,
      allowed: RATIO
    }))

  const retryCases: ReadonlyArray<
    [string, RetryJitter.Options, Named]
  > = [
    ["base zero", { base: 0, cap: 1000 }, { parameter: "base", value: 0, allowed: POSITIVE }],
    ["cap below base", { base: 1000, cap: 10 }, {
      parameter: "cap",
      value: 10,
      allowed: "a finite duration >= base (1000 ms)"
    }]
  ]
  const schedules = {
    fullJitter: JitterSchedules.fullJitter,
    equalJitter: JitterSchedules.equalJitter,
    decorrelatedJitter: JitterSchedules.decorrelatedJitter
  }
  for (const [scheduleName, make] of Object.entries(schedules)) {
    for (const [name, options, expected] of retryCases) {
      it.effect(`${scheduleName}: rejects ${name}`, () =>
        expectInvalid(
          Effect.fail("boom" as const).pipe(
            Effect.retry(make(options).pipe(Schedule.upTo({ times: 1 }))),
            // "boom" would mean the schedule ran; only the InvalidParameter may get through
            Effect.catch((e) => e === "boom" ? Effect.void : Effect.fail(e))
          ),
          expected
        ))
    }
  }

  it.effect("RetryJitter.settings", () =>
    expectInvalid(RetryJitter.settings({ base: "1 second", cap: "-1 second" }), {
      parameter: "cap",
      value: "-1 second",
      allowed: "a finite duration >= base (1000 ms)"
    }))
})

describe("Jitter: a bad argument is a defect carrying InvalidParameter", () => {
  it.effect("startupDelay with a negative max", () =>
    Effect.gen(function*() {
      const defect = yield* expectDefect(Jitter.startupDelay(-1))
      assert.strictEqual(defect.parameter, "max")
      assert.strictEqual(defect.allowed, NON_NEGATIVE)
    }))

  it.effect("jitter with a ratio outside [0, 1]", () =>
    Effect.gen(function*() {
      const defect = yield* expectDefect(Jitter.jitter("1 second", 1.01))
      assert.strictEqual(defect.parameter, "ratio")
      assert.strictEqual(defect.value, 1.01)
    }))

  it.effect("jitter with a negative duration", () =>
    Effect.gen(function*() {
      const defect = yield* expectDefect(Jitter.jitter(-10, 0.5))
      assert.strictEqual(defect.parameter, "duration")
      assert.strictEqual(defect.allowed, NON_NEGATIVE)
    }))
})
