import { assert, describe, it } from "@effect/vitest"
import type { PollBackoff } from "@resilience/jitter"
import fc from "fast-check"
import * as Scheduling from "../src/Scheduling.ts"
import * as Arbitraries from "./arbitraries.ts"

const settings = (ratio: number, enabled = true): PollBackoff.Settings => ({
  baseMillis: 1000,
  multiplier: 2,
  maxMillis: 30_000,
  enabled,
  ratio
})

describe("Scheduling (pure)", () => {
  it("empty and error advance 1, 2, 4, 8, 16, 30, 30; claimed resets with no sleep; busy leaves the state", () => {
    let state = { currentMillis: 1000 }
    const sleeps: Array<number> = []
    for (let i = 0; i < 7; i++) {
      const decision = Scheduling.decide(settings(0), state, i % 2 === 0 ? "empty" : "error", 0.3)
      sleeps.push(decision.sleepMillis)
      state = decision.state
    }
    assert.deepStrictEqual(sleeps, [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000])
    const busy = Scheduling.decide(settings(0), state, "busy", 0.9)
    assert.deepStrictEqual(busy, { sleepMillis: 1000, state })
    assert.deepStrictEqual(Scheduling.decide(settings(0), state, "claimed", 0.5), {
      sleepMillis: 0,
      state: { currentMillis: 1000 }
    })
  })

  it("backoff disabled: always the base", () => {
    const decision = Scheduling.decide(settings(0, false), { currentMillis: 1000 }, "empty", 0)
    assert.deepStrictEqual(decision, { sleepMillis: 1000, state: { currentMillis: 1000 } })
  })

  it("every jittered sleep lies in [1 - r, 1 + r] x the nominal interval", () => {
    fc.assert(
      fc.property(
        Arbitraries.ratio,
        Arbitraries.draw,
        Arbitraries.interval,
        Arbitraries.sleepingOutcome,
        (ratio, u, current, outcome) => {
          const { sleepMillis } = Scheduling.decide(settings(ratio), { currentMillis: current }, outcome, u)
          return Arbitraries.withinJitter(sleepMillis, ratio, outcome === "busy" ? 1000 : current)
        }
      )
    )
  })

  it("draws only when the decision uses chance", () => {
    assert.isFalse(Scheduling.needsDraw("claimed", settings(0.5)))
    assert.isFalse(Scheduling.needsDraw("empty", settings(0)))
    assert.isTrue(Scheduling.needsDraw("busy", settings(0.5)))
    assert.strictEqual(Scheduling.startupDelay(30_000, 0.5), 15_000)
    assert.strictEqual(Scheduling.cleanupDelay(60_000, 0, 0.9), 60_000)
  })

  it("a heartbeat comes at most a third of the stale timeout after the last, at least a sixth, jittered down by half the ratio", () => {
    fc.assert(
      fc.property(Arbitraries.ratio, Arbitraries.draw, fc.integer({ min: 1, max: 3_600_000 }), (ratio, u, stale) => {
        const delay = Scheduling.heartbeatDelay(stale, ratio, u)
        return delay <= stale / 3 && delay >= (1 - ratio / 2) * (stale / 3) - 1e-9 && delay >= stale / 6 - 1e-9
      })
    )
    assert.strictEqual(Scheduling.heartbeatDelay(300_000, 0.5, 0), 100_000)
    assert.strictEqual(Scheduling.heartbeatDelay(300_000, 0.5, 0.5), 87_500)
    assert.isAtLeast(Scheduling.heartbeatDelay(300_000, 1, 0.999_999), 50_000)
  })
})
