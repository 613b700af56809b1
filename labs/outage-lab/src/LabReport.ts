/**
 * What a person reads: the lab's summary table (one column per run), the calibration table, and the
 * `--json` document (settings, summary, lab figures, per-second series).
 */
import { Report } from "@resilience/fleet-sim"
import type * as Calibration from "./Calibration.ts"
import type * as Lab from "./Lab.ts"

/** The lab summary: one column per run. */
export const summaryTable = (runs: ReadonlyArray<{ readonly name: string; readonly result: Lab.Result }>): string => {
  const rows: Array<[string, (r: Lab.Result) => string]> = [
    ["peak client connections", (r) => String(r.summary.peakClientConnections)],
    ["mean client connections", (r) => r.summary.meanClientConnections.toFixed(1)],
    ["peak clients waiting (cl_waiting)", (r) => String(r.lab.peakClientsWaiting)],
    [
      "seconds at the client limit (after trigger)",
      (r) => `${r.lab.secondsAtClientLimit} (${r.lab.secondsAtClientLimitAfter})`
    ],
    ["peak active backends", (r) => String(r.summary.peakActiveBackends)],
    ["mean active backends", (r) => r.summary.meanActiveBackends.toFixed(1)],
    ["drained after trigger (no wait, no refusal)", (r) => Report.recovery(r.lab.drainedSeconds)],
    [
      "back to pre-trigger peak clients for good",
      (r) => `${Report.recovery(r.lab.settledSeconds)} (≤ ${r.lab.preTriggerPeakClients})`
    ],
    ["recovery after trigger (simulator's rule)", (r) => Report.recovery(r.summary.recoverySeconds)],
    ["seconds at backend ceiling", (r) => String(r.summary.secondsAtCeiling)],
    ["successful polls (goodput)", (r) => String(r.summary.claimsCompleted)],
    ["failed polls", (r) => String(r.summary.failedPolls)],
    ["claims cancelled (claim timeout)", (r) => String(r.summary.claimsCancelled)],
    ["API served / failed", (r) => `${r.lab.apiServed} / ${r.lab.apiFailed}`],
    ["connection attempts", (r) => String(r.summary.connectionAttempts)],
    ["refusals (max_client_conn)", (r) => String(r.summary.rejections)],
    ["connect timeouts", (r) => String(r.summary.timeouts)],
    ["pooler CPU (PgBouncer, stunnel)", (r) => `${r.lab.poolerCpuSeconds.toFixed(1)} s`],
    ["samples per second", (r) => r.lab.sampleRate.toFixed(1)]
  ]
  return Report.table(
    ["", ...runs.map((r) => r.name)],
    rows.map(([label, f]) => [label, ...runs.map((r) => f(r.result))])
  )
}

/** Failures by kind, one line per kind and run. */
export const failureLines = (runs: ReadonlyArray<{ readonly name: string; readonly result: Lab.Result }>): string =>
  runs.flatMap((r) => Object.entries(r.result.lab.failures).map(([kind, count]) => `  ${r.name}: ${kind} ×${count}`))
    .join("\n")

/** The calibration beside the simulator's defaults. */
export const calibrationTable = (c: Calibration.Calibration, defaults: typeof Calibration.simulatorDefaults) =>
  Report.table(
    [
      "pooler cost (its own CPU)",
      `measured (${c.auth}, TLS ${c.tls === "none" ? "none" : `${c.tls} ${c.tlsKey}`}${
        c.poolerCpu >= 0 ? `, CPU ${c.poolerCpu}` : ""
      }, ${c.samples} each; load ${c.loadAverage.join(" ")})`,
      "simulator default"
    ],
    [
      [
        "per accepted connection",
        `${(c.connectCostMillis * 1000).toFixed(0)} µs`,
        `${defaults.connectCostMillis * 1000} µs`
      ],
      [
        "per refused connection",
        `${(c.rejectCostMillis * 1000).toFixed(0)} µs`,
        `${defaults.rejectCostMillis * 1000} µs`
      ],
      [
        "per relayed transaction",
        `${(c.relayCostMillis * 1000).toFixed(0)} µs`,
        `${defaults.relayCostMillis * 1000} µs`
      ],
      ["claim on an empty queue (wall)", `${c.claimMillis.toFixed(2)} ms`, "170 ms (the spec's)"],
      ["client: accepted connect (wall)", `${c.clientConnectMillis.toFixed(2)} ms`, ""],
      ["client: refused connect (wall)", `${c.clientRefuseMillis.toFixed(2)} ms`, ""]
    ]
  )

/** The `--json` document of a run: series as plain arrays. */
export const document = (result: Lab.Result): Record<string, unknown> => ({
  settings: result.settings,
  pids: result.pids,
  summary: result.summary,
  lab: result.lab,
  series: Object.fromEntries(
    [...Object.entries(result.series), ...Object.entries(result.extra)].map((
      [k, v]
    ) => [k, Array.from(v as Float64Array)])
  )
})
