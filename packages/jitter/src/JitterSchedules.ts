/**
 * The jitters of this package as Effect `Schedule`s, drawing from Effect's `Random` service: the poll
 * backoff for `Effect.repeat`, and Brooker's full, equal and decorrelated jitter for client-side
 * `Effect.retry` (Effect's own `Schedule.jittered` only scales a delay by 0.8–1.2).
 *
 * Invalid options surface as an {@link InvalidParameter.InvalidParameter} in the schedule's error channel
 * when the schedule is first stepped. The schedules recur forever: bound them with `Schedule.recurs`,
 * `Schedule.upTo` or `Schedule.during`.
 *
 * Deprecated: no product code steps these schedules, and the module is removed in the next minor release
 * (the package index says what to use instead).
 *
 * @since 0.1.0
 */
import type { InvalidParameter } from "@resilience/parameters"
import { Duration, Effect, Random, Schedule } from "effect"
import * as PollBackoff from "./PollBackoff.ts"
import * as RetryJitter from "./RetryJitter.ts"

/**
 * The poll backoff as a schedule: the n-th delay is the jittered n-th interval of 1, 2, 4, 8, 16, 30, 30, …
 * (with the defaults). The output is the unjittered interval. A schedule cannot be reset from outside: a
 * new `repeat` starts again at the base.
 *
 * @since 0.1.0
 * @category schedules
 */
export const pollBackoff = (
  options: PollBackoff.Options = {}
): Schedule.Schedule<Duration.Duration, unknown, InvalidParameter.InvalidParameter> =>
  Schedule.fromStep(Effect.map(PollBackoff.settings(options), (settings) => {
    let state = PollBackoff.initial(settings)
    return () =>
      Effect.map(Random.next, (u) => {
        const interval = Duration.millis(state.currentMillis)
        const delay = Duration.millis(PollBackoff.sleepFrom(state, settings, u))
        state = PollBackoff.step(state, settings)
        return [interval, delay] as [Duration.Duration, Duration.Duration]
      })
  }))

/** A retry schedule whose n-th delay (from 0) comes from `delayFrom(n, settings, u)`; the output is the delay. */
const retrySchedule = (
  options: RetryJitter.Options,
  delayFrom: (attempt: number, settings: RetryJitter.Settings, u: number) => number
): Schedule.Schedule<Duration.Duration, unknown, InvalidParameter.InvalidParameter> =>
  Schedule.fromStep(Effect.map(RetryJitter.settings(options), (settings) => {
    let attempt = 0
    return () =>
      Effect.map(Random.next, (u) => {
        const delay = Duration.millis(delayFrom(attempt++, settings, u))
        return [delay, delay] as [Duration.Duration, Duration.Duration]
      })
  }))

/**
 * Brooker's full jitter: before retry n (from 0) sleep uniform in [0, min(cap, base × 2^n)). The output
 * is the delay.
 *
 * @since 0.1.0
 * @category schedules
 */
export const fullJitter = (
  options: RetryJitter.Options
): Schedule.Schedule<Duration.Duration, unknown, InvalidParameter.InvalidParameter> =>
  retrySchedule(options, RetryJitter.fullFrom)

/**
 * Brooker's equal jitter: before retry n (from 0) sleep half of min(cap, base × 2^n) plus uniform in
 * [0, that half). The output is the delay.
 *
 * @since 0.1.0
 * @category schedules
 */
export const equalJitter = (
  options: RetryJitter.Options
): Schedule.Schedule<Duration.Duration, unknown, InvalidParameter.InvalidParameter> =>
  retrySchedule(options, RetryJitter.equalFrom)

/**
 * Brooker's decorrelated jitter: sleep `min(cap, uniform in [base, 3 × previous sleep))`, starting from
 * `previous = base`. The output is the delay.
 *
 * @since 0.1.0
 * @category schedules
 */
export const decorrelatedJitter = (
  options: RetryJitter.Options
): Schedule.Schedule<Duration.Duration, unknown, InvalidParameter.InvalidParameter> =>
  Schedule.fromStep(Effect.map(RetryJitter.settings(options), (settings) => {
    let previous = settings.baseMillis
    return () =>
      Effect.map(Random.next, (u) => {
        previous = RetryJitter.decorrelatedFrom(previous, settings, u)
        const delay = Duration.millis(previous)
        return [delay, delay] as [Duration.Duration, Duration.Duration]
      })
  }))
