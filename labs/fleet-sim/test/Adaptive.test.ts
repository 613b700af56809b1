import { assert, describe, it } from "@effect/vitest"
import { Settings as AdmissionSettings } from "@resilience/admission"
import * as Model from "../src/Model.ts"
import * as Simulation from "../src/Simulation.ts"
import * as Summary from "../src/Summary.ts"
import { followable } from "./fixtures.ts"

/** One deriver (or a few), no API, no pooler costs: every poll can be followed from the series. */
const small = (policy: Model.Policy, overrides: Partial<Model.Params> = {}): Model.Params =>
  followable(policy, { derivers: 1, horizonSeconds: 3_600 }, { startupJitterMillis: 0, ...overrides })

/** The seconds in which the (single) deriver made a connection attempt: its polls. */
const pollSeconds = (outcome: Simulation.Outcome): ReadonlyArray<number> =>
  Array.from(outcome.series.connectionAttempts).flatMap((n, s) => n > 0 ? [s] : [])

const gaps = (times: ReadonlyArray<number>): ReadonlyArray<number> => times.slice(1).map((t, k) => t - times[k]!)

describe("adaptive: the deriver's overload signals", () => {
  it("without an overload signal it schedules exactly as fixed: the same claims at the same instants", () => {
    const preset = Model.preset("restart", "fixed")
    const params = (policy: Model.Policy): Model.Params => ({
      ...Model.preset("restart", policy),
      derivers: 300,
      horizonSeconds: 300,
      api: { requestsPerSecond: 0, queryMillis: 20 },
      pooler: { ...preset.pooler, backendCeiling: 300, connectCostMillis: 0, relayCostMillis: 0 },
      database: { ...preset.database, cores: 300 }
    })
    const fixed = Simulation.run(params("fixed"), { recordClaims: 100_000 })
    const adaptive = Simulation.run(params("adaptive"), { recordClaims: 100_000 })
    assert.isAbove(fixed.claimStartTimes.length, 3_000)
    assert.deepStrictEqual(adaptive.claimStartTimes, fixed.claimStartTimes)
    assert.strictEqual(adaptive.totals.claimsCancelled, 0)
  })

  it("an outage keeps the spec's schedule under adaptive too: unavailable polls never stretch the interval past the idle cap", () => {
    // The only backend is held by another workload for the first 1,200 s: every poll times out (unavailable).
    const params = small("adaptive", { spike: { atSeconds: 0, seconds: 1_200, backends: 1 } })
    const ratio = params.poll.ratio
    const polls = pollSeconds(Simulation.run(params))
    const during = gaps(polls.filter((s) => s < 1_200))
    const after = gaps(polls.filter((s) => s >= 1_200))
    assert.isAbove(during.length, 1_200 / ((1 + ratio) * params.poll.maxMillis / 1000 + 3) - 2, "it keeps polling")
    // Never past the idle cap (30 s jittered by ±50 %), plus the 2 s connect timeout and the second's rounding:
    // the overload floor stays 0 through an outage.
    for (const gap of [...during, ...after]) {
      assert.isAtMost(gap, (1 + ratio) * params.poll.maxMillis / 1000 + 3)
    }
    // The first poll after the outage comes within the jittered idle cap.
    assert.isAtMost(polls.find((s) => s >= 1_200)! - 1_200, (1 + ratio) * params.poll.maxMillis / 1000 + 3)
  })

  it("the same outage under fixed keeps the idle cap: the interval never exceeds 30 s (jittered)", () => {
    const params = small("fixed", { spike: { atSeconds: 0, seconds: 1_200, backends: 1 } })
    const during = gaps(pollSeconds(Simulation.run(params)).filter((s) => s < 1_200))
    assert.isAtMost(Math.max(...during), (1 + params.poll.ratio) * params.poll.maxMillis / 1000 + 3)
  })

  it("a claim still running at its statement timeout is cancelled, frees its backend, and is an overload signal", () => {
    const params = small("adaptive", {
      horizonSeconds: 1_200,
      database: { cores: 1, claimMillis: 10_000, contention: 0 },
      claimTimeoutMillis: 5_000
    })
    const outcome = Simulation.run(params, { recordClaims: 100 })
    const starts = outcome.claimStartTimes.map((c) => c.atMillis)
    assert.strictEqual(outcome.totals.claimsCompleted, 0)
    assert.isAtLeast(outcome.totals.claimsCancelled, starts.length - 1)
    // The first claim starts at 0 and is cancelled at 5 s; the next one gets the only backend after its sleep.
    assert.strictEqual(starts[0], 0)
    assert.isAtLeast(starts[1]!, params.claimTimeoutMillis)
    // Each cancellation doubles the floor: the sleeps between claims grow past the idle cap (30 s, jittered).
    const sleeps = gaps(starts).map((gap) => gap - params.claimTimeoutMillis)
    assert.isAbove(Math.max(...sleeps), (1 + params.poll.ratio) * params.poll.maxMillis)
    // Under fixed (no claim timeout) the same claims run their 10 s each.
    const fixed = Simulation.run({ ...params, ...Model.policy("fixed", params.poll) })
    assert.strictEqual(fixed.totals.claimsCancelled, 0)
    assert.isAtLeast(fixed.totals.claimsCompleted, 25)
  })
})

