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

const settings: Overload.Settings = {
  slowPollMillis: 2000,
  maxMillis: 300_000,
  multiplier: 2,
  recoveryMillis: 30_000
}

/** The first `n` intervals of the doubling from 1 s, capped at `capMillis`. */
const doubling = (n: number, capMillis: number) =>
  Array.from({ length: n }, (_, i) => Math.min(1000 * 2 ** i, capMillis))

const repeat = (n: number, poll: readonly [Scheduling.Outcome, Overload.Signal]) =>
  Array.from({ length: n }, () => poll)

/** `Overload.decide` with the suite's settings and the backoff at `ratio`. */
const decide = (ratio: number, input: Omit<Overload.DecideInput, "settings" | "backoff">) =>
  Overload.decide({ settings, backoff: backoff(ratio), ...input })

/**
 * A loop's two states, from the initial ones: `poll` decides one poll (its outcome and signal, the time, the draw)
 * and carries the decision's states to the next.
 */
const loop = (ratio: number) => {
  let schedule = Scheduling.initialState(backoff(ratio), "base")
  let overload = Overload.initial
  return {
    schedule: () => schedule,
    overload: () => overload,
    poll: (outcome: Scheduling.Outcome, signal: Overload.Signal, nowMillis: number, u: number) => {
      const decision = decide(ratio, { schedule, overload, outcome, signal, nowMillis, u })
      schedule = decision.schedule
      overload = decision.overload
      return decision
    }
  }
}

/**
 * Runs a sequence of (outcome, signal) polls from the initial states, each taking `pollMillis` and followed by
 * its sleep on a clock; returns the sleeps, the floors in force and the times of the decisions.
 */
const replay = (
  ratio: number,
  polls: ReadonlyArray<readonly [Scheduling.Outcome, Overload.Signal]>,
  draws: (i: number) => number = () => 0.5,
  pollMillis = 10
) => {
  const polling = loop(ratio)
  let now = 0
  const sleeps: Array<number> = []
  const floors: Array<number> = []
  const times: Array<number> = []
  polls.forEach(([outcome, signal], i) => {
    now += pollMillis
    const decision = polling.poll(outcome, signal, now, draws(i))
    sleeps.push(decision.sleepMillis)
    times.push(now)
    floors.push(decision.floorMillis)
    now += decision.sleepMillis
  })
  return { sleeps, floors, times }
}

