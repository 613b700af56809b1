/**
 * `InvalidParameter`, the one validation error of this repository's packages: range checks built from a
 * `Schema`, and their bridge to Effect `Config`, so a bad setting stops a process naming the variable, the value
 * and the allowed range.
 *
 * @since 0.1.0
 */

/**
 * The typed error for a parameter outside its allowed range, and its bridge to Effect `Config`.
 *
 * @since 0.1.0
 */
export * as InvalidParameter from "./InvalidParameter.ts"

/**
 * Range checks with `Schema`: `check(schema, allowed)`, and the ratio, multiplier and duration checks.
 *
 * @since 0.1.0
 */
export * as Parameters from "./Parameters.ts"
