import { assert, describe, it } from "@effect/vitest"
import * as Breaker from "../src/Breaker.ts"

const policy: Breaker.Policy = {
  tripFailures: 2,
  windows: { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0.5 }
}

const tripped = (now: number) => {
  let state = Breaker.initial(policy)
  for (let i = 0; i < 2; i++) {
    state = Breaker.settle(state, policy, {
      outcome: "Unavailable",
      probe: false,
      now: now,
      draw: () => 0
    })
  }
  return state
}

describe("Breaker (pure)", () => {
  it("opens when tripFailures of the last 2 × tripFailures outcomes were unavailable", () => {
    let state = Breaker.initial(policy)
    for (const outcome of ["Unavailable", "Answered", "Answered", "Answered", "Unavailable"] as const) {
      state = Breaker.settle(state, policy, { outcome: outcome, probe: false, now: 0, draw: () => 0 })
    }
    assert.strictEqual(state.phase, "Closed", "two of the last four, but the first fell out of the window")
    state = Breaker.settle(state, policy, { outcome: "Ignored", probe: false, now: 0, draw: () => 0 })
    assert.strictEqual(state.phase, "Closed", "ignored outcomes are not recorded")
    state = Breaker.settle(state, policy, { outcome: "Unavailable", probe: false, now: 0, draw: () => 0 })
    assert.strictEqual(state.phase, "Open")
    assert.strictEqual(state.openUntil, 500, "the base window at the lowest jitter draw")
  })

  it("open: shed until the window ends, then one probe; an early caller may probe before it", () => {
    const state = tripped(0)
    assert.strictEqual(Breaker.enter(state, 499)[0], "shed")
    assert.strictEqual(Breaker.retryAfterMillis(state, 100), 400)
    const [decision, probing] = Breaker.enter(state, 500)
    assert.strictEqual(decision, "probe")
    assert.strictEqual(Breaker.enter(probing, 600)[0], "shed", "one probe at a time")
    assert.strictEqual(Breaker.enter(state, 10, true)[0], "probe", "early")
    assert.strictEqual(Breaker.enter(Breaker.enter(state, 10, true)[1], 10, true)[0], "shed", "still one at a time")
  })

  it("evidence from outside lets an open circuit's next caller probe at once; half-open and closed stay", () => {
    const open = tripped(0)
    assert.strictEqual(open.phase, "Open")
    assert.strictEqual(Breaker.enter(open, 10)[0], "shed", "in its window")
    const evidenced = Breaker.evidence(open)
    assert.deepStrictEqual(Breaker.enter(evidenced, 10)[0], "probe")
    const [, probing] = Breaker.enter(evidenced, 10)
    assert.strictEqual(Breaker.enter(probing, 10)[0], "shed", "still one probe at a time")
    assert.strictEqual(Breaker.evidence(probing), probing, "half-open: unchanged")
    const closed = Breaker.initial(policy)
    assert.strictEqual(Breaker.evidence(closed), closed, "closed: unchanged")
    // a failed probe opens the next window, as any probe's failure does
    const reopened = Breaker.settle(probing, policy, { outcome: "Unavailable", probe: true, now: 20, draw: () => 0 })
    assert.strictEqual(reopened.phase, "Open")
    assert.strictEqual(reopened.failedProbes, 1)
  })

  it("a probe that told nothing, or gave up, lets the next caller probe", () => {
    const [, probing] = Breaker.enter(tripped(0), 500)
    assert.strictEqual(
      Breaker.enter(
        Breaker.settle(probing, policy, {
          outcome: "Ignored",
          probe: true,
          now: 600,
          draw: () => 0
        }),
        600
      )[0],
      "probe"
    )
    assert.strictEqual(Breaker.enter(Breaker.abandon(probing), 600)[0], "probe")
  })

  it("failed probes step the window to the cap; calls admitted before the trip change nothing after it", () => {
    let state = tripped(0)
    let now = 0
    const windows: Array<number> = []
    for (let i = 0; i < 7; i++) {
      now = state.openUntil
      state = Breaker.settle(state, policy, { outcome: "Answered", probe: false, now: now, draw: () => 0.5 })
      assert.strictEqual(state.phase, "Open", "a late answer of a call admitted before the trip")
      const [, probing] = Breaker.enter(state, now)
      state = Breaker.settle(probing, policy, { outcome: "Unavailable", probe: true, now: now, draw: () => 0.5 })
      windows.push(state.openUntil - now)
    }
    assert.deepStrictEqual(windows, [2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000])
    assert.strictEqual(state.failedProbes, 7)
    const [, probing] = Breaker.enter(state, state.openUntil)
    assert.deepStrictEqual(
      Breaker.settle(probing, policy, { outcome: "Answered", probe: true, now: now, draw: () => 0.5 }),
      Breaker.initial(policy)
    )
  })
})

describe("Breaker.settle's draw", () => {
  it("is taken once, and only when a window opens", () => {
    let draws = 0
    const draw = () => (draws++, 0.5)
    let state = Breaker.initial(policy)
    assert.isFalse(Breaker.opens(state, policy, "Unavailable", false))
    state = Breaker.settle(state, policy, { outcome: "Unavailable", probe: false, now: 0, draw })
    assert.strictEqual(draws, 0)
    assert.isTrue(Breaker.opens(state, policy, "Unavailable", false))
    state = Breaker.settle(state, policy, { outcome: "Unavailable", probe: false, now: 0, draw })
    assert.strictEqual(state.phase, "Open")
    assert.strictEqual(draws, 1)
  })
})
