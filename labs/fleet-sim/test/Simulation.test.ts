import { assert, describe, it } from "@effect/vitest"
import * as Model from "../src/Model.ts"
import * as Simulation from "../src/Simulation.ts"
import * as Summary from "../src/Summary.ts"
import { followable } from "./fixtures.ts"

/** A tiny system whose every event can be followed by hand: no pooler costs, no API, one claim at a time. */
const tiny = (policy: Model.Policy, overrides: Partial<Model.Params> = {}): Model.Params =>
  followable(policy, { derivers: 3, horizonSeconds: 4 }, overrides)

const starts = (outcome: Simulation.Outcome) => outcome.claimStartTimes.map((c) => `${c.deriver}@${c.atMillis}`)

describe("Simulation: small scenarios checked by hand", () => {
  it("3 derivers, no jitter, a pool of 1: claims queue in order and each loop sleeps 1, 2, 4 s after its claim", () => {
    const outcome = Simulation.run(tiny("baseline"), { recordClaims: 100 })
    // t=0: all three wake; the backend serves them one after another (170 ms each).
    // Each then sleeps the base interval (1 s) from its own completion: 1170, 1340, 1510; then 2 s: 3340, 3510, 3680.
    assert.deepStrictEqual(starts(outcome), [
      "0@0",
      "1@170",
      "2@340",
      "0@1170",
      "1@1340",
      "2@1510",
      "0@3340",
      "1@3510",
      "2@3680"
    ])
    assert.strictEqual(outcome.totals.connectionAttempts, 9)
    assert.strictEqual(outcome.totals.failedPolls, 0)
  })

  it("failfast: a client still waiting at the connect timeout fails, backs off 1 s, and queues again", () => {
    const params = tiny("failfast-only", {
      acquisition: { kind: "failfast", connectTimeoutMillis: 250 }
    })
    const outcome = Simulation.run(params, { recordClaims: 100 })
    // Deriver 2 has waited 250 ms at t=250 → error → sleeps 1 s (schedule 1 → 2) → wakes at 1250 and waits for the
    // backend that deriver 0 holds from 1170 to 1340; deriver 1 wakes at 1340 and queues behind it.
    assert.deepStrictEqual(starts(outcome).slice(0, 5), ["0@0", "1@170", "0@1170", "2@1340", "1@1510"])
    assert.strictEqual(outcome.totals.timeouts, 1)
    assert.strictEqual(outcome.totals.failedPolls, 1)
  })

  it("retry: a refused attempt is retried after initial + U(0, jitter) and the poll succeeds within the budget", () => {
    const params = tiny("baseline", {
      derivers: 2,
      pooler: { ...tiny("baseline").pooler, maxClientConnections: 1 },
      database: { cores: 1, claimMillis: 50, contention: 0 }
    })
    const outcome = Simulation.run(params, { recordClaims: 3 })
    // Deriver 1 is refused (one client slot, held by deriver 0 until 50 ms) and retries once after
    // 100 ms + U(0, 1 s), i.e. in [100, 1100) ms, when the slot is free again.
    const [first, second] = outcome.claimStartTimes
    assert.deepStrictEqual(first, { deriver: 0, atMillis: 0 })
    assert.strictEqual(second?.deriver, 1)
    assert.isTrue(second!.atMillis >= 100 && second!.atMillis < 1100, `retried at ${second!.atMillis}`)
    assert.strictEqual(outcome.totals.rejections, 1)
    assert.strictEqual(outcome.totals.failedPolls, 0)
  })

  it("the pooler's handshakes are served in order, one connect cost each", () => {
    const params = tiny("baseline", {
      pooler: { ...tiny("baseline").pooler, backendCeiling: 3, connectCostMillis: 5 },
      database: { cores: 3, claimMillis: 170, contention: 0 }
    })
    const outcome = Simulation.run(params, { recordClaims: 3 })
    assert.deepStrictEqual(starts(outcome), ["0@5", "1@10", "2@15"])
  })

  it("processor sharing: with more active claims than cores, each claim slows down in proportion", () => {
    const params = tiny("baseline", {
      horizonSeconds: 1,
      pooler: { ...tiny("baseline").pooler, backendCeiling: 3 },
      database: { cores: 1, claimMillis: 100, contention: 0 }
    })
    const outcome = Simulation.run(params)
    // Three claims share one core: all three finish together at 300 ms, inside the first second.
    assert.strictEqual(outcome.series.activeBackends[0], 3)
    assert.strictEqual(outcome.series.claimsCompleted[0], 3)
    assert.closeTo(outcome.series.meanActiveBackends[0]!, 3 * 0.3, 1e-9)
  })
})

describe("Simulation: determinism", () => {
  const params: Model.Params = { ...Model.scaled(Model.preset("incident", "fixed"), 20), horizonSeconds: 300 }

  it("the same seed gives the same run, event for event", () => {
    const a = Simulation.run(params, { recordClaims: 500 })
    const b = Simulation.run(params, { recordClaims: 500 })
    assert.deepStrictEqual(a.totals, b.totals)
    assert.deepStrictEqual(a.claimStartTimes, b.claimStartTimes)
    for (const name of Simulation.seriesNames) assert.deepStrictEqual(a.series[name], b.series[name])
  })

  it("another seed gives another run", () => {
    const a = Simulation.run(params, { recordClaims: 500 })
    const b = Simulation.run({ ...params, seed: "2" }, { recordClaims: 500 })
    assert.notDeepEqual(a.claimStartTimes, b.claimStartTimes)
  })
})

