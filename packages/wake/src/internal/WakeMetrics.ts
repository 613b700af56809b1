/**
 * The sender's metrics, as Effect `Metric`s (export them with `effect/observability`'s `PrometheusMetrics`).
 *
 * @since 0.3.0
 */
import { Metric } from "effect"

/**
 * Wake requests sent that the receiver accepted (`202`): `wakes_sent_total`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const sent = Metric.counter("wakes_sent_total", {
  description: "Wake requests sent to the deriver and accepted (202)",
  incremental: true
})

/**
 * Wake requests that failed (refused, timed out, or any answer but `202`), by reason: `wakes_failed_total{reason}`.
 * The write they followed succeeded anyway; its item waits for the deriver's schedule.
 *
 * @since 0.3.0
 * @category metrics
 */
export const failed = Metric.counter("wakes_failed_total", {
  description: "Wake requests that failed (reason: timeout, error, status); the deriver's schedule picks the work up",
  incremental: true
})

/**
 * Wakes folded into a request already in flight or waiting (no request of their own): `wakes_coalesced_total`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const coalesced = Metric.counter("wakes_coalesced_total", {
  description: "Wakes folded into a wake request already in flight or waiting",
  incremental: true
})
