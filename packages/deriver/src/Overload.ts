/**
 * Overload-aware polling as pure functions of the clock and a uniform draw, in the style of {@link Scheduling}:
 * which poll observations are overload signals, how the overload floor moves, and what it does to the next
 * sleep. The deriver's loop and the fleet simulator both call these, so a simulated deriver backs off exactly
 * as the real one does.
 *
 * The floor is a lower bound on the poll interval. Without an overload signal it stays 0 and every sleep is
 * exactly {@link Scheduling.decide}'s (the 1 → 2 → 4 → … → 30 s schedule, reset on a claim). Only evidence
 * that the database answers but thrashes is a signal, as in delay-based congestion control (TCP Vegas): a
 * poll whose checkout plus claim took longer than the slow-poll threshold, and a claim cancelled by its
 * deadline. A poll's time is the database's only once the process's own time is taken off it (its event
 * loop on a CPU or waiting for one over the poll, {@link databaseMillis}): a host that starves the process of
 * CPU is not a slow database.
 * An unavailable database (a refused or timed-out connection) is an outage, not thrash: it keeps
 * the spec's capped schedule, whose cap bounds how long work waits once the database is back.
 *
 * Each signal multiplies the floor (multiplicative decrease of the offered poll rate, as AIMD does on loss),
 * continuing the schedule's doubling past the idle cap up to the overload cap. The floor holds until a healthy
 * poll (answered within the threshold); from then on it falls linearly with wall-clock time, from the overload
 * cap to 0 in `recoveryMillis` (default: the idle cap), and no sleep decided meanwhile outlasts it. So once
 * polls are healthy again the deriver is back on the idle schedule within `recoveryMillis`, whatever the
 * floor's height. An unavailable poll neither raises the floor nor lets it fall: it says nothing about thrash
 * (without a floor, an outage is the spec's schedule exactly).
 *
 * Under the floor, time-driven polls (an empty queue, an error) wait it out; a poll that found work is
 * followed by the next claim as soon as a worker is free, as without overload, unless that claim itself was
 * slow (a signal: the loop then sleeps the floor).
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
 * @category models
 */
export interface Settings {
  /** A poll (checkout plus claim) slower than this is an overload signal. */
  readonly slowPollMillis: number
  /** The highest the floor goes (≥ the schedule's idle cap; equal to it: never past the idle cap). */
  readonly maxMillis: number
  /** The floor's growth per overload signal (the schedule's multiplier). */
  readonly multiplier: number
  /**
   * Wall-clock time of healthy polling in which the floor falls from `maxMillis` to 0 (linearly; a lower
   * floor is gone sooner). The bound on the floor's return.
   */
  readonly recoveryMillis: number
  /**
   * Whether the process's own time over a poll ({@link PollTiming.lagMillis}) is taken off its elapsed time
   * before it is compared with `slowPollMillis` (default true; false: the elapsed time as it is, the behaviour
   * before 0.3.0).
   *
   * @since 0.3.0
   */
  readonly subtractLag?: boolean | undefined
}

/**
 * What a poll said about the database:
 * - `fast`: it succeeded within the slow-poll threshold;
 * - `slow`: it succeeded, but took longer than the threshold (overload);
 * - `cancelled`: the claim was cancelled by its deadline (overload);
 * - `unavailable`: no connection (refused, timed out, the server is shutting down): an outage, not overload;
 * - `none`: nothing to learn (no poll because every worker was busy, or a failure that is not overload).
 *
 * @since 0.2.0
 * @category models
 */
export type Signal = "fast" | "slow" | "cancelled" | "unavailable" | "none"

/**
 * How a poll ended, as the loop saw it.
 *
 * @since 0.2.0
 * @category models
 */
export type PollResult = "succeeded" | "cancelled" | "unavailable" | "failed"

/**
 * The overload state: the floor of the poll interval (0: no overload) and since when it falls.
 *
 * @since 0.2.0
 * @category models
 */
export interface State {
  /** The floor as set by the last overload signal. */
  readonly floorMillis: number
  /**
   * When healthy polling began after the last overload signal (the floor falls from then on); `Infinity`
   * while it holds (no healthy poll since the last signal).
   */
  readonly healthySinceMillis: number
}

/**
 * No overload.
 *
 * @since 0.2.0
 * @category constructors
 */
export const initial: State = { floorMillis: 0, healthySinceMillis: Infinity }

/**
 * Whether the state is overloaded (a floor was set and has not been seen gone yet).
 *
 * @deprecated Since 0.3.0; goes in 0.4.0. Internal: a step of {@link decide}, which is the API.
 * @since 0.2.0
 * @category predicates
 */
export const isOverloaded = (state: State): boolean => state.floorMillis > 0

/**
 * The signal of one poll: its result and how long it took (checkout plus claim), without the process's lag
 * ({@link signalOfPoll} with `lagMillis` 0).
 *
 * @since 0.2.0
 * @category decisions
 */
export const signalOf = (settings: Settings, result: PollResult, elapsedMillis: number): Signal =>
  signalOfPoll(settings, { result, elapsedMillis, lagMillis: 0 })

