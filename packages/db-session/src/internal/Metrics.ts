/**
 * Acquisition metrics, as Effect `Metric`s in the fiber's `MetricRegistry`: how many checkouts succeeded or
 * failed and why, how long they took, and how many connections are checked out right now.
 *
 * @since 0.1.0
 */
import { Metric } from "effect"
import type { UnavailableReason } from "../Errors.ts"

/**
 * `ok`, or the failed checkout's reason (`Misconfigured` for a `DatabaseMisconfigured`).
 *
 * @since 0.1.0
 * @category models
 */
export type AcquisitionReason = "none" | UnavailableReason | "Misconfigured"

/**
 * Checkouts by `outcome` (`ok` / `failed` / `interrupted`, the caller gave up first) and `reason`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const acquisitions = Metric.counter("db_acquisitions_total", {
  description: "Connection checkouts by outcome (ok/failed/interrupted) and reason",
  incremental: true
})

/**
 * Time from the start of a checkout to a connection or a failure, by `outcome`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const acquisitionSeconds = Metric.histogram("db_acquisition_seconds", {
  description: "Connection checkout latency in seconds, by outcome",
  boundaries: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10]
})

/**
 * Connections checked out and not yet released.
 *
 * @since 0.1.0
 * @category metrics
 */
export const connectionsInUse = Metric.gauge("db_connections_in_use", {
  description: "Connections currently checked out"
})

/**
 * The counter series for one outcome.
 *
 * @since 0.1.0
 * @category metrics
 */
export const acquisitionsFor = (outcome: "ok" | "failed" | "interrupted", reason: AcquisitionReason) =>
  series(`${outcome}:${reason}`, () => Metric.withAttributes(acquisitions, { outcome, reason }))

/**
 * The histogram series for one outcome.
 *
 * @since 0.1.0
 * @category metrics
 */
export const acquisitionSecondsFor = (outcome: "ok" | "failed") =>
  series(`seconds:${outcome}`, () => Metric.withAttributes(acquisitionSeconds, { outcome }))

/**
 * Each series made once: a metric with attributes keys its series by them (a JSON text), and a checkout updates
 * two, so a series made afresh per checkout would key it afresh too.
 */
const made = new Map<string, unknown>()
const series = <M>(key: string, make: () => M): M => {
  let found = made.get(key) as M | undefined
  if (found === undefined) {
    found = make()
    made.set(key, found)
  }
  return found
}
