/**
 * `@resilience/environment`: the names of the environment variables this repository's processes read.
 *
 * @since 0.1.0
 */

/**
 * The variable names, per library `Config` that reads them.
 *
 * @since 0.1.0
 */
export * as Variables from "./Variables.ts"
