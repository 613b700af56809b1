/**
 * The figures the benchmarks report over their samples, one definition for all of them: a quantile is the
 * nearest rank (a value that was measured, never one interpolated between two), the median is the quantile 0.5,
 * and a figure over no samples is NaN, which {@link fixed} prints as "-".
 *
 * @since 0.1.0
 */

/**
 * The nearest-rank quantile: the ⌈q·n⌉-th smallest of the n values, the smallest value with at least a fraction
 * `q` (0 to 1) of the values at or below it. So p99 of 100 samples is the 99th smallest, p50 of 4 the 2nd, q 0 the
 * smallest and q 1 the largest. NaN when there are no values. `values` is not reordered.
 *
 * @since 0.1.0
 * @category figures
 */
export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  // q·n to a millionth first: 0.07 × 100 is 7.000000000000001 in floating point, whose ceiling would skip a rank.
  const rank = Math.ceil(Math.round(q * sorted.length * 1e6) / 1e6)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!
}

/**
 * The median as the quantile 0.5: the middle value of an odd count, the lower of the two middle ones of an even
 * count (a measured value, not their mean). NaN when there are no values.
 *
 * @since 0.1.0
 * @category figures
 */
export const median = (values: ReadonlyArray<number>): number => quantile(values, 0.5)

/**
 * The arithmetic mean; NaN when there are no values.
 *
 * @since 0.1.0
 * @category figures
 */
export const mean = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : values.reduce((sum, value) => sum + value, 0) / values.length

/**
 * The largest value; NaN when there are no values (where `Math.max()` gives -Infinity).
 *
 * @since 0.1.0
 * @category figures
 */
export const max = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : values.reduce((largest, value) => Math.max(largest, value), -Infinity)

/**
 * A figure for a table or a log line, with `digits` decimals; "-" for a figure that is missing, NaN or infinite
 * (a quantile of no samples, a ratio to zero).
 *
 * @since 0.1.0
 * @category formatting
 */
export const fixed = (value: number | undefined, digits = 1): string =>
  value === undefined || !Number.isFinite(value) ? "-" : value.toFixed(digits)