describe("Simulation: the poll policy comes from the deriver's scheduling", () => {
  it("startup jitter spreads a restarted fleet's first polls over the whole window", () => {
    const preset = Model.preset("restart", "fixed")
    const params: Model.Params = {
      ...preset,
      derivers: 3000,
      horizonSeconds: 30,
      api: { requestsPerSecond: 0, queryMillis: 20 },
      // no saturation: every first poll is served at once
      pooler: { ...preset.pooler, backendCeiling: 3000, connectCostMillis: 0, relayCostMillis: 0 },
      database: { ...preset.database, cores: 3000 },
      poll: { ...preset.poll, baseMillis: 30_000, maxMillis: 30_000 }
    }
    const outcome = Simulation.run(params, { recordClaims: 10_000 })
    const first = new Map<number, number>()
    for (const c of outcome.claimStartTimes) if (!first.has(c.deriver)) first.set(c.deriver, c.atMillis)
    assert.strictEqual(first.size, 3000)
    const buckets = Array.from({ length: 10 }, () => 0)
    for (const at of first.values()) buckets[Math.floor(at / 3000)]!++
    for (const count of buckets) assert.isTrue(count > 240 && count < 360, `bucket of ${count}`)
  })

  it("without jitter a restarted fleet polls in lockstep: every first poll at t = 0", () => {
    const preset = Model.preset("restart", "baseline")
    const outcome = Simulation.run({ ...preset, derivers: 500, horizonSeconds: 5 }, { recordClaims: 368 })
    assert.strictEqual(outcome.series.connectionAttempts[0]! >= 500, true)
    assert.strictEqual(outcome.claimStartTimes.every((c) => c.atMillis < 1000), true)
  })
})

describe("Simulation: the incident's shape, on a fleet scaled down 8×", () => {
  const run = (policy: Model.Policy) => {
    const params = { ...Model.scaled(Model.preset("incident", policy), 8), horizonSeconds: 900 }
    const outcome = Simulation.run(params)
    return { params, outcome, summary: Summary.summarize(outcome) }
  }
  const baseline = run("baseline")
  const fixed = run("fixed")
  const jitterOnly = run("jitter-only")
  const failfastOnly = run("failfast-only")
  const ceiling = baseline.params.pooler.backendCeiling

  it("baseline: the ceiling within a second of the restart, a client wall, no recovery within the horizon", () => {
    const s = baseline.outcome.series
    assert.isAtLeast(Math.max(s.activeBackends[0]!, s.activeBackends[1]!), ceiling)
    assert.isAtLeast(baseline.summary.peakClientConnections, 20 * ceiling)
    // the wall is still standing in the last five minutes
    const tail = Array.from(s.meanClientConnections.slice(-300))
    assert.isAtLeast(Math.min(...tail), 10 * ceiling)
    assert.isNull(baseline.summary.recoverySeconds)
  })

  it("fixed: recovers, and once settled claim starts per second stay within mean + 5·sqrt(mean)", () => {
    assert.isNotNull(fixed.summary.recoverySeconds)
    assert.isAtMost(fixed.summary.recoverySeconds!, 90)
    assert.isAtMost(fixed.summary.settledMaxClaimStartsPerSecond, fixed.summary.settledHerdBound)
    assert.isAbove(fixed.summary.settledMeanClaimStartsPerSecond, 0.8 * baseline.params.derivers / 30)
  })

  it("fixed, schedules starting at the cap: the warm-up burst goes, the pool is at its ceiling for seconds, not a minute", () => {
    const params = { ...Model.scaled(Model.preset("incident", "fixed"), 8), horizonSeconds: 900 }
    const warm = Summary.summarize(Simulation.run({ ...params, initialInterval: "max" }))
    assert.isAbove(fixed.summary.secondsAtCeiling, 30)
    assert.isAtMost(warm.secondsAtCeiling, 5)
    assert.isNotNull(warm.recoverySeconds)
    assert.isAtMost(warm.recoverySeconds!, fixed.summary.recoverySeconds! / 2)
    assert.isBelow(warm.maxClaimStartsPerSecond, fixed.summary.maxClaimStartsPerSecond)
  })

  it("failfast-only removes the client wall but not the herd; jitter-only removes the herd but not the wall", () => {
    // no wall: clients drain between herds
    assert.isBelow(failfastOnly.summary.meanClientConnections, 0.1 * baseline.summary.meanClientConnections)
    // the herd persists: the unjittered fleet keeps hitting the ceiling, and its settled claim starts exceed the bound
    assert.isNotNull(failfastOnly.summary.recoverySeconds)
    assert.isAbove(failfastOnly.summary.secondsAtCeiling, 30)
    assert.isAbove(failfastOnly.summary.settledMaxClaimStartsPerSecond, failfastOnly.summary.settledHerdBound)
    // jitter-only: no lockstep at the restart (first second far below the whole fleet) ...
    assert.isBelow(jitterOnly.outcome.series.claimStarts[0]!, baseline.params.derivers / 10)
    // ... but once the post-restart surge saturates the pool, the retry sustains the collapse
    assert.isNull(jitterOnly.summary.recoverySeconds)
  })
})
