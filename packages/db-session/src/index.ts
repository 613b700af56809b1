/**
 * Single-attempt database checkouts with a bounded connect timeout and typed unavailability errors.
 *
 * @since 0.1.0
 */

/**
 * What a database failure means: the table and the guards every other package asks.
 *
 * @since 0.1.0
 */
export * as Classify from "./Classify.ts"

/**
 * A checked-out connection.
 *
 * @since 0.1.0
 */
export type { Connection } from "./Connection.ts"

/**
 * The session's options and their environment variables.
 *
 * @since 0.1.0
 */
export * as DbConfig from "./DbConfig.ts"

/**
 * The session service.
 *
 * @since 0.1.0
 */
export { DbSession } from "./DbSession.ts"

/**
 * The seam between the session and a client library.
 *
 * @since 0.1.0
 */
export type * as Driver from "./Driver.ts"

/**
 * The typed failures (`DatabaseUnavailable`, `DatabaseMisconfigured`, `QueryFailed`).
 *
 * @since 0.1.0
 */
export * from "./Errors.ts"

/**
 * The typed failures as a namespace.
 *
 * @deprecated since 0.3.0: a second name for the classes exported above (`DatabaseUnavailable`, …), used nowhere;
 * removed in the next minor release.
 * @since 0.1.0
 */
export * as Errors from "./Errors.ts"

/**
 * Acquisition metrics.
 *
 * @deprecated since 0.3.0: internal (`src/internal/Metrics.ts`); nothing outside this package reads these values,
 * they reach a dashboard through the application's exporter (their names are in the README); removed from the
 * index in the next minor release.
 * @since 0.1.0
 */
export * as Metrics from "./internal/Metrics.ts"

/**
 * The two pool classes: a fresh connection per checkout (`null`) or an in-process pool (`queue`).
 *
 * @since 0.1.0
 */
export * as Pool from "./Pool.ts"

/**
 * Where a caller decides whether a checkout may open a new connection (the deriver's gate holds attempts back
 * while its process backs off).
 *
 * @since 0.2.0
 */
export * as ConnectGuard from "./ConnectGuard.ts"

/**
 * TLS to the database: libpq's `sslmode`, `sslrootcert`, `sslcert` and `sslkey` under both drivers, and the
 * refusal of a setting that cannot work (`InvalidTlsSetting`, at start).
 *
 * @since 0.2.0
 */
export * as Tls from "./Tls.ts"

/**
 * A TLS setting that cannot work, raised at start.
 *
 * @since 0.2.0
 */
export { InvalidTlsSetting } from "./Tls.ts"