/**
 * How one poll went, as the loop measured it: its result, its elapsed time (checkout plus claim, on the
 * process's clock) and how much of that time was the process's own (`LoopLag`: its event loop's thread on a CPU
 * or waiting for one, over the same window; 0 when not measured).
 *
 * @since 0.3.0
 * @category models
 */
export interface PollTiming {
  readonly result: PollResult
  readonly elapsedMillis: number
  readonly lagMillis: number
}

/**
 * The database's share of a poll's elapsed time: the elapsed time less the process's own time over it (at
 * least 0), or the elapsed time as it is when `subtractLag` is false. A starved or CPU-throttled process sees
 * its I/O late by the time it was not scheduled; that time is the host's, not the database's. With
 * `LoopLag`'s `schedstat` source what is left is the time the process slept waiting for the pooler and the
 * database; with its `timer` source a stall while the process was waiting anyway is taken off too, so the
 * share may be underestimated on a host starved for seconds at a time (a claim the database really holds up
 * still ends in its deadline: `cancelled`, an overload signal whatever the lag).
 *
 * @since 0.3.0
 * @category decisions
 */
export const databaseMillis = (settings: Settings, timing: Omit<PollTiming, "result">): number =>
  settings.subtractLag === false ? timing.elapsedMillis : Math.max(0, timing.elapsedMillis - timing.lagMillis)

/**
 * The signal of one poll: its result and the database's share of its elapsed time ({@link databaseMillis}).
 *
 * @since 0.3.0
 * @category decisions
 */
export const signalOfPoll = (settings: Settings, timing: PollTiming): Signal => {
  switch (timing.result) {
    case "succeeded":
      return databaseMillis(settings, timing) > settings.slowPollMillis ? "slow" : "fast"
    case "cancelled":
    case "unavailable":
      return timing.result
    case "failed":
      return "none"
  }
}

/**
 * Whether a signal says the database answers but thrashes: a slow poll or a cancelled claim. An unavailable
 * database is not one (an outage keeps the spec's schedule).
 *
 * @since 0.2.0
 * @category predicates
 */
export const isOverloadSignal = (signal: Signal): boolean => signal === "slow" || signal === "cancelled"

/**
 * Whether a signal is healthy polling, which lets the floor fall: a poll answered within the threshold. (An
 * unavailable database is neither thrash nor health: the floor, if any, holds; without one it stays 0.)
 *
 * @since 0.2.0
 * @category predicates
 */
export const isHealthySignal = (signal: Signal): boolean => signal === "fast"

/** How fast the floor falls (milliseconds of floor per millisecond of healthy polling). */
const decayRate = (settings: Settings): number => settings.maxMillis / settings.recoveryMillis

/**
 * The floor in force at `nowMillis`: the floor set by the last signal, less what healthy polling since has
 * taken off it (at most 0).
 *
 * @since 0.2.0
 * @category decisions
 */
export const floorAt = (settings: Settings, state: State, nowMillis: number): number => {
  if (state.floorMillis <= 0) return 0
  const healthy = Math.max(0, nowMillis - state.healthySinceMillis)
  const floor = state.floorMillis - healthy * decayRate(settings)
  return floor > 0 ? floor : 0
}

/**
 * How long until the floor is gone, from `nowMillis` (0 without a floor; `Infinity` while it holds).
 *
 * @deprecated Since 0.3.0; goes in 0.4.0. Internal: a step of {@link decide}, which is the API.
 * @since 0.2.0
 * @category decisions
 */
export const remainingMillis = (settings: Settings, state: State, nowMillis: number): number => {
  const floor = floorAt(settings, state, nowMillis)
  if (floor === 0) return 0
  return nowMillis >= state.healthySinceMillis ? floor / decayRate(settings) : Infinity
}

/**
 * The state after a poll's signal at `nowMillis`. `scheduledMillis` is the schedule's interval after its own
 * decision (so the floor starts where the schedule is and continues its doubling):
 * - overload: `min(max, max(floor × multiplier, scheduled))`, holding until a healthy poll;
 * - healthy (`fast`): the floor starts falling (if it is not already), or is gone;
 * - `unavailable`, `none`: unchanged.
 *
 * @deprecated Since 0.3.0; goes in 0.4.0. Internal: a step of {@link decide}, which is the API.
 * @since 0.2.0
 * @category decisions
 */
export const step = (
  settings: Settings,
  state: State,
  signal: Signal,
  scheduledMillis: number,
  nowMillis: number
): State => {
  if (isOverloadSignal(signal)) {
    const floor = floorAt(settings, state, nowMillis)
    return {
      floorMillis: Math.min(settings.maxMillis, Math.max(floor * settings.multiplier, scheduledMillis)),
      healthySinceMillis: Infinity
    }
  }
  if (isHealthySignal(signal) && isOverloaded(state)) {
    if (floorAt(settings, state, nowMillis) === 0) return initial
    return { floorMillis: state.floorMillis, healthySinceMillis: Math.min(state.healthySinceMillis, nowMillis) }
  }
  return state
}

