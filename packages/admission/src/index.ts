/**
 * An admission gate in front of database work: an adaptive concurrency limit, a short jittered circuit after
 * unavailability with one half-open probe, and single-flight readiness. A shed request makes no connection
 * attempt; an admitted one makes at most the one its work makes.
 *
 * @since 0.1.0
 */

/**
 * The gate: circuit, then a permit of the adaptive limit within the queueing bound, then the work.
 *
 * @since 0.1.0
 */
export * as Gate from "./Gate.ts"

/**
 * The settings, their defaults and their environment variables.
 *
 * @since 0.1.0
 */
export * as Settings from "./Settings.ts"

/**
 * The adaptive limit (AIMD) as pure functions.
 *
 * @since 0.1.0
 */
export * as Limit from "./Limit.ts"

/**
 * The circuit breaker as pure functions (trip on a failure rate, one probe, open windows backing off to a cap).
 *
 * @since 0.2.0
 */
export * as Breaker from "./Breaker.ts"

/**
 * The admission controller: {@link Limit} and {@link Breaker} on Effect's `Semaphore` and `Latch`, with metrics
 * and logs by `gate`; the API's request gate and the deriver's checkout gate both drive it.
 *
 * @since 0.3.0
 */
export * as Controller from "./Controller.ts"

/**
 * What one request's exit says about the database.
 *
 * @since 0.1.0
 */
export * as Outcome from "./Outcome.ts"

/**
 * The error of a shed request.
 *
 * @since 0.1.0
 */
export * as Shed from "./Shed.ts"

/**
 * Admitted, shed, limit, in-flight and circuit metrics.
 *
 * @deprecated since 0.3.0: internal (`src/internal/Metrics.ts`); nothing outside this package reads these values,
 * they reach a dashboard through the application's exporter (their names are in the README); removed from the
 * index in the next minor release.
 * @since 0.1.0
 */
export * as Metrics from "./internal/Metrics.ts"

/**
 * The readiness probe: a single-flight, cached `SELECT 1` through the gate.
 *
 * @since 0.2.0
 */
export * as ReadinessProbe from "./ReadinessProbe.ts"
