/**
 * Simulator vs lab: the simulator run with the lab's parameters (same fleet, limits, rates, schedule, policy
 * and trigger; the pooler's costs from the calibration), summarised with the same definitions, side by side,
 * with every figure where the two disagree by more than 2× marked.
 */
import { type Model, Simulation, Summary } from "@resilience/fleet-sim"
import { Report } from "@resilience/fleet-sim"
import type { InvalidParameter } from "@resilience/parameters"
import { Effect } from "effect"
import * as Lab from "./Lab.ts"
import { triggerEndSeconds } from "./Settings.ts"
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
  const figures = runs.map((r) => {
    const offset = SimParams.offsetSeconds(r.lab.settings)
    const simClients = new Float64Array(r.lab.settings.horizonSeconds)
    simClients.set(r.sim.outcome.series.clientConnections.subarray(0, simClients.length - offset), offset)
    const end = Math.ceil(triggerEndSeconds(r.lab.settings))
    return {
      lab: r.lab.lab.settledSeconds,
      sim: Lab.settledAfter(simClients, r.lab.lab.preTriggerPeakClients, end)
    }
  })
  const rows: Array<
    [string, (s: Summary.Summary, i: number, side: "lab" | "sim") => number | null, (n: number | null) => string]
  > = [
    ["back to the lab's pre-trigger peak (s)", (_, i, side) => figures[i]![side], (n) => Report.recovery(n)],
    ["peak client connections", (s) => s.peakClientConnections, String],
    ["mean client connections", (s) => s.meanClientConnections, (n) => n === null ? "" : n.toFixed(1)],
    ["peak active backends", (s) => s.peakActiveBackends, String],
    ["mean active backends", (s) => s.meanActiveBackends, (n) => n === null ? "" : n.toFixed(1)],
    ["recovery, simulator's rule (s)", (s) => s.recoverySeconds, (n) => Report.recovery(n)],
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
      ...runs.flatMap((r, i) => {
        const lab = f(r.lab.summary, i, "lab")
        const sim = f(r.sim.summary, i, "sim")
        return [show(lab), show(sim), disagreement(lab, sim)]
      })
    ])
  )
}
