/**
 * Simulator vs lab: the simulator run with the lab's parameters (same fleet, limits, rates, schedule, policy
 * and trigger; the pooler's costs from the calibration), summarised with the same definitions, side by side,
 * with every figure where the two disagree by more than 2× marked.
 */
import { type Model, Simulation, Summary } from "@resilience/fleet-sim"
import { Report } from "@resilience/fleet-sim"
import type { InvalidParameter } from "@resilience/jitter"
import { Effect } from "effect"
import type * as Lab from "./Lab.ts"
import * as SimParams from "./SimParams.ts"

/** One simulated counterpart of a lab run. */
export interface Simulated {
  readonly params: Model.Params
  readonly outcome: Simulation.Outcome
  readonly summary: Summary.Summary
}

/** Runs the simulator for a lab run's settings with the given costs. */
export const simulate = (
  result: Lab.Result,
  costs: SimParams.Costs
): Effect.Effect<Simulated, InvalidParameter.InvalidParameter> =>
  Effect.gen(function*() {
    const params = yield* SimParams.of(result.settings, costs)
    const outcome = Simulation.run(params)
    return { params, outcome, summary: Summary.summarize(outcome) } satisfies Simulated
  })

/** "2.5×" when two figures differ by more than a factor of two (either way), else "". */
export const disagreement = (lab: number | null, sim: number | null): string => {
  if (lab === null || sim === null) return lab === sim ? "" : "differs"
  const hi = Math.max(lab, sim)
  const lo = Math.min(lab, sim)
  if (hi === 0) return ""
  if (lo === 0) return hi <= 2 ? "" : "∞×"
  return hi / lo > 2 ? `${(hi / lo).toFixed(1)}×` : ""
}

/** The side-by-side table: for each run, lab and simulator, and the disagreement flag. */
export const table = (
  runs: ReadonlyArray<{ readonly name: string; readonly lab: Lab.Result; readonly sim: Simulated }>
): string => {
  const rows: Array<[string, (s: Summary.Summary) => number | null, (n: number | null) => string]> = [
    ["peak client connections", (s) => s.peakClientConnections, String],
    ["mean client connections", (s) => s.meanClientConnections, (n) => n === null ? "" : n.toFixed(1)],
    ["peak active backends", (s) => s.peakActiveBackends, String],
    ["mean active backends", (s) => s.meanActiveBackends, (n) => n === null ? "" : n.toFixed(1)],
    ["recovery after trigger (s)", (s) => s.recoverySeconds, (n) => Report.recovery(n)],
    ["seconds at backend ceiling", (s) => s.secondsAtCeiling, String],
    ["successful polls", (s) => s.claimsCompleted, String],
    ["failed polls", (s) => s.failedPolls, String],
    ["connection attempts", (s) => s.connectionAttempts, String],
    ["refusals (client limit)", (s) => s.rejections, String],
    ["connect timeouts", (s) => s.timeouts, String]
  ]
  const header = ["", ...runs.flatMap((r) => [`lab ${r.name}`, `sim ${r.name}`, ">2×"])]
  return Report.table(
    header,
    rows.map(([label, f, show]) => [
      label,
      ...runs.flatMap((r) => {
        const lab = f(r.lab.summary)
        const sim = f(r.sim.summary)
        return [show(lab), show(sim), disagreement(lab, sim)]
      })
    ])
  )
}
