/**
 * `@resilience/checker`: a Jepsen-style consistency checker for the product: record every write and its
 * answer ({@link History}), then reconcile with the database and the derived state ({@link Checker}).
 *
 * @since 0.1.0
 */

/**
 * Recording writes and what their clients learned of them.
 *
 * @since 0.1.0
 */
export * as History from "./History.ts"

/**
 * Writes through `@resilience/api-client`: what a client's failure proves, and one message appended and recorded.
 *
 * @since 0.1.0
 */
export * as ClientWrites from "./ClientWrites.ts"

/**
 * Reconciling a history with the database: the verdict and its table.
 *
 * @since 0.1.0
 */
export * as Checker from "./Checker.ts"
