/**
 * STAND-IN for `@resilience/admission`'s `Limit` until it lands on main (same arithmetic, same settings);
 * replaced by an import of the package.
 *
 * @since 0.2.0
 */

/**
 * @since 0.2.0
 */
export interface Settings {
  readonly maxConcurrency: number
  readonly minConcurrency: number
  readonly queueTimeoutMillis: number
  readonly slowMillis: number
  readonly tripFailures: number
  readonly openMillis: number
  readonly openJitterRatio: number
  readonly decreaseRatio: number
}

/**
 * @since 0.2.0
 */
export const defaults: Settings = {
  maxConcurrency: 256,
  minConcurrency: 1,
  queueTimeoutMillis: 50,
  slowMillis: 2_000,
  tripFailures: 3,
  openMillis: 1_000,
  openJitterRatio: 0.5,
  decreaseRatio: 0.9
}

/**
 * @since 0.2.0
 */
export interface Sample {
  readonly outcome: "Unavailable" | "Overloaded" | "Answered" | "Ignored"
  readonly inFlight: number
  readonly millis: number
}

/**
 * @since 0.2.0
 */
export const initial = (settings: Settings): number => settings.maxConcurrency

/**
 * @since 0.2.0
 */
export const next = (limit: number, sample: Sample, settings: Settings): number => {
  const slow = settings.slowMillis > 0 && sample.millis > settings.slowMillis
  switch (sample.outcome) {
    case "Ignored":
      return limit
    case "Unavailable":
    case "Overloaded":
      return decrease(limit, settings)
    case "Answered":
      if (slow) return decrease(limit, settings)
      return sample.inFlight * 2 >= limit ? Math.min(settings.maxConcurrency, limit + 1) : limit
  }
}

const decrease = (limit: number, settings: Settings): number =>
  Math.max(settings.minConcurrency, Math.floor(limit * settings.decreaseRatio))
