import { assert, describe, it } from "@effect/vitest"
import * as Limit from "../src/Limit.ts"
import * as Settings from "../src/Settings.ts"

const settings: Settings.Settings = { ...Settings.defaults, maxConcurrency: 20, minConcurrency: 2, slowMillis: 500 }

describe("Limit (AIMD)", () => {
  it("starts at the maximum", () => {
    assert.strictEqual(Limit.initial(settings), 20)
  })

  it("unavailable and overloaded cut it by the ratio, never below the minimum", () => {
    assert.strictEqual(Limit.next(20, { outcome: "Unavailable", inFlight: 20, millis: 3 }, settings), 18)
    assert.strictEqual(Limit.next(20, { outcome: "Overloaded", inFlight: 1, millis: 3 }, settings), 18)
    let limit = 20
    const seen: Array<number> = []
    for (let i = 0; i < 40; i++) {
      limit = Limit.next(limit, { outcome: "Unavailable", inFlight: 1, millis: 1 }, settings)
      seen.push(limit)
    }
    assert.deepStrictEqual(seen.slice(0, 8), [18, 16, 14, 12, 10, 9, 8, 7])
    assert.strictEqual(limit, 2)
  })

  it("an answer slower than slowMillis is overload; slowMillis 0 disables it", () => {
    assert.strictEqual(Limit.next(20, { outcome: "Answered", inFlight: 20, millis: 501 }, settings), 18)
    assert.strictEqual(Limit.next(19, { outcome: "Answered", inFlight: 19, millis: 500 }, settings), 20)
    assert.strictEqual(
      Limit.next(19, { outcome: "Answered", inFlight: 19, millis: 60_000 }, { ...settings, slowMillis: 0 }),
      20
    )
  })

  it("an answer adds one only while at least half the limit is in use, up to the maximum", () => {
    assert.strictEqual(Limit.next(10, { outcome: "Answered", inFlight: 5, millis: 1 }, settings), 11)
    assert.strictEqual(Limit.next(10, { outcome: "Answered", inFlight: 4, millis: 1 }, settings), 10)
    assert.strictEqual(Limit.next(20, { outcome: "Answered", inFlight: 20, millis: 1 }, settings), 20)
  })

  it("an ignored outcome changes nothing", () => {
    assert.strictEqual(Limit.next(7, { outcome: "Ignored", inFlight: 7, millis: 99_999 }, settings), 7)
  })
})
