/**
 * The modelled wake (`Model.Wake`): a served API write gives its tenant work and, with the wake on, makes the
 * tenant's deriver poll now, as `@resilience/wake`'s `Coalesce` decides for the deriver: wakes during a poll
 * coalesce into one more poll, a woken poll waits out the minimum interval, a woken poll that fails restores
 * the schedule and disarms wakes until a poll succeeds; an overload floor holds them. Seeded runs; every
 * figure asserted is computed by the simulation, the bounds come from the model's settings.
 */
import { assert, describe, it } from "@effect/vitest"
import { PollBackoff } from "@resilience/jitter"
import * as Model from "../src/Model.ts"
import * as Simulation from "../src/Simulation.ts"
import * as Summary from "../src/Summary.ts"
import { followable } from "./fixtures.ts"

/** A healthy fleet at its idle cap (spread start), writes only, a database with room for everyone. */
const healthy = (enabled: boolean, overrides: Partial<Model.Params> = {}): Model.Params => {
  const preset = Model.preset("spike", "fixed")
  return {
    ...preset,
    derivers: 200,
    horizonSeconds: 600,
    spike: undefined,
    api: { requestsPerSecond: 2, queryMillis: 20 },
    pooler: { ...preset.pooler, backendCeiling: 200 },
    database: { ...preset.database, cores: 200 },
    wake: { ...Model.noWake, enabled, writeFraction: 1 },
    ...overrides
  }
}

/**
 * Every wake is a poll of its own (now, or the one more poll after a poll in flight), coalesced, held by a
 * floor or ignored (disarmed); at most one per deriver is still waiting at the horizon.
 */
const accounted = (summary: Summary.Summary, derivers: number) => {
  const waiting = summary.wakes - summary.wakePolls - summary.wakesCoalesced - summary.wakesHeld -
    summary.wakesIgnored
  assert.isTrue(waiting >= 0 && waiting <= derivers, `${waiting} wakes unaccounted for`)
}

const run = (params: Model.Params) => {
  const outcome = Simulation.run(params)
  return { outcome, summary: Summary.summarize(outcome) }
}

