/**
 * The map: trigger size (stall seconds) × offered load (API requests per second), each cell run on fresh real
 * parts under a policy and beside the simulator's run of the same parameters (the pooler's costs measured),
 * each judged by one rule on both sides: the pooler is **saturated** in a second when its clients are at
 * `max_client_conn` or it refused someone. A cell **stays collapsed** when it is saturated in at least 90 % of
 * the seconds after the trigger's end (the simulator's own `collapsed` rule, `Sweep.classify`, on this
 * quantity); it **relapses** when it is saturated in one of the last `tail` seconds but less often than that
 * (bursts: the unjittered fleet's herd, the one Node process's pauses); otherwise it **recovers**, in the
 * seconds from the trigger's end to the end of its last saturated second. The shape of Huang et al.,
 * OSDI '22's retry table.
 */
import { Chart, Report, Simulation } from "@resilience/fleet-sim"
import type { Model } from "@resilience/fleet-sim"
import type { InvalidParameter } from "@resilience/parameters"
import { Effect } from "effect"
import type * as Lab from "./Lab.ts"
import { type Settings, triggerEndSeconds } from "./Settings.ts"
import * as SimParams from "./SimParams.ts"

/** Seconds at the end of a run in which a saturated second means "not recovered at the horizon". */
export const tail = 5

/** The share of seconds after the trigger's end that a collapsed cell is saturated in. */
export const collapsedShare = 0.9

/** What became of a cell: the simulator's `Sweep` outcomes but `slow recovery` (the recovery time says it). */
export type Outcome = "recovers" | "relapses" | "collapsed"

/**
 * The outcome of `saturatedAfter` saturated seconds among the `window` after the trigger's end, and whether one
 * of the last `tail` seconds was saturated.
 */
export const outcomeOf = (saturatedAfter: number, window: number, endsSaturated: boolean): Outcome =>
  window > 0 && saturatedAfter >= collapsedShare * window ? "collapsed" : endsSaturated ? "relapses" : "recovers"

/** A cell's verdict: recovered (seconds after the trigger's end), or still collapsed at the horizon. */
export interface Verdict {
  readonly outcome: Outcome
  /** Seconds from the trigger's end to the end of the last saturated second; `null`: saturated in the last seconds. */
  readonly recoverySeconds: number | null
  /** Saturated seconds after the trigger's end. */
  readonly saturatedAfter: number
  /** Refusals after the trigger's end. */
  readonly refusalsAfter: number
  /** Successful polls per second after the trigger's end (goodput). */
  readonly goodputAfter: number
}

/**
 * The verdict on per-second series: `saturated[s]` whether second `s` was saturated, `refusals[s]` and
 * `goodput[s]` what happened in it; `end` the trigger's end (seconds).
 */
export const judge = (
  saturated: ReadonlyArray<boolean>,
  refusals: ArrayLike<number>,
  goodput: ArrayLike<number>,
  end: number
): Verdict => {
  const horizon = saturated.length
  let last = -1
  let count = 0
  let refused = 0
  let ok = 0
  for (let s = end; s < horizon; s++) {
    if (saturated[s]) {
      last = s
      count++
    }
    refused += refusals[s] ?? 0
    ok += goodput[s] ?? 0
  }
  const endsSaturated = last >= horizon - tail
  return {
    outcome: outcomeOf(count, horizon - end, endsSaturated),
    recoverySeconds: endsSaturated ? null : last < 0 ? 0 : last + 1 - end,
    saturatedAfter: count,
    refusalsAfter: refused,
    goodputAfter: horizon > end ? ok / (horizon - end) : 0
  }
}

/** The lab's verdict on a run. */
export const judgeLab = (result: Lab.Result): Verdict => {
  const limit = result.settings.maxClientConn
  const saturated = Array.from(
    { length: result.settings.horizonSeconds },
    (_, s) => result.extra.clientsTotal[s]! >= limit || result.series.rejections[s]! > 0
  )
  return judge(
    saturated,
    result.series.rejections,
    result.series.claimsCompleted,
    Math.ceil(triggerEndSeconds(result.settings))
  )
}

