/**
 * Where a record's claim along starts its walk (`internal/ClaimCursor.ts`): after the newest unit the last claim
 * took, and from the start again once the last walk from the start is the refresh interval old.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ClaimCursor from "../src/internal/ClaimCursor.ts"

const refresh = 1000

describe("ClaimCursor", () => {
  it("the first walk is from the start; the next starts after the newest unit it claimed", () => {
    const first = ClaimCursor.walkAt(ClaimCursor.initial, 0, refresh)
    assert.deepStrictEqual(first, { after: 0n, full: true })
    const state = ClaimCursor.advance(ClaimCursor.initial, first, ["12", "40", "7"], 0)
    assert.deepStrictEqual(state, { after: 40n, fullAtMillis: 0 })
    assert.deepStrictEqual(ClaimCursor.walkAt(state, 999, refresh), { after: 40n, full: false })
  })

  it("a walk from after the cursor only moves it forward, and keeps the time of the last walk from the start", () => {
    const state: ClaimCursor.State = { after: 40n, fullAtMillis: 100 }
    const walk = ClaimCursor.walkAt(state, 500, refresh)
    assert.deepStrictEqual(ClaimCursor.advance(state, walk, ["90", "41"], 500), { after: 90n, fullAtMillis: 100 })
    assert.deepStrictEqual(ClaimCursor.advance(state, walk, [], 500), state)
  })

  it("once the last walk from the start is the refresh interval old, the next walks from the start and resets the cursor", () => {
    const state: ClaimCursor.State = { after: 90n, fullAtMillis: 100 }
    const walk = ClaimCursor.walkAt(state, 1100, refresh)
    assert.deepStrictEqual(walk, { after: 0n, full: true })
    // it found an older unit (freed behind the cursor): the cursor goes back to the newest it took
    assert.deepStrictEqual(ClaimCursor.advance(state, walk, ["20", "95"], 1100), { after: 95n, fullAtMillis: 1100 })
    // it claimed nothing: the next walk is from the start again
    const empty = ClaimCursor.advance(state, walk, [], 1100)
    assert.deepStrictEqual(ClaimCursor.walkAt(empty, 1101, refresh), { after: 0n, full: true })
  })

  it("ids beyond 2^53 compare exactly", () => {
    const state = ClaimCursor.advance(ClaimCursor.initial, { after: 0n, full: true }, ["9007199254740993"], 0)
    assert.strictEqual(state.after, 9007199254740993n)
  })
})
