/**
 * The client's metrics (Effect `Metric`s; exported by whatever the process exports them with).
 *
 * @since 0.1.0
 */
import { Metric } from "effect"

/** A counter that only counts up (`incremental`), as every counter here does. */
const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

/**
 * `api_client_requests_total{endpoint, outcome}`: logical requests by outcome (`success`, `unavailable`,
 * `rejected`, `unauthorized`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const requestsTotal = counter(
  "api_client_requests_total",
  "Logical requests of the API client, by endpoint and outcome"
)

/**
 * `api_client_retries_total{endpoint, cause}`: retries by cause (`503`, `connection`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const retriesTotal = counter("api_client_retries_total", "Retries of the API client, by endpoint and cause")

/**
 * `api_client_gave_up_total{endpoint, reason}`: logical requests given up while the API was unavailable, by
 * reason (`BudgetExhausted`, `AttemptsExhausted`, `RetryAfterBeyondCap`, `NotSafeToRepeat`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const gaveUpTotal = counter(
  "api_client_gave_up_total",
  "Requests the API client gave up on while the API was unavailable, by endpoint and reason"
)

/**
 * `api_client_retry_delay_seconds`: the waits before retries.
 *
 * @since 0.1.0
 * @category metrics
 */
export const retryDelaySeconds = Metric.histogram("api_client_retry_delay_seconds", {
  description: "Waits of the API client before a retry",
  boundaries: Metric.boundariesFromIterable([0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 30, 60])
})
