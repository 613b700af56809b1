import { assert, describe, it } from "@effect/vitest"
import { Eventually } from "@resilience/test-db"
import { Cause, Clock, Effect, Exit, Fiber } from "effect"

/** A counter that another fiber would advance; here each check advances it. */
const counter = () => {
  let n = 0
  return Effect.sync(() => ++n)
}

describe("Eventually", () => {
  it.effect("returns the first value that holds, also under the TestClock (its pauses are real time)", () =>
    Effect.gen(function*() {
      const next = counter()
      assert.strictEqual(
        yield* Eventually.defined("the third check", Effect.map(next, (n) => n >= 3 ? n : undefined)),
        3
      )
      assert.strictEqual(yield* Eventually.satisfying("a count of 5", next, (n) => n === 5), 5)
      yield* Eventually.until("a count of 6", Effect.map(next, (n) => n === 6))
    }))

  it.live("past the deadline it dies naming what was awaited and the last value seen", () =>
    Effect.gen(function*() {
      const startedAt = performance.now()
      const exit = yield* Effect.exit(
        Eventually.satisfying(() => "a count of -1", counter(), (n) => n === -1, { within: "100 millis" })
      )
      assert.isAtLeast(performance.now() - startedAt, 100)
      assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), String(exit))
      assert.match(
        Cause.pretty((exit as Exit.Failure<number, never>).cause),
        /timed out after 100 ms waiting for a count of -1 \(last seen: \d+\)/
      )
    }))

  it.live("a failing check ends the wait with its failure", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Eventually.until("never", Effect.fail("refused" as const)))
      assert.strictEqual(error, "refused")
    }))

  it.effect("advancing: moves the test clock step by step until the check holds, settling before each check", () =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      // a fiber that sleeps 3.5 s on the test clock, then once more 2 s: moving once by 3.5 s would leave the second
      // sleep waiting for a clock nobody moves
      const sleeper = yield* Effect.forkChild(Effect.andThen(Effect.sleep("3500 millis"), Effect.sleep("2 seconds")))
      let settled = 0
      yield* Eventually.advancing("the sleeper done", Effect.sync(() => sleeper.pollUnsafe() !== undefined), {
        step: "1 second",
        settle: Effect.sync(() => void settled++)
      })
      yield* Fiber.join(sleeper)
      // 3.5 + 2 s of sleeps: done once the clock moved 6 s; settled before each of the seven checks (0 s … 6 s)
      assert.strictEqual((yield* Clock.currentTimeMillis) - startedAt, 6000)
      assert.strictEqual(settled, 7)
    }))

  it.effect("advancing: past its test time it dies naming what was awaited, the clock moved no further", () =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const exit = yield* Effect.exit(
        Eventually.advancing("a check that never holds", Effect.succeed(false), { step: 10, testTime: 50, every: 0 })
      )
      assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), String(exit))
      assert.match(
        Cause.pretty((exit as Exit.Failure<void, never>).cause),
        /not done within 50 ms of test time: a check that never holds/
      )
      assert.strictEqual((yield* Clock.currentTimeMillis) - startedAt, 50)
    }))
})
