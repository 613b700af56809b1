/**
 * The coalescing of wakes, as pure functions of a small state, in the style of `Scheduling` and `Breaker`: a wake
 * asks a poller to poll now; whatever number of wakes arrives, the poller makes at most one poll more than it
 * would have, per poll in flight. The deriver's loop and the API's sender both run it (the sender coalesces
 * its requests to one target the same way), and the fleet simulator can replay it.
 *
 * - a wake while nothing is in flight and none is waiting: `pollNow`;
 * - a wake while a poll (or a send) is in flight and none is waiting: `oneMoreAfter` (the one that follows it);
 * - a wake while one is already waiting: `coalesced` (the waiting one covers it);
 * - a wake while {@link State.armed} is false: `ignored` (a woken poll failed: wakes wait for a poll that
 *   succeeds, so a flood of wakes during an outage adds at most one connection attempt to the schedule's), unless
 *   `rearmAfterMillis` have passed since the last poll started: then the wake is honoured again (a committed write
 *   after an outage is evidence; at most one woken attempt per that interval while writes commit and polls fail).
 *
 * A poll that starts takes every wake before it along ({@link started}); one that finishes says whether another
 * must follow at once ({@link finished}).
 *
 * @since 0.3.0
 */

/**
 * What to do with one wake.
 *
 * @since 0.3.0
 * @category models
 */
export type Decision = "pollNow" | "oneMoreAfter" | "coalesced" | "ignored"

/**
 * The state of one poller (or one sender's target).
 *
 * @since 0.3.0
 * @category models
 */
export interface State {
  /** A poll (a send) is in flight. */
  readonly inFlight: boolean
  /** A wake is waiting: the next poll covers it (the poller is to poll now, or once the one in flight ends). */
  readonly waiting: boolean
  /** Wakes are honoured; false after a woken poll failed, until a poll succeeds. */
  readonly armed: boolean
  /** When the last poll started (milliseconds; `-Infinity`: none yet), for {@link delayMillis}. */
  readonly lastStartedAtMillis: number
}

/**
 * Nothing in flight, nothing waiting, armed.
 *
 * @since 0.3.0
 * @category constructors
 */
export const initial: State = { inFlight: false, waiting: false, armed: true, lastStartedAtMillis: -Infinity }

/**
 * One wake at `nowMillis`: the decision and the state after it. Wakes a failed woken poll disarmed are honoured again
 * once `rearmAfterMillis` have passed since the last poll started (default: never, until a poll succeeds).
 *
 * @since 0.3.0
 * @category decisions
 */
export const wake = (state: State, nowMillis = 0, rearmAfterMillis = Infinity): readonly [Decision, State] => {
  if (!state.armed && !(nowMillis - state.lastStartedAtMillis >= rearmAfterMillis && !state.inFlight)) {
    return ["ignored", state]
  }
  if (state.waiting) return ["coalesced", state]
  return [state.inFlight ? "oneMoreAfter" : "pollNow", { ...state, waiting: true, armed: true }]
}

/**
 * A poll (a send) starts at `nowMillis`: it covers every wake so far.
 *
 * @since 0.3.0
 * @category decisions
 */
export const started = (state: State, nowMillis: number): State => ({
  ...state,
  inFlight: true,
  waiting: false,
  lastStartedAtMillis: nowMillis
})

/**
 * How a poll ended, as far as wakes go: `succeeded` (the database answered), `failed` (it did not), and whether
 * the poll was a woken one (made because of a wake, not the schedule).
 *
 * @since 0.3.0
 * @category models
 */
export interface Finished {
  readonly succeeded: boolean
  readonly woken: boolean
}

/**
 * A poll (a send) ended: the state after it and whether the next one is due at once (a wake came in meanwhile).
 * A woken poll that failed disarms wakes (and drops the waiting one) until a poll succeeds; a poll that
 * succeeds arms them again.
 *
 * @since 0.3.0
 * @category decisions
 */
export const finished = (state: State, poll: Finished): { readonly state: State; readonly again: boolean } => {
  if (!poll.succeeded && poll.woken) {
    return { state: { ...state, inFlight: false, waiting: false, armed: false }, again: false }
  }
  const armed = state.armed || poll.succeeded
  return { state: { ...state, inFlight: false, armed }, again: state.waiting }
}

/**
 * How long a woken poll waits at `nowMillis` so that it starts no sooner than `minIntervalMillis` after the
 * last poll started (0: at once). The bound on the poll rate a flood of wakes can cause: one per interval.
 *
 * @since 0.3.0
 * @category decisions
 */
export const delayMillis = (state: State, minIntervalMillis: number, nowMillis: number): number =>
  Math.max(0, state.lastStartedAtMillis + minIntervalMillis - nowMillis)
