/**
 * The sweep: runs a scenario over fleet size × retry budget (or × backend ceiling, API rate, database
 * contention) and
 * classifies each cell as recovering, recovering slowly or staying collapsed: the vulnerable region.
 *
 * @since 0.1.0
 */
import * as Model from "./Model.ts"
import * as Simulation from "./Simulation.ts"
import * as Summary from "./Summary.ts"

/**
 * The second axis of the sweep.
 *
 * @since 0.1.0
 */
export type Axis = "budget" | "ceiling" | "api-rps" | "contention"

/**
 * @since 0.1.0
 */
export const axes: ReadonlyArray<Axis> = ["budget", "ceiling", "api-rps", "contention"]

/**
 * One cell of the sweep.
 *
 * @since 0.1.0
 */
export interface Cell {
  readonly derivers: number
  readonly value: number
  readonly summary: Summary.Summary
  readonly outcome: Outcome
}

/**
 * Sets the axis value on the parameters (budget in seconds; `budget` only affects the `retry` policy).
 *
 * @since 0.1.0
 */
export const withAxis = (params: Model.Params, axis: Axis, value: number): Model.Params => {
  switch (axis) {
    case "budget":
      return params.acquisition.kind === "retry"
        ? {
          ...params,
          acquisition: { kind: "retry", retry: { ...params.acquisition.retry, budgetMillis: value * 1000 } }
        }
        : params
    case "ceiling":
      return { ...params, pooler: { ...params.pooler, backendCeiling: value } }
    case "api-rps":
      return { ...params, api: { ...params.api, requestsPerSecond: value } }
    case "contention":
      return { ...params, database: { ...params.database, contention: value } }
  }
}

/**
 * A cell's outcome: recovered within one max poll interval of the trigger's end, later, under the ceiling for
 * a while but over it again at the horizon (`relapses`: at the ceiling less than 90 % of the time after the
 * trigger), or never under it (`collapsed`).
 *
 * @since 0.1.0
 */
export type Outcome = "recovers" | "slow recovery" | "relapses" | "collapsed"

/**
 * @since 0.1.0
 */
export const classify = (params: Model.Params, summary: Summary.Summary): Outcome => {
  if (summary.recoverySeconds === null) {
    const after = params.horizonSeconds - Math.ceil(Model.triggerEndSeconds(params))
    return summary.secondsAtCeiling >= 0.9 * after ? "collapsed" : "relapses"
  }
  return summary.recoverySeconds * 1000 <= params.poll.maxMillis ? "recovers" : "slow recovery"
}

/**
 * Runs every cell (fleet sizes × axis values), calling `onCell` after each.
 *
 * @since 0.1.0
 */
export const run = (
  base: Model.Params,
  fleets: ReadonlyArray<number>,
  axis: Axis,
  values: ReadonlyArray<number>,
  onCell: (cell: Cell, index: number, total: number) => void = () => {}
): ReadonlyArray<Cell> => {
  const cells: Array<Cell> = []
  const total = fleets.length * values.length
  for (const derivers of fleets) {
    for (const value of values) {
      const params = withAxis({ ...base, derivers }, axis, value)
      const summary = Summary.summarize(Simulation.run(params))
      const cell: Cell = { derivers, value, summary, outcome: classify(params, summary) }
      cells.push(cell)
      onCell(cell, cells.length, total)
    }
  }
  return cells
}
