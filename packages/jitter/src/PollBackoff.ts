/**
 * The poll backoff of a queue worker: a deterministic schedule (base → ×multiplier → capped at max) with
 * jitter applied to the returned sleep only, so the schedule itself stays 1, 2, 4, 8, 16, 30, 30, … while
 * every actual sleep is scattered.
 *
 * The core is a pure state machine in milliseconds ({@link initial}, {@link step}, {@link sleepFrom},
 * {@link baseSleepFrom}) for simulators that take millions of decisions; {@link make} wraps it in an Effect
 * object that draws from Effect's `Random` service.
 *
 * @since 0.1.0
 */
import { type InvalidParameter, Parameters } from "@resilience/parameters"
import { Duration, Effect, Random, Ref } from "effect"
import * as Jitter from "./Jitter.ts"

/**
 * Poll backoff options; every field is optional and falls back to {@link defaults}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The base interval (> 0): the first sleep after a claim and the "all workers busy" sleep. */
  readonly base?: Duration.Input | undefined
  /** Growth factor per empty poll (≥ 1). */
  readonly multiplier?: number | undefined
  /** The cap of the schedule (≥ base). */
  readonly max?: Duration.Input | undefined
  /** When false the schedule never grows: every sleep is a jittered base. */
  readonly enabled?: boolean | undefined
  /** Jitter ratio in [0, 1]: each sleep is uniform in [1 − ratio, 1 + ratio] × the nominal interval. */
  readonly ratio?: number | undefined
}

/**
 * The defaults of the reference service: 1 s base, ×2, 30 s cap, enabled, ratio 0.5.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults = {
  base: Duration.seconds(1),
  multiplier: 2,
  max: Duration.seconds(30),
  enabled: true,
  ratio: 0.5
} as const

/**
 * Validated options, in milliseconds: the input of the pure state machine.
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly baseMillis: number
  readonly multiplier: number
  readonly maxMillis: number
  readonly enabled: boolean
  readonly ratio: number
}

/**
 * Validates options (ratio in [0, 1], base > 0, max ≥ base, multiplier ≥ 1) into {@link Settings}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const settings = (options: Options = {}): Effect.Effect<Settings, InvalidParameter.InvalidParameter> =>
  Effect.gen(function*() {
    const baseMillis = yield* Parameters.positiveDuration(options.base ?? defaults.base, "base")
    const multiplier = yield* Parameters.multiplier(options.multiplier ?? defaults.multiplier)
    const maxMillis = yield* Parameters.durationAtLeast(options.max ?? defaults.max, "max", baseMillis, "base")
    const ratio = yield* Parameters.ratio(options.ratio ?? defaults.ratio)
    return { baseMillis, multiplier, maxMillis, enabled: options.enabled ?? defaults.enabled, ratio }
  })

/**
 * The state of the pure machine: the current, unjittered interval in milliseconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface State {
  readonly currentMillis: number
}

/**
 * The initial state (and the state after a reset): the base interval.
 *
 * @since 0.1.0
 * @category constructors
 */
export const initial = (settings: Settings): State => ({ currentMillis: settings.baseMillis })

/**
 * The state after one empty (or failed) poll: `min(current × multiplier, max)`, or unchanged when backoff
 * is disabled.
 *
 * @since 0.1.0
 * @category decisions
 */
export const step = (state: State, settings: Settings): State =>
  settings.enabled
    ? { currentMillis: Math.min(state.currentMillis * settings.multiplier, settings.maxMillis) }
    : state

/**
 * The sleep for the current interval given a uniform draw `u` in [0, 1): the jittered current interval,
 * in milliseconds. Advancing is `sleepFrom` then {@link step}.
 *
 * @since 0.1.0
 * @category decisions
 */
export const sleepFrom = (state: State, settings: Settings, u: number): number =>
  Jitter.jitterFrom(state.currentMillis, settings.ratio, u)

/**
 * The "all workers busy" sleep given a uniform draw `u` in [0, 1): the jittered base, in milliseconds.
 *
 * @since 0.1.0
 * @category decisions
 */
export const baseSleepFrom = (settings: Settings, u: number): number =>
  Jitter.jitterFrom(settings.baseMillis, settings.ratio, u)

/**
 * A poll backoff for one loop. Not shared between loops: each loop owns its own.
 *
 * @since 0.1.0
 * @category models
 */
export interface PollBackoff {
  /** The validated settings. */
  readonly settings: Settings
  /** Returns the jittered current interval, then grows the schedule (empty poll, or a failed poll). */
  readonly advance: Effect.Effect<Duration.Duration>
  /** Returns the schedule to the base interval (a poll claimed work). */
  readonly reset: Effect.Effect<void>
  /** Returns a jittered base interval without touching the schedule (all workers busy). */
  readonly base: Effect.Effect<Duration.Duration>
  /** The current, unjittered interval of the schedule. */
  readonly current: Effect.Effect<Duration.Duration>
}

/**
 * Builds a poll backoff from validated {@link Settings}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromSettings = (settings: Settings): Effect.Effect<PollBackoff> =>
  Effect.map(Ref.make(initial(settings)), (ref) => {
    const draw = settings.ratio === 0 ? Effect.succeed(0) : Random.next
    return {
      settings,
      advance: Effect.flatMap(
        draw,
        (u) => Ref.modify(ref, (state) => [Duration.millis(sleepFrom(state, settings, u)), step(state, settings)])
      ),
      reset: Ref.set(ref, initial(settings)),
      base: Effect.map(draw, (u) => Duration.millis(baseSleepFrom(settings, u))),
      current: Effect.map(Ref.get(ref), (state) => Duration.millis(state.currentMillis))
    }
  })

/**
 * Validates the options and builds a poll backoff starting at the base interval.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<PollBackoff, InvalidParameter.InvalidParameter> =>
  Effect.flatMap(settings(options), fromSettings)
