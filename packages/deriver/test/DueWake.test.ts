import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import * as DueWake from "../src/internal/DueWake.ts"

describe("DueWake (pure)", () => {
  it("a wake fires no sooner than the item is due, nor than the floor from now, at most the spread later", () => {
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 1e6 }),
      fc.integer({ min: -1e4, max: 1e6 }),
      fc.integer({ min: 0, max: 1000 }),
      fc.integer({ min: 0, max: 1000 }),
      fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      (now, dueIn, floor, spread, u) => {
        const at = DueWake.fireAt(now, now + dueIn, floor, spread, u)
        assert.isAtLeast(at, now + dueIn)
        assert.isAtLeast(at, now + floor)
        assert.isAtMost(at, Math.max(now + dueIn, now + floor) + spread)
      }
    ))
    assert.strictEqual(DueWake.fireAt(1000, 1200, 50, 40, 0.5), 1220)
    assert.strictEqual(DueWake.fireAt(1000, 1010, 50, 40, 0), 1050)
  })

  it("keeps the known times ascending and once each, splits them at now, and keeps at most maxKnown (the earliest)", () => {
    let known: ReadonlyArray<number> = []
    // a time added again (two retries due at once, or every empty poll learning the same next item) is one wake
    for (const at of [300, 100, 200, 100]) known = DueWake.add(known, at)
    assert.deepStrictEqual(known, [100, 200, 300])
    assert.deepStrictEqual(DueWake.due(known, 150), { come: true, later: [200, 300] })
    assert.deepStrictEqual(DueWake.due(known, 50), { come: false, later: known })
    let many: ReadonlyArray<number> = []
    for (let i = DueWake.maxKnown + 10; i > 0; i--) many = DueWake.add(many, i)
    assert.strictEqual(many.length, DueWake.maxKnown)
    assert.strictEqual(many.at(-1), DueWake.maxKnown)
  })
})

describe("DueWake (TestClock)", () => {
  it.effect("wakes once per due time as each comes, the earliest first, and not before", () =>
    Effect.gen(function*() {
      const wakes: Array<number> = []
      const due = yield* DueWake.make(
        Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => wakes.push(at))),
        { floorMillis: 50, spreadMillis: 0 }
      )
      yield* due.at(300)
      yield* due.at(100)
      yield* due.at(320)
      yield* TestClock.adjust("99 millis")
      assert.deepStrictEqual(wakes, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(wakes, [100])
      yield* TestClock.adjust("199 millis")
      assert.deepStrictEqual(wakes, [100])
      // 300 and 320 are each a wake of their own, the second no sooner than the floor after the first
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(wakes, [100, 300])
      yield* TestClock.adjust("49 millis")
      assert.deepStrictEqual(wakes, [100, 300])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(wakes, [100, 300, 350])
      assert.deepStrictEqual(yield* due.known, [])
      // a time already past wakes after the floor, not at once
      yield* due.at(0)
      yield* TestClock.adjust("49 millis")
      assert.strictEqual(wakes.length, 3)
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(wakes, [100, 300, 350, 400])
    }))

  it.effect("nothing known, nothing woken: the timer sleeps only for a time it was given", () =>
    Effect.gen(function*() {
      let wakes = 0
      yield* DueWake.make(Effect.sync(() => wakes++), { floorMillis: 50, spreadMillis: 50 })
      yield* TestClock.adjust("1 hour")
      assert.strictEqual(wakes, 0)
    }))
})
