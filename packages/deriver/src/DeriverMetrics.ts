/**
 * The deriver's metrics, as Effect `Metric`s (export them with `effect/observability`'s `PrometheusMetrics`).
 *
 * @since 0.1.0
 */
import { Metric } from "effect"
import type * as Scheduling from "./Scheduling.ts"

/** A counter that only counts up (`incremental`), as every counter here does. */
const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

/**
 * Polls by result (`claimed`, `empty`, `busy`, `error`): `deriver_polls_total{result}`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const polls = counter(
  "deriver_polls_total",
  "Loop iterations by result: claimed, empty, busy (all workers busy, no poll) or error"
)

/**
 * The counter of polls for each result.
 *
 * @since 0.1.0
 * @category metrics
 */
export const pollsBy = {
  claimed: Metric.withAttributes(polls, { result: "claimed" }),
  empty: Metric.withAttributes(polls, { result: "empty" }),
  busy: Metric.withAttributes(polls, { result: "busy" }),
  error: Metric.withAttributes(polls, { result: "error" })
} satisfies Record<Scheduling.Outcome, unknown>

/**
 * The current, unjittered poll interval of the backoff schedule: `deriver_poll_interval_seconds`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const pollInterval = Metric.gauge("deriver_poll_interval_seconds", {
  description: "Current poll interval of the backoff schedule (before jitter)"
})

/**
 * The overload floor of the poll interval (0: no overload): `deriver_overload_floor_seconds`.
 *
 * @since 0.2.0
 * @category metrics
 */
export const overloadFloor = Metric.gauge("deriver_overload_floor_seconds", {
  description: "Lower bound on the poll interval set by overload signals (0: none)"
})

/**
 * Work units claimed: `deriver_claims_total`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const claims = counter("deriver_claims_total", "Work units claimed")

/**
 * Items processed successfully: `deriver_items_processed_total`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const itemsProcessed = counter("deriver_items_processed_total", "Queue items whose handler succeeded")

/**
 * Items whose handler failed (marked with their error): `deriver_items_failed_total`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const itemsFailed = counter(
  "deriver_items_failed_total",
  "Queue items whose handler failed; marked with the error"
)

/**
 * Database failures while processing an item (item left unprocessed, worker backed off):
 * `deriver_item_database_failures_total`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const itemDatabaseFailures = counter(
  "deriver_item_database_failures_total",
  "Database failures while working on an item; the item stays unprocessed for a later attempt"
)

/**
 * Time to process one claimed work unit: `deriver_unit_processing_seconds`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const unitProcessingSeconds = Metric.histogram("deriver_unit_processing_seconds", {
  description: "Time from claiming a work unit to releasing it",
  boundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]
})

/**
 * Work units being processed right now: `deriver_units_in_flight`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const unitsInFlight = Metric.gauge("deriver_units_in_flight", {
  description: "Work units this process is working on"
})

/**
 * Stale ownership rows removed by the cleanup: `deriver_stale_units_released_total`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const staleUnitsReleased = counter(
  "deriver_stale_units_released_total",
  "Ownership rows removed because their heartbeat was older than the stale timeout"
)

/**
 * Deaths of the loop outside a handler, by `where` (`poller` or `worker`): `deriver_loop_deaths_total`. Any
 * value above 0 is a defect; the app exits non-zero and says so on `/healthz`.
 *
 * @since 0.2.0
 * @category metrics
 */
export const loopDeaths = counter(
  "deriver_loop_deaths_total",
  "The poll loop or a worker died of a defect outside a handler (the process exits non-zero)"
)

/**
 * Processed items deleted by the history retention: `deriver_history_pruned_total`.
 *
 * @since 0.2.0
 * @category metrics
 */
export const historyPruned = counter(
  "deriver_history_pruned_total",
  "Processed items deleted because they were older than DERIVER_HISTORY_RETENTION_HOURS"
)

