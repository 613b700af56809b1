/**
 * The scenarios' figures as Markdown tables: one per scenario (figure, value), and one line per scenario side
 * by side.
 */
import { Checker } from "@resilience/checker"
import type * as Scenario from "./Scenario.ts"

const seconds = (millis: number | null) => millis === null ? "-" : `${(millis / 1000).toFixed(2)} s`

/** `switchover, synchronous_mode on`. */
export const title = (settings: Scenario.Settings): string =>
  `${settings.fault}, synchronous_mode ${settings.synchronousMode ? (settings.strict ? "strict" : "on") : "off"}`

const anomalyCount = (verdict: Checker.Verdict) => Checker.kinds.reduce((sum, kind) => sum + verdict.counts[kind], 0)

/** The kinds found, `lost 3, unfolded 1`, or `none`. */
const anomalyList = (verdict: Checker.Verdict) =>
  Checker.kinds.filter((kind) => verdict.counts[kind] > 0).map((kind) => `${kind} ${verdict.counts[kind]}`).join(", ")
  || "none"

const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string | number>>) =>
  [
    `| ${header.join(" | ")} |`,
    `| ${header.map(() => "---").join(" | ")} |`,
    ...rows.map((row) => `| ${row.join(" | ")} |`)
  ].join("\n")

/** One scenario's table. */
export const scenario = (result: Scenario.Result): string => {
  const f = result.figures
  const v = result.verdict
  return [
    `### ${title(result.settings)}`,
    "",
    table(["figure", "value"], [
      [
        "fault → first 201 after the longest gap in 201s (gap)",
        `${seconds(f.gapEndMillis)} (${seconds(f.longestGapMillis)})`
      ],
      ["fault → first 201 sent after the first refusal came", seconds(f.firstAcknowledgedMillis)],
      [
        result.failedOver ? "fault → new leader (Patroni)" : "fault → old primary leads again (no failover)",
        seconds(result.newLeaderMillis)
      ],
      ["fault → old primary streaming from it again", seconds(result.rejoinedMillis)],
      [
        "refused attempts after the fault: first, last",
        `${seconds(f.firstRefusalMillis)}, ${seconds(f.lastRefusalMillis)}`
      ],
      ["503 with Retry-After after the fault", f.unavailableWithRetryAfter],
      ["503 without Retry-After", f.unavailableWithoutRetryAfter],
      ["500", f.internalErrors],
      ["no HTTP answer", f.transportFailures],
      ["other statuses", f.otherStatuses],
      [
        "writes: acknowledged / refused (4xx) / unknown (503s given up on, no answer)",
        `${f.acknowledged} / ${f.refused} / ${f.unknown}`
      ],
      ["messages stored (acknowledged + unknown that were)", v.totals.stored],
      [
        "201 latency before the fault, p50 / p99",
        `${f.latencyBeforeMillis.p50 ?? "-"} / ${f.latencyBeforeMillis.p99 ?? "-"} ms`
      ],
      [`checker anomalies (valid? ${v.valid})`, `${anomalyCount(v)}: ${anomalyList(v)}`],
      ["acknowledged writes lost", v.counts.lost],
      ["processes restarted", result.processesExited],
      ["fault → patronictl returned / postmaster killed", seconds(result.faultDoneMillis)],
      ["members after", result.members],
      ["the API's counters", result.apiCounters.join("; ") || "-"],
      ["HAProxy after the fault", result.routing.join("; ") || "-"]
    ])
  ].join("\n")
}

/** One line per scenario. */
export const summary = (results: ReadonlyArray<Scenario.Result>): string =>
  table(
    [
      "scenario",
      "first 201 (gap)",
      "503 + Retry-After",
      "500",
      "acknowledged / unknown",
      "acknowledged lost",
      "anomalies",
      "restarted",
      "rejoined"
    ],
    results.map((result) => [
      title(result.settings),
      `${seconds(result.figures.gapEndMillis)} (${seconds(result.figures.longestGapMillis)})`,
      result.figures.unavailableWithRetryAfter,
      result.figures.internalErrors,
      `${result.figures.acknowledged} / ${result.figures.unknown}`,
      result.verdict.counts.lost,
      anomalyCount(result.verdict),
      result.processesExited,
      seconds(result.rejoinedMillis)
    ])
  )

/** Answers per second around the fault: `+3 s 201×12 503×4`. */
export const timeline = (result: Scenario.Result): string =>
  result.timeline.map((row) =>
    `${row.second >= 0 ? "+" : ""}${row.second} s 201×${row.acknowledged} 503×${row.unavailable}${
      row.other > 0 ? ` other×${row.other}` : ""
    }`
  ).join("\n")
