import { assert, describe, it } from "@effect/vitest"
import { Eventually } from "@resilience/test-db"
import { Cause, Effect, Exit } from "effect"

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
})
