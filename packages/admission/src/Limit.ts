/**
 * The adaptive concurrency limit, as pure functions: additive increase while the database answers and the
 * limit is in use, multiplicative decrease when it is unavailable or slow (AIMD, as TCP congestion control
 * and Netflix's concurrency-limits `AIMDLimit`). The gate applies the result to a resizable `Semaphore`.
 *
 * @since 0.1.0
 */
import type * as Outcome from "./Outcome.ts"
import type * as Settings from "./Settings.ts"

/**
 * What the limit learns from one admitted request: its outcome, how many requests were in flight when it
 * was admitted (itself included), and how long it held its permit.
 *
 * @since 0.1.0
 */
export interface Sample {
  readonly outcome: Outcome.Outcome
  readonly inFlight: number
  readonly millis: number
}

/**
 * The limit a gate starts with: the maximum.
 *
 * @since 0.1.0
 */
export const initial = (settings: Settings.Settings): number => settings.maxConcurrency

/**
 * The next limit after one sample:
 * - `Unavailable` or `Overloaded`, or an answer slower than `slowMillis`: `max(min, floor(limit × decreaseRatio))`;
 * - any other answer, while at least half the limit was in use: `min(max, limit + 1)` (one more per success
 *   doubles the limit per round trip when it is full, so it recovers in a few round trips);
 * - otherwise (`Ignored`, or a limit that is not the bottleneck): unchanged.
 *
 * @since 0.1.0
 */
export const next = (limit: number, sample: Sample, settings: Settings.Settings): number => {
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

const decrease = (limit: number, settings: Settings.Settings): number =>
  Math.max(settings.minConcurrency, Math.floor(limit * settings.decreaseRatio))
