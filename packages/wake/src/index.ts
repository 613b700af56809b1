/**
 * The wake of a deriver: the wire contract, the pure coalescing decision and the API's fire-and-forget sender.
 *
 * @since 0.3.0
 */

/**
 * The coalescing of wakes as pure functions: wake, poll started, poll finished.
 *
 * @since 0.3.0
 */
export * as Coalesce from "./Coalesce.ts"

/**
 * The wire contract: `POST /wake` with `{"schema": …}`, decoded with `Schema`.
 *
 * @since 0.3.0
 */
export * as WakeContract from "./WakeContract.ts"

/**
 * The fire-and-forget, coalescing sender of wakes (the API's side).
 *
 * @since 0.3.0
 */
export * as WakeSender from "./WakeSender.ts"