describe("Overload (pure)", () => {
  it("the database's share: the process's lag comes off the elapsed time, never below 0; subtractLag false keeps it", () => {
    const timed = (elapsedMillis: number, lagMillis: number, s: Overload.Settings = settings) =>
      Overload.signalOfPoll(s, { result: "succeeded", elapsedMillis, lagMillis })
    assert.strictEqual(timed(5000, 3000), "fast")
    assert.strictEqual(timed(5000, 2999), "slow")
    assert.strictEqual(timed(1500, 4000), "fast")
    assert.strictEqual(Overload.databaseMillis(settings, { elapsedMillis: 1500, lagMillis: 4000 }), 0)
    assert.strictEqual(timed(5000, 3000, { ...settings, subtractLag: false }), "slow")
    // lag says nothing about a cancelled claim or an outage
    assert.strictEqual(
      Overload.signalOfPoll(settings, { result: "cancelled", elapsedMillis: 10, lagMillis: 10 }),
      "cancelled"
    )
    assert.strictEqual(
      Overload.signalOfPoll(settings, { result: "unavailable", elapsedMillis: 10, lagMillis: 10 }),
      "unavailable"
    )
  })

  it("property: without lag, signalOfPoll is signalOf; more lag never turns a fast poll slow", () => {
    const results = fc.constantFrom<Overload.PollResult>("succeeded", "cancelled", "unavailable", "failed")
    const millis = fc.integer({ min: 0, max: 20_000 })
    fc.assert(
      fc.property(results, millis, millis, millis, (result, elapsedMillis, lag, more) => {
        assert.strictEqual(
          Overload.signalOfPoll(settings, { result, elapsedMillis, lagMillis: 0 }),
          Overload.signalOf(settings, result, elapsedMillis)
        )
        const less = Overload.signalOfPoll(settings, { result, elapsedMillis, lagMillis: lag })
        const moreLag = Overload.signalOfPoll(settings, { result, elapsedMillis, lagMillis: lag + more })
        if (less === "fast") assert.strictEqual(moreLag, "fast")
      })
    )
  })

  it("signals: slow above the threshold and cancelled are overload; unavailable is an outage; others teach nothing", () => {
    assert.strictEqual(Overload.signalOf(settings, "succeeded", 2000), "fast")
    assert.strictEqual(Overload.signalOf(settings, "succeeded", 2001), "slow")
    assert.strictEqual(Overload.signalOf(settings, "cancelled", 5), "cancelled")
    assert.strictEqual(Overload.signalOf(settings, "unavailable", 5), "unavailable")
    assert.strictEqual(Overload.signalOf(settings, "failed", 60_000), "none")
    assert.deepStrictEqual(
      (["fast", "slow", "cancelled", "unavailable", "none"] as const).filter(Overload.isOverloadSignal),
      ["slow", "cancelled"]
    )
  })

  it("without overload signals every decision is exactly Scheduling.decide's (same draws, same sleeps)", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.array(
          fc.tuple(
            fc.constantFrom<Scheduling.Outcome>("claimed", "empty", "busy", "error"),
            fc.constantFrom<Overload.Signal>("fast", "unavailable", "none"),
            fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true })
          ),
          { maxLength: 40 }
        ),
        (ratio, polls) => {
          const polling = loop(ratio)
          let now = 0
          for (const [outcome, signal, u] of polls) {
            assert.strictEqual(
              Overload.needsDraw(outcome, signal, backoff(ratio)),
              Scheduling.needsDraw(outcome, backoff(ratio))
            )
            const expected = Scheduling.decide(backoff(ratio), polling.schedule(), outcome, u)
            const actual = polling.poll(outcome, signal, now, u)
            now += actual.sleepMillis + 7
            assert.strictEqual(actual.sleepMillis, expected.sleepMillis)
            assert.deepStrictEqual(actual.schedule, expected.state)
            assert.deepStrictEqual(actual.overload, Overload.initial)
            assert.strictEqual(actual.wakeable, outcome === "busy")
          }
        }
      )
    )
  })

  it("an outage keeps the spec's schedule: 1, 2, 4, … capped at the idle cap, no floor", () => {
    const { floors, sleeps } = replay(0, repeat(12, ["error", "unavailable"] as const))
    assert.deepStrictEqual(sleeps, doubling(12, 30_000))
    assert.isTrue(floors.every((floor) => floor === 0))
  })

  it("slow polls continue the doubling past the idle cap and stop at the overload cap", () => {
    const { floors, sleeps } = replay(0, repeat(12, ["empty", "slow"] as const))
    // 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300 s
    assert.deepStrictEqual(sleeps, doubling(12, 300_000))
    assert.isTrue(floors.every((floor) => floor <= 300_000))
  })

  it("slow claims sleep the floor, which doubles from the base even while claiming, up to the cap", () => {
    const { floors, sleeps } = replay(0, repeat(14, ["claimed", "slow"] as const))
    // A claim resets the schedule (it would poll again at once), but a slow one waits out the floor.
    assert.deepStrictEqual(sleeps.slice(0, 4), [1000, 2000, 4000, 8000])
    assert.isTrue(sleeps.some((sleep) => sleep > 30_000), "past the idle cap")
    assert.strictEqual(Math.max(...sleeps), 300_000)
    assert.strictEqual(floors.at(-1), 300_000)
  })

  it("under the floor a claim that was fast is followed by the next poll at once; a busy loop wakes on a free worker", () => {
    /** A decision at ratio 0.5, draw 0, from the schedule at `currentMillis` under a holding 300 s floor. */
    const underFloor = (currentMillis: number, outcome: Scheduling.Outcome, signal: Overload.Signal) =>
      decide(0.5, {
        schedule: { currentMillis },
        overload: { floorMillis: 300_000, healthySinceMillis: Infinity },
        outcome,
        signal,
        nowMillis: 0,
        u: 0
      })
    const claimed = underFloor(30_000, "claimed", "fast")
    assert.strictEqual(claimed.sleepMillis, 0)
    assert.deepStrictEqual(claimed.schedule, { currentMillis: 1000 })
    const busy = underFloor(1000, "busy", "none")
    assert.isTrue(busy.wakeable)
    assert.strictEqual(busy.sleepMillis, 500, "the jittered base, not the floor")
    assert.isFalse(Overload.needsDraw("claimed", "fast", backoff(0.5)))
    assert.isTrue(Overload.needsDraw("claimed", "slow", backoff(0.5)))
    // Time-driven polls under a holding floor wait it out (a failure that teaches nothing leaves it holding).
    const failed = underFloor(1000, "error", "none")
    assert.strictEqual(failed.sleepMillis, 150_000)
    assert.isFalse(failed.wakeable)
  })

  it("the floor falls over wall-clock time of healthy polling: gone within the recovery time, whatever the polls", () => {
    fc.assert(
      fc.property(
        Arbitraries.ratio,
        fc.integer({ min: 1, max: 9 }),
        fc.array(
          fc.tuple(
            fc.constantFrom<Scheduling.Outcome>("claimed", "empty", "error", "busy"),
            fc.constantFrom<Overload.Signal>("fast", "unavailable", "none"),
            Arbitraries.draw,
            fc.integer({ min: 0, max: 3000 })
          ),
          { minLength: 1, maxLength: 60 }
        ),
        (ratio, slowPolls, polls) => {
          // Overloaded first: `slowPolls` slow empty polls.
          const polling = loop(ratio)
          let now = 0
          for (let i = 0; i < slowPolls; i++) now += polling.poll("empty", "slow", now, 0.5).sleepMillis + 2500
          const floorAtSignal = polling.overload().floorMillis
          let healthySince: number | undefined
          let previousFloor = floorAtSignal
          for (const [outcome, signal, u, pollMillis] of polls) {
            const schedule = polling.schedule()
            const decision = polling.poll(outcome, signal, now, u)
            if (healthySince === undefined && Overload.isHealthySignal(signal)) healthySince = now
            if (healthySince !== undefined) {
              const end = healthySince + 30_000 * (floorAtSignal / 300_000)
              // Falls linearly from the first healthy poll, gone by the recovery bound, and no sleep outlasts it.
              assert.isAtMost(decision.floorMillis, previousFloor + 1e-6, "never rises without a signal")
              if (decision.floorMillis > 0 && outcome !== "busy" && outcome !== "claimed") {
                assert.isAtMost(
                  now + decision.sleepMillis,
                  Math.max(end, now + schedule.currentMillis * (1 + ratio)) + 1e-6
                )
              }
              if (now >= end) assert.strictEqual(decision.floorMillis, 0, "gone by the bound")
            } else {
              assert.strictEqual(decision.floorMillis, floorAtSignal, "holds until a healthy poll")
            }
            previousFloor = decision.floorMillis
            now += pollMillis + decision.sleepMillis
          }
        }
      )
    )
  })

  it("from the overload cap, the first healthy poll brings sleeps back to at most the recovery time; then the idle schedule", () => {
    const overloaded = repeat(12, ["empty", "slow"] as const)
    const recovering = repeat(10, ["empty", "fast"] as const)
    const { floors, sleeps, times } = replay(0, [...overloaded, ...recovering])
    assert.strictEqual(floors[11], 300_000)
    const firstHealthy = times[12]!
    // The first healthy poll sleeps at most the recovery time (30 s), not the 300 s floor.
    assert.isAtMost(sleeps[12]!, 30_000)
    const gone = floors.findIndex((floor, i) => i >= 12 && floor === 0)
    // (seen by the first poll after the bound: the sleep ends on it, the poll takes its 10 ms)
    assert.isAtMost(times[gone]! - firstHealthy, 30_000 + 10, "gone within the recovery time")
    // Then the empty schedule sleeps its cap, 30 s, as the spec's.
    assert.strictEqual(sleeps.at(-1), 30_000)
  })

  it("an outage after thrash neither raises the floor nor lets it fall; the first fast poll after it does", () => {
    const thrash = repeat(12, ["empty", "slow"] as const)
    const outage = repeat(4, ["error", "unavailable"] as const)
    const { floors, sleeps } = replay(0, [...thrash, ...outage, ...repeat(6, ["empty", "fast"] as const)])
    assert.deepStrictEqual(floors.slice(12, 16), [300_000, 300_000, 300_000, 300_000], "holds through the outage")
    assert.isAtMost(sleeps[16]!, 30_000, "the first fast poll brings the sleeps back to the recovery time")
    assert.strictEqual(floors.at(-1), 0)
    assert.strictEqual(sleeps.at(-1), 30_000)
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
          const { sleepMillis } = decide(ratio, {
            schedule: { currentMillis: current },
            overload: { floorMillis: floor, healthySinceMillis: Infinity },
            outcome,
            signal: "none",
            nowMillis: 0,
            u
          })
          return Arbitraries.withinJitter(sleepMillis, ratio, outcome === "busy" ? 1000 : Math.max(current, floor))
        }
      )
    )
  })
})
