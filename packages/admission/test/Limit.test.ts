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

describe("Limit.update (with a hold, as the deriver's gate uses it)", () => {
  const hold = { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0 }
  const policy: Limit.Policy = {
    minConcurrency: 1,
    maxConcurrency: 9,
    decreaseRatio: 0.5,
    slowMillis: 0,
    growth: "always",
    hold
  }
  const unavailable = { outcome: "Unavailable", inFlight: 1, millis: 1 } as const
  const answered = { outcome: "Answered", inFlight: 1, millis: 1 } as const

  it("a burst of refusals halves the limit down to 1 and starts one hold", () => {
    let state = Limit.start(policy)
    for (let i = 0; i < 9; i++) state = Limit.update(state, policy, { sample: unavailable, now: 0, draw: () => 0.5 })
    assert.strictEqual(state.limit, 1)
    assert.strictEqual(state.growAfter, 1000, "now + the base hold")
    assert.strictEqual(state.hold?.currentMillis, 2000, "the hold stepped once for the burst")
  })

  it("no growth before the hold ends; then one per answer (always, busy or not); the maximum resets the hold", () => {
    let state = Limit.update(Limit.start(policy), policy, { sample: unavailable, now: 0, draw: () => 0.5 }) // 9 → 4, hold until 1 s
    state = Limit.update(state, policy, { sample: answered, now: 999, draw: () => 0.5 })
    assert.strictEqual(state.limit, 4, "held")
    state = Limit.update(state, policy, { sample: answered, now: 1000, draw: () => 0.5 })
    assert.strictEqual(state.limit, 5)
    for (let i = 0; i < 4; i++) {
      state = Limit.update(state, policy, {
        sample: answered,
        now: 1001 + i,
        draw: () => 0.5
      })
    }
    assert.deepStrictEqual(state, Limit.start(policy), "back at the maximum with the base hold")
  })

  it("a refusal after the hold ends starts the next, longer hold; within a hold it keeps the one running", () => {
    let state = Limit.update(Limit.start(policy), policy, { sample: unavailable, now: 0, draw: () => 0.5 }) // hold until 1 s, next 2 s
    state = Limit.update(state, policy, { sample: unavailable, now: 500, draw: () => 0.5 })
    assert.strictEqual(state.growAfter, 1000)
    state = Limit.update(state, policy, { sample: unavailable, now: 1000, draw: () => 0.5 })
    assert.strictEqual(state.growAfter, 3000, "1 s + the 2 s hold")
    assert.strictEqual(state.hold?.currentMillis, 4000)
  })

  it("recovered: the hold ends at once and returns to its base", () => {
    let state = Limit.update(Limit.start(policy), policy, { sample: unavailable, now: 0, draw: () => 0.5 })
    state = Limit.update(state, policy, { sample: unavailable, now: 1000, draw: () => 0.5 })
    state = Limit.recovered(state, policy)
    assert.deepStrictEqual(state, { ...Limit.start(policy), limit: 2 })
    assert.strictEqual(Limit.update(state, policy, { sample: answered, now: 1001, draw: () => 0.5 }).limit, 3)
  })

  it("without a hold and with whenBusy growth it is next()", () => {
    const plain: Limit.Policy = { ...settings, growth: "whenBusy" }
    let state = Limit.start(plain)
    for (const sample of [unavailable, answered, { ...answered, inFlight: 19 }]) {
      const expected = Limit.next(state.limit, sample, plain)
      state = Limit.update(state, plain, { sample: sample, now: 0, draw: () => 0.5 })
      assert.strictEqual(state.limit, expected)
    }
  })
})
