/**
 * Startup jitter, ratio jitter and a deterministic poll backoff, so a fleet of pollers never moves in step.
 *
 * @since 0.1.0
 */

/**
 * Startup delay and ratio jitter, as pure functions of a uniform draw and as Effects on `Random`.
 *
 * @since 0.1.0
 */
export * as Jitter from "./Jitter.ts"

/**
 * The poll backoff: deterministic schedule, jitter on the returned sleep only; pure core and Effect wrapper.
 *
 * @since 0.1.0
 */
export * as PollBackoff from "./PollBackoff.ts"

/**
 * Brooker's full, equal and decorrelated retry jitter as pure functions.
 *
 * @since 0.1.0
 */
export * as RetryJitter from "./RetryJitter.ts"

/**
 * The poll backoff and Brooker's jitters as Effect `Schedule`s.
 *
 * @deprecated since 0.3.0: nothing in the product steps these schedules (the deriver's loop uses {@link PollBackoff},
 * which a loop can reset when it finds work and a `Schedule` cannot; the API client draws {@link RetryJitter}
 * itself); removed in the next minor release. Use `PollBackoff.make`, or `RetryJitter.fullFrom` with Effect's
 * `Schedule.fromStep`.
 * @since 0.2.0
 */
export * as JitterSchedules from "./JitterSchedules.ts"
