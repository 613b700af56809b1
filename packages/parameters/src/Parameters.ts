/**
 * Validation of parameters (jitter and backoff options, settings) with `Schema`. Every check fails with an
 * {@link InvalidParameter.InvalidParameter} that names the parameter, the bad value and the allowed range.
 *
 * @since 0.1.0
 */
import { Duration, Effect, Option, Schema } from "effect"
import * as InvalidParameter from "./InvalidParameter.ts"

/**
 * A jitter ratio: a finite number in [0, 1]. 0 disables jitter; 0.5 sleeps in [0.5x, 1.5x].
 *
 * @since 0.1.0
 * @category schemas
 */
export const Ratio = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))

/**
 * A backoff multiplier: a finite number ≥ 1 (1 keeps the interval constant).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Multiplier = Schema.Finite.check(Schema.isGreaterThanOrEqualTo(1))

/**
 * A duration in milliseconds that is finite and strictly positive (a base interval).
 *
 * @since 0.1.0
 * @category schemas
 */
export const PositiveMillis = Schema.Finite.check(Schema.isGreaterThan(0))

/**
 * A duration in milliseconds that is finite and not negative (a startup window, a duration to jitter).
 *
 * @since 0.1.0
 * @category schemas
 */
export const NonNegativeMillis = Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))

/**
 * A duration in milliseconds that is finite and at least `minimum` (a cap, which must be ≥ the base).
 *
 * @since 0.1.0
 * @category decisions
 */
export const MillisAtLeast = (minimum: number) => Schema.Finite.check(Schema.isGreaterThanOrEqualTo(minimum))

const isPositiveMillis = Schema.is(PositiveMillis)
const isNonNegativeMillis = Schema.is(NonNegativeMillis)

const invalid = (parameter: string, value: unknown, allowed: string) =>
  new InvalidParameter.InvalidParameter({ parameter, value, allowed })

/**
 * A check built from a `Schema` and the allowed range in words: the value passes as it is, or the check fails
 * with an {@link InvalidParameter.InvalidParameter} naming the parameter, the value and `allowed`. The one way
 * a setting is range-checked in this repository.
 *
 * @since 0.2.0
 * @category effects
 */
export const check = <A>(schema: Schema.Schema<A>, allowed: string) => {
  const is = Schema.is(schema)
  return (value: unknown, parameter: string): Effect.Effect<A, InvalidParameter.InvalidParameter> =>
    is(value) ? Effect.succeed(value) : Effect.fail(invalid(parameter, value, allowed))
}

const checkRatio = check(Ratio, "a number in [0, 1]")
const checkMultiplier = check(Multiplier, "a finite number >= 1")

/** Milliseconds of a `Duration.Input`, or `undefined` when the input is not a duration at all. */
const toMillis = (input: Duration.Input): number | undefined =>
  // A plain number is milliseconds; it is checked as given (Duration would quietly turn NaN into zero).
  typeof input === "number"
    ? input
    : Option.match(Duration.fromInput(input), { onNone: () => undefined, onSome: Duration.toMillis })

/**
 * Validates a jitter ratio (in [0, 1]).
 *
 * @since 0.1.0
 * @category effects
 */
export const ratio = (value: number, parameter = "ratio"): Effect.Effect<number, InvalidParameter.InvalidParameter> =>
  checkRatio(value, parameter)

/**
 * Validates a backoff multiplier (≥ 1).
 *
 * @since 0.1.0
 * @category effects
 */
export const multiplier = (
  value: number,
  parameter = "multiplier"
): Effect.Effect<number, InvalidParameter.InvalidParameter> => checkMultiplier(value, parameter)

/** A check of a `Duration.Input` in milliseconds: a plain number is milliseconds, checked as given. */
const durationCheck = (isMillis: (millis: number) => boolean, allowed: string) =>
(
  value: Duration.Input,
  parameter: string
): Effect.Effect<number, InvalidParameter.InvalidParameter> => {
  const millis = toMillis(value)
  return millis !== undefined && isMillis(millis)
    ? Effect.succeed(millis)
    : Effect.fail(invalid(parameter, value, allowed))
}

/**
 * Validates a strictly positive, finite duration and returns it in milliseconds (e.g. a base interval).
 *
 * @since 0.1.0
 * @category effects
 */
export const positiveDuration: (
  value: Duration.Input,
  parameter: string
) => Effect.Effect<number, InvalidParameter.InvalidParameter> = durationCheck(isPositiveMillis, "a finite duration > 0")

/**
 * Validates a finite duration that is not negative and returns it in milliseconds (e.g. a startup window).
 *
 * @since 0.1.0
 * @category effects
 */
export const nonNegativeDuration: (
  value: Duration.Input,
  parameter: string
) => Effect.Effect<number, InvalidParameter.InvalidParameter> = durationCheck(
  isNonNegativeMillis,
  "a finite duration >= 0"
)

/**
 * Validates a finite duration of at least `minimumMillis` (named `minimumName` in the error, e.g. a cap that
 * must be ≥ the base) and returns it in milliseconds.
 *
 * @since 0.1.0
 * @category effects
 */
export const durationAtLeast = (
  value: Duration.Input,
  parameter: string,
  minimumMillis: number,
  minimumName: string
): Effect.Effect<number, InvalidParameter.InvalidParameter> =>
  durationCheck(
    Schema.is(MillisAtLeast(minimumMillis)),
    `a finite duration >= ${minimumName} (${minimumMillis} ms)`
  )(value, parameter)