describe("adaptive: a freed worker wakes the loop", () => {
  it("a busy sleep ends when the handler is done, as in the real loop (fixed sleeps whole jittered base intervals)", () => {
    const work = { probability: 1, handlerMillis: 5_000 }
    const gapsOf = (policy: Model.Policy) =>
      gaps(
        Simulation.run(small(policy, { horizonSeconds: 120, work }), { recordClaims: 100 }).claimStartTimes.map((c) =>
          c.atMillis
        )
      )
    // claim (170 ms), then the handler (5 s) while the loop sleeps: the next claim starts when it is done
    for (const gap of gapsOf("adaptive")) assert.closeTo(gap, 170 + 5_000, 1e-6)
    assert.isTrue(gapsOf("fixed").some((gap) => Math.abs(gap - 5_170) > 10))
  })
})

describe("adaptive: the API's admission gate", () => {
  // API traffic only (one idle deriver), all backends held by another workload from 10 s to 70 s.
  const params = (policy: Model.Policy): Model.Params => ({
    ...small(policy),
    horizonSeconds: 120,
    pooler: { ...small(policy).pooler, backendCeiling: 4 },
    database: { cores: 4, claimMillis: 170, contention: 0 },
    api: { requestsPerSecond: 40, queryMillis: 20 },
    spike: { atSeconds: 10, seconds: 60, backends: 4 }
  })
  const fixed = Simulation.run(params("fixed"))
  const adaptive = Simulation.run(params("adaptive"))

  it("during the outage the circuit sheds requests without a connection attempt", () => {
    assert.strictEqual(fixed.totals.apiShed, 0)
    assert.isAbove(adaptive.totals.apiShed, 0.5 * 40 * 60)
    // Attempts during the outage: fixed makes one per request; the gate a few probes per window.
    const attempts = (o: Simulation.Outcome) =>
      Array.from(o.series.connectionAttempts.slice(12, 70)).reduce((a, b) => a + b)
    assert.isAbove(attempts(fixed), 0.8 * 40 * 58)
    assert.isBelow(attempts(adaptive), 0.1 * attempts(fixed))
  })

  it("after the outage the gate admits again within 1.5 × the window cap: requests are served", () => {
    // The open window doubles per failed probe up to the cap (30 s), so the probe after the release comes at
    // most one jittered capped window (45 s) after it; then the instance serves at the offered rate again.
    const bound = (1 + AdmissionSettings.defaults.openJitterRatio) * AdmissionSettings.defaults.openMaxMillis / 1000
    const back = adaptive.series.connectionAttempts.findIndex((n, second) => second >= 70 && n >= 0.5 * 40)
    assert.isAtLeast(back, 70)
    assert.isAtMost(back, 70 + bound + 1, `serving again at ${back} s`)
    const served = (o: Simulation.Outcome) => o.totals.apiServed
    // Both serve the first 10 s and the last 50 s; the gate loses at most the wait for that probe.
    assert.isAbove(served(adaptive), served(fixed) - 40 * (bound + 5))
  })
})

describe("adaptive: the incident with a thrashing database, on a fleet scaled down 8×", () => {
  const run = (policy: Model.Policy, contention: number) => {
    const preset = Model.scaled(Model.preset("incident", policy), 8)
    const params = { ...preset, horizonSeconds: 900, database: { ...preset.database, contention } }
    return Summary.summarize(Simulation.run(params))
  }

  it("contention 2: fixed stays at the ceiling to the horizon; adaptive less, and completes and serves more", () => {
    const fixed = run("fixed", 2)
    const adaptive = run("adaptive", 2)
    assert.isNull(fixed.recoverySeconds)
    assert.isAbove(fixed.secondsAtCeiling, 850)
    // Only slow polls and cancelled claims raise the floor now (an unavailable acquisition is an outage and
    // keeps the spec's schedule), so the fleet backs off later than when timeouts counted too. Whether it is
    // back under the ceiling for good within these 900 s has become a matter of the seed: 719 s with the
    // simulator's former streak circuit, 747 s without an admission gate, not within the horizon with the real
    // gate's circuit (`Breaker`: 5 of the last 10, backing-off windows): 723 s of 900 at the ceiling, 11,280
    // claims against fixed's 9,472, 7,737 API requests served against 4,957. The full incident's figures (4 h,
    // where it does recover for good) are in docs/results/fleet-sim.md.
    assert.isBelow(adaptive.secondsAtCeiling, fixed.secondsAtCeiling - 100)
    assert.isAbove(adaptive.claimsCompleted, fixed.claimsCompleted)
    assert.isAbove(adaptive.apiServed, 1.5 * fixed.apiServed)
  })

  it("no contention: adaptive is no worse than fixed", () => {
    const fixed = run("fixed", 0)
    const adaptive = run("adaptive", 0)
    assert.isAtMost(adaptive.peakActiveBackends, fixed.peakActiveBackends)
    assert.isAtMost(adaptive.secondsAtCeiling, fixed.secondsAtCeiling + 5)
    assert.isAtMost(adaptive.settledMaxClaimStartsPerSecond, adaptive.settledHerdBound)
    assert.isAtLeast(adaptive.claimsCompleted, 0.97 * fixed.claimsCompleted)
  })
})
