/**
 * The sweep: configurations (each a few flags over the base settings) × policies, each run on fresh real
 * parts and beside the simulator's run of the same parameters, classified with the simulator's own rule
 * (recovers within one max poll interval, slow recovery, or collapsed: still over the ceiling at the horizon).
 */
import { Report, Sweep as SimSweep } from "@resilience/fleet-sim"
import type { Model } from "@resilience/fleet-sim"
import type { InvalidParameter } from "@resilience/parameters"
import { Effect } from "effect"
import type * as Lab from "./Lab.ts"
import type * as SimCompare from "./SimCompare.ts"
import * as SimParams from "./SimParams.ts"

/** One configuration under one policy. */
export interface Cell {
  readonly configuration: string
  readonly policy: Model.Policy
  readonly lab: Lab.Result
  readonly sim: SimCompare.Simulated
  readonly labOutcome: SimSweep.Cell["outcome"]
  readonly simOutcome: SimSweep.Cell["outcome"]
}

/** The simulator's classification of a lab run (on the lab's time axis). */
export const classify = (
  result: Lab.Result
): Effect.Effect<SimSweep.Cell["outcome"], InvalidParameter.InvalidParameter> =>
  Effect.map(
    SimParams.of(
      result.settings,
      { connectCostMillis: 0, rejectCostMillis: 0, relayCostMillis: 0, claimMillis: 1 },
      true
    ),
    (params) => SimSweep.classify(params, result.summary)
  )

const cellText = (
  s: { readonly recoverySeconds: number | null; readonly peakClientConnections: number },
  limit: number
) =>
  `${Report.recovery(s.recoverySeconds)} (${s.peakClientConnections}${s.peakClientConnections >= limit - 1 ? "!" : ""})`

/**
 * The sweep table: one row per configuration; per policy, the lab's return to its pre-trigger peak of clients,
 * its seconds at the client limit after the trigger / its recovery by the simulator's rule (peak client
 * connections), and the simulator's recovery (peak client connections).
 */
export const table = (cells: ReadonlyArray<Cell>): string => {
  const configurations = [...new Set(cells.map((c) => c.configuration))]
  const policies = [...new Set(cells.map((c) => c.policy))]
  return Report.table(
    ["configuration", ...policies.flatMap((p) => [`lab ${p}`, `sim ${p}`])],
    configurations.map((configuration) => [
      configuration,
      ...policies.flatMap((policy) => {
        const cell = cells.find((c) => c.configuration === configuration && c.policy === policy)
        if (cell === undefined) return ["", ""]
        const limit = cell.lab.settings.maxClientConn
        return [
          `${Report.recovery(cell.lab.lab.settledSeconds)}, ${cell.lab.lab.secondsAtClientLimitAfter} s / ${
            cellText(cell.lab.summary, limit)
          }`,
          cellText(cell.sim.summary, limit)
        ]
      })
    ])
  )
}

/** The simulator's classification of its own run. */
export const classifySimulated = (sim: SimCompare.Simulated): SimSweep.Cell["outcome"] =>
  SimSweep.classify(sim.params, sim.summary)
