/**
 * `@resilience/deriver`: a jittered, fail-fast Postgres queue worker that backs off a saturated database
 * and loses no work.
 *
 * @since 0.1.0
 */

/**
 * The database condition, logged once per change of state (the deriver's own; moved to `src/internal`).
 *
 * @deprecated Since 0.3.0: the deriver's internal log; this entry goes in 0.4.0.
 * @since 0.2.0
 */
export * as ConditionLog from "./internal/ConditionLog.ts"

/**
 * The deriver: the poll loop over one tenant schema's queue.
 *
 * @since 0.1.0
 */
export * as Deriver from "./Deriver.ts"

/**
 * The deriver's settings from the `DERIVER_*` environment.
 *
 * @since 0.1.0
 */
export * as DeriverConfig from "./DeriverConfig.ts"

/**
 * The deriver's metrics.
 *
 * @since 0.1.0
 */
export * as DeriverMetrics from "./DeriverMetrics.ts"

/**
 * Database failure vs handler failure, and error rendering.
 *
 * @since 0.1.0
 */
export * as Failures from "./Failures.ts"

/**
 * The task handler registry.
 *
 * @since 0.1.0
 */
export * as Handlers from "./Handlers.ts"

/**
 * Overload-aware polling: signals, the interval floor and its recovery (pure; shared with the fleet
 * simulator).
 *
 * @since 0.2.0
 */
export * as Overload from "./Overload.ts"

/**
 * The polling loop, independent of SQL.
 *
 * @since 0.1.0
 */
export * as PollLoop from "./PollLoop.ts"

/**
 * The queue's hot path: claim units with their first batches, read a unit's later batches, record outcomes with
 * the heartbeat or the release.
 *
 * @since 0.1.0
 */
export * as Queue from "./Queue.ts"

/**
 * Enqueueing items, in the writer's own transaction.
 *
 * @since 0.3.0
 */
export * as Enqueue from "./Enqueue.ts"

/**
 * The queue's maintenance: stale cleanup, history retention, depth sample.
 *
 * @since 0.3.0
 */
export * as Maintenance from "./Maintenance.ts"

/**
 * The queue's migrations.
 *
 * @since 0.1.0
 */
export * as QueueSchema from "./QueueSchema.ts"

/**
 * The loop's pure scheduling decisions (shared with the fleet simulator).
 *
 * @since 0.1.0
 */
export * as Scheduling from "./Scheduling.ts"

/**
 * Retry policies of handlers' transient failures (pure; on `@resilience/jitter`'s full jitter).
 *
 * @since 0.3.0
 */
export * as Retries from "./Retries.ts"

/**
 * Dead letters: list, count, replay, and the operator's command line.
 *
 * @since 0.3.0
 */
export * as DeadLetters from "./DeadLetters.ts"
