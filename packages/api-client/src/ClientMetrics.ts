/**
 * The client's metrics (Effect `Metric`s; exported by whatever the process exports them with).
 *
 * @since 0.1.0
 */
import { Metric } from "effect"

/**
 * `api_client_requests_total{endpoint, outcome}`: logical requests by outcome (`success`, `unavailable`,
 * `rejected`, `unauthorized`).
 *
 * @since 0.1.0
 */
export const requestsTotal = Metric.counter("api_client_requests_total", {
  description: "Logical requests of the API client, by endpoint and outcome",
  incremental: true
})

/**
 * `api_client_retries_total{endpoint, cause}`: retries by cause (`503`, `connection`).
 *
 * @since 0.1.0
 */
export const retriesTotal = Metric.counter("api_client_retries_total", {
  description: "Retries of the API client, by endpoint and cause",
  incremental: true
})

/**
 * `api_client_gave_up_total{endpoint, reason}`: logical requests given up while the API was unavailable, by
 * reason (`BudgetExhausted`, `AttemptsExhausted`, `RetryAfterBeyondCap`, `NotSafeToRepeat`).
 *
 * @since 0.1.0
 */
export const gaveUpTotal = Metric.counter("api_client_gave_up_total", {
  description: "Requests the API client gave up on while the API was unavailable, by endpoint and reason",
  incremental: true
})

/**
 * `api_client_retry_delay_seconds`: the waits before retries.
 *
 * @since 0.1.0
 */
export const retryDelaySeconds = Metric.histogram("api_client_retry_delay_seconds", {
  description: "Waits of the API client before a retry",
  boundaries: Metric.boundariesFromIterable([0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 30, 60])
})
