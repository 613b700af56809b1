/**
 * `@resilience/bench-kit`: what the benchmarks of every workspace share, so that their figures mean the same.
 *
 * @since 0.1.0
 */

/**
 * Quantiles (nearest rank), the median, the mean and the maximum of a bench's samples, and their formatting.
 *
 * @since 0.1.0
 */
export * as Stats from "./Stats.ts"

/**
 * A bench's settings from the environment, and the database it runs against.
 *
 * @since 0.1.0
 */
export * as Setup from "./Setup.ts"
