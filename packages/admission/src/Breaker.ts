/**
 * The circuit breaker as pure functions of its state, the time and a uniform draw (like `@resilience/jitter`'s
 * `Jitter` and `PollBackoff`): the one implementation behind the admission {@link Controller} (the API's
 * request gate and the deriver's checkout gate) and the fleet simulator.
 *
 * Closed, it counts the last `2 × tripFailures` outcomes and opens when `tripFailures` of them were
 * unavailable. Open, it sheds everything for a window; after the window the next caller is the one probe
 * (half-open; the others are shed while it runs). An answered probe closes it; a failed one opens the next
 * window. The windows follow the jitter package's poll backoff: `1 → 2 → 4 → … → cap` × the base, each
 * jittered by the ratio, stepping once per failed probe and back to the base when a probe is answered, so a
 * long outage costs one attempt per capped window, not one per base window.
 *
 * @since 0.2.0
 */
import { PollBackoff } from "@resilience/jitter"

/**
 * What the breaker needs to know.
 *
 * @category models
 * @since 0.2.0
 */
export interface Policy {
  /** The circuit opens when this many of the last `2 × tripFailures` recorded outcomes were unavailable. */
  readonly tripFailures: number
  /** The open windows: base, ×multiplier per failed probe, capped, ratio-jittered (see `PollBackoff`). */
  readonly windows: PollBackoff.Settings
}

/**
 * The three phases.
 *
 * @category models
 * @since 0.2.0
 */
export type Phase = "Closed" | "HalfOpen" | "Open"

/**
 * The breaker's state.
 *
 * @category models
 * @since 0.2.0
 */
export interface State {
  readonly phase: Phase
  /** Closed: the last recorded outcomes, oldest first, `true` for unavailable (at most `2 × tripFailures`). */
  readonly recent: ReadonlyArray<boolean>
  /** Open: no probe before this time (ms). */
  readonly openUntil: number
  /** Half-open: the probe is running. */
  readonly probing: boolean
  /** The nominal length of the next open window. */
  readonly window: PollBackoff.State
  /** Failed probes since the circuit last closed. */
  readonly failedProbes: number
}

/**
 * A closed circuit, with the base window next.
 *
 * @category constructors
 * @since 0.2.0
 */
export const initial = (policy: Policy): State => ({
  phase: "Closed",
  recent: [],
  openUntil: 0,
  probing: false,
  window: PollBackoff.initial(policy.windows),
  failedProbes: 0
})

/**
 * What the breaker says to a caller: run (`pass`), run as the one probe (`probe`), or do not run (`shed`).
 *
 * @category models
 * @since 0.2.0
 */
export type Decision = "pass" | "probe" | "shed"

/**
 * The decision for a caller at `now`, and the state if the caller goes ahead (commit it only then). With
 * `early`, an open circuit lets the caller probe before its window ends (when no probe runs): for a caller
 * whose own schedule already spaces its attempts, such as the deriver's poll on the spec's backoff.
 *
 * @category transitions
 * @since 0.2.0
 */
export const enter = (state: State, now: number, early = false): readonly [Decision, State] => {
  switch (state.phase) {
    case "Closed":
      return ["pass", state]
    case "Open":
      if (now < state.openUntil && !early) return ["shed", state]
      return ["probe", { ...state, phase: "HalfOpen", probing: true }]
    case "HalfOpen":
      if (state.probing) return ["shed", state]
      return ["probe", { ...state, probing: true }]
  }
}

/**
 * How long until the circuit lets a probe through: the rest of the open window (0 when not open).
 *
 * @category getters
 * @since 0.2.0
 */
export const retryAfterMillis = (state: State, now: number): number =>
  state.phase === "Open" ? Math.max(0, state.openUntil - now) : 0

/**
 * What a call that ran says about the database: unavailable, answered, or nothing (interrupted, or a failure
 * that is not about the database, such as this process's own pool being full).
 *
 * @category models
 * @since 0.2.0
 */
