import { assert, describe, it } from "@effect/vitest"
import type { PollBackoff } from "@resilience/jitter"
import fc from "fast-check"
import * as Overload from "../src/Overload.ts"
import * as Scheduling from "../src/Scheduling.ts"
import * as Arbitraries from "./arbitraries.ts"

const backoff = (ratio: number): PollBackoff.Settings => ({
  baseMillis: 1000,
  multiplier: 2,
  maxMillis: 30_000,
  enabled: true,
  ratio
})

const settings: Overload.Settings = { slowPollMillis: 2000, maxMillis: 300_000, multiplier: 2, recoveryFactor: 1.5 }

const repeat = (n: number, poll: readonly [Scheduling.Outcome, Overload.Signal]) =>
  Array.from({ length: n }, () => poll)

/** Runs a sequence of (outcome, signal) polls from the initial states; returns the sleeps and floors. */
const replay = (
  ratio: number,
  polls: ReadonlyArray<readonly [Scheduling.Outcome, Overload.Signal]>,
  draws: (i: number) => number = () => 0.5
) => {
  let schedule = Scheduling.initialState(backoff(ratio), "base")
  let overload = Overload.initial
  const sleeps: Array<number> = []
  const floors: Array<number> = []
  polls.forEach(([outcome, signal], i) => {
    const decision = Overload.decide(settings, backoff(ratio), schedule, overload, outcome, signal, draws(i))
    sleeps.push(decision.sleepMillis)
    schedule = decision.schedule
    overload = decision.overload
    floors.push(overload.floorMillis)
  })
  return { sleeps, floors }
}

describe("Overload (pure)", () => {
  it("signals: slow above the threshold, cancelled and unavailable; other failures teach nothing", () => {
    assert.strictEqual(Overload.signalOf(settings, "succeeded", 2000), "fast")
    assert.strictEqual(Overload.signalOf(settings, "succeeded", 2001), "slow")
    assert.strictEqual(Overload.signalOf(settings, "cancelled", 5), "cancelled")
    assert.strictEqual(Overload.signalOf(settings, "unavailable", 5), "unavailable")
    assert.strictEqual(Overload.signalOf(settings, "failed", 60_000), "none")
  })

  it("without overload signals every decision is exactly Scheduling.decide's (same draws, same sleeps)", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.array(
          fc.tuple(
            fc.constantFrom<Scheduling.Outcome>("claimed", "empty", "busy", "error"),
            fc.constantFrom<Overload.Signal>("fast", "none"),
            fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true })
          ),
          { maxLength: 40 }
        ),
        (ratio, polls) => {
          let state = Scheduling.initialState(backoff(ratio), "base")
          let overload = Overload.initial
          for (const [outcome, signal, u] of polls) {
            assert.strictEqual(
              Overload.needsDraw(overload, outcome, backoff(ratio)),
              Scheduling.needsDraw(outcome, backoff(ratio))
            )
            const expected = Scheduling.decide(backoff(ratio), state, outcome, u)
            const actual = Overload.decide(settings, backoff(ratio), state, overload, outcome, signal, u)
            assert.strictEqual(actual.sleepMillis, expected.sleepMillis)
            assert.deepStrictEqual(actual.schedule, expected.state)
            assert.deepStrictEqual(actual.overload, Overload.initial)
            assert.strictEqual(actual.wakeable, outcome === "busy")
            state = expected.state
            overload = actual.overload
          }
        }
      )
    )
  })

  it("an outage continues the doubling past the idle cap and stops at the overload cap", () => {
    const { floors, sleeps } = replay(0, repeat(12, ["error", "unavailable"] as const))
    assert.deepStrictEqual(sleeps, [
      1000,
      2000,
      4000,
      8000,
      16_000,
      32_000,
      64_000,
      128_000,
      256_000,
      300_000,
      300_000,
      300_000
    ])
    assert.isTrue(floors.every((floor) => floor <= 300_000))
  })

  it("slow polls raise the interval past the idle cap even while claiming, and no further than the cap", () => {
    const { floors, sleeps } = replay(0, repeat(14, ["claimed", "slow"] as const))
    // Claims reset the schedule (sleep 0), but the floor doubles from the base: 1, 2, 4, … 256, 300 s.
    assert.deepStrictEqual(sleeps.slice(0, 3), [0, 1000, 2000])
    assert.isTrue(sleeps.some((sleep) => sleep > 30_000), "past the idle cap")
    assert.strictEqual(Math.max(...sleeps), 300_000)
    assert.strictEqual(floors.at(-1), 300_000)
  })

  it("fast polls bring the floor back gradually, never in one step, then the schedule is the spec's again", () => {
    const overloaded = repeat(10, ["empty", "unavailable"] as const)
    const recovering = repeat(16, ["empty", "fast"] as const)
    const { floors, sleeps } = replay(0, [...overloaded, ...recovering])
    for (let i = 10; i < floors.length; i++) {
      const previous = floors[i - 1]!
      assert.isTrue(floors[i]! <= previous, "never rises on a fast poll")
      if (floors[i]! > 0) assert.isAtLeast(floors[i]!, previous / 1.5 - 1e-9, "at most one recovery factor per poll")
    }
    // From the cap back to the idle cap takes several fast polls.
    const back = sleeps.slice(10).findIndex((sleep) => sleep <= 30_000)
    assert.isAtLeast(back, 4)
    // Eventually the floor is gone and the empty schedule sleeps its cap, 30 s.
    assert.strictEqual(floors.at(-1), 0)
    assert.strictEqual(sleeps.at(-1), 30_000)
  })

  it("under overload a busy loop is not woken early and sleeps at least the jittered floor", () => {
    const overloaded = { floorMillis: 60_000 }
    const decision = Overload.decide(settings, backoff(0.5), { currentMillis: 1000 }, overloaded, "busy", "none", 0)
    assert.isFalse(decision.wakeable)
    assert.strictEqual(decision.sleepMillis, 30_000)
    assert.isTrue(Overload.needsDraw(overloaded, "claimed", backoff(0.5)))
  })

  it("every sleep lies in [1 - r, 1 + r] x max(schedule, floor)", () => {
    fc.assert(
      fc.property(
        Arbitraries.ratio,
        Arbitraries.draw,
        Arbitraries.interval,
        fc.integer({ min: 0, max: 300_000 }),
        Arbitraries.sleepingOutcome,
        (ratio, u, current, floor, outcome) => {
          const { sleepMillis } = Overload.decide(
            settings,
            backoff(ratio),
            { currentMillis: current },
            { floorMillis: floor },
            outcome,
            "none",
            u
          )
          return Arbitraries.withinJitter(sleepMillis, ratio, Math.max(outcome === "busy" ? 1000 : current, floor))
        }
      )
    )
  })
})
