/** Test helpers: one-second bucketing of event times and the checks the desync tests apply to them. */

/** Counts of `times` (milliseconds) per one-second bucket over [0, windowMillis); later times are clamped into the last bucket. */
export const buckets = (times: ReadonlyArray<number>, windowMillis: number): Array<number> => {
  const counts: Array<number> = Array.from({ length: Math.ceil(windowMillis / 1000) }, () => 0)
  for (const t of times) {
    const index = Math.min(Math.floor(t / 1000), counts.length - 1)
    counts[index] = (counts[index] ?? 0) + 1
  }
  return counts
}

/** Pearson's chi-square statistic of `counts` against a uniform expectation. */
export const chiSquare = (counts: ReadonlyArray<number>): number => {
  const total = counts.reduce((a, b) => a + b, 0)
  const expected = total / counts.length
  return counts.reduce((sum, observed) => sum + (observed - expected) ** 2 / expected, 0)
}

/** Upper 0.1% point of the chi-square distribution with 29 degrees of freedom (30 one-second buckets). */
export const chiSquareCritical29 = 58.301

/** What a desync test asserts about a set of first-poll times, and the figures behind it. */
export interface Spread {
  readonly counts: ReadonlyArray<number>
  readonly maxBucket: number
  readonly bound: number
  readonly chiSquare: number
  /** No bucket above mean + 5·sqrt(mean). */
  readonly withinBound: boolean
  /** Chi-square below the 0.1% critical value for 29 degrees of freedom. */
  readonly uniform: boolean
}

/** Buckets `times` over a 30-second window and applies both desync checks. */
export const spread = (times: ReadonlyArray<number>, windowMillis = 30_000): Spread => {
  const counts = buckets(times, windowMillis)
  const mean = times.length / counts.length
  const bound = mean + 5 * Math.sqrt(mean)
  const maxBucket = Math.max(...counts)
  const statistic = chiSquare(counts)
  return {
    counts,
    maxBucket,
    bound,
    chiSquare: statistic,
    withinBound: maxBucket <= bound,
    uniform: counts.length === 30 && statistic < chiSquareCritical29
  }
}