/**
 * Wakes received (`POST /wake`, or `PollLoop.wake`), whatever was decided: `deriver_wakes_received_total`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const wakesReceived = counter(
  "deriver_wakes_received_total",
  "Wakes received (a write committed work for this deriver's schema)"
)

/**
 * Wakes that made no poll of their own, by `reason`: `coalesced` (a poll already waiting covers them) or
 * `ignored` (a woken poll failed, so wakes wait for a poll that succeeds; or the deriver had not started):
 * `deriver_wakes_coalesced_total{reason}`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const wakesCoalesced = counter(
  "deriver_wakes_coalesced_total",
  "Wakes that made no poll of their own (reason: coalesced into a waiting poll, or ignored)"
)

/**
 * Polls made because of a wake (a sleep ended early, or one more poll after the one in flight):
 * `deriver_polls_woken_total`. One per wake: a woken poll that the checkout gate refused and the loop tries again
 * until one reaches the database counts once.
 *
 * @since 0.3.0
 * @category metrics
 */
export const pollsWoken = counter("deriver_polls_woken_total", "Polls made because of a wake, not the schedule")

/**
 * Retries scheduled after a handler's transient failure: `deriver_retries_scheduled_total`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const retriesScheduled = counter(
  "deriver_retries_scheduled_total",
  "Queue items whose handler failed transiently; left unprocessed until the backoff's time"
)

/**
 * Items that failed their last attempt: `deriver_dead_letters_total`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const deadLetters = counter(
  "deriver_dead_letters_total",
  "Queue items whose handler failed its last attempt (dead letters, kept for replay)"
)

/**
 * The attempt at which an item's handling ended (processed, failed or dead): `deriver_item_attempts`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const itemAttempts = Metric.histogram("deriver_item_attempts", {
  description: "Handler runs an item took, the last included, when it ended processed, failed or dead",
  boundaries: [1, 2, 3, 5, 8, 13, 20, 30]
})

/**
 * Units recorded by one statement (`queue_record_units`): `deriver_record_units_per_statement`. With one worker
 * finishing at a time it is 1; under load, the units whose records came in while the last statement ran.
 *
 * @since 0.3.0
 * @category metrics
 */
export const recordUnitsPerStatement = Metric.histogram("deriver_record_units_per_statement", {
  description: "Work units whose outcomes one record statement carried",
  boundaries: [1, 2, 3, 4, 6, 8, 12, 16, 32]
})

/**
 * Where {@link queueDepth} stops counting: a count that reaches it is reported as it (at least that many).
 *
 * @since 0.3.0
 * @category metrics
 */
export const queueDepthCap = 10_000

/**
 * The queue's depth as the last cleanup round sampled it, by `state`: `due` (live items that can run now) or
 * `waiting` (for a retry's time, or the time they were enqueued with); dead letters are not counted. Each state
 * is counted up to {@link queueDepthCap}: a value equal to it means at least that many.
 * `deriver_queue_depth{state}`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const queueDepth = Metric.gauge("deriver_queue_depth", {
  description:
    `Live queue items by state (due, waiting for their time), sampled with the stale cleanup; counted up to ${queueDepthCap}`
})

/**
 * The gauge of the queue's depth for each state.
 *
 * @since 0.3.0
 * @category metrics
 */
export const queueDepthBy = {
  due: Metric.withAttributes(queueDepth, { state: "due" }),
  waiting: Metric.withAttributes(queueDepth, { state: "waiting" })
}

/**
 * How long the oldest due item has been due (0: none is), sampled with the stale cleanup:
 * `deriver_queue_oldest_pending_age_seconds`.
 *
 * @since 0.3.0
 * @category metrics
 */
export const queueOldestPendingAge = Metric.gauge("deriver_queue_oldest_pending_age_seconds", {
  description: "Time since the oldest due queue item became due (0: none), sampled with the stale cleanup"
})
