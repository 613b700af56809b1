/**
 * The adaptive concurrency limit, as pure functions: additive increase while the database answers and the
 * limit is in use, multiplicative decrease when it is unavailable or slow (AIMD, as TCP congestion control
 * and Netflix's concurrency-limits `AIMDLimit`). The one implementation behind the API's admission gate (on a
 * resizable `Semaphore`), the deriver's checkout gate and the fleet simulator.
 *
 * {@link next} is the plain rule. {@link update} adds what a process with kept connections needs: after a
 * decrease, no growth until a hold drawn from a jittered backoff has passed (stepping once per held decrease,
 * back to the base at the maximum or when an outage ends), so that a pool which keeps working on the
 * connections it has asks for a new one once per hold, not once per answer.
 *
 * @since 0.1.0
 */
import { PollBackoff } from "@resilience/jitter"
import type * as Outcome from "./Outcome.ts"

/**
 * What the limit learns from one admitted request: its outcome, how many requests were in flight when it
 * was admitted (itself included), and how long it held its permit.
 *
 * @category models
 * @since 0.1.0
 */
export interface Sample {
  readonly outcome: Outcome.Outcome
  readonly inFlight: number
  readonly millis: number
}

/**
 * The limit a gate starts with: the maximum.
 *
 * @category constructors
 * @since 0.1.0
 */
export const initial = (bounds: Pick<Bounds, "maxConcurrency">): number => bounds.maxConcurrency

/**
 * The next limit after one sample:
 * - `Unavailable`, `Overloaded` or `Exhausted`, or an answer slower than `slowMillis`:
 *   `max(min, floor(limit × decreaseRatio))`;
 * - any other answer, while at least half the limit was in use: `min(max, limit + 1)` (one more per success
 *   doubles the limit per round trip when it is full, so it recovers in a few round trips);
 * - otherwise (`Ignored`, or a limit that is not the bottleneck): unchanged.
 *
 * @category transitions
 * @since 0.1.0
 */
export const next = (limit: number, sample: Sample, settings: Bounds): number => {
  const slow = settings.slowMillis > 0 && sample.millis > settings.slowMillis
  switch (sample.outcome) {
    case "Ignored":
      return limit
    case "Unavailable":
    case "Overloaded":
    case "Exhausted":
      return decrease(limit, settings)
    case "Answered":
      if (slow) return decrease(limit, settings)
      return sample.inFlight * 2 >= limit ? Math.min(settings.maxConcurrency, limit + 1) : limit
  }
}

const decrease = (limit: number, settings: Bounds): number =>
  Math.max(settings.minConcurrency, Math.floor(limit * settings.decreaseRatio))

/**
 * What {@link next} reads of the settings (the gate's `Settings` have these fields).
 *
 * @category models
 * @since 0.2.0
 */
export interface Bounds {
  /** The limit never falls below this. */
  readonly minConcurrency: number
  /** The limit never exceeds this. */
  readonly maxConcurrency: number
  /** The multiplicative decrease, in (0, 1). */
  readonly decreaseRatio: number
  /** An answer slower than this (ms) counts as overload; 0 disables. */
  readonly slowMillis: number
}

/**
 * A limit's policy: its bounds, when it grows, and the optional hold after a decrease.
 *
 * @category models
 * @since 0.2.0
 */
export interface Policy extends Bounds {
  /**
   * `whenBusy` (the API): an answer adds one only while at least half the limit is in use. `always` (the
   * deriver, whose claimed units hold the limit between their checkouts): every answer adds one.
   */
  readonly growth: "whenBusy" | "always"
  /** After a decrease, no growth for a jittered hold from this schedule; undefined: no hold. */
  readonly hold?: PollBackoff.Settings | undefined
}

/**
 * The limit with its hold.
 *
 * @category models
 * @since 0.2.0
 */
export interface State {
  readonly limit: number
  /** No growth before this time (ms); 0: none. */
  readonly growAfter: number
  /** The nominal length of the next hold. */
  readonly hold: PollBackoff.State | undefined
}

/**
 * The state a process starts with: the maximum, no hold.
 *
 * @category constructors
 * @since 0.2.0
 */
export const start = (policy: Policy): State => ({
  limit: policy.maxConcurrency,
  growAfter: 0,
  hold: policy.hold === undefined ? undefined : PollBackoff.initial(policy.hold)
})

/**
 * What {@link update} learns from: one sample at `now`, and a uniform draw in [0, 1) for the jitter of a new
 * hold, taken only when the sample starts one (as `Breaker.settle` takes its draw only when a window opens).
 *
 * @category models
 * @since 0.3.0
 */
export interface Learned {
  readonly sample: Sample
  /** When the sample ended (ms). */
  readonly now: number
  /** Called at most once, and only when a new hold starts. */
  readonly draw: () => number
}

/**
 * The state after one sample: the limit moves as in {@link next} (with `always` growth, every answer counts as a
 * busy one), except that it does not grow before `growAfter`. A decrease past `growAfter` starts a new hold
 * (`now + jitter(hold)`, then the hold steps); a decrease within a hold keeps it. Reaching the maximum resets the
 * hold to its base.
 *
 * @category transitions
 * @since 0.2.0
 */
export const update = (state: State, policy: Policy, learned: Learned): State => {
  const { draw, now, sample } = learned
  const busy = policy.growth === "always" ? { ...sample, inFlight: state.limit } : sample
  const limit = next(state.limit, busy, policy)
  if (limit < state.limit) {
    if (policy.hold === undefined || state.hold === undefined || now < state.growAfter) return { ...state, limit }
    return {
      limit,
      growAfter: now + PollBackoff.sleepFrom(state.hold, policy.hold, draw()),
      hold: PollBackoff.step(state.hold, policy.hold)
    }
  }
  if (limit === state.limit || now < state.growAfter) return state
  return limit >= policy.maxConcurrency ? { ...start(policy), limit } : { ...state, limit }
}

/**
 * The database answered after an outage (a circuit closed): the hold ends and returns to its base, so the
 * limit climbs back at once, one per answer.
 *
 * @category transitions
 * @since 0.2.0
 */
export const recovered = (state: State, policy: Policy): State => ({ ...start(policy), limit: state.limit })
