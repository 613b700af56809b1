/**
 * The `Retry-After` policy of a 503: a fixed number of seconds, or a range that each response draws from,
 * so that clients told to come back do not all come back in the same second.
 *
 * @since 0.1.0
 */
import { InvalidParameter } from "@resilience/parameters"
import { Config, Effect, Random, Schema } from "effect"

/**
 * Integer seconds to put in `Retry-After`: every response gets a value in [`minSeconds`, `maxSeconds`]
 * (both inclusive). `minSeconds === maxSeconds` is a fixed value.
 *
 * @since 0.1.0
 * @category models
 */
export interface RetryAfter {
  readonly minSeconds: number
  readonly maxSeconds: number
}

/**
 * The largest `Retry-After` this package accepts: one day. A larger value is almost certainly a unit mistake.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxAllowedSeconds = 86_400

const isSeconds = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= maxAllowedSeconds

const invalid = (parameter: string, value: unknown, allowed: string) =>
  new InvalidParameter.InvalidParameter({ parameter, value, allowed })

/**
 * Validates a policy: integer seconds in [0, 86400], and `maxSeconds` (default: `seconds`) not below `seconds`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: {
  readonly seconds: number
  readonly maxSeconds?: number | undefined
}): Effect.Effect<RetryAfter, InvalidParameter.InvalidParameter> => {
  const minSeconds = options.seconds
  const maxSeconds = options.maxSeconds ?? options.seconds
  if (!isSeconds(minSeconds)) {
    return Effect.fail(invalid("seconds", minSeconds, `an integer in [0, ${maxAllowedSeconds}]`))
  }
  if (!isSeconds(maxSeconds) || maxSeconds < minSeconds) {
    return Effect.fail(invalid("maxSeconds", maxSeconds, `an integer in [${minSeconds}, ${maxAllowedSeconds}]`))
  }
  return Effect.succeed({ minSeconds, maxSeconds })
}

/**
 * A fixed `Retry-After`. Throws on a value that {@link make} would reject: meant for constants.
 *
 * @since 0.1.0
 * @category decisions
 */
export const fixed = (seconds: number): RetryAfter => {
  if (!isSeconds(seconds)) {
    throw invalid("seconds", seconds, `an integer in [0, ${maxAllowedSeconds}]`)
  }
  return { minSeconds: seconds, maxSeconds: seconds }
}

/**
 * The default of the reference service: `Retry-After: 1`.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaultPolicy: RetryAfter = { minSeconds: 1, maxSeconds: 1 }

/**
 * The seconds for a uniform draw `u` in [0, 1): uniform over the integers of [`minSeconds`, `maxSeconds`].
 * Pure, for servers that bring their own randomness.
 *
 * @since 0.1.0
 * @category decisions
 */
export const fromUniform = (self: RetryAfter, u: number): number => {
  const span = self.maxSeconds - self.minSeconds + 1
  return Math.min(self.maxSeconds, self.minSeconds + Math.floor(u * span))
}

/**
 * Draws the seconds for one response from Effect's `Random` service (seed it in tests).
 *
 * @since 0.1.0
 * @category effects
 */
export const draw = (self: RetryAfter): Effect.Effect<number> =>
  self.minSeconds === self.maxSeconds
    ? Effect.succeed(self.minSeconds)
    : Effect.map(Random.next, (u) => fromUniform(self, u))

const Seconds = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: maxAllowedSeconds }))

/**
 * The names of the two environment variables {@link config} reads: the application chooses them (this
 * repository's API passes `API_RETRY_AFTER_SECONDS` and `API_RETRY_AFTER_MAX_SECONDS`).
 *
 * @since 0.2.0
 * @category models
 */
export interface Names {
  /** Integer seconds, the minimum; default {@link defaultPolicy}'s. */
  readonly seconds: string
  /** Integer seconds, the maximum; default: the minimum (a fixed `Retry-After`). */
  readonly maxSeconds: string
}

/**
 * The policy from the environment variables `names` gives: the minimum (default {@link defaultPolicy}'s) and,
 * to draw from a range, the maximum (default: the minimum). A value outside [0, 86400], or a maximum below the
 * minimum, is a `ConfigError` that names the variable.
 *
 * @since 0.2.0
 * @category config
 */
export const config = (names: Names): Config.Config<RetryAfter> =>
  Config.all({
    seconds: Config.schema(Seconds, names.seconds).pipe(Config.withDefault(defaultPolicy.minSeconds)),
    maxSeconds: Config.schema(Seconds, names.maxSeconds).pipe(Config.option)
  }).pipe(
    InvalidParameter.validateConfig(({ maxSeconds, seconds }) => {
      const max = maxSeconds._tag === "Some" ? maxSeconds.value : seconds
      return max < seconds
        ? Effect.fail(
          invalid(names.maxSeconds, max, `an integer in [${names.seconds} = ${seconds}, ${maxAllowedSeconds}]`)
        )
        : Effect.succeed({ minSeconds: seconds, maxSeconds: max })
    })
  )
