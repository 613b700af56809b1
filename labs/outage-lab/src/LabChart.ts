/**
 * The lab's charts, drawn with the simulator's Vega-Lite time-series charts: per policy, PgBouncer's client
 * connections (the staircase) against `max_client_conn`, clients waiting, active backends against the pool,
 * and connection attempts per second; optionally the simulator's run of the same parameters beside each.
 */
import { Chart } from "@resilience/fleet-sim"
import type * as Lab from "./Lab.ts"
import type * as SimCompare from "./SimCompare.ts"
import * as SimParams from "./SimParams.ts"

/** A simulated series placed on the lab's time axis (a restart's run starts at the lab's restart). */
const onLabAxis = (values: Float64Array, offset: number, seconds: number): Float64Array => {
  const out = new Float64Array(seconds).fill(Number.NaN)
  for (let s = 0; s < values.length && s + offset < seconds; s++) out[s + offset] = values[s]!
  return out
}

/** What the chart needs of a lab run: its settings and four of its series (a `Lab.Result`, or one read back). */
export interface Charted {
  readonly settings: Lab.Result["settings"]
  readonly series: Pick<
    Lab.Result["series"],
    "clientConnections" | "activeBackends" | "connectionAttempts" | "claimsCompleted"
  >
}

/** Reads a run back from the `series` and `settings` of a `--json` document. */
export const fromDocument = (document: {
  readonly settings: Lab.Result["settings"]
  readonly series: Record<string, ReadonlyArray<number>>
}): Charted => {
  const series = (name: string) => Float64Array.from(document.series[name] ?? [])
  return {
    settings: document.settings,
    series: {
      clientConnections: series("clientConnections"),
      activeBackends: series("activeBackends"),
      connectionAttempts: series("connectionAttempts"),
      claimsCompleted: series("claimsCompleted")
    }
  }
}

/** Renders the chart of one or more runs (`sim` optional per run). */
export const render = (
  title: string,
  runs: ReadonlyArray<{ readonly name: string; readonly lab: Charted; readonly sim?: SimCompare.Simulated }>
) => {
  const first = runs[0]!.lab.settings
  const seconds = first.horizonSeconds
  const lines = (
    labField: (r: Charted) => Float64Array,
    simField?: (s: SimCompare.Simulated) => Float64Array
  ): Array<Chart.Line> =>
    runs.flatMap((r) => [
      { name: `lab ${r.name}`, values: labField(r.lab) },
      ...(r.sim !== undefined && simField !== undefined
        ? [{
          name: `sim ${r.name}`,
          values: onLabAxis(simField(r.sim), SimParams.offsetSeconds(r.lab.settings), seconds)
        }]
        : [])
    ])
  return Chart.timeSeries(
    title,
    [
      {
        title: "client connections (peak per second)",
        lines: lines((r) => r.series.clientConnections, (s) => s.outcome.series.clientConnections),
        rule: { label: `max_client_conn ${first.maxClientConn}`, value: first.maxClientConn }
      },
      {
        title: "active backends (peak per second)",
        lines: lines((r) => r.series.activeBackends, (s) => s.outcome.series.activeBackends),
        rule: { label: `default_pool_size ${first.poolSize}`, value: first.poolSize }
      },
      {
        title: "connection attempts per second",
        lines: lines((r) => r.series.connectionAttempts, (s) => s.outcome.series.connectionAttempts)
      },
      {
        title: "successful polls per second (goodput)",
        lines: lines((r) => r.series.claimsCompleted, (s) => s.outcome.series.claimsCompleted)
      }
    ],
    { unit: "seconds" }
  )
}
