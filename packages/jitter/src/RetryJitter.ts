/**
 * Marc Brooker's retry jitter ("Exponential Backoff And Jitter", AWS Architecture Blog, 2015) as pure
 * functions of a uniform draw `u` in [0, 1), in milliseconds: the core of the client-side retry
 * {@link JitterSchedules}. `attempt` counts retries from 0.
 *
 * @since 0.1.0
 */
import { type InvalidParameter, Parameters } from "@resilience/parameters"
import type { Duration } from "effect"
import { Effect } from "effect"

/**
 * Options of the retry jitters: the base delay (> 0) and the cap (≥ base).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly base: Duration.Input
  readonly cap: Duration.Input
}

/**
 * Validated options, in milliseconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly baseMillis: number
  readonly capMillis: number
}

/**
 * Validates options (base > 0, cap ≥ base) into {@link Settings}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const settings = (options: Options): Effect.Effect<Settings, InvalidParameter.InvalidParameter> =>
  Effect.gen(function*() {
    const baseMillis = yield* Parameters.positiveDuration(options.base, "base")
    const capMillis = yield* Parameters.durationAtLeast(options.cap, "cap", baseMillis, "base")
    return { baseMillis, capMillis }
  })

/**
 * The capped exponential envelope `min(cap, base × 2^attempt)` that full and equal jitter draw under.
 *
 * @since 0.1.0
 * @category decisions
 */
export const envelope = (attempt: number, settings: Settings): number =>
  Math.min(settings.capMillis, settings.baseMillis * 2 ** attempt)

/**
 * Full jitter: uniform in [0, envelope). The least total work for competing clients, at the price of
 * occasionally retrying almost at once.
 *
 * @since 0.1.0
 * @category decisions
 */
export const fullFrom = (attempt: number, settings: Settings, u: number): number => u * envelope(attempt, settings)

/**
 * Equal jitter: half the envelope plus uniform in [0, envelope / 2); never sleeps less than half the envelope.
 *
 * @since 0.1.0
 * @category decisions
 */
export const equalFrom = (attempt: number, settings: Settings, u: number): number => {
  const half = envelope(attempt, settings) / 2
  return half + u * half
}

/**
 * Decorrelated jitter: `min(cap, uniform in [base, 3 × previous))`, where `previous` is the last sleep
 * (the base before the first retry). Grows from the last sleep rather than from the attempt count.
 *
 * @since 0.1.0
 * @category decisions
 */
export const decorrelatedFrom = (previousMillis: number, settings: Settings, u: number): number =>
  Math.min(settings.capMillis, settings.baseMillis + u * (3 * previousMillis - settings.baseMillis))
