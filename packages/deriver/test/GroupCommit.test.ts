/**
 * The group commit of the records (`internal/GroupCommit.ts`): inputs that arrive during a flush go out together in the
 * next one; the next flush goes out before the callers of the last one are answered; callers are answered back to back
 * within a slice of time, with other fibers running between slices; a failed flush fails each of its callers and no
 * other.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, Fiber } from "effect"
import * as GroupCommit from "../src/internal/GroupCommit.ts"

/**
 * A group commit whose flushes wait for the test: `open(n)` ends the n-th flush (from 0), with each input times 10, or
 * with a failure when `fails`. Every flush's start and every caller's answer is written to `events` as it happens; a
 * caller's answer then calls `onAnswered`.
 */
const controlled = (onAnswered: () => void = () => undefined) =>
  Effect.gen(function*() {
    const events: Array<string> = []
    const gates: Array<Deferred.Deferred<void, string>> = []
    const gate = (n: number) => {
      while (gates.length <= n) gates.push(Deferred.makeUnsafe<void, string>())
      return gates[n]!
    }
    let flushes = 0
    const commit = yield* GroupCommit.make((inputs: ReadonlyArray<number>) =>
      Effect.suspend(() => {
        events.push(`flush ${inputs.join(",")}`)
        return Effect.as(Deferred.await(gate(flushes++)), inputs.map((input) => input * 10))
      })
    )
    const submit = (input: number) =>
      Effect.forkChild(
        commit.submit(input).pipe(
          Effect.onExit(() =>
            Effect.sync(() => {
              events.push(`answered ${input}`)
              onAnswered()
            })
          ),
          Effect.exit
        )
      )
    const open = (n: number, fails?: string) =>
      fails === undefined ? Deferred.succeed(gate(n), undefined) : Deferred.fail(gate(n), fails)
    return { events, submit, open }
  })

describe("GroupCommit", () => {
  it.effect("inputs that arrive during a flush go out together in the next, each caller with its own answer", () =>
    Effect.gen(function*() {
      const { events, open, submit } = yield* controlled()
      const one = yield* submit(1)
      yield* Effect.yieldNow
      const two = yield* submit(2)
      const three = yield* submit(3)
      yield* Effect.yieldNow
      yield* open(0)
      assert.deepStrictEqual(yield* Fiber.join(one), Exit.succeed(10))
      yield* open(1)
      assert.deepStrictEqual(yield* Fiber.join(two), Exit.succeed(20))
      assert.deepStrictEqual(yield* Fiber.join(three), Exit.succeed(30))
      assert.deepStrictEqual(events.filter((event) => event.startsWith("flush")), ["flush 1", "flush 2,3"])
    }))

  it.effect("the next flush goes out before the callers of the last one are answered", () =>
    Effect.gen(function*() {
      const { events, open, submit } = yield* controlled()
      const one = yield* submit(1)
      yield* Effect.yieldNow
      const waiting = [yield* submit(2), yield* submit(3)]
      yield* Effect.yieldNow
      yield* open(0)
      yield* Fiber.join(one)
      const four = yield* submit(4)
      yield* Effect.yieldNow
      yield* open(1)
      for (const fiber of waiting) yield* Fiber.join(fiber)
      yield* open(2)
      yield* Fiber.join(four)
      assert.deepStrictEqual(events, [
        "flush 1",
        "flush 2,3", // sent before the caller of "flush 1" goes on
        "answered 1",
        "flush 4", // sent before the callers of "flush 2,3" are answered
        "answered 2",
        "answered 3",
        "answered 4"
      ])
    }))

  it.effect("callers are answered back to back within a slice, and other fibers run between slices", () =>
    Effect.gen(function*() {
      // a clock whose monotonic time moves only as callers are answered: 100 µs each
      let nanos = 0n
      const clock = yield* Effect.clockWith((testClock) =>
        Effect.succeed({ ...testClock, monotonicTimeNanosUnsafe: () => nanos })
      )
      const scenario = Effect.gen(function*() {
        const { events, open, submit } = yield* controlled(() => void (nanos += 100_000n))
        const one = yield* submit(1)
        yield* Effect.yieldNow
        const waiting: Array<Fiber.Fiber<unknown>> = []
        for (const input of [2, 3, 4, 5, 6, 7]) waiting.push(yield* submit(input))
        yield* Effect.yieldNow
        yield* open(0)
        yield* Fiber.join(one)
        // another fiber that runs whenever it is let: it marks each turn it gets
        const other = yield* Effect.forkChild(Effect.gen(function*() {
          while (true) {
            yield* Effect.yieldNow
            events.push("other")
          }
        }))
        yield* open(1)
        for (const fiber of waiting) yield* Fiber.join(fiber)
        yield* Fiber.interrupt(other)
        return events
      })
      const events = yield* Effect.provideService(scenario, Clock.Clock, clock)
      const answers = events.filter((event) => event.startsWith("answered"))
      assert.deepStrictEqual(answers, [1, 2, 3, 4, 5, 6, 7].map((input) => `answered ${input}`))
      // 2, 3 and 4 take 300 µs: the slice (250 µs) has passed before 5, which waits for the event loop's turn
      assert.strictEqual(GroupCommit.answerSliceMicros, 250)
      const at = (input: number) => events.indexOf(`answered ${input}`)
      for (const [before, after] of [[2, 3], [3, 4], [5, 6], [6, 7]] as const) {
        assert.notInclude(events.slice(at(before) + 1, at(after)), "other", `${before} and ${after}: one slice`)
      }
      assert.include(events.slice(at(4) + 1, at(5)), "other", "another fiber ran between the slices")
    }))

  it.effect("a failed flush fails each of its callers and no other; the next flush still goes out", () =>
    Effect.gen(function*() {
      const { open, submit } = yield* controlled()
      const one = yield* submit(1)
      yield* Effect.yieldNow
      const waiting = [yield* submit(2), yield* submit(3)]
      yield* Effect.yieldNow
      yield* open(0)
      const four = yield* submit(4)
      yield* Effect.yieldNow
      yield* open(1, "server gone")
      yield* open(2)
      assert.deepStrictEqual(yield* Fiber.join(one), Exit.succeed(10))
      for (const fiber of waiting) assert.deepStrictEqual(yield* Fiber.join(fiber), Exit.fail("server gone"))
      assert.deepStrictEqual(yield* Fiber.join(four), Exit.succeed(40))
    }))
})
