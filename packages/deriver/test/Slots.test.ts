/**
 * The handler slots (`internal/Slots.ts`): a freed slot goes to the `first` line before the `later` one, first come
 * first served within a line; never more handlers than slots; an interrupted waiter leaves its line and takes no slot.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as Slots from "../src/internal/Slots.ts"

/**
 * One slot, held by a handler until `release` is called; `run(name, line)` forks a handler that records its name in
 * `ran` once it gets a slot.
 */
const oneHeldSlot = Effect.gen(function*() {
  const slots = yield* Slots.make(1)
  const open = yield* Deferred.make<void>()
  const ran: Array<string> = []
  const holder = yield* Effect.forkChild(slots.withSlot("later")(Deferred.await(open)))
  yield* Effect.yieldNow
  const run = (name: string, line: Slots.Line) =>
    Effect.forkChild(slots.withSlot(line)(Effect.sync(() => void ran.push(name))))
  /** Frees the held slot (the holder ends, in a fiber of its own) and waits for the holder. */
  const release = Effect.andThen(Deferred.succeed(open, undefined), Fiber.join(holder))
  return { slots, ran, run, release, open, holder }
})

describe("Slots", () => {
  it.effect("a freed slot goes to the first line before the later one, in arrival order within each", () =>
    Effect.gen(function*() {
      const { ran, release, run, slots } = yield* oneHeldSlot
      const waiters = [
        ["a", "later"],
        ["b", "first"],
        ["c", "later"],
        ["d", "first"]
      ] as const
      const fibers: Array<Fiber.Fiber<void>> = []
      for (const [name, line] of waiters) {
        fibers.push(yield* run(name, line))
        yield* Effect.yieldNow
      }
      const waiting = yield* slots.snapshot
      assert.deepStrictEqual(waiting, { free: 0, first: 2, later: 2 })
      yield* release
      for (const fiber of fibers) yield* Fiber.join(fiber)
      assert.deepStrictEqual(ran, ["b", "d", "a", "c"])
      assert.deepStrictEqual(yield* slots.snapshot, { free: 1, first: 0, later: 0 })
    }))

  it.effect("an interrupted waiter leaves its line and takes no slot", () =>
    Effect.gen(function*() {
      const { ran, release, run, slots } = yield* oneHeldSlot
      const gone = yield* run("gone", "first")
      const stays = yield* run("stays", "later")
      yield* Effect.yieldNow
      yield* Fiber.interrupt(gone)
      assert.deepStrictEqual(yield* slots.snapshot, { free: 0, first: 0, later: 1 })
      yield* release
      yield* Fiber.join(stays)
      assert.deepStrictEqual(ran, ["stays"])
      assert.deepStrictEqual(yield* slots.snapshot, { free: 1, first: 0, later: 0 })
    }))

  it.effect("a waiter interrupted around the hand-over of a slot loses no slot: the next waiter gets it", () =>
    Effect.gen(function*() {
      const { holder, open, ran, run, slots } = yield* oneHeldSlot
      const handed = yield* run("handed", "first")
      const next = yield* run("next", "later")
      yield* Effect.yieldNow
      // the holder's end hands the slot to `handed` (resumed in a microtask), interrupted about then: whether it ran
      // or not, the slot goes on to `next` and comes back free
      yield* Effect.sync(() => {
        Effect.runFork(Deferred.succeed(open, undefined))
      })
      yield* Fiber.join(holder)
      yield* Fiber.interrupt(handed)
      yield* Fiber.join(next)
      assert.include(["next", "handed,next"], ran.join(","))
      assert.deepStrictEqual(yield* slots.snapshot, { free: 1, first: 0, later: 0 })
    }))

  it.effect("never more handlers at once than slots, and every handler runs", () =>
    Effect.gen(function*() {
      const slots = yield* Slots.make(3)
      let running = 0
      let most = 0
      let done = 0
      const handler = Effect.gen(function*() {
        running += 1
        most = Math.max(most, running)
        for (let i = 0; i < 3; i++) yield* Effect.yieldNow
        running -= 1
        done += 1
      })
      yield* Effect.forEach(
        Array.from({ length: 40 }, (_, i) => i),
        (i) => slots.withSlot(i % 3 === 0 ? "first" : "later")(handler),
        { concurrency: "unbounded", discard: true }
      )
      assert.strictEqual(done, 40)
      assert.strictEqual(most, 3)
      assert.deepStrictEqual(yield* slots.snapshot, { free: 3, first: 0, later: 0 })
    }))
})
