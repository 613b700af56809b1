/**
 * The sweep: runs a scenario over fleet size × retry budget (or × backend ceiling, or × API rate) and
 * classifies each cell as recovering, recovering slowly or staying collapsed: the vulnerable region.
 *
 * @since 0.1.0
 */
import type * as Model from "./Model.ts"
import * as Simulation from "./Simulation.ts"
import * as Summary from "./Summary.ts"

/**
 * The second axis of the sweep.
 *
 * @since 0.1.0
 */
export type Axis = "budget" | "ceiling" | "api-rps"

/**
 * @since 0.1.0
 */
export const axes: ReadonlyArray<Axis> = ["budget", "ceiling", "api-rps"]

/**
 * One cell of the sweep.
 *
 * @since 0.1.0
 */
export interface Cell {
  readonly derivers: number
  readonly value: number
  readonly summary: Summary.Summary
  readonly outcome: "recovers" | "slow recovery" | "collapsed"
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
  }
}

/**
 * A cell's outcome: recovered within one max poll interval of the trigger's end, later, or never.
 *
 * @since 0.1.0
 */
export const classify = (params: Model.Params, summary: Summary.Summary): Cell["outcome"] =>
  summary.recoverySeconds === null
    ? "collapsed"
    : summary.recoverySeconds * 1000 <= params.poll.maxMillis
    ? "recovers"
    : "slow recovery"

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
