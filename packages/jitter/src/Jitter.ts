/**
 * Startup jitter and ratio jitter: the two random delays that keep a fleet of pollers out of step.
 *
 * Each operation comes twice: a pure function of a uniform draw `u` in [0, 1) that works in milliseconds
 * (for simulators and hot loops; no allocation, no Effect), and an Effect that draws `u` from Effect's
 * `Random` service and returns a `Duration` (so tests seed it and get the same sequence every run).
 *
 * @since 0.1.0
 */
import { Parameters } from "@resilience/parameters"
import { Duration, Effect, Random } from "effect"

/**
 * Startup delay for a uniform draw `u` in [0, 1): `u × maxMillis`, uniform in [0, maxMillis).
 *
 * @since 0.1.0
 * @category decisions
 */
export const startupDelayFrom = (maxMillis: number, u: number): number => u * maxMillis

/**
 * Ratio jitter for a uniform draw `u` in [0, 1): uniform in [(1 − ratio)·millis, (1 + ratio)·millis]
 * (clamped, so floating-point rounding never leaves that band). Ratio 0 returns `millis` unchanged.
 *
 * @since 0.1.0
 * @category decisions
 */
export const jitterFrom = (millis: number, ratio: number, u: number): number => {
  if (ratio === 0) return millis
  const low = (1 - ratio) * millis
  const high = (1 + ratio) * millis
  return Math.min(high, Math.max(low, low + u * (high - low)))
}

/**
 * A uniform random delay in [0, max]: sleep this long before the first poll so that instances started at
 * the same instant (a rollout batch, a database restart) spread their first polls over the whole window.
 *
 * A `max` that is not a finite duration ≥ 0 is a defect ({@link InvalidParameter.InvalidParameter}):
 * validate configuration up front with {@link Parameters.nonNegativeDuration}.
 *
 * @since 0.1.0
 * @category effects
 */
export const startupDelay = (max: Duration.Input): Effect.Effect<Duration.Duration> =>
  Effect.flatMap(
    Effect.orDie(Parameters.nonNegativeDuration(max, "max")),
    (maxMillis) => Effect.map(Random.next, (u) => Duration.millis(startupDelayFrom(maxMillis, u)))
  )

/**
 * `duration` scaled by a uniform random factor in [1 − ratio, 1 + ratio]: the sleep actually taken for a
 * nominal interval, so that loops which drift into phase are scattered again on every cycle. Ratio 0 is
 * the identity (and draws nothing).
 *
 * A `duration` that is not a finite duration ≥ 0, or a ratio outside [0, 1], is a defect
 * ({@link InvalidParameter.InvalidParameter}): validate configuration up front with {@link Parameters.ratio}.
 *
 * @since 0.1.0
 * @category effects
 */
export const jitter = (duration: Duration.Input, ratio: number): Effect.Effect<Duration.Duration> =>
  Effect.flatMap(
    Effect.orDie(Effect.zip(Parameters.nonNegativeDuration(duration, "duration"), Parameters.ratio(ratio))),
    ([millis, r]) =>
      r === 0
        ? Effect.succeed(Duration.millis(millis))
        : Effect.map(Random.next, (u) => Duration.millis(jitterFrom(millis, r, u)))
  )
