/**
 * The client's retry decisions as pure functions of a uniform draw `u` in [0, 1): how long to wait before a
 * retry, what a `Retry-After` header asks for, and which requests may be repeated after a connection failure.
 *
 * @since 0.1.0
 */
import { RetryJitter } from "@resilience/jitter"
import { InvalidParameter, Parameters } from "@resilience/parameters"
import { Duration, Effect } from "effect"

/**
 * Options of the retries.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Attempts of one logical request, the first included: an integer in [1, 100] (default 5). */
  readonly maxAttempts?: number | undefined
  /** Base of the full-jitter envelope `min(maxDelay, baseDelay × 2^retry)` (default 250 ms). */
  readonly baseDelay?: Duration.Input | undefined
  /**
   * Cap of one wait (default 30 s); a `Retry-After` longer than this ends the retries rather than being cut
   * short.
   */
  readonly maxDelay?: Duration.Input | undefined
}

/**
 * Validated options, in milliseconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly maxAttempts: number
  readonly jitter: RetryJitter.Settings
}

/**
 * The defaults: 5 attempts, 250 ms base, 30 s cap.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults = { maxAttempts: 5, baseDelay: Duration.millis(250), maxDelay: Duration.seconds(30) } as const

/**
 * Validates the options (`maxAttempts` an integer in [1, 100], `baseDelay` > 0, `maxDelay` ≥ `baseDelay`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const settings = (options: Options = {}): Effect.Effect<Settings, InvalidParameter.InvalidParameter> =>
  Effect.gen(function*() {
    const maxAttempts = options.maxAttempts ?? defaults.maxAttempts
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 100) {
      return yield* new InvalidParameter.InvalidParameter({
        parameter: "maxAttempts",
        value: maxAttempts,
        allowed: "an integer in [1, 100]"
      })
    }
    const baseMillis = yield* Parameters.positiveDuration(options.baseDelay ?? defaults.baseDelay, "baseDelay")
    const capMillis = yield* Parameters.durationAtLeast(
      options.maxDelay ?? defaults.maxDelay,
      "maxDelay",
      baseMillis,
      "baseDelay"
    )
    return { maxAttempts, jitter: { baseMillis, capMillis } }
  })

/**
 * The wait before retry `retry` (from 0): the server's `Retry-After` (`floorMillis`) as the floor plus full
 * jitter on top, uniform in [0, min(cap, base × 2^retry)), the whole capped at `maxDelay`. Never less than the
 * floor: the caller gives up when the floor itself exceeds the cap (see {@link beyondCap}).
 *
 * @since 0.1.0
 * @category decisions
 */
export const delayFrom = (retry: number, floorMillis: number, settings: Settings, u: number): number =>
  Math.max(
    floorMillis,
    Math.min(settings.jitter.capMillis, floorMillis + RetryJitter.fullFrom(retry, settings.jitter, u))
  )

/**
 * Whether the server asked for a wait longer than the cap.
 *
 * @since 0.1.0
 * @category decisions
 */
export const beyondCap = (floorMillis: number, settings: Settings): boolean => floorMillis > settings.jitter.capMillis

/**
 * `Retry-After` in milliseconds: delta-seconds (`"2"`) or an HTTP date relative to `nowMillis`; `undefined`
 * when absent or unreadable (then only the jitter applies).
 *
 * @since 0.1.0
 * @category decisions
 */
export const retryAfterMillis = (header: string | undefined, nowMillis: number): number | undefined => {
  if (header === undefined) return undefined
  const text = header.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  const date = Date.parse(text)
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMillis)
}

const idempotentMethods: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"])

/**
 * Whether a request may be repeated after a connection failure (when it may have reached the server): an
 * idempotent method, or a write whose endpoint honours its `Idempotency-Key`.
 *
 * @since 0.1.0
 * @category decisions
 */
export const safeToRepeat = (method: string, keyHonoured: boolean): boolean =>
  idempotentMethods.has(method.toUpperCase()) || keyHonoured