/**
 * Whether the next decision consumes a uniform draw: when the schedule's does, or for a slow claim (which
 * sleeps the jittered floor). Without overload signals this is exactly {@link Scheduling.needsDraw}, so a
 * seeded sequence is consumed as before.
 *
 * @since 0.2.0
 * @category decisions
 */
export const needsDraw = (outcome: Scheduling.Outcome, signal: Signal, backoff: PollBackoff.Settings): boolean =>
  Scheduling.needsDraw(outcome, backoff) || (backoff.ratio !== 0 && isOverloadSignal(signal))

/**
 * What {@link sleepFrom} decides on: the settings, the overload states before and after this poll's step, the
 * poll's outcome and signal, the schedule's own sleep, the time and the uniform draw (both arguments, so the
 * function stays pure and the simulator replays it).
 *
 * @since 0.2.0
 * @category models
 */
export interface SleepInput {
  readonly settings: Settings
  readonly backoff: PollBackoff.Settings
  /** The overload state before this poll's step. */
  readonly before: State
  /** The overload state after this poll's step. */
  readonly after: State
  readonly outcome: Scheduling.Outcome
  readonly signal: Signal
  /** The sleep {@link Scheduling.decide} chose for this outcome. */
  readonly scheduledSleepMillis: number
  readonly nowMillis: number
  /** A uniform draw in [0, 1). */
  readonly u: number
}

/**
 * The sleep after a poll, given the schedule's sleep and the states before and after this poll's step:
 * - `busy`: the schedule's (a jittered base, ended early by a free worker: a local event);
 * - `claimed`: 0 (work drains at once), or the jittered floor when the claim was slow;
 * - `empty` and `error`: the schedule's sleep or the jittered floor, the longer. After a signal, the floor
 *   before it (as the schedule sleeps its current interval before growing it); while the floor falls, never
 *   longer than the time until it is gone.
 *
 * @deprecated Since 0.3.0; goes in 0.4.0. Internal: a step of {@link decide}, which is the API.
 * @since 0.2.0
 * @category decisions
 */
export const sleepFrom = (input: SleepInput): number => {
  const { after, backoff, before, nowMillis, outcome, scheduledSleepMillis, settings, signal, u } = input
  switch (outcome) {
    case "busy":
      return scheduledSleepMillis
    case "claimed":
      return isOverloadSignal(signal) ? Jitter.jitterFrom(after.floorMillis, backoff.ratio, u) : 0
    case "empty":
    case "error": {
      if (isOverloadSignal(signal)) {
        const floor = floorAt(settings, before, nowMillis)
        return floor > 0
          ? Math.max(scheduledSleepMillis, Jitter.jitterFrom(floor, backoff.ratio, u))
          : scheduledSleepMillis
      }
      const floor = floorAt(settings, after, nowMillis)
      if (floor === 0) return scheduledSleepMillis
      const jittered = Math.min(Jitter.jitterFrom(floor, backoff.ratio, u), remainingMillis(settings, after, nowMillis))
      return Math.max(scheduledSleepMillis, jittered)
    }
  }
}

/**
 * One whole decision: the schedule's, then the floor's; what the deriver loop and the simulator call.
 *
 * @since 0.2.0
 * @category models
 */
export interface Decision {
  readonly sleepMillis: number
  readonly schedule: PollBackoff.State
  readonly overload: State
  /** The floor in force after the decision (0: none), for metrics and observers. */
  readonly floorMillis: number
  /** Whether a worker becoming free may end the sleep early. */
  readonly wakeable: boolean
}

/**
 * What {@link decide} decides on: the settings, the schedule's and the floor's states before this poll, the
 * poll's outcome and signal, the time and the uniform draw (both arguments, so the function stays pure and the
 * simulator replays it).
 *
 * @since 0.2.0
 * @category models
 */
export interface DecideInput {
  readonly settings: Settings
  readonly backoff: PollBackoff.Settings
  readonly schedule: PollBackoff.State
  readonly overload: State
  readonly outcome: Scheduling.Outcome
  readonly signal: Signal
  readonly nowMillis: number
  /** A uniform draw in [0, 1). */
  readonly u: number
}

/**
 * The loop's decision after a poll at `nowMillis`: {@link Scheduling.decide} for the schedule, the floor's
 * step with this poll's signal, then the sleep ({@link sleepFrom}). With `initial` and no overload signal
 * this is exactly `Scheduling.decide`.
 *
 * @since 0.2.0
 * @category decisions
 */
export const decide = (input: DecideInput): Decision => {
  const { backoff, nowMillis, outcome, overload, schedule, settings, signal, u } = input
  const scheduled = Scheduling.decide(backoff, schedule, outcome, u)
  const next = step(settings, overload, signal, scheduled.state.currentMillis, nowMillis)
  return {
    sleepMillis: sleepFrom({
      settings,
      backoff,
      before: overload,
      after: next,
      outcome,
      signal,
      scheduledSleepMillis: scheduled.sleepMillis,
      nowMillis,
      u
    }),
    schedule: scheduled.state,
    overload: next,
    floorMillis: floorAt(settings, next, nowMillis),
    wakeable: outcome === "busy"
  }
}
