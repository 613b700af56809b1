/**
 * Terminal output: aligned tables of summaries, and the JSON document `--json` writes.
 *
 * @since 0.1.0
 */
import type * as Simulation from "./Simulation.ts"
import type * as Summary from "./Summary.ts"

/**
 * Formats rows as an aligned text table (first column left-aligned, the others right-aligned).
 *
 * @since 0.1.0
 */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, c) => c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)).join("  ")
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n")
}

const fixed = (value: number, digits = 1) => value.toFixed(digits)

/**
 * A number, or "never" for `null` (a run that did not recover within its horizon).
 *
 * @since 0.1.0
 */
export const recovery = (seconds: number | null): string => seconds === null ? "never" : `${seconds} s`

/**
 * The summary table: one column per run (e.g. per policy).
 *
 * @since 0.1.0
 */
export const summaryTable = (runs: ReadonlyArray<{ readonly name: string; readonly summary: Summary.Summary }>) => {
  const rows: Array<[string, (s: Summary.Summary) => string]> = [
    ["peak active backends", (s) => String(s.peakActiveBackends)],
    ["mean active backends", (s) => fixed(s.meanActiveBackends)],
    ["peak client connections", (s) => String(s.peakClientConnections)],
    ["mean client connections", (s) => fixed(s.meanClientConnections)],
    ["max claim starts/s", (s) => String(s.maxClaimStartsPerSecond)],
    ["mean claim starts/s", (s) => fixed(s.meanClaimStartsPerSecond)],
    ["claims completed", (s) => String(s.claimsCompleted)],
    ["recovery after trigger", (s) => recovery(s.recoverySeconds)],
    ["seconds at ceiling", (s) => String(s.secondsAtCeiling)],
    ["settled max claim starts/s", (s) => String(s.settledMaxClaimStartsPerSecond)],
    ["settled mean + 5·sqrt(mean)", (s) => fixed(s.settledHerdBound)],
    ["connection attempts", (s) => String(s.connectionAttempts)],
    ["rejections (EMAXCONN)", (s) => String(s.rejections)],
    ["acquisition timeouts", (s) => String(s.timeouts)],
    ["failed polls", (s) => String(s.failedPolls)],
    ["claims cancelled (timeout)", (s) => String(s.claimsCancelled)],
    ["API served / requests", (s) => `${s.apiServed} / ${s.apiRequests}`],
    ["API failed (unavailable)", (s) => String(s.apiFailed)],
    ["API shed (admission gate)", (s) => String(s.apiShed)],
    ["peak active after trigger", (s) => String(s.peakActiveAfterTrigger)],
    ["writes / wakes", (s) => `${s.writes} / ${s.wakes}`],
    [
      "wake polls (failed) / coalesced / held / ignored",
      (s) => `${s.wakePolls} (${s.wakePollsFailed}) / ${s.wakesCoalesced} / ${s.wakesHeld} / ${s.wakesIgnored}`
    ],
    [
      "pickup p50 / p99 / max",
      (s) =>
        s.pickupP50Seconds === null
          ? "-"
          : `${fixed(s.pickupP50Seconds, 2)} / ${fixed(s.pickupP99Seconds!, 2)} / ${fixed(s.pickupMaxSeconds!, 2)} s`
    ],
    ["outage: all first 201s after", (s) => s.lastFirst201Seconds === null ? "-" : `${fixed(s.lastFirst201Seconds)} s`],
    ["outage: all processed after", (s) => s.drainSeconds === null ? "-" : `${fixed(s.drainSeconds)} s`],
    ["events", (s) => String(s.events)],
    ["wall time", (s) => `${fixed(s.wallSeconds)} s`]
  ]
  return table(["", ...runs.map((r) => r.name)], rows.map(([label, f]) => [label, ...runs.map((r) => f(r.summary))]))
}

/**
 * The `--json` document: `{ summary, series, params, totals }`, series as plain per-second arrays.
 *
 * @since 0.1.0
 */
export const document = (outcome: Simulation.Outcome, summary: Summary.Summary) => ({
  summary,
  series: Object.fromEntries(Object.entries(outcome.series).map(([k, v]) => [k, Array.from(v as Float64Array)])),
  params: outcome.params,
  totals: outcome.totals
})