describe("Simulation: the wake path", () => {
  it("without writes the run is the model without the wake path, draw for draw", () => {
    const params: Model.Params = { ...Model.scaled(Model.preset("incident", "adaptive"), 20), horizonSeconds: 300 }
    const without = Simulation.run({ ...params, wake: undefined }, { recordClaims: 500 })
    const off = Simulation.run({ ...params, wake: Model.noWake }, { recordClaims: 500 })
    const onButNoWrites = Simulation.run({ ...params, wake: { ...Model.noWake, enabled: true } }, { recordClaims: 500 })
    assert.isAbove(without.totals.claimStarts, 0)
    for (const other of [off, onButNoWrites]) {
      assert.deepStrictEqual(other.totals, without.totals)
      assert.deepStrictEqual(other.claimStartTimes, without.claimStartTimes)
    }
  })

  it("off, a write waits for its deriver's next poll on the idle schedule; on, it is picked up in one claim", () => {
    const off = run(healthy(false))
    const on = run(healthy(true))
    const params = healthy(true)
    for (const r of [off, on]) assert.isAbove(r.summary.writes, 600)
    // off: at the 30 s cap (±50 %) the next poll is on average ~15 s away
    assert.isAbove(off.summary.pickupP50Seconds!, 5)
    assert.strictEqual(off.summary.wakes, 0)
    // on: the wake's delay, one handshake and one claim (no queueing: the database has a core per deriver)
    const oneClaim = (params.wake!.delayMillis + params.pooler.connectCostMillis + params.database.claimMillis +
      params.pooler.relayCostMillis) / 1000
    assert.isAtMost(on.summary.pickupP50Seconds!, oneClaim + 0.001)
    assert.strictEqual(on.summary.wakes, on.summary.writes)
    accounted(on.summary, params.derivers)
  })

  it("a flood of wakes to one deriver coalesces: polls back to back at most, never one per wake", () => {
    const params = healthy(true, {
      derivers: 1,
      horizonSeconds: 60,
      api: { requestsPerSecond: 500, queryMillis: 1 },
      pooler: { ...healthy(true).pooler, backendCeiling: 50 },
      database: { cores: 50, claimMillis: 170, contention: 0 }
    })
    const { summary } = run(params)
    assert.isAbove(summary.wakes, 20_000)
    // one poll in flight at a time, each a claim of 170 ms at least: no more polls than fit back to back
    assert.isAtMost(summary.polls, params.horizonSeconds * 1000 / params.database.claimMillis + 1)
    // every wake but those that made a poll (and the one still waiting at the horizon) was folded into one
    assert.isAtLeast(summary.wakesCoalesced, summary.wakes - summary.wakePolls - 1)
    assert.isAtMost(summary.wakePolls, summary.polls)
    accounted(summary, params.derivers)
  })

  it("a woken poll starts no sooner than the minimum interval after the last poll started", () => {
    // a flood of wakes to one deriver whose claims take 1 ms: without the interval, woken polls follow one
    // another within milliseconds
    const flood = (minIntervalMillis: number) => {
      const params = healthy(true, {
        derivers: 1,
        horizonSeconds: 60,
        api: { requestsPerSecond: 500, queryMillis: 1 },
        database: { cores: 50, claimMillis: 1, contention: 0 },
        wake: { ...Model.noWake, enabled: true, writeFraction: 1, minIntervalMillis }
      })
      const gaps: Array<number> = []
      let lastStart = -Infinity
      Simulation.run(params, {
        onPoll: (poll) => {
          if (poll.woken) gaps.push(poll.startedAtMillis - lastStart)
          lastStart = poll.startedAtMillis
        }
      })
      return { gaps, params }
    }
    const bounded = flood(Model.noWake.minIntervalMillis)
    const unbounded = flood(0)
    assert.isAbove(Model.noWake.minIntervalMillis, 0)
    // the flood keeps the deriver polling at the bound: more than one woken poll per two intervals
    assert.isAbove(bounded.gaps.length, bounded.params.horizonSeconds * 1000 / Model.noWake.minIntervalMillis / 2)
    assert.isAtLeast(Math.min(...bounded.gaps), Model.noWake.minIntervalMillis - 1e-9)
    assert.isBelow(Math.min(...unbounded.gaps), Model.noWake.minIntervalMillis)
    assert.isAbove(unbounded.gaps.length, bounded.gaps.length)
  })

  it("a woken poll that fails restores the schedule and disarms wakes until a poll succeeds or a base interval passes, as Coalesce", () => {
    // one deriver; the wake's hop is long (240 s), so writes served before the outage wake it during it
    const params = followable("fixed", { derivers: 1, horizonSeconds: 1_200 }, {
      api: { requestsPerSecond: 0.1, queryMillis: 20 },
      wake: { ...Model.noWake, enabled: true, writeFraction: 1, delayMillis: 240_000 },
      outage: { atSeconds: 300, seconds: 600, resendWindowMillis: 30_000 }
    })
    const polls: Array<Simulation.Poll> = []
    const summary = Summary.summarize(Simulation.run(params, { onPoll: (poll) => polls.push(poll) }))
    let armed = true
    let failedWoken = 0
    let restoredAboveBase = 0
    let rearmed = 0
    let wokenAfterRearm = 0
    let previous: Simulation.Poll | undefined
    for (const poll of polls) {
      if (poll.woken) {
        // disarmed wakes count again a base interval after the last poll started (`Coalesce.wake`'s re-arm)
        const sinceLast = poll.startedAtMillis - (previous?.startedAtMillis ?? -Infinity)
        assert.isTrue(
          armed || sinceLast >= params.poll.baseMillis,
          `a woken poll at ${poll.startedAtMillis} ms while wakes were disarmed, ${sinceLast} ms after the last poll`
        )
        if (rearmed > 0) wokenAfterRearm++
      }
      if (poll.woken && poll.outcome === "error") {
        failedWoken++
        // the schedule it had before the wake, stepped by the failure (not the base the wake reset it to)
        const before = previous!.intervalMillis
        assert.strictEqual(poll.intervalMillis, PollBackoff.step({ currentMillis: before }, params.poll).currentMillis)
        if (before > params.poll.baseMillis) restoredAboveBase++
        armed = false
      } else if (poll.outcome === "claimed" || poll.outcome === "empty") {
        if (!armed) rearmed++
        armed = true
      }
      previous = poll
    }
    assert.isAtLeast(failedWoken, 1)
    assert.strictEqual(summary.wakePollsFailed, failedWoken)
    // the restore was seen to matter: the schedule before the wake was above the base
    assert.isAbove(restoredAboveBase, 0)
    // wakes came while disarmed and were ignored; once a poll succeeded, wakes made polls again
    assert.isAbove(summary.wakesIgnored, 0)
    assert.isAbove(rearmed, 0)
    assert.isAbove(wokenAfterRearm, 0)
    accounted(summary, params.derivers)
  })

  it("a wake does not cut an overload floor short: on a thrashing database wakes are held", () => {
    const preset = Model.preset("spike", "adaptive")
    const params: Model.Params = {
      ...preset,
      derivers: 400,
      horizonSeconds: 600,
      spike: undefined,
      api: { requestsPerSecond: 20, queryMillis: 20 },
      admission: undefined,
      // the claims alone oversubscribe the cores and contention makes it worse: polls are slow, floors rise
      database: { cores: 2, claimMillis: 170, contention: 2 },
      wake: { ...Model.noWake, enabled: true, writeFraction: 1 }
    }
    const { summary } = run(params)
    assert.isAbove(summary.wakesHeld, 0)
    accounted(summary, params.derivers)
  })

  it("incident, scaled 8×, 10 % of API requests writes: with wakes on the settled claim starts stay within mean + 5·sqrt(mean)", () => {
    const params = {
      ...Model.scaled(Model.preset("incident", "fixed"), 8),
      horizonSeconds: 900,
      wake: { ...Model.noWake, enabled: true, writeFraction: 0.1 }
    }
    const { summary } = run(params)
    assert.isAbove(summary.wakePolls, 1000)
    assert.isNotNull(summary.recoverySeconds)
    assert.isAtMost(summary.settledMaxClaimStartsPerSecond, summary.settledHerdBound)
  })

  it("outage, scaled 8×: every tenant's resent write is served and processed, with wakes on and off", () => {
    const base = Model.scaled(Model.preset("outage", "fixed"), 8)
    for (const enabled of [false, true]) {
      const { summary } = run({ ...base, wake: { ...Model.noWake, enabled } })
      assert.strictEqual(summary.resendsServed, base.derivers)
      assert.strictEqual(summary.resendsProcessed, base.derivers)
      assert.isNotNull(summary.drainSeconds)
      assert.isAtLeast(summary.drainSeconds!, summary.lastFirst201Seconds! - 1e-9)
    }
  })
})