/** The simulator's run of the same settings and its verdict by the same rule. */
export const predict = (
  settings: Settings,
  costs: SimParams.Costs
): Effect.Effect<{ readonly params: Model.Params; readonly verdict: Verdict }, InvalidParameter.InvalidParameter> =>
  Effect.map(SimParams.of(settings, costs), (params) => {
    const { series } = Simulation.run(params)
    const limit = settings.maxClientConn
    const saturated = Array.from(
      { length: Math.min(settings.horizonSeconds, series.clientConnections.length) },
      (_, s) => series.clientConnections[s]! >= limit || series.rejections[s]! > 0
    )
    return {
      params,
      verdict: judge(saturated, series.rejections, series.claimsCompleted, Math.ceil(triggerEndSeconds(settings)))
    }
  })

/** One cell under one policy: the lab's verdict (absent when not run) and the simulator's. */
export interface Cell {
  readonly stallSeconds: number
  readonly apiRps: number
  readonly policy: Model.Policy
  readonly lab: Verdict | null
  readonly sim: Verdict
  /** Wall seconds of the lab run (set-up and teardown included); 0 when not run. */
  readonly wallSeconds: number
  /** `uptime`'s 1-minute load average at the run's start and end. */
  readonly load: readonly [number, number]
  /** The pooler's CPU seconds over the lab run. */
  readonly poolerCpuSeconds: number
  /** Samples per second the lab achieved (nominal 10). */
  readonly sampleRate: number
}

/** "12 s", "relapses (9 s)" with its saturated seconds, or "collapsed" (or "–" when not run). */
export const verdictText = (v: Verdict | null): string =>
  v === null
    ? "–"
    : v.outcome === "collapsed"
    ? "collapsed"
    : v.outcome === "relapses"
    ? `relapses (${v.saturatedAfter} s)`
    : `${Report.recovery(v.recoverySeconds)}`

/**
 * A verdict judged again by today's rule from what it recorded (its saturated seconds, whether it ended
 * saturated), over `window` seconds after the trigger: for documents written by an earlier rule.
 */
export const rejudge = (v: Verdict, window: number): Verdict => ({
  ...v,
  outcome: outcomeOf(v.saturatedAfter, window, v.recoverySeconds === null)
})

/** What the table's entries mean. */
export const legend =
  `per cell: lab / simulator — N s: recovered N s after the stall ended (no client at the limit, no refusal, for good); ` +
  `collapsed: saturated (clients at the limit, or refusals) in ${collapsedShare * 100} % of the seconds after it; ` +
  `relapses (N s): saturated in one of the last ${tail} s, N s in all`

/** The table: one row per load, per stall a column for each policy's lab and simulator verdicts. */
export const table = (cells: ReadonlyArray<Cell>): string => {
  const stalls = [...new Set(cells.map((c) => c.stallSeconds))].sort((a, b) => a - b)
  const loads = [...new Set(cells.map((c) => c.apiRps))].sort((a, b) => a - b)
  const policies = [...new Set(cells.map((c) => c.policy))]
  return Report.table(
    ["API req/s", ...stalls.flatMap((s) => policies.map((p) => `stall ${s} s: ${p} lab / sim`))],
    loads.map((load) => [
      String(load),
      ...stalls.flatMap((stall) =>
        policies.map((policy) => {
          const cell = cells.find((c) => c.stallSeconds === stall && c.apiRps === load && c.policy === policy)
          return cell === undefined ? "" : `${verdictText(cell.lab)} / ${verdictText(cell.sim)}`
        })
      )
    ])
  )
}

/** The map as heat maps, one per policy and side (lab, simulator), the simulator's `Chart.grid`. */
export const chart = (title: string, cells: ReadonlyArray<Cell>): Effect.Effect<string> => {
  const policies = [...new Set(cells.map((c) => c.policy))]
  // the maps side by side in the order policy by policy, lab before simulator (the grid takes first appearance)
  const order = (c: Cell, side: string) => policies.indexOf(c.policy) * 2 + (side === "lab" ? 0 : 1)
  return Chart.grid(
    title,
    cells.flatMap((c) => {
      const sides: Array<[string, Verdict | null]> = [["lab", c.lab], ["simulator", c.sim]]
      return sides.filter(([, v]) => v !== null).map(([side, v]) => ({
        x: `${c.stallSeconds} s`,
        y: `${c.apiRps}/s`,
        outcome: v!.outcome,
        label: verdictText(v),
        column: `${c.policy}, ${side}`,
        order: order(c, side)
      }))
    }).sort((a, b) => a.order - b.order).map((cell) => ({ ...cell, order: undefined })),
    { x: "stall (trigger) duration", y: "offered API load" }
  )
}
