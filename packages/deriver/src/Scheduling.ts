/**
 * The loop's scheduling decisions as pure functions of a uniform draw: what to sleep after each poll
 * outcome and how the backoff moves. The deriver's loop and the fleet simulator both call these, so a
 * simulated deriver schedules exactly as the real one does.
 *
 * Built on `@resilience/jitter`'s pure core (`PollBackoff.step`, `Jitter.jitterFrom`).
 *
 * @since 0.1.0
 */
import { Jitter, PollBackoff } from "@resilience/jitter"

/**
 * What one iteration of the loop saw:
 * - `claimed`: the poll claimed at least one unit;
 * - `empty`: the poll found nothing to claim;
 * - `busy`: every worker was busy, so nothing was polled;
 * - `error`: the poll failed (e.g. the database is unavailable).
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = "claimed" | "empty" | "busy" | "error"

/**
 * The outcomes, for metrics and reports.
 *
 * @deprecated Since 0.3.0; goes in 0.4.0. Nothing reads it; the {@link Outcome} type lists them.
 * @since 0.1.0
 * @category constants
 */
export const outcomes: ReadonlyArray<Outcome> = ["claimed", "empty", "busy", "error"]

/**
 * The next sleep (milliseconds, 0 = poll again at once) and the backoff state after it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Decision {
  readonly sleepMillis: number
  readonly state: PollBackoff.State
}

/**
 * Whether deciding on this outcome consumes a uniform draw (so callers draw only when needed and a seeded
 * sequence is used identically by every caller).
 *
 * @since 0.1.0
 * @category decisions
 */
export const needsDraw = (outcome: Outcome, settings: PollBackoff.Settings): boolean =>
  outcome !== "claimed" && settings.ratio !== 0

/**
 * The decision after a poll outcome, for a uniform draw `u` in [0, 1):
 * - `claimed`: reset the backoff to the base and poll again at once;
 * - `empty` and `error`: sleep the jittered current interval, then grow it (×multiplier, capped);
 * - `busy`: sleep a jittered base interval; the backoff is untouched (the loop ends this sleep early when a
 *   worker becomes free: a local event, see `Overload.decide`'s `wakeable`).
 *
 * @since 0.1.0
 * @category decisions
 */
export const decide = (
  settings: PollBackoff.Settings,
  state: PollBackoff.State,
  outcome: Outcome,
  u: number
): Decision => {
  switch (outcome) {
    case "claimed":
      return { sleepMillis: 0, state: PollBackoff.initial(settings) }
    case "busy":
      return { sleepMillis: PollBackoff.baseSleepFrom(settings, u), state }
    case "empty":
    case "error":
      return { sleepMillis: PollBackoff.sleepFrom(state, settings, u), state: PollBackoff.step(state, settings) }
  }
}

/**
 * Where the schedule starts after the startup delay: `base` (the reference behaviour: 1, 2, 4, … s, a burst
 * of polls in the first minute after a restart) or `max` (the cap at once: a restarted fleet polls at its
 * steady rate from the first poll; a claim still resets to the base).
 *
 * @since 0.1.0
 * @category models
 */
export type InitialInterval = "base" | "max"

/**
 * The backoff state before the first poll. With the backoff disabled the interval is always the base.
 *
 * @since 0.1.0
 * @category decisions
 */
export const initialState = (settings: PollBackoff.Settings, initial: InitialInterval): PollBackoff.State => ({
  currentMillis: initial === "max" && settings.enabled ? settings.maxMillis : settings.baseMillis
})

/**
 * The delay before the first poll, uniform in [0, startupMillis), for a uniform draw `u`.
 *
 * @since 0.1.0
 * @category decisions
 */
export const startupDelay = (startupMillis: number, u: number): number => Jitter.startupDelayFrom(startupMillis, u)

/**
 * The delay until the next stale cleanup: the cleanup interval jittered with the poll ratio, so the fleet's
 * cleanups do not align either.
 *
 * @since 0.1.0
 * @category decisions
 */
export const cleanupDelay = (intervalMillis: number, ratio: number, u: number): number =>
  Jitter.jitterFrom(intervalMillis, ratio, u)

/**
 * The delay until the next heartbeat of the units a deriver holds: a third of the stale timeout at most (a unit held
 * through a beat's failure is renewed by the next one before it could be taken over), jittered down by half the poll
 * ratio, uniform in [(1 − ratio/2)·timeout/3, timeout/3], so the fleet's beats do not align; never below a sixth of
 * the timeout, whatever the ratio (with ratio 1 a lower bound of 0 would let beats follow each other at once).
 *
 * @since 0.3.0
 * @category decisions
 */
export const heartbeatDelay = (staleTimeoutMillis: number, ratio: number, u: number): number =>
  (staleTimeoutMillis / 3) * (1 - (ratio / 2) * u)