export type Outcome = "Unavailable" | "Answered" | "Ignored"

const open = (state: State, policy: Policy, now: number, u: number, failedProbes: number): State => ({
  phase: "Open",
  recent: [],
  openUntil: now + PollBackoff.sleepFrom(state.window, policy.windows, u),
  probing: false,
  window: PollBackoff.step(state.window, policy.windows),
  failedProbes
})

/**
 * How a call that ran ended, for {@link settle}.
 *
 * @category models
 * @since 0.2.0
 */
export interface Settled {
  readonly outcome: Outcome
  /** The call was the probe. */
  readonly probe: boolean
  /** When it ended (ms). */
  readonly now: number
  /**
   * A uniform draw in [0, 1) for the window's jitter, taken only when this outcome opens a window (see
   * {@link opens}), so every caller draws at the same point.
   */
  readonly draw: () => number
}

/**
 * Whether settling `outcome` on `state` opens a window (the one case where {@link settle} asks for a draw).
 *
 * @category predicates
 * @since 0.2.0
 */
export const opens = (state: State, policy: Policy, outcome: Outcome, probe: boolean): boolean => {
  if (outcome !== "Unavailable") return false
  if (probe) return true
  return state.phase === "Closed" && record(state, policy, true).trips
}

/** The closed circuit's recent outcomes with one more, and whether they trip it. */
const record = (state: State, policy: Policy, failed: boolean) => {
  const recent = [...state.recent, failed].slice(-2 * policy.tripFailures)
  return { recent, trips: recent.reduce((n, f) => f ? n + 1 : n, 0) >= policy.tripFailures }
}

/**
 * The state after a call that ran ended:
 * - the probe answered: closed, windows back to the base;
 * - the probe failed: open for the next window (one step longer, up to the cap);
 * - the probe told nothing: half-open, the next caller probes;
 * - closed: the outcome is recorded; `tripFailures` unavailable among the last `2 × tripFailures` opens it;
 * - a call admitted before the circuit opened that ends while it is open or half-open: nothing changes.
 *
 * `draw` is called once, and only when a window opens.
 *
 * @category transitions
 * @since 0.2.0
 */
export const settle = (state: State, policy: Policy, settled: Settled): State => {
  const { draw, now, outcome, probe } = settled
  if (probe) {
    switch (outcome) {
      case "Answered":
        return initial(policy)
      case "Unavailable":
        return open(state, policy, now, draw(), state.failedProbes + 1)
      case "Ignored":
        return { ...state, probing: false }
    }
  }
  if (state.phase !== "Closed" || outcome === "Ignored") return state
  const { recent, trips } = record(state, policy, outcome === "Unavailable")
  return trips ? open(state, policy, now, draw(), 0) : { ...state, recent }
}

/**
 * The probe gave up before it ran (e.g. no permit in time): the next caller probes instead.
 *
 * @category transitions
 * @since 0.2.0
 */
export const abandon = (state: State): State => state.probing ? { ...state, probing: false } : state

/**
 * Evidence that the database answers, from outside the circuit's own attempts (a write another process committed,
 * such as the one whose wake reached a deriver): an open circuit lets its next caller probe at once instead of
 * at the end of its window. Half-open and closed circuits are left as they are. The caller bounds how often it
 * gives evidence: each one can let one probe through.
 *
 * @category transitions
 * @since 0.3.0
 */
export const evidence = (state: State): State =>
  state.phase === "Open" ? { ...state, phase: "HalfOpen", probing: false } : state

/**
 * The nominal open windows in order, for documentation and tests: base, ×multiplier, … capped (`count` of them).
 *
 * @category getters
 * @since 0.2.0
 */
export const nominalWindows = (policy: Policy, count: number): ReadonlyArray<number> => {
  const windows: Array<number> = []
  let window = PollBackoff.initial(policy.windows)
  for (let i = 0; i < count; i++) {
    windows.push(window.currentMillis)
    window = PollBackoff.step(window, policy.windows)
  }
  return windows
}
