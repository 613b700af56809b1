/**
 * What a handler's transient failure does to its item: the per-task-type retry policy (how many attempts, a
 * capped exponential backoff with full jitter from `@resilience/jitter`) and the pure decision it makes, as a
 * function of the time and a uniform draw: options → settings → decision, as the rest of the deriver's
 * scheduling.
 *
 * @since 0.3.0
 */
import { RetryJitter } from "@resilience/jitter"
import { type InvalidParameter, Parameters } from "@resilience/parameters"
import type { Duration } from "effect"
import { Effect, Schema } from "effect"

/**
 * What a handler's error means when it is neither a stated outcome nor a database condition: `fail` (marked
 * with its error, never run again: the behaviour before retries) or `retry` (a transient failure).
 *
 * @since 0.3.0
 * @category models
 */
export type UnknownErrors = "fail" | "retry"

/**
 * A task type's retry policy. Every field has a default ({@link defaults}).
 *
 * @since 0.3.0
 * @category models
 */
export interface Options {
  /** Runs of the handler before the item is a dead letter, the first included (an integer ≥ 1). */
  readonly maxAttempts?: number | undefined
  /** The backoff's first envelope: the first retry is uniform in [0, base). */
  readonly base?: Duration.Input | undefined
  /** The largest envelope (≥ base). */
  readonly cap?: Duration.Input | undefined
  /** What an error the handler did not state means. */
  readonly unknownErrors?: UnknownErrors | undefined
}

/**
 * A validated policy.
 *
 * @since 0.3.0
 * @category models
 */
export interface Settings {
  readonly maxAttempts: number
  readonly backoff: RetryJitter.Settings
  readonly unknownErrors: UnknownErrors
}

/**
 * The defaults: 15 attempts, base 5 s, cap 10 min, unknown errors fail. The first retry of a herd (ten
 * thousand items that a downstream outage failed at once) is spread over 5 s, the next over 10, 20, 40 s and so
 * on (full jitter: uniform under the envelope, the least total load for competing clients); from the 8th
 * retry on each is uniform in [0, 10 min). The 14 retries wait 40 minutes on average (80 at most) before the
 * item is a dead letter: longer than most provider incidents, short enough that an operator sees a real poison
 * item within the hour.
 *
 * @since 0.3.0
 * @category defaults
 */
export const defaults: Settings = {
  maxAttempts: 15,
  backoff: { baseMillis: 5_000, capMillis: 600_000 },
  unknownErrors: "fail"
}

const checkAttempts = Parameters.check(
  Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
  "an integer >= 1"
)
const checkUnknown = Parameters.check(Schema.Literals(["fail", "retry"]), "\"fail\" or \"retry\"")

/**
 * Validates a policy, the defaults filling what it leaves out; the error names the field.
 *
 * @since 0.3.0
 * @category constructors
 */
export const settings = (options: Options = {}): Effect.Effect<Settings, InvalidParameter.InvalidParameter> =>
  Effect.gen(function*() {
    const maxAttempts = yield* checkAttempts(options.maxAttempts ?? defaults.maxAttempts, "maxAttempts")
    const backoff = yield* RetryJitter.settings({
      base: options.base ?? defaults.backoff.baseMillis,
      cap: options.cap ?? defaults.backoff.capMillis
    })
    const unknownErrors = yield* checkUnknown(options.unknownErrors ?? defaults.unknownErrors, "unknownErrors")
    return { maxAttempts, backoff, unknownErrors }
  })

/**
 * What a transient failure leads to: a retry at `atMillis` (epoch milliseconds), or a dead letter.
 *
 * @since 0.3.0
 * @category models
 */
export type Decision =
  | { readonly _tag: "Retry"; readonly atMillis: number }
  | { readonly _tag: "Dead" }

/**
 * The decision after a transient failure of the run that follows `attempts` recorded runs, at `nowMillis`, for a
 * uniform draw `u` in [0, 1): a dead letter when this run was the last allowed; else a retry after the full
 * jitter of the `attempts`-th envelope (`min(cap, base × 2^attempts)`), or, when the handler named an earliest
 * time (a provider's `Retry-After`), at that time plus a draw under one base (so a fleet's answers that name the
 * same second do not come back together), never before now.
 *
 * @since 0.3.0
 * @category decisions
 */
export const decide = (
  settings: Settings,
  attempts: number,
  nowMillis: number,
  earliestMillis: number | undefined,
  u: number
): Decision =>
  attempts + 1 >= settings.maxAttempts
    ? { _tag: "Dead" }
    : {
      _tag: "Retry",
      atMillis: earliestMillis === undefined
        ? nowMillis + RetryJitter.fullFrom(attempts, settings.backoff, u)
        : Math.max(earliestMillis, nowMillis) + u * settings.backoff.baseMillis
    }
