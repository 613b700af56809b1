/**
 * Overload-aware polling as pure functions of a uniform draw, in the style of {@link Scheduling}: which poll
 * observations are overload signals, how the overload floor moves, and what it does to the next sleep. The
 * deriver's loop and the fleet simulator both call these, so a simulated deriver backs off exactly as the
 * real one does.
 *
 * The floor is a lower bound on the poll interval. Without an overload signal it stays 0 and every sleep is
 * exactly {@link Scheduling.decide}'s (the 1 → 2 → 4 → … → 30 s schedule, reset on a claim). Each overload
 * signal multiplies the floor (multiplicative decrease of the offered poll rate, as AIMD does on loss), so it
 * continues the schedule's doubling past the idle cap up to the overload cap; each fast poll divides it by
 * the recovery factor (smaller than the multiplier), so the rate comes back over several polls, never in one
 * step. Signals, as in delay-based congestion control (TCP Vegas): a poll whose checkout plus claim took
 * longer than the slow-poll threshold, a claim cancelled by its statement timeout, and an unavailable
 * database.
 *
 * @since 0.2.0
 */
import { Jitter } from "@resilience/jitter"
import type { PollBackoff } from "@resilience/jitter"
import * as Scheduling from "./Scheduling.ts"

/**
 * Overload settings (milliseconds).
 *
 * @since 0.2.0
 */
export interface Settings {
  /** A poll (checkout plus claim) slower than this is an overload signal. */
  readonly slowPollMillis: number
  /** The highest the floor goes (≥ the schedule's idle cap; equal to it: never past the idle cap). */
  readonly maxMillis: number
  /** The floor's growth per overload signal (the schedule's multiplier). */
  readonly multiplier: number
  /** The floor's division per fast poll (> 1). */
  readonly recoveryFactor: number
}

/**
 * What a poll said about the database:
 * - `fast`: it succeeded within the slow-poll threshold;
 * - `slow`: it succeeded, but took longer than the threshold;
 * - `cancelled`: the claim was cancelled by its statement timeout;
 * - `unavailable`: no connection (refused, timed out, the server is shutting down);
 * - `none`: nothing to learn (no poll because every worker was busy, or a failure that is not overload).
 *
 * @since 0.2.0
 */
export type Signal = "fast" | "slow" | "cancelled" | "unavailable" | "none"

/**
 * How a poll ended, as the loop saw it.
 *
 * @since 0.2.0
 */
export type PollResult = "succeeded" | "cancelled" | "unavailable" | "failed"

/**
 * The overload state: the floor of the poll interval (0: no overload).
 *
 * @since 0.2.0
 */
export interface State {
  readonly floorMillis: number
}

/**
 * No overload.
 *
 * @since 0.2.0
 */
export const initial: State = { floorMillis: 0 }

/**
 * Whether the state is overloaded (the floor is in force).
 *
 * @since 0.2.0
 */
export const isOverloaded = (state: State): boolean => state.floorMillis > 0

/**
 * The signal of one poll: its result and how long it took (checkout plus claim).
 *
 * @since 0.2.0
 */
export const signalOf = (settings: Settings, result: PollResult, elapsedMillis: number): Signal => {
  switch (result) {
    case "succeeded":
      return elapsedMillis > settings.slowPollMillis ? "slow" : "fast"
    case "cancelled":
    case "unavailable":
      return result
    case "failed":
      return "none"
  }
}

/**
 * Whether a signal says the database is overloaded.
 *
 * @since 0.2.0
 */
export const isOverloadSignal = (signal: Signal): boolean =>
  signal === "slow" || signal === "cancelled" || signal === "unavailable"

/**
 * The floor after a signal. `scheduledMillis` is the schedule's interval after its own decision (so the
 * floor starts where the schedule is and continues its doubling):
 * - overload: `min(max, max(floor × multiplier, scheduled))`;
 * - `fast`: `floor / recoveryFactor`, dropped to 0 once below the base interval;
 * - `none`: unchanged.
 *
 * @since 0.2.0
 */
export const step = (
  settings: Settings,
  backoff: PollBackoff.Settings,
  state: State,
  signal: Signal,
  scheduledMillis: number
): State => {
  if (isOverloadSignal(signal)) {
    return {
      floorMillis: Math.min(settings.maxMillis, Math.max(state.floorMillis * settings.multiplier, scheduledMillis))
    }
  }
  if (signal === "fast" && state.floorMillis > 0) {
    const lowered = state.floorMillis / settings.recoveryFactor
    return { floorMillis: lowered < backoff.baseMillis ? 0 : lowered }
  }
  return state
}

/**
 * Whether the next sleep consumes a uniform draw: when the schedule's decision does, or when the floor is in
 * force with a jitter ratio. Without overload this is exactly {@link Scheduling.needsDraw}, so a seeded
 * sequence is consumed as before.
 *
 * @since 0.2.0
 */
export const needsDraw = (state: State, outcome: Scheduling.Outcome, backoff: PollBackoff.Settings): boolean =>
  Scheduling.needsDraw(outcome, backoff) || (isOverloaded(state) && backoff.ratio !== 0)

/**
 * The sleep under the floor (of the state BEFORE this poll's step, as the schedule sleeps its current
 * interval before growing it): the schedule's sleep, or the jittered floor if longer. With the same draw
 * `u` the jitter is monotone in the interval, so this equals jittering the larger of the two intervals.
 *
 * @since 0.2.0
 */
export const sleepFrom = (
  state: State,
  backoff: PollBackoff.Settings,
  scheduledSleepMillis: number,
  u: number
): number =>
  isOverloaded(state)
    ? Math.max(scheduledSleepMillis, Jitter.jitterFrom(state.floorMillis, backoff.ratio, u))
    : scheduledSleepMillis

/**
 * Whether a busy loop (every worker busy) may be woken early by a worker becoming free: only when not
 * overloaded (under overload the floor holds for every poll, local wake-ups included).
 *
 * @since 0.2.0
 */
export const wakesOnFreeWorker = (state: State): boolean => !isOverloaded(state)

/**
 * One whole decision: the schedule's, then the floor's; what the deriver loop and the simulator call.
 *
 * @since 0.2.0
 */
export interface Decision {
  readonly sleepMillis: number
  readonly schedule: PollBackoff.State
  readonly overload: State
  /** Whether a worker becoming free may end the sleep early. */
  readonly wakeable: boolean
}

/**
 * The loop's decision after a poll: {@link Scheduling.decide} for the schedule, then the floor for the
 * sleep, then the floor's step with this poll's signal. With `initial` and only `fast`/`none` signals this
 * is exactly `Scheduling.decide`.
 *
 * @since 0.2.0
 */
export const decide = (
  settings: Settings,
  backoff: PollBackoff.Settings,
  schedule: PollBackoff.State,
  overload: State,
  outcome: Scheduling.Outcome,
  signal: Signal,
  u: number
): Decision => {
  const scheduled = Scheduling.decide(backoff, schedule, outcome, u)
  return {
    sleepMillis: sleepFrom(overload, backoff, scheduled.sleepMillis, u),
    schedule: scheduled.state,
    overload: step(settings, backoff, overload, signal, scheduled.state.currentMillis),
    wakeable: outcome === "busy" && wakesOnFreeWorker(overload)
  }
}
